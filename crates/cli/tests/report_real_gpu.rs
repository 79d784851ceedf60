//! The GPU section on a real GPU's readings: a `tpscope bench --gpu-metrics` run on an
//! NVIDIA H200 (tests/data/gpu/README.md says how it was made) read back by
//! `tpscope report`, checked against an independent log of the same GPU's NVML
//! counters taken every 100 ms beside it. The report's energy over the window, mean
//! power and utilisation must agree with what the GPU itself counted.

use std::path::PathBuf;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/gpu")
        .join(name)
}

/// One row of the NVML log: unix seconds, power (W), energy counter (mJ), utilisation (%).
struct Nvml {
    at: f64,
    power_w: f64,
    energy_mj: f64,
    util_pct: f64,
}

fn nvml_log() -> Vec<Nvml> {
    let text = std::fs::read_to_string(data("h200-nvml-c16.csv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<f64> = l.split(',').map(|v| v.parse().unwrap()).collect();
            Nvml {
                at: f[0],
                power_w: f[1],
                energy_mj: f[2],
                util_pct: f[3],
            }
        })
        .collect()
}

/// Unix seconds of an RFC 3339 instant the report writes (`…T13:00:25.725453084Z`).
fn unix(s: &str) -> f64 {
    tpscope_model::Timestamp::parse_rfc3339(s)
        .unwrap()
        .unix_seconds_f64()
}

/// The energy counter at `t`, interpolated between the two readings around it.
fn counter_at(log: &[Nvml], t: f64) -> f64 {
    let i = log.iter().position(|r| r.at > t).unwrap();
    let (a, b) = (&log[i - 1], &log[i]);
    a.energy_mj + (t - a.at) / (b.at - a.at) * (b.energy_mj - a.energy_mj)
}

#[test]
fn real_h200_energy_agrees_with_the_gpus_own_counter() {
    let out = report_json(&data("h200-transformers-c16.jsonl"));
    let run = &out["runs"][0];
    let energy = &run["energy"];
    let window = &run["window"];
    let (t0, t1) = (
        unix(window["start"].as_str().unwrap()),
        unix(window["end"].as_str().unwrap()),
    );
    let log = nvml_log();
    let inside: Vec<&Nvml> = log.iter().filter(|r| r.at >= t0 && r.at <= t1).collect();
    assert!(
        inside.len() > 300,
        "{} NVML readings in the window",
        inside.len()
    );

    let nvml_j = (counter_at(&log, t1) - counter_at(&log, t0)) / 1000.0;
    let report_j = energy["energy_j"].as_f64().unwrap();
    assert!(
        (report_j / nvml_j - 1.0).abs() < 0.005,
        "energy over the window: report {report_j:.1} J, NVML counter {nvml_j:.1} J"
    );

    let nvml_w = inside.iter().map(|r| r.power_w).sum::<f64>() / inside.len() as f64;
    let report_w = energy["mean_power_w"].as_f64().unwrap();
    assert!(
        (report_w / nvml_w - 1.0).abs() < 0.005,
        "mean power: report {report_w:.2} W, NVML {nvml_w:.2} W"
    );

    // The report samples utilisation every 0.5 s, the NVML log every 0.1 s.
    let nvml_util = inside.iter().map(|r| r.util_pct).sum::<f64>() / inside.len() as f64 / 100.0;
    let report_util = energy["mean_util"].as_f64().unwrap();
    assert!(
        (report_util - nvml_util).abs() < 0.01,
        "utilisation: report {report_util:.4}, NVML {nvml_util:.4}"
    );

    // Joules per output token divide that energy by the tokens system TPS counts.
    let tokens: f64 = 64.0 * 128.0;
    let per_token = energy["joules_per_output_token"].as_f64().unwrap();
    assert!(
        (per_token - report_j / tokens).abs() < 1e-9,
        "{per_token} J/token"
    );
    assert_eq!(energy["gpus"], 1);
    assert!(energy["from_counter"].as_bool().unwrap());
}

/// `tpscope report FILE --format json`, parsed.
fn report_json(path: &std::path::Path) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tpscope"))
        .arg("report")
        .arg(path)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
