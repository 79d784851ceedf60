//! The roofline against a real GPU: the `llama-3.1-8b` / `h100` preset's step times
//! beside decode and prefill steps measured on an H100 (`tests/data/
//! h100-llama-3.1-8b-steps/`, the `torch.compile` column). Every decode point must be
//! within 10 % and every prefill within 15 %; the errors are printed (docs/sim.md
//! quotes them).

use std::path::PathBuf;

use tpscope_sim::{Roofline, SimConfig, StepWork};

/// The rows of a measurement file: the named columns, as numbers.
fn rows(file: &str, columns: &[&str]) -> Vec<Vec<f64>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/h100-llama-3.1-8b-steps")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split(',').collect();
    let at: Vec<usize> = columns
        .iter()
        .map(|c| {
            header
                .iter()
                .position(|h| h == c)
                .unwrap_or_else(|| panic!("{file}: no column {c}"))
        })
        .collect();
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            at.iter()
                .map(|&i| {
                    cells[i]
                        .trim()
                        .parse()
                        .unwrap_or_else(|_| panic!("{file}: {l}"))
                })
                .collect()
        })
        .collect()
}

fn preset() -> Roofline {
    let c = SimConfig::preset("llama-3.1-8b", "h100").unwrap();
    assert_eq!(
        c,
        SimConfig::default(),
        "the default is the measured preset"
    );
    Roofline::new(&c)
}

/// Prints each point (what, measured ms, simulated ms) with its error; the largest
/// error's magnitude.
fn worst_error(kind: &str, points: &[(String, f64, f64)]) -> f64 {
    let mut worst: f64 = 0.0;
    for (what, measured, sim) in points {
        let err = sim / measured - 1.0;
        println!(
            "{kind} {what}: measured {measured:7.3} ms, sim {sim:7.3} ms, {:+5.1} %",
            err * 100.0
        );
        worst = worst.max(err.abs());
    }
    println!("{kind}: max error {:.1} %", worst * 100.0);
    worst
}

#[test]
fn decode_steps_are_within_ten_percent_of_an_h100() {
    let r = preset();
    let data = rows(
        "decode.csv",
        &["batch", "context_tokens", "step_ms_compiled_graph"],
    );
    assert_eq!(data.len(), 17);
    let points: Vec<_> = data
        .iter()
        .map(|row| {
            let (batch, context) = (row[0] as u64, row[1] as u64);
            // Each sequence holds `context` tokens and computes one more.
            let sim = r.decode_step(batch, context + 1).as_secs_f64() * 1e3;
            (
                format!("batch {batch:>3} context {context:>4}"),
                row[2],
                sim,
            )
        })
        .collect();
    let worst = worst_error("decode", &points);
    assert!(worst <= 0.10, "a decode step is {:.1} % off", worst * 100.0);
}

#[test]
fn prefill_steps_are_within_fifteen_percent_of_an_h100() {
    let r = preset();
    let data = rows("prefill.csv", &["prompt_tokens", "ms_compiled"]);
    assert_eq!(data.len(), 4);
    let points: Vec<_> = data
        .iter()
        .map(|row| {
            let tokens = row[0] as u64;
            let sim = r.step(&StepWork::prefill(tokens)).as_secs_f64() * 1e3;
            (format!("{tokens:>4} tokens"), row[1], sim)
        })
        .collect();
    let worst = worst_error("prefill", &points);
    assert!(
        worst <= 0.15,
        "a prefill step is {:.1} % off",
        worst * 100.0
    );
}
