//! The measurement-quality section of a run's report: one line per figure.

use tpscope_analysis::report::RunReport;

use crate::section::{Block, Section};

fn pct(x: Option<f64>) -> String {
    x.map_or("–".into(), |x| format!("{:.1} %", x * 100.0))
}

fn ms(d: Option<std::time::Duration>) -> String {
    d.map_or("–".into(), |d| format!("{:.2} ms", d.as_secs_f64() * 1e3))
}

/// One line per figure of [`tpscope_analysis::MeasurementQuality`]; empty when
/// the run has nothing to say (no kernel stamps, no samples, no connects).
fn quality_lines(r: &RunReport) -> Vec<String> {
    let q = &r.measurement_quality;
    let mut v = Vec::new();
    if q.first_tokens > 0 || q.chunks > 0 {
        v.push(format!(
            "exact stamps: first tokens {} of {}, chunks {} of {} ({:.2} chunks per read)",
            pct(q.first_tokens_exact),
            q.first_tokens,
            pct(q.chunks_exact),
            q.chunks,
            q.chunks_per_read.unwrap_or(f64::NAN)
        ));
    }
    if q.client_lag_max_s.is_some() {
        v.push(format!(
            "client lag: p99 {}, worst {}; release after the end marker: worst {}",
            ms(q.client_lag_p99_s),
            ms(q.client_lag_max_s),
            ms(q.release_late_max_s)
        ));
    }
    if q.schedule_late_max_s.is_some() {
        v.push(format!(
            "open-loop pacing: worst {} after schedule",
            ms(q.schedule_late_max_s)
        ));
    }
    if q.sampler_missed_ticks.is_some() {
        v.push(format!(
            "sampler ticks missed: {}",
            pct(q.sampler_missed_ticks)
        ));
    }
    if q.connect_max_s.is_some() || q.resends > 0 {
        v.push(format!(
            "connects: worst {}, {} of a second or more; keep-alive resends: {}",
            ms(q.connect_max_s),
            q.slow_connects,
            q.resends
        ));
    }
    if q.collapsed_streams > 0 {
        v.push(format!(
            "streams with every token at one instant: {} (no stream TPS or TPOT)",
            q.collapsed_streams
        ));
    }
    if !v.is_empty() {
        let verdict = if q.poor { "POOR" } else { q.verdict };
        v.push(match &q.note {
            Some(n) => format!("verdict: {verdict} — {n}"),
            None => format!("verdict: {verdict}"),
        });
    }
    v
}

/// The section; `None` when the run has nothing to say.
pub(crate) fn section(r: &RunReport) -> Option<Section<'_>> {
    let lines = quality_lines(r);
    (!lines.is_empty())
        .then(|| Section::new("quality", "measurement quality").with(Block::Items(lines)))
}
