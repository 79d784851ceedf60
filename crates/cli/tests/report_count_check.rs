//! `tpscope report`'s count check (the tokenizer's counts against the server's
//! `usage`) in every format, from a file and from standard input.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The golden log with the tokenizer's counts of its two ok replies added: 12
/// where usage said 10, 5 where it said 5 (+13.3 % over 2 spans).
fn counted_log() -> String {
    let golden =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../log/tests/fixtures/two_spans_cap1.jsonl");
    std::fs::read_to_string(golden)
        .unwrap()
        .replace(
            r#""tokens":10}]}"#,
            r#""tokens":10}],"tokenizer_output_tokens":12}"#,
        )
        .replace(
            r#""tokens":5}]}"#,
            r#""tokens":5}],"tokenizer_output_tokens":5}"#,
        )
}

fn report(stdin: &str, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tpscope"))
        .arg("report")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tpscope");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

const LINE: &str = "count check: on 2 spans, the tokenizer counted 17 output tokens where \
                    usage said 15 (+13.33 %; 1 span differs)";

/// The check was computed by reading the files a second time, which standard
/// input cannot be: `report -` showed no check at all.
#[test]
fn count_check_missing_when_the_log_came_from_stdin() {
    let out = report(&counted_log(), &["-"]);
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains(LINE), "{t}");
    assert_eq!(t.matches("the tokenizer's counts differ").count(), 1, "{t}");
    let out = report(&counted_log(), &["-", "--format", "markdown"]);
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(md.contains("**Count check.** On 2 spans"), "{md}");
}

#[test]
fn json_and_html_carry_the_count_check() {
    let out = report(&counted_log(), &["-", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = &v["runs"][0]["count_check"];
    assert_eq!(
        (&c["spans"], &c["usage_tokens"], &c["tokenizer_tokens"]),
        (&2.into(), &15.into(), &17.into()),
        "{c}"
    );
    assert_eq!(c["spans_differing"], 1, "{c}");
    let warning = c["warning"].as_str().unwrap();
    assert!(warning.contains("+13.3 %"), "{warning}");
    let warnings = v["runs"][0]["warnings"].as_array().unwrap();
    assert!(warnings.iter().any(|w| w == warning), "{warnings:?}");

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("counted.jsonl");
    std::fs::write(&log, counted_log()).unwrap();
    let page = dir.path().join("report.html");
    let out = report(
        "",
        &[log.to_str().unwrap(), "--html", page.to_str().unwrap()],
    );
    assert!(String::from_utf8(out.stdout).unwrap().contains(LINE));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("<h2>Count check</h2>"), "{html}");

    let plain =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../log/tests/fixtures/two_spans_cap1.jsonl");
    let out = report("", &[plain.to_str().unwrap(), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["runs"][0]["count_check"].is_null());
}
