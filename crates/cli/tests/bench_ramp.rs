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
