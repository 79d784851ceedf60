//! End to end: flags are validated (bad values name their flag), vLLM's flag names
//! work, every workload source runs, warm-up requests are not written, the
//! receive-timestamp source is recorded, sweeps write one run per level and print
//! the table, and Ctrl-C stops cleanly.

mod bench_support;

use std::path::Path;
use std::time::Duration;

use bench_support::{
    Run, bench, check_log, records, refused, runs, signal, spawn, wait, wait_for_line,
};
use tpscope_model::{EndRecord, Span, Status};

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../load/tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

fn rejected(args: &[&str], needle: &str) {
    refused(args, &[needle]);
}

#[test]
fn bad_values_are_rejected_naming_the_flag() {
    rejected(&["--concurrency", "0"], "--concurrency");
    rejected(&["--output-tokens", "normal:5"], "--output-tokens");
    rejected(&["--input-tokens", "uniform:9..1"], "--input-tokens");
    rejected(&["--rate", "fast"], "--rate");
    rejected(&["--arrival", "gamma:0"], "--arrival");
    rejected(&["--dispatch", "eager"], "--dispatch");
    rejected(&["--extra-body", "[1]"], "--extra-body");
    rejected(&["--header", "nocolon"], "--header");
    rejected(&["--duration", "5 parsecs"], "--duration");
    rejected(&["--warmup", "soon"], "--warmup");
    rejected(&["--trace", "nope:x"], "--trace");
    rejected(&["--url", "ftp://x"], "--url");
    rejected(
        &["--rate", "1", "--concurrency", "1,2", "--rate", "1,2"],
        "--rate",
    );
    rejected(&["--arrival", "poisson"], "--rate");
    rejected(&["--dispatch", "waves", "--rate", "2"], "--concurrency");
    rejected(&["--sim-fault", "418=0.1"], "--sim-fault");
    rejected(&["--rx-timestamps", "hardware"], "--rx-timestamps");
    rejected(&["--rx-timestamps", "hardware"], "`hardware`");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"prompt\": \"ok\"}\n{\"prompt\": 3}\n").unwrap();
    rejected(
        &["--dataset", bad.to_str().unwrap()],
        "bad.jsonl:2: field `prompt`",
    );
}

#[test]
fn vllm_flag_names_are_accepted_with_the_same_meaning() {
    let dir = tempfile::tempdir().unwrap();
    let run = bench(
        dir.path(),
        "v.jsonl",
        &[
            "--max-concurrency",
            "4",
            "--num-prompts",
            "12",
            "--random-input-len",
            "32",
            "--random-output-len",
            "8",
            "--request-rate",
            "inf",
            "--seed",
            "5",
            "--sim-speed",
            "20",
            "-q",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let (spans, _) = check_log(&run.out);
    assert_eq!(spans.len(), 12);
    assert!(spans.iter().all(|s| s.input_tokens.is_some()));
    let r = &runs(&records(&run.out))[0];
    assert_eq!(r.cap, Some(4));
    assert_eq!(r.load["workload"]["input_tokens"], "32");
    assert_eq!(r.load["seed"], 5);
    let kernel = if cfg!(target_os = "linux") {
        "kernel"
    } else {
        "user"
    };
    assert_eq!(r.load["rx_timestamps"], kernel);
}

#[test]
fn user_receive_timestamps_are_used_and_recorded_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let run = bench(
        dir.path(),
        "u.jsonl",
        &[
            "--rx-timestamps",
            "user",
            "--requests",
            "8",
            "--concurrency",
            "4",
            "--output-tokens",
            "8",
            "--sim-speed",
            "20",
            "-q",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let (spans, _) = check_log(&run.out);
    assert_eq!(spans.len(), 8);
    assert!(spans.iter().all(|s| s.status == Status::Ok));
    let r = &runs(&records(&run.out))[0];
    assert_eq!(r.load["rx_timestamps"], "user");
}

#[test]
fn every_workload_source_runs() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("prompts.jsonl");
    std::fs::write(
        &ds,
        "\"Say hi\"\n{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 5}\n",
    )
    .unwrap();
    let sharegpt = fixture("sharegpt_20.json");
    let mooncake = format!("mooncake:{}", fixture("mooncake_200.jsonl"));
    let azure = format!("azure:{}", fixture("azure_conv_200.csv"));
    for (name, args, n) in [
        (
            "ds",
            vec![
                "--dataset",
                ds.to_str().unwrap(),
                "--requests",
                "6",
                "--output-tokens",
                "8",
            ],
            6,
        ),
        (
            "sg",
            vec![
                "--sharegpt",
                sharegpt.as_str(),
                "--requests",
                "10",
                "--output-tokens",
                "uniform:4..16",
            ],
            10,
        ),
        (
            "mc",
            vec![
                "--trace",
                mooncake.as_str(),
                "--requests",
                "6",
                "--time-scale",
                "0.001",
            ],
            6,
        ),
        (
            "az",
            vec![
                "--trace",
                azure.as_str(),
                "--requests",
                "30",
                "--time-scale",
                "0.01",
            ],
            30,
        ),
        (
            "open",
            vec![
                "--rate",
                "50",
                "--arrival",
                "gamma:0.5",
                "--requests",
                "20",
                "--output-tokens",
                "8",
            ],
            20,
        ),
    ] {
        let mut a = args.clone();
        a.extend(["--sim-speed", "50", "-q"]);
        let run = bench(dir.path(), &format!("{name}.jsonl"), &a);
        assert_eq!(run.status.code(), Some(0), "{name}: {}", run.stderr);
        let (spans, end) = check_log(&run.out);
        assert_eq!((spans.len(), end.status.ok), (n, n as u64), "{name}");
    }
    // A trace replays its own arrival times (scaled).
    let recs = records(&dir.path().join("az.jsonl"));
    let spans = bench_support::spans(&recs);
    let t0 = spans.iter().map(|s| s.queued_at).min().unwrap();
    let last = spans.iter().map(|s| s.queued_at).max().unwrap();
    assert!(
        last.since(t0).unwrap() > Duration::from_millis(50),
        "arrivals are spread by the trace"
    );
}

#[test]
fn warm_up_requests_are_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let run = bench(
        dir.path(),
        "w.jsonl",
        &[
            "--warmup",
            "8",
            "--requests",
            "10",
            "--concurrency",
            "4",
            "--output-tokens",
            "8",
            "--sim-speed",
            "20",
            "-q",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let (spans, _) = check_log(&run.out);
    assert_eq!(spans.len(), 10);
    let r = &runs(&records(&run.out))[0];
    assert_eq!(r.load["warmup"]["written"], false);
}

#[test]
fn a_concurrency_sweep_writes_one_run_per_level_and_prints_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let run = bench(
        dir.path(),
        "s.jsonl",
        &[
            "--concurrency",
            "1,4,16",
            "--requests",
            "24",
            "--output-tokens",
            "32",
            "--input-tokens",
            "64",
            "--sim-speed",
            "20",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let recs = records(&run.out);
    let rs = runs(&recs);
    assert_eq!(
        rs.iter().map(|r| r.cap).collect::<Vec<_>>(),
        vec![Some(1), Some(4), Some(16)]
    );
    assert_eq!(bench_support::ends(&recs).len(), 3);
    assert!(
        run.stdout.contains("Sweep of concurrency"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("knee:"), "{}", run.stdout);
    assert_eq!(
        run.stdout.lines().filter(|l| l.contains("24/24")).count(),
        3,
        "{}",
        run.stdout
    );
}

#[test]
fn report_of_a_sweep_log_prints_the_sweep_table_and_knee_bench_printed() {
    // `tpscope report sweep.jsonl` printed three separate reports and no table.
    let dir = tempfile::tempdir().unwrap();
    let run = bench(
        dir.path(),
        "sweep.jsonl",
        &[
            "--concurrency",
            "1,4",
            "--requests",
            "16",
            "--output-tokens",
            "16",
            "--input-tokens",
            "32",
            "--sim-speed",
            "20",
            "--goodput",
            "ttft:30s,e2e:1h",
            "--price-per-hour",
            "2",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let table: String = run
        .stdout
        .lines()
        .take_while(|l| !l.starts_with("One run per level"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        table.contains("Sweep of concurrency") && table.contains("knee"),
        "{table}"
    );
    assert!(table.contains("up to concurrency 4"), "{table}");
    let report = bench_support::tpscope()
        .args(["report", run.out.to_str().unwrap()])
        .args(["--goodput", "ttft:30s,e2e:1h", "--price-per-hour", "2"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&report.stdout);
    assert!(report.status.success());
    assert!(shown.contains(&table), "bench:\n{table}\nreport:\n{shown}");
    // The closed loop's queue is named as the client's backlog, in both.
    assert!(
        !table.contains("TTFT user") && table.contains("backlog+TTFT"),
        "{table}"
    );
    assert!(shown.contains("t_queue = client backlog"), "{shown}");
    let json = bench_support::tpscope()
        .args(["report", run.out.to_str().unwrap(), "--format", "json"])
        .args(["--goodput", "ttft:30s"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let sweep = &v["sweeps"][0];
    assert_eq!(sweep["parameter"], "concurrency", "{sweep}");
    assert_eq!(sweep["closed_loop"], true, "{sweep}");
    assert_eq!(sweep["rows"].as_array().map(Vec::len), Some(2), "{sweep}");
    assert_eq!(sweep["within_goals"]["level"], 4.0, "{sweep}");
}

fn interrupt(pid: u32) {
    signal(pid, "-INT");
}

/// Starts a 400-request run at concurrency 4, sends `sig` once its first request
/// has finished (the run is under way, others are in flight), and waits for it.
fn stopped_once_by(dir: &Path, sig: &str) -> (Run, Vec<Span>, EndRecord) {
    let (child, out) = spawn(
        dir,
        "stopped.jsonl",
        &[
            "--concurrency",
            "4",
            "--requests",
            "400",
            "--output-tokens",
            "64",
        ],
    );
    wait_for_line(&out, |l| l.contains(r#""kind":"span""#));
    signal(child.id(), sig);
    let run = wait(child, out);
    let (spans, end) = check_log(&run.out);
    (run, spans, end)
}

#[test]
fn ctrl_c_once_stops_admitting_and_lets_in_flight_requests_finish() {
    let dir = tempfile::tempdir().unwrap();
    let (run, spans, end) = stopped_once_by(dir.path(), "-INT");
    assert_eq!(run.status.code(), Some(130), "{}", run.stderr);
    assert_eq!(end.spans, 400, "every ready request is a span");
    assert!(end.status.ok >= 4, "{end:?}");
    assert_eq!(
        spans
            .iter()
            .filter(|s| s.status == Status::Cancelled && s.admitted_at.is_some())
            .count(),
        0
    );
    assert!(run.stdout.contains("system_tps"), "the report is printed");
}

#[test]
fn ctrl_c_twice_cancels_in_flight_requests() {
    let dir = tempfile::tempdir().unwrap();
    let (child, out) = spawn(
        dir.path(),
        "ii.jsonl",
        &[
            "--concurrency",
            "4",
            "--requests",
            "40",
            "--output-tokens",
            "100000",
            "--extra-body",
            "{\"ignore_eos\": true}",
        ],
    );
    // All four slots taken (a sample says so); then give their first tokens time.
    wait_for_line(&out, |l| {
        l.contains(r#""kind":"sample""#) && l.contains(r#""in_flight":4,"#)
    });
    std::thread::sleep(Duration::from_millis(500));
    interrupt(child.id());
    std::thread::sleep(Duration::from_millis(300));
    interrupt(child.id());
    let run = wait(child, out);
    assert_eq!(run.status.code(), Some(130), "{}", run.stderr);
    let (spans, end) = check_log(&run.out);
    assert_eq!(end.spans, 40);
    let cancelled_in_flight = spans
        .iter()
        .filter(|s| s.status == Status::Cancelled && s.admitted_at.is_some())
        .count();
    assert_eq!(cancelled_in_flight, 4, "the four in flight were cancelled");
    assert!(
        spans
            .iter()
            .filter(|s| s.admitted_at.is_some())
            .all(|s| s.first_token_at.is_some())
    );
}

#[test]
fn sigterm_and_sighup_stop_a_run_like_ctrl_c() {
    // `timeout`, `docker stop` and CI cancellation send SIGTERM; a closed terminal
    // SIGHUP. Before, either killed bench without an `end` record or a report.
    for (sig, code) in [("-TERM", 143), ("-HUP", 129)] {
        let dir = tempfile::tempdir().unwrap();
        let (run, _, end) = stopped_once_by(dir.path(), sig);
        assert_eq!(run.status.code(), Some(code), "{sig}: {}", run.stderr);
        assert_eq!(end.spans, 400, "{sig}: every ready request is a span");
        assert!(
            run.stdout.contains("system_tps"),
            "{sig}: the report is printed"
        );
    }
}
