//! End to end, what a new user meets: the model's context is
//! respected, scaled simulator time is said, and the run's report points onwards.

mod bench_support;

use bench_support::{bench, check_log, records, runs};
use tpscope_model::Status;

#[test]
fn the_default_workload_fits_the_models_context_and_says_so() {
    // What broke: the default lengths against a 4k-context vLLM drew 31 of 320
    // requests longer than max_model_len (HTTP 400).
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("sim.toml");
    std::fs::write(&cfg, "max_model_len = 1024\nspeed = \"max\"\n").unwrap();
    let cfg = cfg.display().to_string();
    let run = bench(
        dir.path(),
        "ctx.jsonl",
        &[
            "--sim-config",
            &cfg,
            "--requests",
            "60",
            "--concurrency",
            "8",
            "-q",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("context is 1024 tokens (max_model_len)"),
        "{}",
        run.stderr
    );
    let (spans, end) = check_log(&run.out);
    assert_eq!(end.status.ok, 60, "{}", run.stderr);
    let limit = runs(&records(&run.out))[0].load["context_limit"]
        .as_u64()
        .unwrap();
    assert!(limit < 1024);
    // The server's prompt count includes the chat template: within the context.
    for s in spans.iter().filter(|s| s.status == Status::Ok) {
        assert!(s.input_tokens.unwrap() + s.output_tokens <= 1024, "{s:?}");
    }
    // Lengths the user gave that cannot fit are refused, naming the flags.
    let run = bench(
        dir.path(),
        "ctx2.jsonl",
        &[
            "--sim-config",
            &cfg,
            "--input-tokens",
            "1000",
            "--output-tokens",
            "100",
            "--requests",
            "2",
        ],
    );
    assert_eq!(run.status.code(), Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("--input-tokens/--output-tokens") && run.stderr.contains("1100"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_scaled_simulator_run_says_so_and_the_report_leads_with_the_server_and_points_onwards() {
    // What broke: a --sim-speed run did not say its times were scaled; the default
    // report led with the client's backlog and suggested nothing.
    let dir = tempfile::tempdir().unwrap();
    let run = bench(
        dir.path(),
        "s.jsonl",
        &[
            "--sim-speed",
            "20",
            "--requests",
            "24",
            "--concurrency",
            "4",
            "--input-tokens",
            "64",
            "--output-tokens",
            "16",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("20× faster than real time (--sim-speed 20)"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains("warning: times are scaled"),
        "{}",
        run.stdout
    );
    let report = &run.stdout;
    assert!(
        report.starts_with("what the server did:\n  TTFT after admission"),
        "{report}"
    );
    for row in ["TPOT", "stream TPS", "system TPS"] {
        assert!(report.contains(&format!("\n  {row} ")), "{row}: {report}");
    }
    let next = report.rsplit_once("\nnext:\n").expect("next steps").1;
    let file = run.out.display().to_string();
    assert!(
        next.contains(&format!("tpscope report {file} --html")),
        "{next}"
    );
    assert!(
        next.contains("tpscope bench --concurrency 1,4,16,64"),
        "{next}"
    );
    assert!(next.contains("tpscope compare"), "{next}");
    // In a closed loop with 24 requests ready at once and 4 slots, what a user
    // waited is mostly tpscope's own queue: said as such.
    assert!(report.contains("client backlog:"), "{report}");
}

#[test]
fn sim_fault_connection_close_makes_every_request_connect_and_sim_flags_are_refused_with_url() {
    // What broke: `tpscope sim --connection-close` had no `bench --sim-fault` form.
    let dir = tempfile::tempdir().unwrap();
    let run = bench(
        dir.path(),
        "cc.jsonl",
        &[
            "--sim-fault",
            "connection-close=1",
            "--sim-speed",
            "max",
            "--requests",
            "6",
            "--concurrency",
            "1",
            "-q",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let (spans, _) = check_log(&run.out);
    assert_eq!(spans.len(), 6);
    for s in &spans {
        assert_eq!(s.attempts[0].connection_reused, Some(false), "{s:?}");
    }
    bench_support::refused(&["--sim-fault", "connection-close=0.5"], &["0 or 1"]);
    bench_support::refused(
        &[
            "--url",
            "http://127.0.0.1:9/v1",
            "--sim-fault",
            "connection-close=1",
        ],
        &["--sim-* flags", "--url"],
    );
    let help = bench_support::tpscope()
        .args(["bench", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("refused with --url"), "{help}");
    assert!(help.contains("connection-close"), "{help}");
}

#[test]
fn ctrl_c_during_the_warm_up_says_nothing_was_measured() {
    // What broke: a run stopped while warming up printed an empty report.
    let dir = tempfile::tempdir().unwrap();
    let (child, out) = bench_support::spawn(
        dir.path(),
        "w.jsonl",
        &["--warmup", "10m", "--concurrency", "2", "--requests", "10"],
    );
    // The log is opened after the signal handlers are installed: from then on a
    // signal is a stop, whether the warm-up has begun or not.
    let deadline = std::time::Instant::now() + bench_support::LIMIT;
    while !out.exists() {
        assert!(std::time::Instant::now() < deadline, "no log file");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    bench_support::signal(child.id(), "-INT");
    let run = bench_support::wait(child, out);
    assert_eq!(run.status.code(), Some(130), "{}", run.stderr);
    assert!(
        run.stderr
            .contains("stopped during the warm-up (--warmup): nothing was measured"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("system_tps"), "{}", run.stdout);
}

#[test]
fn closed_loop_duration_leftovers_are_backlog_left_at_the_end_not_failures() {
    // What broke: requests still queued when --duration ended were reported as
    // "failures by cause: cancelled N".
    let dir = tempfile::tempdir().unwrap();
    let run = bench(
        dir.path(),
        "d.jsonl",
        &[
            "--concurrency",
            "2",
            "--duration",
            "1s",
            "--sim-speed",
            "5",
            "--output-tokens",
            "64",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let (spans, _) = check_log(&run.out);
    let left = spans
        .iter()
        .filter(|s| s.status == Status::Cancelled && s.admitted_at.is_none())
        .count();
    assert!(left > 0, "a closed loop always has a backlog");
    assert!(
        run.stdout.contains(&format!(
            "({left} of them backlog left at the end, never sent)"
        )),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("failures by cause: none"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("cancelled ×"), "{}", run.stdout);
}
