//! The proxy sees the user's pipeline: a pipeline that works in
//! batches of 4 (each waiting for its slowest request) and one that keeps 4
//! workers busy, through the proxy to the simulator, with no queue header and
//! no cap. The report's exact gap is 0 (the proxy never saw work wait); the
//! inferred one comes within 0.05 of the pipeline's own gap for the waves and
//! stays below 0.05 for the workers. With the header and `--cap 4`, the exact
//! figure stands alone, and the live counters and the sampled estimate follow
//! it. Each pipeline twice: in Rust here, and on the official openai Python SDK
//! (`scripts/sdk_pipeline.py`, ignored tests: run `scripts/sdk-venv.sh`).

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;
use tpscope_analysis::infer::Shape;
use tpscope_analysis::{Options, RunReport, analyze};
use tpscope_sim::Speed;

const WIDTH: usize = 4;
const REQUESTS: usize = 16;
const MODEL: &str = "sim-llama-3.1-8b";

/// The simulator's speed and the output tokens of a job's unit for the Rust
/// pipelines: jobs of 32 … 256 tokens at 2×.
const RUST: (f64, u32) = (2.0, 32);
/// The same for the SDK's: a quarter of the tokens at an eighth of the speed
/// (jobs twice as long, an eighth of the chunks per second), so that the Python
/// client, which decodes every chunk with pydantic, keeps up with its streams
/// on a loaded machine, and its own work between requests (milliseconds each)
/// is small beside a job.
const SDK: (f64, u32) = (0.25, 8);

/// Output tokens of job `i`: 1 … 8 units, so a batch waits for its longest
/// (long beside the proxy's and the client's own overhead between requests).
fn tokens(i: usize, unit: u32) -> u32 {
    unit * (1 + (i * 5 % 8) as u32)
}

/// The pipeline's own record: when its work was ready (all at the start), and
/// each request's send and end.
struct Own {
    start: Instant,
    spans: Vec<(Instant, Instant)>,
}

impl Own {
    /// The pipeline's own gap fraction: time with work not yet sent while
    /// fewer than WIDTH requests were out, over its run.
    fn gap_fraction(&self) -> f64 {
        let mut ev: Vec<(Instant, i32)> = Vec::new();
        for (a, b) in &self.spans {
            ev.push((*a, 1));
            ev.push((*b, -1));
        }
        ev.sort();
        let end = ev.last().unwrap().0;
        let (mut n, mut sent, mut gap) = (0i32, 0usize, Duration::ZERO);
        let mut prev = self.start;
        for (t, d) in ev {
            if sent < self.spans.len() && (n as usize) < WIDTH {
                gap += t - prev;
            }
            prev = t;
            n += d;
            if d > 0 {
                sent += 1;
            }
        }
        gap.as_secs_f64() / (end - self.start).as_secs_f64()
    }
}

fn queued_header(at: SystemTime) -> String {
    let d = at.duration_since(UNIX_EPOCH).unwrap();
    format!("{}.{:09}", d.as_secs(), d.subsec_nanos())
}

async fn one(addr: SocketAddr, i: usize, ready: Option<String>) -> (Instant, Instant) {
    let body = chat(MODEL, true, tokens(i, RUST.1))
        .to_string()
        .into_bytes();
    let headers: Vec<(&str, &str)> = ready
        .as_deref()
        .map(|h| ("x-tpscope-queued-at", h))
        .into_iter()
        .collect();
    let a = Instant::now();
    let r = send(addr, "POST", "/v1/chat/completions", body, &headers, false).await;
    assert_eq!(r.status, 200, "{}", r.text());
    (a, Instant::now())
}

/// Batches of WIDTH sent together, the next when the slowest is back (as
/// `asyncio.gather` per batch does).
async fn waves(addr: SocketAddr, header: bool) -> Own {
    let (start, wall) = (Instant::now(), queued_header(SystemTime::now()));
    let ready = header.then_some(wall);
    let mut spans = Vec::new();
    for batch in (0..REQUESTS).collect::<Vec<_>>().chunks(WIDTH) {
        let futs = batch.iter().map(|&i| one(addr, i, ready.clone()));
        spans.extend(futures_join(futs).await);
    }
    Own { start, spans }
}

/// WIDTH workers taking the next job as soon as theirs is back.
async fn workers(addr: SocketAddr) -> Own {
    let start = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..WIDTH)
        .map(|_| {
            let next = next.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let i = next.fetch_add(1, Relaxed);
                    if i >= REQUESTS {
                        return mine;
                    }
                    mine.push(one(addr, i, None).await);
                }
            })
        })
        .collect();
    let mut spans = Vec::new();
    for t in tasks {
        spans.extend(t.await.unwrap());
    }
    Own { start, spans }
}

/// Runs the futures at once and waits for them all.
async fn futures_join<F: std::future::Future<Output = (Instant, Instant)> + Send + 'static>(
    futs: impl Iterator<Item = F>,
) -> Vec<(Instant, Instant)> {
    let handles: Vec<_> = futs.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

fn report(out: &Path) -> RunReport {
    let set =
        tpscope_log::read_paths(&[out.to_path_buf()], tpscope_log::ReadOptions::default()).unwrap();
    analyze(&set.runs[0].input, &Options::default())
}

/// Runs the pipeline through a proxy to the simulator at `speed`; the
/// pipeline's own gap and the report of the proxy's log. The live counters'
/// gap and backlog seconds over the run agree with the log's within 0.02 of
/// it, and so does the estimate from the log's samples.
async fn through_proxy(
    cap: Option<u32>,
    speed: f64,
    run: impl AsyncFnOnce(SocketAddr) -> f64,
) -> (f64, RunReport) {
    let sim = sim(Speed::Scaled(speed)).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let mut cfg = config(sim.addr(), &out);
    cfg.cap = cap;
    cfg.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    let p = proxy(cfg).await;
    let own = run(p.addr()).await;
    // A few sample intervals: the last one counted.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let text = send(
        p.metrics_addr().unwrap(),
        "GET",
        "/metrics",
        vec![],
        &[],
        false,
    )
    .await
    .text();
    p.shutdown().await.unwrap();
    sim.shutdown().await.unwrap();
    let r = report(&out);
    assert_eq!(r.target.model.as_deref(), Some(MODEL), "from the responses");
    let w = r.window.unwrap().duration.as_secs_f64();
    for (name, log) in [
        ("tpscope_gap_seconds_total", r.idle.gap_time),
        ("tpscope_backlog_seconds_total", r.idle.backlog_time),
    ] {
        let live = metric(&text, name, "").unwrap();
        let log = log.unwrap().as_secs_f64();
        eprintln!(
            "{name}: live {:.4}, log {:.4} of the run",
            live / w,
            log / w
        );
        assert!(
            ((live - log) / w).abs() < 0.02,
            "{name}: live {live} s, log {log} s over {w} s"
        );
    }
    let (exact, sampled) = (r.gap_fraction.unwrap(), r.gap_fraction_sampled.unwrap());
    eprintln!("gap fraction: exact {exact:.4}, sampled {sampled:.4}");
    assert!(
        (exact - sampled).abs() < 0.02,
        "exact {exact}, sampled {sampled}"
    );
    assert!(
        !r.warnings.iter().any(|w| w.contains("differ by more than")),
        "{:?}",
        r.warnings
    );
    (own, r)
}

/// Without the header: the exact gap is the proxy's own handling (the proxy
/// saw no work wait), and the inferred one of a waves pipeline is within 0.05
/// of the pipeline's own.
fn waves_are_inferred(own: f64, r: &RunReport) {
    assert!(own > 0.2, "the pipeline's own gap {own}");
    assert!(r.gap_fraction.unwrap() < 1e-3, "{:?}", r.gap_fraction);
    let g = r.gap_fraction_inferred.as_ref().expect("an inferred gap");
    assert_eq!((g.method, g.width), (Shape::Waves, WIDTH as u32), "{g:?}");
    let inferred = g.fraction.unwrap();
    eprintln!("waves: own {own:.4}, inferred {inferred:.4}");
    assert!(
        (inferred - own).abs() < 0.05,
        "inferred {inferred}, own {own}: {g:?}"
    );
}

/// Without the header: a worker pool is work-conserving, inferred below 0.05.
fn a_pool_is_inferred_work_conserving(own: f64, r: &RunReport) {
    let g = r.gap_fraction_inferred.as_ref().expect("an inferred gap");
    let inferred = g.fraction.unwrap();
    eprintln!("workers: own {own:.4}, inferred {inferred:.4}");
    assert_eq!(g.method, Shape::WorkConserving, "{g:?}");
    assert!(inferred < 0.05, "{g:?}");
}

/// With the header and `--cap`: no inference, and the exact gap within 0.05 of
/// the pipeline's own.
fn the_exact_gap_stands_alone(own: f64, r: &RunReport) {
    assert_eq!(r.gap_fraction_inferred, None, "queue times were stated");
    let exact = r.gap_fraction.unwrap();
    eprintln!("with the header: own {own:.4}, exact {exact:.4}");
    assert!((exact - own).abs() < 0.05, "exact {exact}, own {own}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waves_pipeline_without_the_header_is_inferred_within_0_05_of_its_own_gap() {
    let (own, r) =
        through_proxy(None, RUST.0, async |a| waves(a, false).await.gap_fraction()).await;
    waves_are_inferred(own, &r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_pool_without_the_header_is_inferred_below_0_05() {
    // A cap of its width does not make the proxy see its queue.
    let (own, r) = through_proxy(Some(WIDTH as u32), RUST.0, async |a| {
        workers(a).await.gap_fraction()
    })
    .await;
    a_pool_is_inferred_work_conserving(own, &r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_header_and_a_cap_the_exact_gap_stands_alone() {
    let (own, r) = through_proxy(Some(WIDTH as u32), RUST.0, async |a| {
        waves(a, true).await.gap_fraction()
    })
    .await;
    the_exact_gap_stands_alone(own, &r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_header_and_no_cap_every_stated_moment_is_a_gap_live_and_in_the_log() {
    let (_, r) = through_proxy(None, RUST.0, async |a| waves(a, true).await.gap_fraction()).await;
    assert_eq!(r.gap_fraction_inferred, None);
    assert!(r.gap_fraction.unwrap() > 0.5, "{:?}", r.gap_fraction);
}

/// The pipeline on the official openai Python SDK.
const SDK_PIPELINE: &str = include_str!("../../../scripts/sdk_pipeline.py");

/// Runs [`SDK_PIPELINE`] in `shape` (`waves` or `pool`) against the proxy at
/// `addr`; its own gap.
async fn sdk(addr: SocketAddr, shape: &str, header: bool) -> f64 {
    let mut args: Vec<String> = [
        &format!("http://{addr}/v1"),
        "--model",
        MODEL,
        "--shape",
        shape,
        "--width",
        &WIDTH.to_string(),
        "--requests",
        &REQUESTS.to_string(),
        "--tokens",
        &SDK.1.to_string(),
    ]
    .map(str::to_string)
    .into();
    if header {
        args.push("--header".into());
    }
    let v = run_sdk_script(SDK_PIPELINE, args).await;
    eprintln!("the SDK pipeline: {v}");
    assert_eq!(v["requests"], REQUESTS);
    let want: u64 = (0..REQUESTS).map(|i| u64::from(tokens(i, SDK.1))).sum();
    assert_eq!(v["output_tokens"], want, "the server's usage, summed");
    v["own_gap"].as_f64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the openai Python SDK: run scripts/sdk-venv.sh"]
async fn sdk_waves_without_the_header_are_inferred_within_0_05_of_their_own_gap() {
    let (own, r) = through_proxy(None, SDK.0, async |a| sdk(a, "waves", false).await).await;
    waves_are_inferred(own, &r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the openai Python SDK: run scripts/sdk-venv.sh"]
async fn sdk_pool_without_the_header_is_inferred_below_0_05() {
    let (own, r) = through_proxy(Some(WIDTH as u32), SDK.0, async |a| {
        sdk(a, "pool", false).await
    })
    .await;
    a_pool_is_inferred_work_conserving(own, &r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the openai Python SDK: run scripts/sdk-venv.sh"]
async fn sdk_waves_with_the_header_and_a_cap_give_the_exact_gap() {
    let (own, r) = through_proxy(Some(WIDTH as u32), SDK.0, async |a| {
        sdk(a, "waves", true).await
    })
    .await;
    the_exact_gap_stands_alone(own, &r);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the openai Python SDK: run scripts/sdk-venv.sh"]
async fn sdk_pool_with_the_header_and_a_cap_give_the_exact_gap() {
    let (own, r) = through_proxy(Some(WIDTH as u32), SDK.0, async |a| {
        sdk(a, "pool", true).await
    })
    .await;
    the_exact_gap_stands_alone(own, &r);
    assert!(own < 0.05, "a pool holds nothing back: {own}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the openai Python SDK: run scripts/sdk-venv.sh"]
async fn sdk_waves_with_the_header_and_no_cap_count_every_stated_moment_as_gap() {
    let (own, r) = through_proxy(None, SDK.0, async |a| sdk(a, "waves", true).await).await;
    assert_eq!(r.gap_fraction_inferred, None);
    let exact = r.gap_fraction.unwrap();
    assert!(exact > own, "exact {exact}, own {own}");
}
