//! Benchmark of docs/design.md §12 "recording library": the cost of the public recording
//! API to the caller's thread (target ≤ 1 µs per event), and events per second of
//! CPU for the whole recorder (caller, writer and sampler threads together).
//!
//! `cargo bench -p tpscope-record --bench recorder` (`TPSCOPE_BENCH_REQUESTS` for
//! another count; default 200,000 requests of 11 events each: queued, admitted, 8
//! token chunks, finish). The log goes to a temporary file, removed afterwards.

use std::time::Instant;

use tpscope_record::{Recorder, RunInfo, Usage};

/// CPU time of the calling thread, in nanoseconds (the first field of Linux's
/// `schedstat`: time spent on a CPU).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// CPU time of the whole process (every thread), in nanoseconds.
fn process_cpu_ns() -> u64 {
    // utime + stime, in clock ticks (100 Hz on Linux).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    ticks * 10_000_000
}

const CHUNKS: u64 = 8;
const EVENTS_PER_REQUEST: u64 = 3 + CHUNKS;

fn main() {
    let requests: u64 = std::env::var("TPSCOPE_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let dir = std::env::temp_dir().join(format!("tpscope-bench-recorder-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let path = dir.join("spans.jsonl");

    // Warm-up: a short run (allocator, page cache, code).
    {
        let rec = Recorder::create(dir.join("warm.jsonl"), RunInfo::new().cap(64)).unwrap();
        for i in 0..20_000 {
            let req = rec.queued(format!("w{i}")).admitted();
            req.tokens(1);
            req.finish_ok(None);
        }
        rec.close().unwrap();
    }

    // Whole requests, as a pipeline makes them.
    let rec = Recorder::create(&path, RunInfo::new().cap(64).label("bench", "recorder")).unwrap();
    let cpu0 = process_cpu_ns();
    let wall0 = Instant::now();
    let caller0 = thread_cpu_ns();
    for i in 0..requests {
        let req = rec.queued(format!("req-{i}")).admitted();
        for _ in 0..CHUNKS {
            req.tokens(1);
        }
        req.finish_ok(Usage::new(CHUNKS, Some(100)));
    }
    let caller_ns = thread_cpu_ns() - caller0;
    let closed = rec.close().unwrap();
    let wall = wall0.elapsed();
    let cpu_ns = process_cpu_ns() - cpu0;
    assert_eq!(closed.counts.status.ok, requests);
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);

    // The hottest event alone: one long stream of token chunks.
    let rec = Recorder::create(dir.join("tokens.jsonl"), RunInfo::new()).unwrap();
    let req = rec.queued("stream").admitted();
    let n_tokens = requests * CHUNKS * 4;
    let t0 = thread_cpu_ns();
    for _ in 0..n_tokens {
        req.tokens(1);
    }
    let token_ns = thread_cpu_ns() - t0;
    req.finish_ok(None);
    rec.close().unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    let events = requests * EVENTS_PER_REQUEST;
    let per_event = caller_ns as f64 / events as f64;
    let per_token = token_ns as f64 / n_tokens as f64;
    let per_request = caller_ns as f64 / requests as f64;
    let cpu_s = cpu_ns as f64 / 1e9;
    println!("recording API, {requests} requests × {EVENTS_PER_REQUEST} events = {events} events");
    println!(
        "  caller's thread: {per_event:.0} ns per event on average ({:.2} M events/s of its CPU); \
         {per_request:.0} ns per whole request",
        1e3 / per_event
    );
    println!("    tokens(n) alone: {per_token:.0} ns per call ({n_tokens} calls)");
    println!(
        "  whole recorder (caller + writer + sampler threads): {cpu_s:.2} s CPU, \
         {:.2} M events/s of CPU, {:.0} spans/s of CPU; wall {:.2} s; log {:.1} MB",
        events as f64 / cpu_s / 1e6,
        requests as f64 / cpu_s,
        wall.as_secs_f64(),
        bytes as f64 / 1e6
    );
    if per_event > 1000.0 {
        println!("  ABOVE the 1 µs per event target (docs/design.md §12)");
    }
}
