//! Span logs made in code for the `compare` and HTML tests: closed-loop runs through
//! a cap, with lengths, rates, failures and retries drawn from a seed, written as
//! `tpscope.spans/1` JSON Lines (run, span, sample and end records).

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tpscope_analysis::stats::bootstrap::SplitMix64;
use tpscope_model::{
    Cause, EndRecord, Record, RunRecord, SCHEMA, Span, SpanError, Status, Target, Timestamp,
    TokenSource,
};

/// How a synthetic run behaves.
#[derive(Clone, Copy, Debug)]
pub struct Load {
    pub requests: usize,
    pub cap: u32,
    /// Requests arrive in bursts of this many ...
    pub burst: usize,
    /// ... every this many seconds.
    pub burst_every: f64,
    /// Mean stream rate per request (tokens/s).
    pub stream_tps: f64,
    /// Seconds a freed slot idles before the next request takes it.
    pub refill_delay: f64,
    pub error_p: f64,
    pub retry_p: f64,
    pub seed: u64,
}

impl Default for Load {
    fn default() -> Self {
        Load {
            requests: 300,
            cap: 8,
            burst: 40,
            burst_every: 4.0,
            stream_tps: 60.0,
            refill_delay: 0.0,
            error_p: 0.0,
            retry_p: 0.0,
            seed: 1,
        }
    }
}

fn ts(secs: f64) -> Timestamp {
    Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + (secs * 1e9).round() as i64)
}

/// The records of one run.
pub fn records(run_id: &str, model: &str, source: TokenSource, load: Load) -> Vec<Record> {
    let mut rng = SplitMix64::new(load.seed);
    let mut out = vec![Record::Run(RunRecord {
        run_id: run_id.into(),
        schema: SCHEMA.into(),
        tool: "tpscope test".into(),
        started_at: ts(0.0),
        target: Target {
            url: None,
            model: Some(model.into()),
            api: Some("chat".into()),
        },
        cap: Some(load.cap),
        token_source: Some(source),
        tokenizer: None,
        sample_interval: Some(std::time::Duration::from_millis(100)),
        sample_heartbeat: None,
        load: serde_json::Value::Null,
        labels: Default::default(),
        queue_times: Default::default(),
    })];
    let mut slots = vec![0.0f64; load.cap as usize];
    let (mut ok, mut error) = (0u64, 0u64);
    let mut end = 0.0f64;
    let mut spans = Vec::new();
    for i in 0..load.requests {
        let queued = (i / load.burst.max(1)) as f64 * load.burst_every;
        let (slot, free) = slots
            .iter()
            .copied()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap();
        let admitted = queued.max(free + if free > 0.0 { load.refill_delay } else { 0.0 });
        let tokens = 50 + rng.below(300) as u64;
        let rate = load.stream_tps * (0.7 + 0.6 * rng.unit_f64());
        let first = admitted + 0.05 + 0.1 * rng.unit_f64();
        let last = first + tokens as f64 / rate;
        let released = last + 0.002;
        let failed = rng.unit_f64() < load.error_p;
        let retries = (0..2).filter(|_| rng.unit_f64() < load.retry_p).count() as u32;
        slots[slot] = released;
        end = end.max(released);
        if failed {
            error += 1
        } else {
            ok += 1
        }
        spans.push(Span {
            run_id: run_id.into(),
            span_id: format!("s{i}"),
            request_id: None,
            status: if failed { Status::Error } else { Status::Ok },
            queued_at: ts(queued),
            admitted_at: Some(ts(admitted)),
            first_token_at: Some(ts(first)),
            last_token_at: Some(ts(last)),
            released_at: ts(released),
            output_tokens: tokens,
            input_tokens: Some(100),
            token_source: None,
            retry_count: retries,
            retry_causes: vec![Cause::Http429; retries as usize],
            attempts: vec![],
            error: failed.then(|| SpanError {
                cause: Cause::Http5xx,
                message: "injected".into(),
            }),
            chunks: None,
            session_id: None,
            turn: None,
            tokenizer_output_tokens: None,
            finish_reason: None,
        });
    }
    // Spans in release order, as a recorder writes them.
    spans.sort_by_key(|s| s.released_at);
    let n = spans.len() as u64;
    out.extend(spans.into_iter().map(Record::Span));
    out.push(Record::End(EndRecord {
        run_id: run_id.into(),
        ended_at: ts(end),
        spans: n,
        status: tpscope_model::StatusCounts {
            ok,
            error,
            cancelled: 0,
        },
        samples: 0,
        schedule_late_max: None,
        queued_at_stated: None,
        cut_at_stop: None,
        model: None,
    }));
    out
}

/// A fresh directory under the cargo target's test scratch space.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes records as a span log.
pub fn write_log(path: &Path, records: &[Record]) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for r in records {
        serde_json::to_writer(&mut f, r).unwrap();
        f.write_all(b"\n").unwrap();
    }
    f.flush().unwrap();
}

/// Writes one run's log and returns its path.
pub fn log(dir: &Path, name: &str, run_id: &str, load: Load) -> PathBuf {
    let path = dir.join(name);
    write_log(&path, &records(run_id, "m", TokenSource::Usage, load));
    path
}

/// Runs the `tpscope` binary.
pub fn tpscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tpscope"))
        .args(args)
        .output()
        .expect("run tpscope")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
