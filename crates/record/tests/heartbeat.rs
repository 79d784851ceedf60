//! Samples written on a change and at least every heartbeat: an idle recorder
//! writes a sample per heartbeat, not per tick, and the sampled gap estimate
//! (each sample holding until the next) stays within 0.02 of the exact one.

mod common;

use std::thread::sleep;
use std::time::Duration;

use common::{read, report};
use tpscope_record::{DEFAULT_SAMPLE_HEARTBEAT, Recorder, RunInfo};

fn ms(n: u64) {
    sleep(Duration::from_millis(n));
}

/// An idle recorder wrote one sample per tick (about 1.1 GB an idle day).
#[test]
fn an_idle_recorder_writes_a_sample_per_heartbeat_not_per_tick() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let info = RunInfo::new()
        .cap(2)
        .sample_interval(Duration::from_millis(1))
        .sample_heartbeat(Duration::from_millis(100));
    let rec = Recorder::create(&path, info).unwrap();
    ms(1500);
    rec.queued("a").admitted().finish_ok(None);
    let closed = rec.close().unwrap();
    let log = read(&path);
    assert_eq!(
        log.runs[0].sample_heartbeat,
        Some(Duration::from_millis(100))
    );
    // About 1500 ticks: 15 heartbeats, the first and last samples, and the
    // changes around `a` (at most four).
    let n = log.samples.len();
    assert_eq!(n as u64, closed.counts.samples);
    assert!((8..=40).contains(&n), "{n} samples");
}

/// A run is stated with the default heartbeat unless the producer names one.
#[test]
fn the_run_record_states_the_default_heartbeat() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let rec = Recorder::create(&path, RunInfo::new()).unwrap();
    rec.close().unwrap();
    let log = read(&path);
    assert_eq!(log.runs[0].sample_heartbeat, Some(DEFAULT_SAMPLE_HEARTBEAT));
    assert!(log.samples.len() >= 2, "the first and the last sample");
}

/// One cycle on cap 2: `a` and `b` run, `c` waits behind them; `a` leaves and
/// `c` waits `gap_ms` beside the free slot, then runs with `b`.
fn cycle(rec: &Recorder, k: usize, gap_ms: u64) {
    let a = rec.queued(format!("a{k}")).admitted();
    let b = rec.queued(format!("b{k}")).admitted();
    let c = rec.queued(format!("c{k}"));
    ms(20);
    a.finish_ok(None);
    ms(gap_ms);
    let c = c.admitted();
    ms(20);
    b.finish_ok(None);
    c.finish_ok(None);
}

fn sampled_gap_holds(drive: impl FnOnce(&Recorder)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spans.jsonl");
    let info = RunInfo::new()
        .cap(2)
        .sample_interval(Duration::from_millis(1));
    let rec = Recorder::create(&path, info).unwrap();
    drive(&rec);
    rec.close().unwrap();
    let r = report(&path);
    let (exact, sampled) = (r.gap_fraction.unwrap(), r.gap_fraction_sampled.unwrap());
    assert!(exact > 0.05, "the run had a gap: {exact}");
    assert!(
        (exact - sampled).abs() <= 0.02,
        "exact {exact} vs sampled {sampled} ({} samples)",
        r.idle.samples
    );
    assert!(r.warnings.iter().all(|w| !w.contains("differ by more")));
}

#[test]
fn a_busy_recording_keeps_its_sampled_gap_within_two_points_of_the_exact() {
    sampled_gap_holds(|rec| {
        for k in 0..30 {
            cycle(rec, k, 10);
        }
    });
}

/// Waves: bursts with idle stretches between, where no sample is written but
/// the last one holds.
#[test]
fn a_waves_recording_keeps_its_sampled_gap_within_two_points_of_the_exact() {
    sampled_gap_holds(|rec| {
        for wave in 0..4 {
            for k in 0..5 {
                cycle(rec, wave * 10 + k, 15);
            }
            ms(200);
        }
    });
}
