//! The few figures a reader wants first — what the server did: time to first
//! token after admission, time per output token, stream and system TPS — and,
//! where the client's own queue dominates what a user waited, that said as such.
//! Shown at the top of the HTML summary and of `tpscope bench`'s report (issue
//! 16: the default run's latency lines were mostly the client's own backlog).

use std::time::Duration;

use tpscope_analysis::{RunReport, Summary};

use crate::fmt::rate;

/// One lead figure: label, value, what it means.
pub struct LeadRow {
    /// The figure's name.
    pub label: &'static str,
    /// Its value, formatted (`—` when absent).
    pub value: String,
    /// What it means, briefly.
    pub why: &'static str,
}

/// A duration in µs below 1 ms, in ms below 1 s, else in s.
fn dur(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else {
        format!("{:.1} ms", s * 1e3)
    }
}

/// `p50 X · p99 Y`, or `—` without values.
fn p50_p99(s: &Summary<Duration>) -> String {
    match (s.p50, s.p99) {
        (Some(a), Some(b)) => format!("p50 {} · p99 {}", dur(a), dur(b)),
        _ => "—".into(),
    }
}

/// The lead figures of a run: server-side first.
pub fn lead_rows(r: &RunReport) -> Vec<LeadRow> {
    let d = &r.distributions;
    vec![
        LeadRow {
            label: "TTFT after admission",
            value: p50_p99(&d.t_first_token),
            why: "first token − slot taken: the server's prefill and queue, not the client's",
        },
        LeadRow {
            label: "TPOT",
            value: p50_p99(&r.conventional.tpot),
            why: "time per output token after the first (as vLLM prints it)",
        },
        LeadRow {
            label: "stream TPS",
            value: d
                .stream_tps
                .p50
                .map_or("—".into(), |v| format!("p50 {} tok/s", rate(v.0))),
            why: "output tokens per second of one request while it streamed",
        },
        LeadRow {
            label: "system TPS",
            value: r
                .system_tps
                .map_or("—".into(), |v| format!("{} tok/s", rate(v.0))),
            why: "output tokens of ok requests per second of the run",
        },
    ]
}

/// The client's own backlog, said as such, when it made up most of what a user
/// waited for the first token (every request of a closed loop is ready at the
/// start and waits in tpscope's queue for a slot): `None` otherwise.
pub fn backlog_line(r: &RunReport) -> Option<String> {
    let d = &r.distributions;
    let (q, user) = (d.t_queue.p50?, d.ttft_user.p50?);
    (q > Duration::ZERO && q * 2 >= user).then(|| {
        format!(
            "client backlog: requests waited p50 {} in tpscope's own queue for a slot (t_queue); \
             TTFT as a user saw it (ttft_user p50 {}) is mostly that wait, set by the load \
             (--concurrency, --rate), not by the server",
            dur(q),
            dur(user)
        )
    })
}

/// The lead block of a run as terminal text.
pub fn text(r: &RunReport) -> String {
    let mut o = String::from("what the server did:\n");
    let rows = lead_rows(r);
    let w = rows.iter().map(|l| l.label.len()).max().unwrap_or(0);
    let vw = rows
        .iter()
        .map(|l| l.value.chars().count())
        .max()
        .unwrap_or(0);
    for l in rows {
        o.push_str(&format!(
            "  {:<w$}  {:<vw$}   {}\n",
            l.label, l.value, l.why
        ));
    }
    if let Some(b) = backlog_line(r) {
        o.push_str(&format!("  {b}\n"));
    }
    o
}
