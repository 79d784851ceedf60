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
//! 3. with `--only memory`, the client's bytes per open stream (RSS growth over a
//!    run with every stream open at once, e.g. `--streams 10000`; the simulator
//!    then runs in a child process, this executable with `--sim-server N`).
//!
//! Run: `cargo bench -p tpscope-load --bench client` (options: `--streams N`,
//! `--requests N` (cpu: default 8000; ttft: default 2 × streams), `--output N`
//! (cpu), `--only cpu|ttft|memory`, `--rx-timestamps kernel|user`, `--shares` (cpu: write
//! the spans to a file and print the exact-stamp shares, as the first-token run
//! always does)).

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

/// CPU seconds per thread-name class: (client, simulator, the client's system
/// share).
fn cpu_by_class() -> (f64, f64, f64) {
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let (mut client, mut sim, mut system) = (0.0, 0.0, 0.0);
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return (f64::NAN, f64::NAN, f64::NAN);
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
        let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        let (user, sys) = (tick(11), tick(12));
        if comm.starts_with("tpscope-sim") {
            sim += (user + sys) / hz;
        } else {
            client += (user + sys) / hz;
            system += sys / hz;
        }
    }
    (client, sim, system)
}

struct Opts {
    streams: u32,
    requests: Option<u64>,
    output: u32,
    only: Option<String>,
    rx: RxTimestamps,
    shares: bool,
}

fn opts() -> Opts {
    let mut o = Opts {
        streams: 1000,
        requests: None,
        output: 256,
        only: None,
        rx: RxTimestamps::Kernel,
        shares: false,
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
            "--shares" => {
                o.shares = true;
                i += 1;
                continue;
            }
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
    // With `--shares` the spans go to a file (read back after the measurement for
    // the exact-stamp shares); else to a sink, as the older builds' benchmark does.
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("spans.jsonl");
    let rec = if o.shares {
        Writer::create(&log_path, Tokenizer::O200kBase, Some(live.clone())).unwrap()
    } else {
        Writer::to_writer(std::io::sink(), Tokenizer::O200kBase, Some(live.clone()))
    };
    // A short warm-up opens the connections and loads the tokenizer.
    rt.block_on(execute(
        plan(o, u64::from(o.streams), 8),
        RunClock::start(),
        client.clone(),
        None,
        Arc::new(LiveStats::default()),
        &Control::default(),
    ));
    settle_connections(&rt);
    let fd0 = open_fds();
    let (c0, s0, k0) = cpu_by_class();
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
    let (c1, s1, k1) = cpu_by_class();
    let opened = open_fds().saturating_sub(fd0);
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
        "  client CPU {:.2} s ({:.2} s of it in the kernel), simulator CPU {:.2} s; {opened} descriptors opened during the measurement",
        client_cpu,
        k1 - k0,
        s1 - s0
    );
    println!(
        "  => {:.0} streamed tokens per client CPU second ({:.2} µs of client CPU per token; target ≥ 1,000,000)",
        tokens / client_cpu,
        client_cpu / tokens * 1e6
    );
    if o.shares {
        let mut shares = Shares::default();
        for line in std::fs::read_to_string(&log_path).unwrap().lines() {
            if let Ok(Record::Span(s)) = serde_json::from_str::<Record>(line)
                && s.status == Status::Ok
            {
                shares.add(&s);
            }
        }
        println!("  {}", shares.line());
    }
    let _ =
        srt.block_on(async { tokio::time::timeout(Duration::from_secs(5), sim.shutdown()).await });
}

/// The process's open descriptors (sockets among them).
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// Waits until the client has finished opening connections: the warm-up's
/// requests end before the connections they asked for are all open (the client
/// paces its connects, `ClientConfig::connect_burst`, and the pool keeps each
/// connect that lost the race to a returning connection), and those opened
/// later would count in the measurement as the first requests' connection
/// setup. Settled when the process's open descriptors have not changed for
/// 300 ms (at most 10 s).
fn settle_connections(rt: &tokio::runtime::Runtime) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut last, mut since) = (open_fds(), Instant::now());
    while Instant::now() < deadline && since.elapsed() < Duration::from_millis(300) {
        rt.block_on(async { tokio::time::sleep(Duration::from_millis(50)).await });
        let n = open_fds();
        if n != last {
            (last, since) = (n, Instant::now());
        }
    }
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
    let mut shares = Shares::default();
    for line in std::fs::read_to_string(&log_path).unwrap().lines() {
        let Ok(Record::Span(s)) = serde_json::from_str::<Record>(line) else {
            continue;
        };
        if s.status != Status::Ok {
            continue;
        }
        shares.add(&s);
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
    println!("  {}", shares.line());
}

/// How many stamps were the arrival of their own bytes (the spans' `traced_chunks`,
/// `inexact_chunks` and `first_token_exact`, kernel stamps only).
#[derive(Default)]
struct Shares {
    first_known: u64,
    first_exact: u64,
    traced: u64,
    inexact: u64,
    reads: u64,
    fresh: u64,
}

impl Shares {
    fn add(&mut self, s: &tpscope_model::Span) {
        let Some(a) = s.attempts.last() else { return };
        if let Some(e) = a.first_token_exact {
            self.first_known += 1;
            self.first_exact += u64::from(e);
        }
        self.traced += a.traced_chunks.unwrap_or(0);
        self.inexact += a.inexact_chunks.unwrap_or(0);
        self.reads += a.reads.unwrap_or(0);
        self.fresh += u64::from(a.connection_reused == Some(false));
    }

    fn line(&self) -> String {
        if self.first_known == 0 || self.traced == 0 {
            return "exact stamps: none traced (user stamps)".into();
        }
        format!(
            "exact stamps: first tokens {:.2} % of {}, chunks {:.2} % of {} ({:.2} chunks per traced read); {} attempts on new connections",
            100.0 * self.first_exact as f64 / self.first_known as f64,
            self.first_known,
            100.0 * (self.traced - self.inexact) as f64 / self.traced as f64,
            self.traced,
            self.traced as f64 / self.reads.max(1) as f64,
            self.fresh
        )
    }
}

/// The client's resident memory in bytes (VmRSS of /proc/self/status).
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// `--sim-server N`: the simulator alone (the memory benchmark's other process),
/// in real time with room for N streams; prints its URL and model, serves until
/// its stdin closes.
fn sim_server(streams: u32) {
    let srt = sim_runtime();
    let mut cfg = SimConfig::default();
    cfg.speed = Speed::Realtime;
    cfg.max_num_seqs = streams;
    cfg.max_num_batched_tokens = cfg.max_num_batched_tokens.max(streams * 64);
    // Every stream keeps its KV blocks: none is preempted or kept waiting.
    cfg.num_kv_blocks = Some(u64::from(streams) * 128);
    let sim = srt
        .block_on(tpscope_sim::start(
            cfg,
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        ))
        .unwrap();
    println!("{} {}", sim.base_url(), sim.model_name());
    let mut sink = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
}

/// The client's bytes per open stream: the simulator runs in a child process
/// (this executable with `--sim-server`), so the client's RSS is its own; the
/// growth from before the run to its peak with all streams open, per stream.
fn bench_memory(o: &Opts) {
    use std::io::BufRead;
    let streams = o.streams;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--sim-server", &streams.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let (url, model) = first
        .trim()
        .split_once(' ')
        .expect("the sim's URL and model");
    let rt = client_runtime();
    let client = client_for(o, url.to_string(), model);
    // A few requests load the tokenizer and the pool's machinery.
    rt.block_on(execute(
        plan(o, 16, 4),
        RunClock::start(),
        client.clone(),
        None,
        Arc::new(LiveStats::default()),
        &Control::default(),
    ));
    let before = rss_bytes();
    let live = Arc::new(LiveStats::default());
    let output = o.output.max(200);
    // The writer (to a sink) and its sampler keep the live counts, open streams
    // among them.
    let rec = Writer::to_writer(std::io::sink(), Tokenizer::O200kBase, Some(live.clone()));
    let watch = live.clone();
    // Sampled every 20 ms: the most streams open at once and the RSS then, and
    // the RSS's own peak.
    let peak = std::thread::spawn(move || {
        let (mut most, mut rss_at_most, mut peak) = (0u32, 0u64, 0u64);
        loop {
            let open = watch.in_flight.load(std::sync::atomic::Ordering::Relaxed);
            let rss = rss_bytes();
            peak = peak.max(rss);
            if open > most || (open == most && rss > rss_at_most) {
                (most, rss_at_most) = (open, rss);
            }
            if watch.done.load(std::sync::atomic::Ordering::Relaxed) >= u64::from(streams) {
                return (most, rss_at_most, peak);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let sum = rt.block_on(execute(
        plan(o, u64::from(streams), output),
        RunClock::start(),
        client.clone(),
        Some(rec.sender()),
        live.clone(),
        &Control::default(),
    ));
    let (open, at_most, peak) = peak.join().unwrap();
    rec.finish().unwrap();
    drop(child.stdin.take());
    let _ = child.wait();
    println!(
        "client memory benchmark: {streams} concurrent streams × {output} tokens, simulator in real time in another process"
    );
    println!(
        "  ok {} / {} spans; client RSS {:.1} MiB before, {:.1} MiB with the most streams open ({open}), peak {:.1} MiB",
        sum.status.ok,
        sum.spans,
        before as f64 / 1048576.0,
        at_most as f64 / 1048576.0,
        peak as f64 / 1048576.0,
    );
    println!(
        "  => {:.1} KB of client memory per open stream (target ≤ 64 KB)",
        at_most.saturating_sub(before) as f64 / f64::from(open.max(1)) / 1024.0
    );
}

fn main() {
    let o = opts();
    let _ = tpscope_sim::raise_nofile_limit();
    if let Some(pos) = std::env::args().position(|a| a == "--sim-server") {
        let n = std::env::args().nth(pos + 1).and_then(|v| v.parse().ok());
        sim_server(n.expect("--sim-server N"));
        return;
    }
    match o.only.as_deref() {
        Some("cpu") => bench_cpu(&o),
        Some("ttft") => bench_ttft(&o),
        Some("memory") => bench_memory(&o),
        Some(other) => panic!("--only cpu|ttft|memory, not {other}"),
        None => {
            bench_cpu(&o);
            bench_ttft(&o);
        }
    }
}
