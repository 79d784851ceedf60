//! `tpscope report` and `compare` on a rotated log (`proxy --rotate`): its files,
//! or its base name, read as one run (said on stderr); and records of a kind this
//! version does not read, skipped with one warning per kind.

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

/// The golden log rotated into three files beside `dir/live.jsonl`, each
/// starting with its `run` record; the files.
fn rotate_golden(dir: &Path) -> Vec<PathBuf> {
    let golden = std::fs::read_to_string(golden()).unwrap();
    let lines: Vec<&str> = golden.lines().collect();
    let run = lines[0];
    let parts = [&lines[1..3], &lines[3..6], &lines[6..]];
    parts
        .iter()
        .enumerate()
        .map(|(i, part)| {
            let p = dir.join(format!("live-{i:04}.jsonl"));
            let mut body = format!("{run}\n");
            for l in part.iter() {
                body.push_str(l);
                body.push('\n');
            }
            std::fs::write(&p, body).unwrap();
            p
        })
        .collect()
}

fn json_runs(out: &Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["runs"].clone()
}

#[test]
fn a_rotations_files_or_its_base_name_report_as_the_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let files = rotate_golden(dir.path());
    let g = golden();
    let want = json_runs(&tpscope(&[
        "report",
        g.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(want.as_array().unwrap().len(), 1);

    let mut args = vec!["report", "--format", "json"];
    args.extend(files.iter().map(|f| f.to_str().unwrap()));
    let out = tpscope(&args);
    assert_eq!(json_runs(&out), want);
    assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));

    let base = dir.path().join("live.jsonl");
    let out = tpscope(&["report", base.to_str().unwrap(), "--format", "json"]);
    assert_eq!(json_runs(&out), want);
    let err = text(&out.stderr);
    assert!(
        err.starts_with("note: ")
            && err.contains("live.jsonl does not exist; reading its rotation as one log")
            && err.contains("(3 files)"),
        "{err}"
    );
    // The text report reads the files a second time, for its record sections.
    let out = tpscope(&["report", base.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("spans 3: ok 2, error 1"));

    // compare takes a base name for a side too.
    let out = tpscope(&["compare", g.to_str().unwrap(), base.to_str().unwrap()]);
    assert_ne!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("reading its rotation"));

    // A base name with neither the file nor a rotation is the reader's error.
    let none = dir.path().join("none.jsonl");
    let out = tpscope(&["report", none.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("none.jsonl"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_rotated_file_whose_run_record_differs_exits_2_naming_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let files = rotate_golden(dir.path());
    let second = std::fs::read_to_string(&files[1]).unwrap();
    std::fs::write(&files[1], second.replacen("\"hand-made\"", "\"other\"", 1)).unwrap();
    let base = dir.path().join("live.jsonl");
    let out = tpscope(&["report", base.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("{}:1: field `tool`", files[1].display())),
        "{err}"
    );
}

/// docs/design.md §8: readers ignore record kinds they do not know; `report` stopped at
/// the first. Now it reads the rest and warns once per kind on stderr.
#[test]
fn unknown_record_kinds_stopped_the_report_instead_of_one_warning_per_kind() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = std::fs::read_to_string(golden()).unwrap();
    for kind in ["gpu_sample", "gpu_sample", "note"] {
        log.push_str(&format!("{{\"kind\":\"{kind}\",\"run_id\":\"golden\"}}\n"));
    }
    let path = dir.path().join("newer.jsonl");
    std::fs::write(&path, log).unwrap();
    let out = tpscope(&["report", path.to_str().unwrap(), "--format", "json"]);
    let g = golden();
    let want = json_runs(&tpscope(&[
        "report",
        g.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(json_runs(&out), want);
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].starts_with("warning: skipped 2 records of kind `gpu_sample`"),
        "{err}"
    );
    assert!(
        lines[1].starts_with("warning: skipped 1 record of kind `note`"),
        "{err}"
    );
}
