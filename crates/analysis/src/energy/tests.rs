//! The GPU section on hand-made GPU scrapes: energy from the counter and from
//! power, the window's energy from the scraped stretch, per-token figures, the
//! cost per kWh, utilisation weighting, and the note beside the gap.

use super::*;
use crate::test_support::{capped_run, ts};

/// A device's `(id, util, power W, energy J)`.
type Device<'a> = (&'a str, Option<f64>, Option<f64>, Option<f64>);

/// One DCGM scrape at `at` ms of `devices`.
fn scrape(at: i64, devices: &[Device<'_>]) -> ServerSampleRecord {
    ServerSampleRecord {
        run_id: "r".into(),
        at: ts(at),
        server: Some("dcgm".into()),
        gpus: devices
            .iter()
            .map(|(id, util, power_w, energy_j)| GpuReading {
                host: Some("n1".into()),
                gpu: (*id).into(),
                util: *util,
                power_w: *power_w,
                energy_j: *energy_j,
                fb_used_bytes: Some(1e9),
                ..GpuReading::default()
            })
            .collect(),
        ..ServerSampleRecord::default()
    }
}

fn run(samples: Vec<ServerSampleRecord>) -> RunInput {
    let mut i = capped_run(1);
    i.server_samples = samples;
    i
}

#[test]
fn energy_from_counters_over_the_scraped_stretch_scales_to_the_window() {
    // Two GPUs, scraped at 100 ms and 900 ms: +300 J and +100 J in 0.8 s = 500 W;
    // the window is 1 s, so 500 J; 1,000 tokens: 0.5 J/token, 2 tokens/J.
    let i = run(vec![
        scrape(
            100,
            &[
                ("a", Some(0.8), Some(350.0), Some(1000.0)),
                ("b", Some(0.4), Some(120.0), Some(50.0)),
            ],
        ),
        scrape(
            900,
            &[
                ("a", Some(0.8), Some(400.0), Some(1300.0)),
                ("b", Some(0.4), Some(130.0), Some(150.0)),
            ],
        ),
    ]);
    let e = energy(&i, (ts(0), ts(1000)), 1000.0, Some(0.0), Some(0.36)).unwrap();
    assert!(e.from_counter);
    assert_eq!((e.gpus, e.scrapes), (2, 2));
    assert_eq!(e.hosts, ["n1"]);
    assert_eq!(e.measured, Duration::from_millis(800));
    assert!((e.mean_power_w.unwrap() - 500.0).abs() < 1e-9);
    assert!((e.energy_j.unwrap() - 500.0).abs() < 1e-9);
    assert!((e.joules_per_output_token.unwrap() - 0.5).abs() < 1e-12);
    assert!((e.output_tokens_per_joule.unwrap() - 2.0).abs() < 1e-12);
    // 500 J = 1/7200 kWh at 0.36 per kWh = 0.00005.
    assert!((e.energy_cost.unwrap() - 0.00005).abs() < 1e-15);
    assert!((e.energy_cost_per_million_output_tokens.unwrap() - 0.05).abs() < 1e-12);
    // Each device's utilisation held from its scrape: (0.8 + 0.4) / 2.
    assert!((e.mean_util.unwrap() - 0.6).abs() < 1e-12);
    assert_eq!(e.max_fb_used_bytes, Some(2e9));
    assert_eq!(e.note, None);
}

#[test]
fn without_counters_power_is_integrated_as_steps() {
    // 200 W for 0.5 s then 400 W for 0.5 s (the last reading ends the stretch).
    let i = run(vec![
        scrape(0, &[("a", None, Some(200.0), None)]),
        scrape(500, &[("a", None, Some(400.0), None)]),
        scrape(1000, &[("a", None, Some(999.0), None)]),
    ]);
    let e = energy(&i, (ts(0), ts(1000)), 300.0, None, None).unwrap();
    assert!(!e.from_counter);
    assert!((e.energy_j.unwrap() - 300.0).abs() < 1e-9);
    assert!((e.joules_per_output_token.unwrap() - 1.0).abs() < 1e-12);
    assert_eq!((e.mean_util, e.energy_cost), (None, None));
}

#[test]
fn scrapes_outside_the_window_and_inference_server_scrapes_are_left_out() {
    let mut vllm = ServerSampleRecord {
        run_id: "r".into(),
        at: ts(500),
        server: Some("vllm".into()),
        running: Some(3.0),
        ..ServerSampleRecord::default()
    };
    vllm.generation_tokens_total = Some(10.0);
    let i = run(vec![
        scrape(-500, &[("a", None, None, Some(0.0))]),
        scrape(100, &[("a", None, None, Some(100.0))]),
        vllm,
        scrape(600, &[("a", None, None, Some(150.0))]),
        scrape(2000, &[("a", None, None, Some(9999.0))]),
    ]);
    let e = energy(&i, (ts(0), ts(1000)), 0.0, None, None).unwrap();
    assert_eq!(e.scrapes, 2);
    // 50 J over 0.5 s = 100 W over the 1 s window.
    assert!((e.energy_j.unwrap() - 100.0).abs() < 1e-9);
    // No tokens: per-token figures cannot be computed.
    assert_eq!(e.joules_per_output_token, None);
    assert_eq!(e.output_tokens_per_joule, Some(0.0));
    // No GPU scrape in a window: no section.
    assert_eq!(energy(&i, (ts(700), ts(1900)), 0.0, None, None), None);
    // The server's side ignores GPU scrapes.
    assert_eq!(crate::server::sorted_samples(&i).len(), 1);
}

#[test]
fn one_scrape_or_a_falling_counter_gives_no_energy() {
    let one = run(vec![scrape(
        100,
        &[("a", Some(0.3), Some(100.0), Some(5.0))],
    )]);
    let e = energy(&one, (ts(0), ts(1000)), 10.0, Some(0.5), None).unwrap();
    assert_eq!((e.energy_j, e.mean_power_w), (None, None));
    assert_eq!(e.mean_util, Some(0.3));
    let reset = run(vec![
        scrape(0, &[("a", None, None, Some(500.0))]),
        scrape(900, &[("a", None, None, Some(20.0))]),
    ]);
    assert_eq!(
        energy(&reset, (ts(0), ts(1000)), 10.0, None, None)
            .unwrap()
            .energy_j,
        None
    );
}

#[test]
fn idle_gpus_beside_a_high_gap_are_named_the_pipelines_loss() {
    let i = run(vec![
        scrape(0, &[("a", Some(0.3), Some(100.0), Some(0.0))]),
        scrape(1000, &[("a", Some(0.3), Some(100.0), Some(100.0))]),
    ]);
    let e = energy(&i, (ts(0), ts(1000)), 10.0, Some(0.37), None).unwrap();
    let note = e.note.unwrap();
    assert!(note.contains("30 % busy"), "{note}");
    assert!(note.contains("37 %"), "{note}");
    // A busy GPU, or no gap: nothing to say.
    assert_eq!(
        energy(&i, (ts(0), ts(1000)), 10.0, Some(0.1), None)
            .unwrap()
            .note,
        None
    );
}
