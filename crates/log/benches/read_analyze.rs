//! Benchmark of docs/design.md §12 "analysis": a generated 1,000,000-span log (with
//! samples every 10 ms) read from JSONL and fully analysed on one core.
//! Prints spans per second of CPU time and peak memory per span.
//!
//! `cargo bench -p tpscope-log --bench read_analyze` (set `TPSCOPE_BENCH_SPANS` for
//! another size, or `TPSCOPE_BENCH_LOG=path` to measure an existing span log, which
//! is then kept; with `TPSCOPE_BENCH_KEEP=path` the generated log is written there
//! and kept; with `TPSCOPE_BENCH_TURNS=k` the spans are multi-turn sessions of k
//! turns, as `bench --sessions` writes them). The measurement runs in a child
//! process so that the generator's memory does not count toward the peak.
//! The capacity ledger is then computed again on its own, to print what it adds
//! to the read and analysis (docs/design.md §12: at most 5 %), unless
//! `TPSCOPE_BENCH_NO_LEDGER` is set (for a profiler to see only reading and
//! analysing).
//! `scripts/perf-compare-reader.sh` runs this and an older build's benchmark
//! interleaved on one log and prints both speeds and their ratio.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use tpscope_analysis::ledger::capacity_and_integrals;
use tpscope_analysis::{Options, RunReport, Steps, analyze};
use tpscope_log::{LogWriter, ReadOptions, read_paths};
use tpscope_model::{
    Attempt, Cause, Record, RunRecord, SCHEMA, SampleRecord, Span, SpanError, Status, Target,
    Timestamp, TokenSource,
};

/// The CPU time of this process (user + system), to the nanosecond: clock
/// ticks (10 ms) were too coarse to time the ledger's share.
fn cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// A closed-loop run with cap 64: realistic spans, 2 % with a retry, 1 % failing.
fn generate(path: &PathBuf, n: u64, turns: Option<u64>) {
    let origin = 1_767_225_600_000_000_000i64;
    let t = |ns: i64| Timestamp::from_unix_nanos(origin + ns);
    let mut w = LogWriter::new(BufWriter::with_capacity(
        1 << 20,
        std::fs::File::create(path).unwrap(),
    ));
    w.write(&Record::Run(RunRecord {
        run_id: "bench".into(),
        schema: SCHEMA.into(),
        tool: "tpscope bench-generator".into(),
        started_at: t(0),
        target: Target {
            url: None,
            model: Some("sim".into()),
            api: Some("chat".into()),
        },
        cap: Some(64),
        token_source: Some(TokenSource::Usage),
        tokenizer: None,
        sample_interval: Some(Duration::from_millis(10)),
        sample_heartbeat: None,
        load: serde_json::Value::Null,
        labels: Default::default(),
        queue_times: Default::default(),
    }))
    .unwrap();
    let cap = 64i64;
    let mut slot_free = vec![0i64; cap as usize];
    let mut next_sample = 0i64;
    let mut x = 0x2545F4914F6CDD1Du64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..n {
        let slot = (i % cap as u64) as usize;
        let queued = (i as i64) * 2_000_000; // arrivals every 2 ms
        let admitted = queued.max(slot_free[slot]);
        let ttft = 20_000_000 + (rnd() % 30_000_000) as i64;
        let tokens = 50 + rnd() % 400;
        let stream = tokens as i64 * 8_000_000;
        let first = admitted + ttft;
        let last = first + stream;
        let released = last + 200_000;
        slot_free[slot] = released;
        while next_sample < queued {
            w.write(&Record::Sample(SampleRecord {
                run_id: "bench".into(),
                at: t(next_sample),
                in_flight: 64,
                queue_depth: (rnd() % 3) as u32,
                cap: None,
            }))
            .unwrap();
            next_sample += 10_000_000;
        }
        let fail = rnd() % 100 == 0;
        let retry = rnd() % 50 == 0;
        let mut attempts = Vec::new();
        if retry {
            attempts.push(Attempt {
                first_byte_at: Some(t(admitted + 1_000_000)),
                ended_at: t(admitted + 1_000_000),
                http_status: Some(429),
                cause: Some(Cause::Http429),
                connection_reused: Some(true),
                backoff: Some(Duration::from_millis(5)),
                ..Attempt::started(t(admitted))
            });
        }
        attempts.push(Attempt {
            first_byte_at: Some(t(first - 1_000_000)),
            first_token_at: Some(t(first)),
            ended_at: t(released),
            http_status: Some(200),
            cause: fail.then_some(Cause::Disconnect),
            tokens,
            connection_reused: Some(i >= cap as u64),
            connect_time: (i < cap as u64).then(|| Duration::from_micros(150)),
            ..Attempt::started(t(admitted + if retry { 6_000_000 } else { 0 }))
        });
        w.write(&Record::Span(Span {
            run_id: "bench".into(),
            span_id: i.to_string(),
            request_id: Some(format!("chatcmpl-{i:x}")),
            status: if fail { Status::Error } else { Status::Ok },
            queued_at: t(queued),
            admitted_at: Some(t(admitted)),
            first_token_at: (!fail).then(|| t(first)),
            last_token_at: (!fail).then(|| t(last)),
            released_at: t(released),
            output_tokens: if fail { 0 } else { tokens },
            input_tokens: Some(200 + rnd() % 1000),
            token_source: None,
            retry_count: u32::from(retry),
            retry_causes: if retry { vec![Cause::Http429] } else { vec![] },
            attempts,
            error: fail.then(|| SpanError {
                cause: Cause::Disconnect,
                message: "stream ended without [DONE]".into(),
            }),
            chunks: None,
            session_id: turns.map(|k| (i / k).to_string()),
            turn: turns.map(|k| (i % k) as u32 + 1),
            tokenizer_output_tokens: None,
            finish_reason: None,
        }))
        .unwrap();
    }
    w.into_inner().flush().unwrap();
}

fn measure(path: &PathBuf) {
    let wall = Instant::now();
    let cpu0 = cpu_time();
    let set = read_paths(std::slice::from_ref(path), ReadOptions::default()).unwrap();
    let read_cpu = cpu_time() - cpu0;
    let opts = Options {
        bucket: Some(Duration::from_secs(1)),
        ..Options::default()
    };
    let reports: Vec<_> = set.runs.iter().map(|r| analyze(&r.input, &opts)).collect();
    let cpu = cpu_time() - cpu0;
    let wall = wall.elapsed();
    let spans: usize = set.runs.iter().map(|r| r.input.spans.len()).sum();
    let samples: usize = set.runs.iter().map(|r| r.input.samples.len()).sum();
    let peak = peak_rss_bytes();
    let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    println!(
        "spans: {spans} (+{samples} samples), log size {:.1} MB",
        bytes as f64 / 1e6
    );
    println!(
        "read: {:.3} s CPU; read + analysis: {:.3} s CPU, {:.3} s wall",
        read_cpu.as_secs_f64(),
        cpu.as_secs_f64(),
        wall.as_secs_f64()
    );
    println!(
        "throughput: {:.0} spans/s of CPU time (target ≥ 1,000,000)",
        spans as f64 / cpu.as_secs_f64().max(1e-9)
    );
    println!(
        "peak memory: {:.1} MB = {:.0} bytes/span (target ≤ 300)",
        peak as f64 / 1e6,
        peak as f64 / spans.max(1) as f64
    );
    println!(
        "check: system_tps {:.1}, gap_fraction {:?}",
        reports[0].system_tps.map(|t| t.0).unwrap_or(0.0),
        reports[0].gap_fraction
    );
    // Skipped where a profiler should see only the read and analysis.
    if std::env::var_os("TPSCOPE_BENCH_NO_LEDGER").is_some() {
        return;
    }
    let ledger = ledger_cpu(&set, &reports, &opts);
    println!(
        "ledger: {:.3} s CPU = {:.1} % of read + analysis (target ≤ 5)",
        ledger.as_secs_f64(),
        100.0 * ledger.as_secs_f64() / cpu.as_secs_f64().max(1e-9)
    );
}

/// What the capacity ledger adds to the analysis, in CPU time (best of five):
/// the ledger's pass over the steps (which gives the idle stage its integrals
/// too) less the pass the analysis makes for the integrals without it.
fn ledger_cpu(set: &tpscope_log::LogSet, reports: &[RunReport], opts: &Options) -> Duration {
    let mut best = (Duration::MAX, Duration::MAX);
    for _ in 0..5 {
        let mut spent = (Duration::ZERO, Duration::ZERO);
        for (run, report) in set.runs.iter().zip(reports) {
            let Some(w) = report.window else { continue };
            let steps = Steps::new(&run.input);
            let buckets = report
                .time_series
                .as_ref()
                .map(|t| (t.bucket, t.buckets.len()));
            let t0 = cpu_time();
            let with = capacity_and_integrals(
                &run.input,
                &steps,
                (w.start, w.end),
                buckets,
                opts.handoff,
                false,
            );
            let t1 = cpu_time();
            let without = steps.integrate(w.start, w.end);
            spent.0 += t1 - t0;
            spent.1 += cpu_time() - t1;
            assert_eq!(with.1, without, "the ledger's integrals are the steps'");
            std::hint::black_box(with);
        }
        best = (best.0.min(spent.0), best.1.min(spent.1));
    }
    best.0.saturating_sub(best.1)
}

fn main() {
    if let Ok(path) = std::env::var("TPSCOPE_BENCH_CHILD") {
        measure(&PathBuf::from(path));
        return;
    }
    let n: u64 = std::env::var("TPSCOPE_BENCH_SPANS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = std::env::temp_dir().join(format!("tpscope-bench-{}", std::process::id()));
    let (path, temporary) = if let Ok(existing) = std::env::var("TPSCOPE_BENCH_LOG") {
        (PathBuf::from(existing), false)
    } else {
        let (path, temporary) = match std::env::var("TPSCOPE_BENCH_KEEP") {
            Ok(keep) => (PathBuf::from(keep), false),
            Err(_) => {
                std::fs::create_dir_all(&dir).unwrap();
                (dir.join("spans.jsonl"), true)
            }
        };
        let t0 = Instant::now();
        let turns = std::env::var("TPSCOPE_BENCH_TURNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&k| k > 0);
        generate(&path, n, turns);
        println!("generated {n} spans in {:.1} s", t0.elapsed().as_secs_f64());
        (path, temporary)
    };
    let me = std::env::current_exe().unwrap();
    // Pin to one core: the target is per core.
    let status = Command::new("taskset")
        .args(["-c", "0"])
        .arg(&me)
        .env("TPSCOPE_BENCH_CHILD", &path)
        .status()
        .or_else(|_| Command::new(&me).env("TPSCOPE_BENCH_CHILD", &path).status())
        .unwrap();
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    std::process::exit(status.code().unwrap_or(1));
}
