//! `tpscope import`, `report --from` and `compare --from` on what people publish
//!: files of one fixed name, files that import nothing, GuideLLM's
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
