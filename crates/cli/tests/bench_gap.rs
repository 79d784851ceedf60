//! End to end: a closed loop with a backlog keeps every slot busy with the default
//! (work-conserving) dispatch — gap fraction < 1 % — while `--dispatch waves` leaves
//! slots idle behind waiting work, and the report shows it. Gap fractions come from
//! the analysis crate, the same code `tpscope report` uses.

mod bench_support;

use bench_support::{analyze, bench, check_log};

const LOAD: &[&str] = &[
    "--sim-speed",
    "10",
    "--concurrency",
    "16",
    "--requests",
    "160",
    "--seed",
    "3",
];

#[test]
fn work_conserving_dispatch_leaves_no_gap_and_waves_clearly_do() {
    let dir = tempfile::tempdir().unwrap();
    let wc = bench(dir.path(), "wc.jsonl", LOAD);
    assert_eq!(wc.status.code(), Some(0), "{}", wc.stderr);
    let (_, end) = check_log(&wc.out);
    assert_eq!(end.status.ok, 160);
    let r = &analyze(&wc.out)[0];
    let gap = r.gap_fraction.expect("a backlog run has a gap fraction");
    assert!(gap < 0.01, "work-conserving gap fraction {gap}");
    assert!(
        r.idle.backlog_time.unwrap().as_secs_f64() > 0.5,
        "the run had a backlog"
    );

    let mut waves_args = LOAD.to_vec();
    waves_args.extend(["--dispatch", "waves"]);
    let waves = bench(dir.path(), "waves.jsonl", &waves_args);
    assert_eq!(waves.status.code(), Some(0), "{}", waves.stderr);
    check_log(&waves.out);
    let w = &analyze(&waves.out)[0];
    let wgap = w.gap_fraction.unwrap();
    assert!(
        wgap > 0.1 && wgap > 10.0 * gap.max(0.001),
        "waves gap fraction {wgap} vs {gap}"
    );
    // The printed report carries the figure.
    let line = waves
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("gap_fraction "))
        .expect("gap line");
    assert!(!line.contains(" 0.00 %"), "{line}");
}
