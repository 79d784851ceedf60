//! End to end: a server that accepts and never answers cannot make bench wait
//! forever (the model lookup and the requests have default limits a user can
//! lift, recorded in the run record); `--max-error-rate` fails a run for CI; a
//! fixed `--output-tokens N` gives exactly N tokens against a server that honours
//! `ignore_eos`.

mod bench_support;

use bench_support::{SilentServer, bench, check_log, records, runs};
use tpscope_model::{Cause, Status};

#[test]
fn a_server_that_never_answers_the_model_lookup_is_given_up_on_with_a_message() {
    let server = SilentServer::start();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}/v1", server.port);
    let run = bench(
        dir.path(),
        "m.jsonl",
        &[
            "--url",
            &url,
            "--timeout-first-token",
            "1s",
            "--requests",
            "2",
        ],
    );
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("/models") && run.stderr.contains("no answer within 1 s"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--model"), "{}", run.stderr);
    assert!(!run.out.exists(), "a bench that never ran leaves no file");
    assert!(server.request_lines()[0].starts_with("GET /v1/models"));
}

#[test]
fn requests_to_a_server_that_never_answers_end_at_the_first_token_limit() {
    let server = SilentServer::start();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}/v1", server.port);
    let run = bench(
        dir.path(),
        "r.jsonl",
        &[
            "--url",
            &url,
            "--model",
            "m",
            "--timeout-first-token",
            "1s",
            "--requests",
            "2",
            "--concurrency",
            "2",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
        ],
    );
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    let (spans, end) = check_log(&run.out);
    assert_eq!((end.spans, end.status.error), (2, 2));
    for s in &spans {
        assert_eq!(s.error.as_ref().unwrap().cause, Cause::TimeoutFirstToken);
    }
    let load = &runs(&records(&run.out))[0].load;
    assert_eq!(load["timeouts_s"]["first_token"], 1.0);
    assert_eq!(load["timeouts_s"]["stall"], 60.0, "the default stall limit");
}

#[test]
fn default_limits_and_exact_fixed_lengths_are_in_the_run_record() {
    let dir = tempfile::tempdir().unwrap();
    let base = [
        "--sim-speed",
        "max",
        "--requests",
        "16",
        "--concurrency",
        "4",
        "--input-tokens",
        "16",
        "--output-tokens",
        "24",
    ];
    let run = bench(dir.path(), "d.jsonl", &base);
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let (spans, _) = check_log(&run.out);
    assert!(
        spans
            .iter()
            .all(|s| s.status == Status::Ok && s.output_tokens == 24),
        "every output has exactly the asked length"
    );
    let load = runs(&records(&run.out))[0].load.clone();
    assert_eq!(load["timeouts_s"]["first_token"], 300.0);
    assert_eq!(load["timeouts_s"]["stall"], 60.0);
    assert_eq!(
        (load["ignore_eos"].clone(), load["min_tokens"].clone()),
        (true.into(), 24.into())
    );

    let mut lifted = base.to_vec();
    lifted.extend([
        "--timeout-first-token",
        "none",
        "--timeout-stall",
        "none",
        "--no-ignore-eos",
    ]);
    let run = bench(dir.path(), "n.jsonl", &lifted);
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let load = runs(&records(&run.out))[0].load.clone();
    assert!(load["timeouts_s"]["first_token"].is_null());
    assert!(load["timeouts_s"]["stall"].is_null());
    assert_eq!(load["ignore_eos"], false);
    assert!(load.get("min_tokens").is_none());
}

#[test]
fn max_error_rate_fails_a_run_whose_error_share_is_above_it() {
    let dir = tempfile::tempdir().unwrap();
    let base = [
        "--sim-speed",
        "max",
        "--requests",
        "40",
        "--concurrency",
        "8",
        "--input-tokens",
        "16",
        "--output-tokens",
        "8",
        "--sim-fault",
        "500=0.5",
        "--seed",
        "3",
    ];
    let mut strict = base.to_vec();
    strict.extend(["--max-error-rate", "1%"]);
    let run = bench(dir.path(), "s.jsonl", &strict);
    let (_, end) = check_log(&run.out);
    assert!(end.status.error > 0 && end.status.ok > 0, "{end:?}");
    assert_eq!(run.status.code(), Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains("above --max-error-rate 1.0%"),
        "{}",
        run.stderr
    );
    let mut loose = base.to_vec();
    loose.extend(["--max-error-rate", "1"]);
    let run = bench(dir.path(), "l.jsonl", &loose);
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
}
