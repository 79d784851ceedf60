//! The GPU section of a run (energy, power, utilisation, per-token figures and the
//! energy's cost) as a [`Section`] the text, markdown and HTML renderers lay out
//! alike. Formatting only.

use tpscope_analysis::RunReport;
use tpscope_analysis::energy::Energy;

use crate::fmt::{or_dash, pct};
use crate::section::{Block, Section};

/// The section's heading.
pub fn heading(e: &Energy) -> String {
    let hosts = match e.hosts.len() {
        0 => String::new(),
        1 => format!(" on {}", e.hosts[0]),
        n => format!(" on {n} hosts"),
    };
    let gpus = if e.gpus == 1 { "GPU" } else { "GPUs" };
    format!(
        "GPU energy ({} {gpus}{hosts}, {} scrapes)",
        e.gpus, e.scrapes
    )
}

fn num(v: Option<f64>, decimals: usize, unit: &str) -> String {
    or_dash(v.map(|x| format!("{x:.decimals$}{unit}")))
}

/// (what, value) rows.
pub fn rows(e: &Energy) -> Vec<[String; 2]> {
    let how = if e.from_counter {
        "energy counters"
    } else {
        "power readings"
    };
    let mut rows = vec![
        [
            format!("energy over the window (from {how})"),
            or_dash(e.energy_j.map(joules)),
        ],
        ["mean power".into(), num(e.mean_power_w, 1, " W")],
        [
            "GPU utilisation (mean)".into(),
            or_dash(e.mean_util.map(pct)),
        ],
        [
            "framebuffer in use (max)".into(),
            or_dash(
                e.max_fb_used_bytes
                    .map(|b| format!("{:.1} GiB", b / (1u64 << 30) as f64)),
            ),
        ],
        [
            "energy per output token".into(),
            or_dash(e.joules_per_output_token.map(joules)),
        ],
        [
            "output tokens per joule".into(),
            num(e.output_tokens_per_joule, 3, ""),
        ],
    ];
    if let Some(p) = e.price_per_kwh {
        rows.push([
            format!("energy cost (at {p} per kWh)"),
            num(e.energy_cost, 6, ""),
        ]);
        rows.push([
            "energy cost per million output tokens".into(),
            num(e.energy_cost_per_million_output_tokens, 4, ""),
        ]);
    }
    rows
}

/// Joules with a unit that keeps 3 or 4 significant figures.
fn joules(j: f64) -> String {
    if j >= 1e6 {
        format!("{:.3} MJ", j / 1e6)
    } else if j >= 1e3 {
        format!("{:.2} kJ", j / 1e3)
    } else if j >= 1.0 {
        format!("{j:.2} J")
    } else {
        format!("{:.1} mJ", j * 1e3)
    }
}

/// The section, when the run has GPU-telemetry scrapes.
pub fn section(r: &RunReport) -> Option<Section<'_>> {
    let e = r.energy.as_ref()?;
    let rows: Vec<Vec<String>> = rows(e).into_iter().map(Vec::from).collect();
    let mut s = Section::new("energy", heading(e)).table(&["", "value"], rows);
    if let Some(n) = &e.note {
        s = s.with(Block::Sentence(format!("note: {n}")));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joules_keep_their_significant_figures() {
        assert_eq!(joules(0.0421), "42.1 mJ");
        assert_eq!(joules(3.25), "3.25 J");
        assert_eq!(joules(12_345.0), "12.35 kJ");
        assert_eq!(joules(2_500_000.0), "2.500 MJ");
    }
}
