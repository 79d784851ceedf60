//! End to end: a run file is never lost or replaced — two benches started together
//! both keep their runs, an existing `--out` is refused and left as it was unless
//! `--overwrite` — and the report is built from what was recorded, so `--out` to a
//! FIFO or to standard output (`-`) does not hang.
//! The run record lists the flags as written (`load.flags_given`), secrets redacted.

mod bench_support;

use std::io::Read;
use std::process::Stdio;

use bench_support::{bench, check_log, records, runs, tpscope, wait};

const QUICK: &[&str] = &[
    "--sim-speed",
    "max",
    "--requests",
    "8",
    "--concurrency",
    "4",
    "--input-tokens",
    "16",
    "--output-tokens",
    "8",
];

#[test]
fn two_benches_started_together_both_keep_their_runs() {
    let dir = tempfile::tempdir().unwrap();
    let start = || {
        tpscope()
            .arg("bench")
            .args(QUICK)
            .arg("-q")
            .current_dir(dir.path())
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (start(), start());
    for c in [a, b] {
        let r = wait(c, dir.path().join("unused"));
        assert_eq!(r.status.code(), Some(0), "{}", r.stderr);
    }
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "one file per bench: {files:?}");
    let mut ids = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            name.starts_with("tpscope-run-") && name.ends_with(".jsonl"),
            "{name}"
        );
        let (_, end) = check_log(f);
        assert_eq!(end.spans, 8, "{name} holds its whole run");
        ids.push(runs(&records(f))[0].run_id.clone());
    }
    assert_ne!(ids[0], ids[1]);
}

#[test]
fn an_existing_out_is_refused_and_left_untouched_unless_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("taken.jsonl");
    std::fs::write(&path, "precious\n").unwrap();
    let run = bench(dir.path(), "taken.jsonl", QUICK);
    assert_eq!(run.status.code(), Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("--out") && run.stderr.contains("taken.jsonl already exists"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--overwrite"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious\n");
    let mut args = QUICK.to_vec();
    args.push("--overwrite");
    let run = bench(dir.path(), "taken.jsonl", &args);
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    assert_eq!(check_log(&path).1.spans, 8);
}

#[test]
fn out_to_a_fifo_does_not_hang_and_the_report_is_printed() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let (f2, copy) = (fifo.clone(), dir.path().join("copy.jsonl"));
    let c2 = copy.clone();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::fs::File::open(&f2)
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        std::fs::write(&c2, s).unwrap();
    });
    // `bench` waits for the child at most LIMIT: a hang fails the test.
    let run = bench(dir.path(), "pipe", QUICK);
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    reader.join().unwrap();
    assert_eq!(check_log(&copy).1.spans, 8);
    assert!(run.stdout.contains("system_tps"), "{}", run.stdout);
}

#[test]
fn out_dash_writes_the_log_to_stdout_and_the_report_to_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let out = tpscope()
        .arg("bench")
        .args(QUICK)
        .args(["--out", "-"])
        .current_dir(dir.path())
        .env_remove("OPENAI_API_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let log = dir.path().join("stdout.jsonl");
    std::fs::write(&log, &out.stdout).unwrap();
    assert_eq!(check_log(&log).1.spans, 8, "stdout is the span log");
    assert!(stderr.contains("system_tps"), "{stderr}");
    assert!(stderr.contains("to standard output"), "{stderr}");
    // Nothing else was written in the working directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn the_run_record_lists_the_flags_written_with_the_key_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = QUICK.to_vec();
    args.extend(["--temperature", "0", "--api-key", "sk-not-for-the-log"]);
    let run = bench(dir.path(), "flags.jsonl", &args);
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let text = std::fs::read_to_string(&run.out).unwrap();
    assert!(!text.contains("sk-not-for-the-log"));
    let run_records = runs(&records(&run.out));
    let given = &run_records[0].load["flags_given"];
    let written: Vec<&str> = given
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["flag"].as_str().unwrap())
        .collect();
    assert_eq!(
        written,
        [
            "--sim-speed",
            "--requests",
            "--concurrency",
            "--input-tokens",
            "--output-tokens",
            "--temperature",
            "--api-key",
            "--out"
        ],
        "in the order written; defaults and the environment are not written"
    );
    assert_eq!(given[5]["values"], serde_json::json!(["0"]));
    // The report gives the command back, key redacted.
    let report = bench_support::tpscope()
        .args(["report"])
        .arg(&run.out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains("command tpscope bench --sim-speed max --requests 8 --concurrency 4")
            && text.contains("--temperature 0 --api-key '[redacted]' --out "),
        "{text}"
    );
}
