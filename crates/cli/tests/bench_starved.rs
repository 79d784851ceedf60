//! A starved client: `tpscope bench` stopped and continued every
//! 250 ms (`kill -STOP`/`-CONT`) while the simulator streams a token every
//! 6.5 ms. The report must flag the measurement quality as poor, and the
//! first tokens it calls exactly stamped must agree with the simulator's own
//! record — a read that drains a backlog no longer stamps every event in it with
//! the arrival of the last one.

mod bench_support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bench_support::{LIMIT, check_log, spawn, tpscope};
use tpscope_model::{Status, Timestamp};

#[derive(serde::Deserialize)]
struct Truth {
    request_id: String,
    first_token_at: Option<Timestamp>,
}

/// Sends `sig` to `pid`, ignoring a process that has just exited.
fn send(pid: u32, sig: &str) {
    let _ = Command::new("kill").arg(sig).arg(pid.to_string()).status();
}

#[test]
fn stopped_and_continued_client_flags_poor_quality_and_keeps_exact_stamps() {
    let dir = tempfile::tempdir().unwrap();
    let truth_path = dir.path().join("truth.jsonl");
    let mut sim = tpscope()
        .args(["sim", "--port", "0", "--truth-log"])
        .arg(&truth_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tpscope sim");
    let mut line = String::new();
    BufReader::new(sim.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();

    let (mut bench, out) = spawn(
        dir.path(),
        "run.jsonl",
        &[
            "--url",
            &url,
            "--concurrency",
            "1",
            "--requests",
            "24",
            "--input-tokens",
            "32",
            "--output-tokens",
            "24",
            "--record-chunks",
            "-q",
        ],
    );
    let deadline = Instant::now() + LIMIT;
    let status = loop {
        if let Some(st) = bench.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "bench ran past {LIMIT:?}");
        send(bench.id(), "-STOP");
        std::thread::sleep(Duration::from_millis(250));
        send(bench.id(), "-CONT");
        std::thread::sleep(Duration::from_millis(250));
    };
    let _ = sim.kill();
    let _ = sim.wait();
    assert!(status.success(), "bench failed: {status:?}");

    // The report says the run was measured poorly, why, and what to do.
    let report = tpscope()
        .args(["report", "--format", "json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(report.status.success());
    let json: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let q = &json["runs"][0]["measurement_quality"];
    assert_eq!(q["poor"], true, "{q}");
    let warning = q["warning"].as_str().unwrap();
    assert!(warning.contains("fewer streams"), "{warning}");
    assert!(q["client_lag_max_s"].as_f64().unwrap() > 0.0, "{q}");

    // Exactly stamped first tokens agree with the simulator's record; the others
    // are upper bounds. (The simulator records when it handed a token to its
    // writer, just before the kernel stamps the write: 1 ms either way.)
    let truth: HashMap<String, Timestamp> = std::fs::read_to_string(&truth_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Truth>(l).unwrap())
        .filter_map(|t| Some((t.request_id, t.first_token_at?)))
        .collect();
    let (spans, _) = check_log(&out);
    let (mut exact, mut agree) = (0, 0);
    for s in spans.iter().filter(|s| s.status == Status::Ok) {
        let theirs = truth[s.request_id.as_ref().unwrap()];
        let err = s.first_token_at.unwrap().signed_nanos_since(theirs);
        assert!(err > -1_000_000, "first token {err} ns before it was sent");
        if s.attempts.last().unwrap().first_token_exact == Some(true) {
            exact += 1;
            agree += u32::from(err < 1_000_000);
        }
    }
    // About half the first tokens arrive while the client runs; a loaded machine
    // may delay the simulator's own writes, so most, not all, must agree.
    assert!(exact >= 3, "{exact} exactly stamped first tokens of 24");
    assert!(
        agree * 5 >= exact * 4,
        "{agree} of {exact} exact first tokens within 1 ms of the truth"
    );
}
