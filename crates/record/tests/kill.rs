//! A recording process killed with SIGKILL mid-run: its log keeps every span
//! released more than a second before the kill, and the readers accept it. The
//! test binary runs itself as the child (an environment variable says which).

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tpscope_record::{Recorder, RunInfo, Usage};

const CHILD_LOG: &str = "TPSCOPE_RECORD_KILL_CHILD_LOG";

/// The child: records requests until it is killed (or a minute passes), printing
/// each request's id once it is released.
#[test]
fn child_records_until_killed() {
    let Some(path) = std::env::var_os(CHILD_LOG) else {
        return;
    };
    let rec = Recorder::create(&path, RunInfo::new().cap(4)).unwrap();
    let _held = rec.queued("held").admitted(); // never released
    let started = Instant::now();
    let mut i = 0u64;
    while started.elapsed() < Duration::from_secs(60) {
        let req = rec.queued(format!("r{i}")).admitted();
        req.tokens(3);
        req.finish_ok(Usage::new(3, None));
        println!("released r{i}");
        i += 1;
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_killed_recorder_keeps_every_span_released_a_second_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_records_until_killed", "--exact", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(CHILD_LOG, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // When the parent saw each release (after it happened).
    let seen: Arc<Mutex<Vec<(String, Instant)>>> = Arc::default();
    let out = child.stdout.take().unwrap();
    let seen2 = seen.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if let Some(id) = line.strip_prefix("released ") {
                seen2.lock().unwrap().push((id.to_string(), Instant::now()));
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.lock().unwrap().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        !seen.lock().unwrap().is_empty(),
        "the child never released a span"
    );
    std::thread::sleep(Duration::from_millis(2500));
    child.kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    child.wait().unwrap();
    reader.join().unwrap();

    let must: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, at)| killed.duration_since(*at) > Duration::from_secs(1))
        .map(|(id, _)| id.clone())
        .collect();
    assert!(!must.is_empty());
    let log = common::read(&path);
    assert!(log.ends.is_empty(), "killed: no end record");
    let there: BTreeSet<&str> = log
        .spans
        .iter()
        .filter_map(|s| s.request_id.as_deref())
        .collect();
    let missing: Vec<&String> = must
        .iter()
        .filter(|id| !there.contains(id.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "lost {} spans: {missing:?}",
        missing.len()
    );
    assert!(!there.contains("held"));
    let report = common::report(&path);
    assert_eq!(report.counts.status.ok, log.spans.len() as u64);
}
