//! End to end: `--ramp-up` against the built-in simulator — a closed loop's cap
//! grows from FROM to TO (the samples state each cap), an open loop's arrivals
//! come closer together as the rate grows, the run record states the ramp, and
//! ramps that cannot be run are refused naming `--ramp-up`.

mod bench_support;

use bench_support::{bench, records, refused, runs, samples, spans};

#[test]
fn a_ramped_closed_loop_raises_its_cap_from_from_to_to() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--sim-speed",
        "max",
        "--requests",
        "120",
        "--ramp-up",
        "linear:1..8",
        "--seed",
        "5",
    ];
    let run = bench(dir.path(), "ramp.jsonl", &args);
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let recs = records(&run.out);
    let caps: Vec<u32> = samples(&recs).iter().filter_map(|s| s.cap).collect();
    assert_eq!(caps.first(), Some(&1), "starts at FROM");
    assert_eq!(caps.iter().max(), Some(&8), "reaches TO");
    assert!(caps.windows(2).all(|w| w[0] <= w[1]), "{caps:?}");
    for c in 1..=8 {
        assert!(caps.contains(&c), "cap {c} stated: {caps:?}");
    }
    assert!(
        samples(&recs)
            .iter()
            .all(|s| s.cap.is_some_and(|c| s.in_flight <= c))
    );
    assert_eq!(spans(&recs).len(), 120);
    let load = &runs(&recs)[0].load;
    assert_eq!(load["mode"], "closed_loop");
    assert_eq!(load["concurrency"], 8);
    let ramp = &load["ramp_up"];
    assert_eq!(ramp["shape"], "linear");
    assert_eq!(ramp["applies_to"], "concurrency");
    assert_eq!(ramp["over"], "requests");
    assert_eq!(
        (ramp["from"].as_f64(), ramp["to"].as_f64()),
        (Some(1.0), Some(8.0))
    );
}

#[test]
fn a_cap_ramped_over_the_duration_steps_on_its_clock() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--sim-speed",
        "max",
        "--duration",
        "1s",
        "--ramp-up",
        "exponential:1..4",
    ];
    let run = bench(dir.path(), "timed.jsonl", &args);
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let recs = records(&run.out);
    let caps: Vec<u32> = samples(&recs).iter().filter_map(|s| s.cap).collect();
    assert_eq!(caps.first(), Some(&1));
    assert_eq!(caps.iter().max(), Some(&4));
    assert!(caps.windows(2).all(|w| w[0] <= w[1]), "{caps:?}");
    assert_eq!(runs(&recs)[0].load["ramp_up"]["over"], "duration");
}

/// The report names where throughput stopped following a ramp: against a sim
/// whose batch holds 4 sequences, a cap ramped 1..16 stops buying throughput near
/// 4 (a generous band: the client shares the box with the simulator).
#[test]
fn the_report_names_the_cap_where_a_ramp_stopped_buying_throughput() {
    let dir = tempfile::tempdir().unwrap();
    let sim = dir.path().join("sim.toml");
    std::fs::write(&sim, "max_num_seqs = 4\n").unwrap();
    let args = [
        "--sim-config",
        sim.to_str().unwrap(),
        "--duration",
        "3s",
        "--ramp-up",
        "linear:1..16",
        "--input-tokens",
        "256",
        "--output-tokens",
        "64",
    ];
    let run = bench(dir.path(), "knee.jsonl", &args);
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let json = bench_support::tpscope()
        .args(["report", run.out.to_str().unwrap(), "--format", "json"])
        .args(["--bucket", "200ms"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let ramp = &v["runs"][0]["ramp"];
    assert_eq!(ramp["applies_to"], "concurrency", "{ramp}");
    let points = ramp["points"].as_array().unwrap();
    assert_eq!(points.len(), 10, "{ramp}");
    let at = ramp["knee"]["at"].as_u64().expect("a knee") as usize;
    let cap = points[at]["load"].as_f64().unwrap();
    assert!((2.0..=9.0).contains(&cap), "knee at a cap of {cap}: {ramp}");
    let text = bench_support::tpscope()
        .args(["report", run.out.to_str().unwrap(), "--bucket", "200ms"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("ramp: how throughput followed the load"),
        "{text}"
    );
    assert!(text.contains("the server's knee"), "{text}");
}

#[test]
fn a_ramped_rate_sends_more_in_the_second_half_as_vllm_flags_too() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--sim-speed",
        "max",
        "--ramp-up-strategy",
        "exponential",
        "--ramp-up-start-rps",
        "5",
        "--ramp-up-end-rps",
        "80",
        "--arrival",
        "constant",
        "--duration",
        "2s",
        "--seed",
        "5",
    ];
    let run = bench(dir.path(), "rate.jsonl", &args);
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    let recs = records(&run.out);
    let mut queued: Vec<_> = spans(&recs).iter().map(|s| s.queued_at).collect();
    queued.sort();
    // Expected arrivals: 2 s · 75 / ln 16 ≈ 54, of which about 43 in the second second.
    assert!(queued.len() > 30, "{}", queued.len());
    let first = queued[0];
    let secs: Vec<f64> = queued
        .iter()
        .map(|q| q.since(first).unwrap().as_secs_f64())
        .collect();
    let late = secs.iter().filter(|t| **t >= 1.0).count();
    assert!(late > 2 * (secs.len() - late), "{late} of {}", secs.len());
    let load = &runs(&recs)[0].load;
    assert_eq!(load["mode"], "open_loop");
    assert_eq!(load["ramp_up"]["applies_to"], "rate");
    assert_eq!(load["ramp_up"]["shape"], "exponential");
    assert_eq!(load["ramp_up"]["over"], "duration");
}

#[test]
fn ramps_that_cannot_run_are_refused_naming_the_flag() {
    refused(&["--ramp-up", "linear:8..2"], &["--ramp-up"]);
    refused(&["--ramp-up", "exponential:0..8"], &["--ramp-up"]);
    refused(&["--ramp-up", "steps:1..8"], &["--ramp-up"]);
    refused(
        &["--ramp-up", "linear:1..8", "--rate", "4"],
        &["--ramp-up", "--rate 8"],
    );
    refused(
        &["--ramp-up", "linear:1..8", "--concurrency", "4"],
        &["--ramp-up", "--concurrency 8"],
    );
    refused(
        &["--ramp-up", "linear:0.5..8"],
        &["--ramp-up", "whole numbers"],
    );
    refused(
        &["--ramp-up", "linear:1..8", "--concurrency", "2,8"],
        &["--ramp-up", "sweep"],
    );
    refused(
        &[
            "--ramp-up-strategy",
            "linear",
            "--ramp-up-start-rps",
            "9",
            "--ramp-up-end-rps",
            "3",
        ],
        &["--ramp-up"],
    );
}
