//! `tpscope import`, and `--from` on `report` and `compare`, as a user runs them on
//! the real tool outputs committed under crates/log/tests/data/import/, and on what
//! people publish: files of one fixed name, files that import nothing, GuideLLM's
//! warm-up.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../log/tests/data/import")
        .join(rel)
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
fn import_writes_a_span_log_that_report_reads_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("aiperf.jsonl");
    let (src, o) = (data("aiperf/profile_export.jsonl"), out.to_str().unwrap());
    let r = tpscope(&["import", "--from", "aiperf", src.to_str().unwrap(), "-o", o]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    assert!(
        text(&r.stderr).contains("imported 40 requests"),
        "{}",
        text(&r.stderr)
    );
    let log = std::fs::read_to_string(&out).unwrap();
    assert_eq!(log.lines().count(), 42, "run, 40 spans, end");
    let rep = tpscope(&["report", o]);
    assert!(rep.status.success(), "{}", text(&rep.stderr));
    assert!(
        text(&rep.stdout).contains("spans 40: ok 40"),
        "{}",
        text(&rep.stdout)
    );
    // A second import to the same file is refused, and leaves it as it was.
    let again = tpscope(&["import", src.to_str().unwrap(), "-o", o]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        text(&again.stderr).contains("already exists"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), log);
    let over = tpscope(&["import", src.to_str().unwrap(), "-o", o, "--overwrite"]);
    assert!(over.status.success(), "{}", text(&over.stderr));
}

#[test]
fn report_from_imports_on_the_fly_and_says_what_cannot_be_known() {
    let src = data("genai-bench/D64_32_text-to-text_num_concurrency_4_time_2s.json");
    let r = tpscope(&[
        "report",
        "--from",
        "auto",
        "--format",
        "json",
        src.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let run = &v["runs"][0];
    assert_eq!(run["counts"]["ok"], 32);
    assert!(run["gap_fraction"].is_null(), "{run}");
    let all = v.to_string();
    assert!(all.contains("no queue or schedule times"), "{all}");
}

#[test]
fn compare_from_judges_two_imported_runs() {
    let a = data("vllm/vllm.json");
    let r = tpscope(&[
        "compare",
        "--from",
        "vllm",
        a.to_str().unwrap(),
        a.to_str().unwrap(),
    ]);
    // The same run twice: a verdict (any), not bad input.
    assert_ne!(r.status.code(), Some(2), "{}", text(&r.stderr));
}

#[test]
fn a_file_of_another_tool_is_refused_with_its_name() {
    let src = data("aiperf/profile_export.jsonl");
    let r = tpscope(&["report", "--from", "vllm", src.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(2));
    let e = text(&r.stderr);
    assert!(e.contains("profile_export.jsonl: not vllm output"), "{e}");
    let bad = tpscope(&[
        "import",
        "--from",
        "locust",
        src.to_str().unwrap(),
        "-o",
        "-",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("--from: unknown format `locust`"));
}

#[test]
fn import_of_a_guidellm_sweep_writes_one_run_per_benchmark() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep.jsonl");
    let src = data("guidellm/sweep.json");
    let o = out.to_str().unwrap();
    let r = tpscope(&[
        "import",
        "--from",
        "guidellm",
        src.to_str().unwrap(),
        "-o",
        o,
    ]);
    assert!(r.status.success(), "{}", text(&r.stderr));
    let log = std::fs::read_to_string(&out).unwrap();
    let runs: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["kind"] == "run")
        .collect();
    assert_eq!(runs.len(), 2, "{log}");
    let base = tpscope_log::import::content_run_id(
        tpscope_log::import::Format::Guidellm,
        &std::fs::read(&src).unwrap(),
    );
    assert_eq!(runs[0]["run_id"], format!("{base}#1"));
    assert_eq!(runs[1]["cap"], 4);
    // compare --from picks two benchmarks of the one file.
    let c = tpscope(&[
        "compare",
        "--from",
        "guidellm",
        src.to_str().unwrap(),
        "--baseline-run",
        &format!("{base}#1"),
        "--candidate-run",
        &format!("{base}#2"),
    ]);
    assert!(
        text(&c.stdout).contains(&format!("run {base}#2")),
        "{}{}",
        text(&c.stdout),
        text(&c.stderr)
    );
}

#[test]
fn import_skip_invalid_that_skipped_everything_exits_2_and_writes_no_log() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("results.json");
    // Every request has a negative TTFT.
    std::fs::write(
        &src,
        r#"{"ttfts":[-1,-2],"itls":[[],[]],"latencies":[1,1],"output_lens":[1,1]}"#,
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let r = tpscope(&[
        "import",
        "--from",
        "vllm",
        "--skip-invalid",
        src.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(2), "{}", text(&r.stderr));
    let e = text(&r.stderr);
    assert!(
        e.contains("results.json: every one of its 2 records was skipped"),
        "{e}"
    );
    assert!(!out.exists(), "no log of nothing (it would start in 1970)");
}

#[test]
fn compare_of_two_different_files_of_one_name_does_not_call_them_the_same_run() {
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read_to_string(data("aiperf/profile_export.jsonl")).unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let (fa, fb) = (
        a.join("profile_export.jsonl"),
        b.join("profile_export.jsonl"),
    );
    std::fs::write(&fa, &full).unwrap();
    let half: String = full.lines().take(20).map(|l| format!("{l}\n")).collect();
    std::fs::write(&fb, half).unwrap();
    let r = tpscope(&[
        "compare",
        "--from",
        "aiperf",
        fa.to_str().unwrap(),
        fb.to_str().unwrap(),
    ]);
    assert_ne!(r.status.code(), Some(2), "{}", text(&r.stderr));
    let all = format!("{}{}", text(&r.stdout), text(&r.stderr));
    assert!(!all.contains("same run"), "{all}");
}

#[test]
fn import_keep_transient_keeps_guidellm_warmup_requests() {
    let src = data("real/guidellm-0.5-warmup/benchmarks.json");
    let default = tpscope(&["import", src.to_str().unwrap(), "-o", "-"]);
    assert!(default.status.success(), "{}", text(&default.stderr));
    let kept = tpscope(&[
        "import",
        "--keep-transient",
        src.to_str().unwrap(),
        "-o",
        "-",
    ]);
    assert!(kept.status.success(), "{}", text(&kept.stderr));
    let spans = |o: &Output| text(&o.stdout).matches("\"kind\":\"span\"").count();
    assert!(spans(&default) < spans(&kept));
    assert_eq!(spans(&kept), 8);
    assert!(
        text(&default.stderr).contains("warm-up"),
        "{}",
        text(&default.stderr)
    );
}
