//! Benchmarks of the load engine with the real HTTP client against the built-in
//! simulator, at 1,000 concurrent streams (docs/design.md §12):
//!
//! 1. streamed tokens per second of *client* CPU time, simulator at `--speed max`;
//! 2. first-token time error against the simulator's truth log (real time).
//!
//! The simulator runs in this process on its own runtime; its threads are named
//! `tpscope-sim-*`, so per-thread CPU from /proc/self/task/*/stat separates its
//! share from the client's (executor, client, writer thread, sampler).
//!
//! The client stamps body reads with the kernel's receive timestamps by default
//! (`--rx-timestamps user`: with the instant its task got the bytes, as before).
//! On loopback the kernel stamps the bytes inside the simulator's own write, so
//! with kernel stamps the first-token error left is the simulator's hand-off
//! (its truth stamp, then hyper's write), and the client's own queueing (hyper's
//! connection task, then the attempt's task: milliseconds at 1,000 streams on two
//! shared cores) is no part of it; with `--rx-timestamps user` it is. No threads
//! are pinned.
//!
//! Run: `cargo bench -p tpscope-load --bench client` (options: `--streams N`,
//! `--requests N` (cpu: default 8000; ttft: default 2 × streams), `--output N`
//! (cpu), `--only cpu|ttft`, `--rx-timestamps kernel|user`).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tpscope_client::{Api, Client, ClientConfig, Endpoint, RxTimestamps};
use tpscope_load::{Control, LengthDist, RetryPolicy, RunPlan, Schedule, Workload, execute};
use tpscope_model::{Record, RunClock, Status, Timestamp};
use tpscope_record::{Dispatch, LiveStats, Writer};
use tpscope_sim::{SimConfig, Speed};
use tpscope_tokens::Tokenizer;

/// CPU seconds per thread-name class: (client, simulator).
fn cpu_by_class() -> (f64, f64) {
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let (mut client, mut sim) = (0.0, 0.0);
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return (f64::NAN, f64::NAN);
    };
    for t in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        // comm is in parentheses and may contain spaces: split after the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        let f: Vec<&str> = stat[close + 2..].split(' ').collect();
        // Fields after comm: state(0) … utime(11) stime(12).
        let ticks: f64 = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
            + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        if comm.starts_with("tpscope-sim") {
            sim += ticks / hz;
        } else {
            client += ticks / hz;
        }
    }
    (client, sim)
}

struct Opts {
    streams: u32,
    requests: Option<u64>,
    output: u32,
    only: Option<String>,
    rx: RxTimestamps,
}

fn opts() -> Opts {
    let mut o = Opts {
        streams: 1000,
        requests: None,
        output: 256,
        only: None,
        rx: RxTimestamps::Kernel,
    };
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--streams" => o.streams = v.parse().expect("--streams N"),
            "--requests" => o.requests = Some(v.parse().expect("--requests N")),
            "--output" => o.output = v.parse().expect("--output N"),
            "--only" => o.only = Some(v),
            "--rx-timestamps" => o.rx = v.parse().unwrap_or_else(|e| panic!("{e}")),
            _ => {
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    o
}

fn sim_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("tpscope-sim-http")
        .enable_all()
        .build()
        .unwrap()
}

fn client_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name("tpscope-bench")
        .enable_all()
        .build()
        .unwrap()
}

fn plan(o: &Opts, requests: u64, output: u32) -> RunPlan {
    RunPlan {
        run_id: "bench".into(),
        schedule: Schedule::Backlog,
        requests: Some(requests),
        duration: None,
        cap: Some(o.streams),
        dispatch: Dispatch::WorkConserving,
        workload: Arc::new(Workload::Synthetic {
            input: LengthDist::Fixed(32),
            output: LengthDist::Fixed(output),
        }),
        sessions: None,
        tokenizer: Tokenizer::O200kBase,
        seed: 1,
        prompt_salt: 0,
        context: None,
        retry: RetryPolicy::default(),
        sample_interval: Some(Duration::from_millis(10)),
        drain_timeout: Duration::from_secs(30),
    }
}

fn client_for(o: &Opts, url: String, model: &str) -> Arc<Client> {
    let mut ep = Endpoint::new(url, Api::Chat, model);
    ep.extra_body
        .insert("ignore_eos".into(), serde_json::Value::Bool(true));
    let cfg = ClientConfig {
        rx_timestamps: o.rx,
        ..ClientConfig::default()
    };
    Arc::new(Client::new(ep, cfg).unwrap())
}

fn bench_cpu(o: &Opts) {
    let srt = sim_runtime();
    let mut cfg = SimConfig::default();
    cfg.speed = Speed::Max;
    cfg.max_num_seqs = cfg.max_num_seqs.max(o.streams);
    let sim = srt
        .block_on(tpscope_sim::start(
            cfg,
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        ))
        .unwrap();
    let rt = client_runtime();
    let client = client_for(o, sim.base_url(), sim.model_name());
    let live = Arc::new(LiveStats::default());
    let rec = Writer::to_writer(std::io::sink(), Tokenizer::O200kBase, Some(live.clone()));
    // A short warm-up opens the connections and loads the tokenizer.
    rt.block_on(execute(
        plan(o, u64::from(o.streams), 8),
        RunClock::start(),
        client.clone(),
        None,
        Arc::new(LiveStats::default()),
        &Control::default(),
    ));
    let (c0, s0) = cpu_by_class();
    let t0 = Instant::now();
    let requests = o.requests.unwrap_or(8000);
    let sum = rt.block_on(execute(
        plan(o, requests, o.output),
        RunClock::start(),
        client.clone(),
        Some(rec.sender()),
        live.clone(),
        &Control::default(),
    ));
    let wall = t0.elapsed().as_secs_f64();
    let (c1, s1) = cpu_by_class();
    rec.finish().unwrap();
    let tokens = live.tokens.load(std::sync::atomic::Ordering::Relaxed) as f64;
    let client_cpu = c1 - c0;
    println!(
        "client CPU benchmark: {} streams, {} requests × {} tokens, simulator at speed max, {} receive timestamps",
        o.streams,
        requests,
        o.output,
        o.rx.effective()
    );
    println!(
        "  ok {} / {} spans, {:.0} tokens in {:.2} s wall ({:.0} tok/s)",
        sum.status.ok,
        sum.spans,
        tokens,
        wall,
        tokens / wall
    );
    println!(
        "  client CPU {:.2} s, simulator CPU {:.2} s",
        client_cpu,
        s1 - s0
    );
    println!(
        "  => {:.0} streamed tokens per client CPU second ({:.2} µs of client CPU per token; target ≥ 1,000,000)",
        tokens / client_cpu,
        client_cpu / tokens * 1e6
    );
    let _ =
        srt.block_on(async { tokio::time::timeout(Duration::from_secs(5), sim.shutdown()).await });
}

#[derive(serde::Deserialize)]
struct Truth {
    request_id: String,
    first_token_at: Option<Timestamp>,
}

fn bench_ttft(o: &Opts) {
    let dir = tempfile::tempdir().unwrap();
    let truth_path = dir.path().join("truth.jsonl");
    let log_path = dir.path().join("spans.jsonl");
    let srt = sim_runtime();
    let mut cfg = SimConfig::default();
    cfg.speed = Speed::Realtime;
    cfg.max_num_seqs = cfg.max_num_seqs.max(o.streams);
    cfg.truth_log = Some(truth_path.clone());
    let sim = srt
        .block_on(tpscope_sim::start(
            cfg,
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        ))
        .unwrap();
    let rt = client_runtime();
    let client = client_for(o, sim.base_url(), sim.model_name());
    rt.block_on(execute(
        plan(o, u64::from(o.streams), 4),
        RunClock::start(),
        client.clone(),
        None,
        Arc::new(LiveStats::default()),
        &Control::default(),
    ));
    let rec = Writer::create(&log_path, Tokenizer::O200kBase, None).unwrap();
    let requests = o.requests.unwrap_or(u64::from(o.streams) * 2);
    rt.block_on(execute(
        plan(o, requests, 64),
        RunClock::start(),
        client.clone(),
        Some(rec.sender()),
        Arc::new(LiveStats::default()),
        &Control::default(),
    ));
    rec.finish().unwrap();
    srt.block_on(async { tokio::time::timeout(Duration::from_secs(10), sim.shutdown()).await })
        .ok();
    let truth: HashMap<String, Option<Timestamp>> = std::fs::read_to_string(&truth_path)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Truth>(l).ok())
        .map(|t| (t.request_id, t.first_token_at))
        .collect();
    let mut err_us: Vec<f64> = Vec::new();
    for line in std::fs::read_to_string(&log_path).unwrap().lines() {
        let Ok(Record::Span(s)) = serde_json::from_str::<Record>(line) else {
            continue;
        };
        if s.status != Status::Ok {
            continue;
        }
        let (Some(id), Some(ours)) = (s.request_id.as_ref(), s.first_token_at) else {
            continue;
        };
        if let Some(Some(theirs)) = truth.get(id) {
            err_us.push(ours.signed_nanos_since(*theirs) as f64 / 1e3);
        }
    }
    err_us.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let r = p * (err_us.len() - 1) as f64;
        let (lo, hi) = (r.floor() as usize, r.ceil() as usize);
        err_us[lo] + (err_us[hi] - err_us[lo]) * (r - lo as f64)
    };
    println!(
        "first-token error benchmark: {} streams, {} requests × 64 tokens, simulator in real time, {} receive timestamps",
        o.streams,
        requests,
        o.rx.effective()
    );
    println!(
        "  matched {} spans: error (client stamp − simulator hand-off) p50 {:.0} µs, p90 {:.0} µs, p99 {:.0} µs, max {:.0} µs, min {:.0} µs (target p99 ≤ 200 µs)",
        err_us.len(),
        q(0.5),
        q(0.9),
        q(0.99),
        err_us[err_us.len() - 1],
        err_us[0]
    );
}

fn main() {
    let o = opts();
    let _ = tpscope_sim::raise_nofile_limit();
    if o.only.as_deref() != Some("ttft") {
        bench_cpu(&o);
    }
    if o.only.as_deref() != Some("cpu") {
        bench_ttft(&o);
    }
}
