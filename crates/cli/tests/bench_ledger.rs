//! End to end against the built-in simulator: the capacity ledger of a waves
//! run and a work-conserving run of the same workload (same seed) tells held-back
//! slot-time from work, the what-if of the waves run predicts the work-conserving
//! run's system TPS, and a retry-heavy run shows failed attempts and back-off.
//!
//! The what-if check compares two runs, made robust to a loaded machine by
//! construction: both simulators keep their schedule (`keep_schedule`: a host
//! stall is caught up instead of stretching the run, so service times are the
//! model's), and the two runs go side by side, so whatever else loads the
//! machine delays both clients alike. The test keeps every core busy meanwhile.

mod bench_support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bench_support::{analyze, bench, check_log, spawn, wait};
use tpscope_analysis::ledger::Part;

const LOAD: &[&str] = &[
    "--sim-speed",
    "2",
    "--concurrency",
    "16",
    "--requests",
    "96",
    "--seed",
    "3",
    "--input-tokens",
    "64",
    "--output-tokens",
    "uniform:16..256",
];

/// The load's flags with a simulator that keeps its schedule.
fn scheduled_load(dir: &Path) -> Vec<String> {
    let config = dir.join("sim.toml");
    std::fs::write(&config, "keep_schedule = true\n").unwrap();
    let mut args: Vec<String> = LOAD.iter().map(|a| a.to_string()).collect();
    args.extend(["--sim-config".into(), config.display().to_string()]);
    args
}

/// Busy threads, one per core, spinning until dropped: the machine loaded.
struct Busy(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>);

impl Busy {
    fn start() -> Busy {
        let stop = Arc::new(AtomicBool::new(false));
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        Busy(stop, threads)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        for t in self.1.drain(..) {
            let _ = t.join();
        }
    }
}

fn share(r: &tpscope_analysis::RunReport, p: Part) -> f64 {
    r.capacity.as_ref().unwrap().share(p).unwrap()
}

/// The parts add up to the slot-time on a real run's log.
fn assert_sums(r: &tpscope_analysis::RunReport) {
    let c = r.capacity.as_ref().unwrap();
    let total: f64 = c.parts.iter().filter_map(|p| p.slot_seconds).sum();
    let slot = c.slot_seconds.unwrap() + c.above_cap_slot_seconds.unwrap_or(0.0);
    assert!(
        (total - slot).abs() < 1e-6 * slot.max(1.0),
        "{total} vs {slot}"
    );
}

#[test]
fn waves_hold_back_slot_time_and_the_what_if_predicts_work_conserving() {
    let dir = tempfile::tempdir().unwrap();
    let load = scheduled_load(dir.path());
    let load: Vec<&str> = load.iter().map(String::as_str).collect();
    let mut waves_args = load.clone();
    waves_args.extend(["--dispatch", "waves"]);
    let busy = Busy::start();
    // Side by side: whatever else loads the machine loads both runs alike.
    let (w, w_out) = spawn(dir.path(), "waves.jsonl", &waves_args);
    let (c, c_out) = spawn(dir.path(), "wc.jsonl", &load);
    let (waves, wc) = (wait(w, w_out), wait(c, c_out));
    drop(busy);
    assert_eq!(wc.status.code(), Some(0), "{}", wc.stderr);
    check_log(&wc.out);
    assert_eq!(waves.status.code(), Some(0), "{}", waves.stderr);
    check_log(&waves.out);
    let (w, c) = (&analyze(&waves.out)[0], &analyze(&wc.out)[0]);
    assert_sums(w);
    assert_sums(c);
    let (held_w, held_c) = (share(w, Part::HeldBack), share(c, Part::HeldBack));
    let secs = |r: &tpscope_analysis::RunReport| -> Vec<String> {
        let c = r.capacity.as_ref().unwrap();
        Part::ALL
            .iter()
            .map(|&p| format!("{} {:.3}", p.name(), c.seconds(p).unwrap_or(f64::NAN)))
            .collect()
    };
    eprintln!(
        "held back: waves {held_w:.3}, work-conserving {held_c:.3}\nwaves {:?} window {:?}\nwc {:?} window {:?}",
        secs(w),
        w.window.map(|x| x.duration),
        secs(c),
        c.window.map(|x| x.duration)
    );
    assert!(held_w > 0.3, "waves held back {held_w}");
    assert!(held_c < 0.05, "work-conserving held back {held_c}");
    assert_eq!(
        w.capacity.as_ref().unwrap().causes[0].cause,
        "blocked_orchestration"
    );
    let predicted = w
        .what_if
        .as_ref()
        .unwrap()
        .work_conserving
        .system_tps
        .unwrap();
    let measured = c.system_tps.unwrap().0;
    eprintln!(
        "system TPS: waves {:.1}, predicted work-conserving {predicted:.1}, measured {measured:.1}",
        w.system_tps.unwrap().0
    );
    assert!(
        (predicted / measured - 1.0).abs() < 0.15,
        "predicted {predicted} vs measured {measured}"
    );
    // The printed report carries the ledger and the cause.
    assert!(waves.stdout.contains("held_back"), "{}", waves.stdout);
    assert!(
        waves.stdout.contains("Blocked orchestration"),
        "{}",
        waves.stdout
    );
    // compare: the held-back slot-time went to work, not into the server's queue.
    let o = bench_support::tpscope()
        .args(["compare", "--allow-mismatch"])
        .arg(&waves.out)
        .arg(&wc.out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("where the slot-seconds moved"), "{text}");
    assert!(text.contains("Idle time removed"), "{text}");
    // --handoff moves the line between a hand-off and held-back work.
    let o = bench_support::tpscope()
        .args(["report", "--format", "json", "--handoff", "10s"])
        .arg(&waves.out)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &json["runs"][0]["capacity"];
    assert_eq!(c["handoff_threshold_s"], 10.0, "{c}");
    assert_eq!(c["parts"]["held_back"]["slot_seconds"], 0.0, "{c}");
    assert!(
        c["parts"]["handoff"]["share"].as_f64().unwrap() > 0.3,
        "{c}"
    );
}

#[test]
fn a_retry_heavy_run_shows_failed_attempts_and_backoff() {
    let dir = tempfile::tempdir().unwrap();
    let run = bench(
        dir.path(),
        "retry.jsonl",
        &[
            "--sim-speed",
            "20",
            "--concurrency",
            "8",
            "--requests",
            "40",
            "--seed",
            "7",
            "--sim-fault",
            "500=0.4",
            "--max-retries",
            "5",
            "--retry-backoff",
            "50ms",
        ],
    );
    assert_eq!(run.status.code(), Some(0), "{}", run.stderr);
    check_log(&run.out);
    let r = &analyze(&run.out)[0];
    assert_sums(r);
    let c = r.capacity.as_ref().unwrap();
    eprintln!("retry-heavy ledger {:?}", c.parts);
    assert!(c.seconds(Part::Failed).unwrap() > 0.0);
    assert!(share(r, Part::Backoff) > 0.05, "{:?}", c.parts);
    assert!(
        c.causes.iter().any(|g| g.cause == "failures"),
        "{:?}",
        c.causes
    );
}
