//! The proxy sees the user's pipeline: a pipeline that works in
//! batches of 4 (each waiting for its slowest request) and one that keeps 4
//! workers busy, through the proxy to the simulator, with no queue header and
//! no cap. The report's exact gap is 0 (the proxy never saw work wait); the
//! inferred one comes within 0.05 of the pipeline's own gap for the waves and
//! stays below 0.05 for the workers. With the header and `--cap 4`, the exact
//! figure stands alone, the live counters follow it, and a stop cuts nothing.

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

/// Output tokens of job `i`: 32 … 256, so a batch waits for its longest (long
/// beside the proxy's and the client's own overhead between requests).
fn tokens(i: usize) -> u32 {
    32 + (i * 5 % 8) as u32 * 32
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
    let body = chat("sim-llama-3.1-8b", true, tokens(i))
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

/// Runs the pipeline through a proxy to the simulator; the pipeline's own
/// record and the report of the proxy's log. The live counters' gap and
/// backlog seconds over the run agree with the log's within 0.02 of it.
async fn through_proxy(
    cap: Option<u32>,
    run: impl AsyncFnOnce(SocketAddr) -> Own,
) -> (Own, RunReport) {
    let sim = sim(Speed::Scaled(2.0)).await;
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
    assert_eq!(
        r.target.model.as_deref(),
        Some("sim-llama-3.1-8b"),
        "from the responses"
    );
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
    (own, r)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waves_pipeline_without_the_header_is_inferred_within_0_05_of_its_own_gap() {
    let (own, r) = through_proxy(None, async |a| waves(a, false).await).await;
    let own = own.gap_fraction();
    assert!(own > 0.2, "the pipeline's own gap {own}");
    // The proxy saw no work wait (but the microseconds of its own handling).
    assert!(r.gap_fraction.unwrap() < 1e-3, "{:?}", r.gap_fraction);
    let g = r.gap_fraction_inferred.expect("an inferred gap");
    assert_eq!((g.method, g.width), (Shape::Waves, WIDTH as u32), "{g:?}");
    let inferred = g.fraction.unwrap();
    eprintln!("waves: own {own:.4}, inferred {inferred:.4}");
    assert!(
        (inferred - own).abs() < 0.05,
        "inferred {inferred}, own {own}: {g:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_pool_without_the_header_is_inferred_below_0_05() {
    // A cap of its width does not make the proxy see its queue.
    let (own, r) = through_proxy(Some(WIDTH as u32), async |a| workers(a).await).await;
    let g = r.gap_fraction_inferred.expect("an inferred gap");
    let inferred = g.fraction.unwrap();
    eprintln!(
        "workers: own {:.4}, inferred {inferred:.4}",
        own.gap_fraction()
    );
    assert_eq!(g.method, Shape::WorkConserving, "{g:?}");
    assert!(inferred < 0.05, "{g:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_header_and_a_cap_the_exact_gap_stands_alone() {
    let (own, r) = through_proxy(Some(WIDTH as u32), async |a| waves(a, true).await).await;
    let own = own.gap_fraction();
    assert_eq!(r.gap_fraction_inferred, None, "queue times were stated");
    // The samples could not see the stated stretches; the warning says so
    // rather than blaming sparse samples.
    assert!(
        r.warnings.iter().any(|w| w.contains("cannot see")),
        "{:?}",
        r.warnings
    );
    assert!(
        !r.warnings.iter().any(|w| w.contains("too sparse")),
        "{:?}",
        r.warnings
    );
    let exact = r.gap_fraction.unwrap();
    eprintln!("waves with the header: own {own:.4}, exact {exact:.4}");
    assert!((exact - own).abs() < 0.05, "exact {exact}, own {own}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_header_and_no_cap_every_stated_moment_is_a_gap_live_and_in_the_log() {
    let (_, r) = through_proxy(None, async |a| waves(a, true).await).await;
    assert_eq!(r.gap_fraction_inferred, None);
    assert!(r.gap_fraction.unwrap() > 0.5, "{:?}", r.gap_fraction);
}
