//! `tpscope report` as a user runs it: formats, windows, exit statuses and errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../log/tests/fixtures/two_spans_cap1.jsonl")
}

fn tpscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tpscope"))
        .args(args)
        .output()
        .expect("run tpscope")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn text_report_of_the_golden_log() {
    let g = golden();
    let out = tpscope(&["report", g.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("run golden"), "{s}");
    assert!(
        s.contains("spans 3: ok 2, error 1, cancelled 0 · failures by cause: disconnect 1"),
        "{s}"
    );
    assert!(s.contains("66.67 %"), "{s}");
    assert!(s.contains("t_queue (ms)"), "{s}");
}

#[test]
fn json_report_uses_design_names_and_seconds() {
    let g = golden();
    let out = tpscope(&[
        "report",
        g.to_str().unwrap(),
        "--format",
        "json",
        "--bucket",
        "2s",
        "--price-per-hour",
        "3.6",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "tpscope.report/1");
    let r = &v["runs"][0];
    for key in [
        "system_tps",
        "gap_fraction",
        "success_rate",
        "retry_rate",
        "utilization",
        "gap_fraction_of_backlog",
        "t_queue",
        "stream_tps",
    ] {
        assert!(r.get(key).is_some(), "missing {key}");
    }
    assert!((r["system_tps"].as_f64().unwrap() - 15.0 / 6.5).abs() < 1e-9);
    assert_eq!(r["t_queue"]["max"].as_f64().unwrap(), 3.0);
    assert_eq!(r["t_queue"]["count"], 2);
    assert!(r["t_queue"].get("p99_9").is_some());
    assert_eq!(r["backlog_time_s"].as_f64().unwrap(), 3.0);
    assert!(r["gap_fraction_of_backlog"].as_f64().unwrap() == 0.0);
    assert_eq!(r["time_series"]["bucket_s"].as_f64().unwrap(), 2.0);
    assert_eq!(r["time_series"]["buckets"].as_array().unwrap().len(), 4);
    // 3.6 per hour at 15/6.5 tok/s → 3.6 / (15/6.5 × 3600) × 1e6.
    let per_m = r["cost"]["per_million_output_tokens"].as_f64().unwrap();
    assert!((per_m - 3.6 / (15.0 / 6.5 * 3600.0) * 1e6).abs() < 1e-6);
    assert!(r["conventional"]["inter_token_latency"]["p50"].is_null());
}

#[test]
fn csv_has_one_row_per_span() {
    let g = golden();
    let out = tpscope(&["report", g.to_str().unwrap(), "--format", "csv"]);
    assert!(out.status.success());
    let s = text(&out.stdout);
    let lines: Vec<&str> = s.lines().collect();
    assert_eq!(lines.len(), 4);
    assert!(
        lines[0]
            .starts_with("run_id,span_id,request_id,status,error_cause,error_message,queued_at")
    );
    assert!(lines[2].starts_with("golden,b,,ok,,,"));
    assert!(lines[3].starts_with("golden,c,,error,disconnect,"));
}

#[test]
fn csv_carries_request_id_error_message_and_token_source() {
    // What broke: the CSV lacked request_id, the error message and the token source.
    let log =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../log/tests/fixtures/bench_sim_faults.jsonl");
    let out = tpscope(&["report", log.to_str().unwrap(), "--format", "csv"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut rows = csv_rows(&out.stdout);
    let head = rows.remove(0);
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    let (rid, status, msg, src) = (
        col("request_id"),
        col("status"),
        col("error_message"),
        col("token_source"),
    );
    let ok = rows.iter().find(|r| r[status] == "ok").unwrap();
    assert!(ok[rid].starts_with("chatcmpl-sim-"), "{ok:?}");
    assert_eq!(ok[src], "usage");
    assert!(ok[msg].is_empty());
    let failed = rows
        .iter()
        .find(|r| r[msg].starts_with("HTTP 429"))
        .unwrap();
    assert!(failed[msg].contains("Rate limit reached"), "{failed:?}");
    assert!(rows.iter().any(|r| r[msg].contains("the stream broke")));
}

/// CSV rows split by a real CSV reader (messages hold commas).
fn csv_rows(bytes: &[u8]) -> Vec<Vec<String>> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(bytes)
        .records()
        .map(|r| r.unwrap().iter().map(str::to_string).collect())
        .collect()
}

#[test]
fn markdown_and_steady_window() {
    let g = golden();
    let out = tpscope(&[
        "report",
        g.to_str().unwrap(),
        "--format",
        "markdown",
        "--window",
        "steady",
    ]);
    assert!(out.status.success());
    let s = text(&out.stdout);
    assert!(s.contains("## Run `golden`"));
    assert!(s.contains("| `system_tps` |"));
    assert!(s.contains("steady window"), "{s}");
}

#[test]
fn bad_input_exits_2_naming_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    let golden = std::fs::read_to_string(golden()).unwrap();
    std::fs::write(
        &bad,
        golden.replacen("\"output_tokens\":10", "\"output_tokens\":-1", 1),
    )
    .unwrap();
    let out = tpscope(&["report", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("bad.jsonl:3: field `output_tokens`"), "{err}");
    // With --skip-invalid the rest is analysed and the skip is reported.
    let out = tpscope(&["report", bad.to_str().unwrap(), "--skip-invalid"]);
    assert!(out.status.success());
    assert!(
        text(&out.stdout).contains("skipped 1 invalid records"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    let g = golden();
    for (args, needle) in [
        (vec!["--window", "9..3"], "--window"),
        (vec!["--window", "later"], "--window"),
        (vec!["--bucket", "fast"], "--bucket"),
        (vec!["--time-unit", "days"], "--time-unit"),
        (vec!["--price-per-hour=-1"], "--price-per-hour"),
    ] {
        let mut all = vec!["report", g.to_str().unwrap()];
        all.extend(args.iter().copied());
        let out = tpscope(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).contains(needle),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let out = tpscope(&["report", "/nonexistent.jsonl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("/nonexistent.jsonl"));
}

#[test]
fn an_unwritable_output_is_a_runtime_failure_exit_1() {
    let g = golden();
    for flag in ["--output", "--html"] {
        let out = tpscope(&["report", g.to_str().unwrap(), flag, "/nonexistent/dir/out"]);
        assert_eq!(out.status.code(), Some(1), "{flag}");
        assert!(text(&out.stderr).contains("/nonexistent/dir/out"), "{flag}");
    }
}

#[test]
fn help_lists_bucket_between_window_and_time_unit() {
    let out = tpscope(&["report", "--help"]);
    let s = text(&out.stdout);
    let at = |flag: &str| {
        s.find(flag)
            .unwrap_or_else(|| panic!("{flag} missing: {s}"))
    };
    assert!(
        at("--window") < at("--bucket") && at("--bucket") < at("--time-unit"),
        "{s}"
    );
}

#[test]
fn summary_shows_request_and_total_token_throughput_in_every_format() {
    // What broke: only output TPS was shown; vLLM prints request throughput and total
    // token throughput beside it. 2 ok spans, 200 + 15 tokens, over 6.5 s.
    let g = golden();
    let g = g.to_str().unwrap();
    let out = tpscope(&["report", g, "--format", "json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["runs"][0];
    assert!((r["request_throughput"].as_f64().unwrap() - 2.0 / 6.5).abs() < 1e-9);
    assert!((r["total_token_throughput"].as_f64().unwrap() - 215.0 / 6.5).abs() < 1e-9);
    let s = text(&tpscope(&["report", g]).stdout);
    assert!(
        s.contains("request_throughput") && s.contains("0.31 req/s"),
        "{s}"
    );
    assert!(s.contains("total_token_throughput"), "{s}");
    let s = text(&tpscope(&["report", g, "--format", "markdown"]).stdout);
    assert!(s.contains("| `request_throughput` |"), "{s}");
    assert!(s.contains("| `total_token_throughput` |"), "{s}");
}

#[test]
fn report_dash_reads_the_log_from_stdin() {
    // What broke: `report -` was taken for a file named `-`.
    use std::io::Write;
    use std::process::Stdio;
    let log = std::fs::read(golden()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tpscope"))
        .args(["report", "-", "--format", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tpscope");
    child.stdin.take().unwrap().write_all(&log).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["runs"][0]["run_id"], "golden");
    assert_eq!(v["runs"][0]["counts"]["spans"], 3);

    let out = tpscope(&["report", "-", "-"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("only once"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn goodput_is_reported_in_every_format_only_when_goals_are_given() {
    let g = golden();
    let g = g.to_str().unwrap();
    let plain = tpscope(&["report", g, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert!(v["runs"][0]["goodput"].is_null());
    let out = tpscope(&[
        "report",
        g,
        "--format",
        "json",
        "--goodput",
        "ttft:10s,e2e:1h",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gp = &v["runs"][0]["goodput"];
    // Two ok spans meet generous goals; the failed one does not.
    assert_eq!(gp["met"], 2, "{gp}");
    assert_eq!(gp["judged"], 3, "{gp}");
    assert_eq!(gp["goals"]["ttft_s"], 10.0, "{gp}");
    assert!(gp["requests_per_second"].as_f64().unwrap() > 0.0);
    for fmt in ["text", "markdown"] {
        let out = tpscope(&["report", g, "--format", fmt, "--goodput", "ttft:10s"]);
        let s = text(&out.stdout);
        assert!(
            s.contains("goodput_share") && s.contains("66.67 %"),
            "{fmt}: {s}"
        );
    }
    let out = tpscope(&["report", g, "--goodput", "e2e:1s", "--goodput", "e2el:5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--goodput: goal `e2e` is given twice"));
    let out = tpscope(&["report", g, "--slo-percentile", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--slo-percentile"));
}
