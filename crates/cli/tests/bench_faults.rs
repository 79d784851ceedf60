//! End to end against the built-in simulator: for every fault it injects, and for a
//! refused connection, every request becomes a span (sent = ok + error +
//! cancelled), failure causes are right, and the report is still produced.

mod bench_support;

use std::collections::BTreeMap;

use bench_support::{bench, check_log};
use tpscope_model::{Cause, Status};

const BASE: &[&str] = &[
    "--sim-speed",
    "20",
    "--concurrency",
    "8",
    "--requests",
    "40",
    "--input-tokens",
    "64",
    "--output-tokens",
    "24",
    "--extra-body",
    "{\"ignore_eos\": true}",
    "--seed",
    "7",
];

fn causes(spans: &[tpscope_model::Span]) -> BTreeMap<Cause, usize> {
    let mut m = BTreeMap::new();
    for s in spans.iter().filter(|s| s.status == Status::Error) {
        *m.entry(s.error.as_ref().unwrap().cause).or_insert(0) += 1;
    }
    m
}

fn fault_run(fault: &str, extra: &[&str], expected: Cause) {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = BASE.to_vec();
    let spec = format!("{fault}=0.4");
    args.extend(["--sim-fault", spec.as_str()]);
    args.extend(extra);
    let run = bench(dir.path(), "f.jsonl", &args);
    assert!(
        run.status.code().is_some_and(|c| c == 0 || c == 1),
        "{fault}: {}",
        run.stderr
    );
    let (spans, end) = check_log(&run.out);
    assert_eq!(end.spans, 40, "{fault}: every request is a span");
    assert_eq!(end.status.cancelled, 0, "{fault}");
    assert!(
        end.status.error > 0 && end.status.ok > 0,
        "{fault}: {end:?}"
    );
    let c = causes(&spans);
    assert_eq!(
        c.keys().copied().collect::<Vec<_>>(),
        vec![expected],
        "{fault}: causes {c:?}"
    );
    assert!(
        run.stdout.contains("system_tps"),
        "{fault}: the report is printed:\n{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(expected.as_str()),
        "{fault}: the report names the cause:\n{}",
        run.stdout
    );
}

#[test]
fn http_429_is_recorded_as_http_429() {
    fault_run("429", &[], Cause::Http429);
}

#[test]
fn http_500_and_503_are_http_5xx() {
    fault_run("500", &[], Cause::Http5xx);
    fault_run("503", &[], Cause::Http5xx);
}

#[test]
fn a_cut_stream_is_a_disconnect() {
    fault_run("cut", &[], Cause::Disconnect);
}

#[test]
fn a_stalled_stream_times_out_as_timeout_stall() {
    fault_run("stall", &["--timeout-stall", "300ms"], Cause::TimeoutStall);
}

#[test]
fn a_malformed_chunk_is_malformed() {
    fault_run("malformed", &[], Cause::Malformed);
}

#[test]
fn a_slow_first_token_times_out_as_timeout_first_token() {
    fault_run(
        "slow-first-token",
        &["--timeout-first-token", "500ms"],
        Cause::TimeoutFirstToken,
    );
}

#[test]
fn retries_turn_429s_into_ok_spans_with_their_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<&str> = BASE.to_vec();
    args.extend([
        "--sim-fault",
        "429=0.3",
        "--max-retries",
        "5",
        "--retry-backoff",
        "10ms",
    ]);
    let run = bench(dir.path(), "r.jsonl", &args);
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let (spans, end) = check_log(&run.out);
    assert_eq!(end.spans, 40);
    let retried: Vec<_> = spans.iter().filter(|s| s.retry_count > 0).collect();
    assert!(!retried.is_empty(), "some requests were retried");
    for s in &retried {
        assert_eq!(s.attempts.len() as u32, s.retry_count + 1);
        assert!(s.retry_causes.iter().all(|c| *c == Cause::Http429));
        // The simulator sends Retry-After: 1; the back-off honours it.
        for a in &s.attempts[..s.attempts.len() - 1] {
            assert!(a.backoff.unwrap().as_secs_f64() >= 1.0, "{:?}", a.backoff);
            assert_eq!(a.http_status, Some(429));
        }
    }
    assert!(
        run.stdout.contains("http_429"),
        "retries by cause are reported"
    );
}

#[test]
fn a_refused_connection_is_connect_for_every_request_and_still_reported() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
        // dropped here: nothing listens on the port any more
    };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/v1");
    let run = bench(
        dir.path(),
        "c.jsonl",
        &[
            "--base-url",
            &url,
            "--model",
            "m",
            "--requests",
            "6",
            "--concurrency",
            "2",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
        ],
    );
    assert_eq!(
        run.status.code(),
        Some(1),
        "no request succeeded: {}",
        run.stderr
    );
    let (spans, end) = check_log(&run.out);
    assert_eq!((end.spans, end.status.error), (6, 6));
    assert!(
        spans
            .iter()
            .all(|s| s.error.as_ref().unwrap().cause == Cause::Connect)
    );
    assert!(run.stdout.contains("connect"), "{}", run.stdout);
}

#[test]
fn the_servers_message_reaches_the_no_request_succeeded_error() {
    // What broke: `--model nope` against vLLM said "no request succeeded", and the
    // server's reason was only in the log.
    let dir = tempfile::tempdir().unwrap();
    let run = bench(
        dir.path(),
        "nope.jsonl",
        &["--model", "nope", "--requests", "3", "--concurrency", "1"],
    );
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    let last = run.stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: no request succeeded; http_4xx ×3: HTTP 404")
            && last.contains("The model `nope` does not exist"),
        "{}",
        run.stderr
    );
    // And the report lists it under its cause.
    assert!(
        run.stdout
            .contains("http_4xx ×3: HTTP 404 Not Found: The model `nope`"),
        "{}",
        run.stdout
    );
}
