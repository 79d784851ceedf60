//! The table `tpscope bench` prints after a sweep: each level's run as recorded,
//! analysed, one row per level, and the knee (found by the analysis crate).

use std::io::Write;
use std::time::Duration;

use tpscope_analysis::knee::{Knee, LevelPoint, knee};
use tpscope_load::BenchSpec;
use tpscope_log::LogSet;

/// Analyses the sweep's runs (`set`, as recorded to `name`; `file` is how to name
/// it to `tpscope report`) with the analysis crate, and prints the
/// throughput-vs-latency table with the knee to `to`.
pub fn print_sweep_table(
    spec: &BenchSpec,
    set: &LogSet,
    (name, file): (&str, &str),
    to: &mut dyn Write,
) -> anyhow::Result<()> {
    let opts = tpscope_analysis::Options::default();
    let secs = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    let mut rows = Vec::new();
    let mut points = Vec::new();
    for (level, run) in spec.levels.iter().zip(set.runs.iter()) {
        let r = tpscope_analysis::analyze(&run.input, &opts);
        let tps = r.system_tps.map(|t| t.0);
        let ttft = &r.distributions.ttft_user;
        let point = LevelPoint {
            level: level.value,
            system_tps: tps,
            latency_s: secs(ttft.p99),
        };
        rows.push((
            level,
            r.counts.ok,
            r.counts.spans,
            tps,
            secs(ttft.p50),
            secs(ttft.p99),
            r.distributions.t_first_token.p50.map(|d| d.as_secs_f64()),
            r.distributions.stream_tps.p50.map(|t| t.0),
            r.gap_fraction,
        ));
        points.push(point);
    }
    let k = knee(&points);
    let param = spec.sweep.unwrap_or("level");
    let fmt = |v: Option<f64>, scale: f64, digits: usize| {
        v.map_or("–".to_string(), |v| format!("{:.*}", digits, v * scale))
    };
    writeln!(
        to,
        "Sweep of {param}: throughput vs latency (one run per level, all in {name})",
    )?;
    writeln!(
        to,
        "{:>12}  {:>9}  {:>12}  {:>13}  {:>13}  {:>14}  {:>13}  {:>7}",
        param,
        "ok/spans",
        "system tok/s",
        "TTFT user p50",
        "TTFT user p99",
        "TTFT admit p50",
        "stream tok/s",
        "gap %"
    )?;
    for (i, (level, ok, spans, tps, p50, p99, tft, stps, gap)) in rows.iter().enumerate() {
        let mark = if k == Knee::At(i) { "  ← knee" } else { "" };
        writeln!(
            to,
            "{:>12}  {:>9}  {:>12}  {:>12}s  {:>12}s  {:>13}s  {:>13}  {:>7}{mark}",
            level.value,
            format!("{ok}/{spans}"),
            fmt(*tps, 1.0, 0),
            fmt(*p50, 1.0, 3),
            fmt(*p99, 1.0, 3),
            fmt(*tft, 1.0, 3),
            fmt(*stps, 1.0, 1),
            fmt(*gap, 100.0, 2),
        )?;
    }
    match k {
        Knee::At(i) => writeln!(
            to,
            "knee: {param} {} — the lowest level reaching 90% of the best throughput; higher levels mostly add latency.",
            spec.levels[i].value
        ),
        Knee::NotReached => writeln!(
            to,
            "knee: not reached — throughput was still rising at the highest level; sweep higher."
        ),
        Knee::Unknown => writeln!(
            to,
            "knee: unknown — fewer than two levels produced a throughput."
        ),
    }?;
    writeln!(to, "Full reports: tpscope report {file}")?;
    Ok(())
}
