//! Measurement quality (docs/design.md §13): how far a run's own stamps can be trusted —
//! the share of first tokens and chunks stamped with their own bytes' kernel
//! arrival, the client's lag, its lateness at release, the sampler's missed
//! ticks — and the warning, with its remedy, when they are poor.

use std::time::Duration;

use serde::Serialize;

use crate::input::{RunInput, SpanFacts};

/// The least share of exact first tokens (and chunks) of a run measured well.
pub const EXACT_SHARE_MIN: f64 = 0.95;
/// The largest share of sampler ticks a run measured well may miss.
pub const MISSED_TICKS_MAX: f64 = 0.05;
/// The largest p99 of the client's per-request worst lag of a run measured well.
pub const LAG_P99_MAX: Duration = Duration::from_millis(5);
/// A connect this long waited for a SYN retransmit (an accept queue overflowed).
pub const SLOW_CONNECT: Duration = Duration::from_secs(1);

/// What to do when the quality is poor.
pub const REMEDY: &str = "run fewer streams, pin the client to its own cores \
    (taskset), or run it on another host than the server";

/// The measurement-quality section of a run's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MeasurementQuality {
    /// Spans whose first token's stamp could be judged (kernel stamps, traced reads).
    pub first_tokens: u64,
    /// Of which the share stamped with their own bytes' arrival.
    pub first_tokens_exact: Option<f64>,
    /// Content chunks whose stamps could be judged.
    pub chunks: u64,
    /// Of which the share stamped with their own bytes' arrival.
    pub chunks_exact: Option<f64>,
    /// Content chunks per socket read (above 1: the client drained several at once).
    pub chunks_per_read: Option<f64>,
    /// The client's worst lag: kernel arrival to the request's task, seconds.
    #[serde(with = "opt_secs")]
    pub client_lag_max_s: Option<Duration>,
    /// p99 over requests of their worst lag, seconds.
    #[serde(with = "opt_secs")]
    pub client_lag_p99_s: Option<Duration>,
    /// The longest time from the end marker's arrival to the slot's release (the
    /// client's lateness, kept out of `t_post`), seconds.
    #[serde(with = "opt_secs")]
    pub release_late_max_s: Option<Duration>,
    /// Share of the sampler's ticks that were missed (the sampler thread ran late).
    pub sampler_missed_ticks: Option<f64>,
    /// Open loop: the latest a request was queued after its scheduled time (the
    /// client's pacing lateness, kept out of the gap), seconds.
    #[serde(with = "opt_secs")]
    pub schedule_late_max_s: Option<Duration>,
    /// Requests sent again at once after a keep-alive race (not retries).
    pub resends: u64,
    /// The longest connect, seconds.
    #[serde(with = "opt_secs")]
    pub connect_max_s: Option<Duration>,
    /// Connects of a second or more (a SYN retransmit: an accept queue overflowed).
    pub slow_connects: u64,
    /// Whether the figures above say the run's timings are not to be trusted.
    pub poor: bool,
    /// Why, and what to do, when poor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

mod opt_secs {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }
}

/// The measurement quality of the spans released in the window (`in_window`).
pub fn measurement_quality(
    input: &RunInput,
    in_window: impl Fn(&SpanFacts) -> bool,
) -> MeasurementQuality {
    let mut q = MeasurementQuality::default();
    let (mut exact_first, mut inexact, mut reads) = (0u64, 0u64, 0u64);
    let mut lags = Vec::new();
    for s in input.spans.iter().filter(|s| in_window(s)) {
        let c = &s.client;
        if let Some(exact) = c.first_token_exact {
            q.first_tokens += 1;
            exact_first += u64::from(exact);
        }
        q.chunks += u64::from(c.traced_chunks);
        inexact += u64::from(c.inexact_chunks);
        reads += u64::from(c.reads);
        if let Some(l) = c.lag {
            lags.push(l);
        }
        if let Some(end) = c.end_at
            && let Some(late) = s.released_at.since(end)
        {
            q.release_late_max_s = q.release_late_max_s.max(Some(late));
        }
        q.resends += u64::from(c.resends);
        q.connect_max_s = q.connect_max_s.max(c.connect);
        q.slow_connects += u64::from(c.connect.is_some_and(|d| d >= SLOW_CONNECT));
    }
    let share = |part: u64, all: u64| (all > 0).then(|| part as f64 / all as f64);
    q.first_tokens_exact = share(exact_first, q.first_tokens);
    q.chunks_exact = share(q.chunks.saturating_sub(inexact), q.chunks);
    q.chunks_per_read = share(q.chunks, reads);
    lags.sort_unstable();
    q.client_lag_max_s = lags.last().copied();
    let secs: Vec<f64> = lags.iter().map(Duration::as_secs_f64).collect();
    q.client_lag_p99_s = crate::stats::quantile_sorted(&secs, 0.99)
        .and_then(|s| Duration::try_from_secs_f64(s).ok());
    q.sampler_missed_ticks = missed_ticks(input);
    q.schedule_late_max_s = input.end.as_ref().and_then(|e| e.schedule_late_max);
    let mut why = Vec::new();
    if let Some(x) = q.first_tokens_exact.filter(|&x| x < EXACT_SHARE_MIN) {
        why.push(format!(
            "{:.0} % of first tokens exactly stamped",
            x * 100.0
        ));
    }
    if let Some(x) = q.chunks_exact.filter(|&x| x < EXACT_SHARE_MIN) {
        why.push(format!("{:.0} % of chunks exactly stamped", x * 100.0));
    }
    if let Some(l) = q.client_lag_p99_s.filter(|&l| l > LAG_P99_MAX) {
        why.push(format!("client lag p99 {:.1} ms", l.as_secs_f64() * 1e3));
    }
    if let Some(x) = q.sampler_missed_ticks.filter(|&x| x > MISSED_TICKS_MAX) {
        why.push(format!(
            "the sampler missed {:.0} % of its ticks",
            x * 100.0
        ));
    }
    if let Some(l) = q.schedule_late_max_s.filter(|&l| l > LAG_P99_MAX) {
        why.push(format!(
            "requests queued up to {:.1} ms after their schedule",
            l.as_secs_f64() * 1e3
        ));
    }
    if q.slow_connects > 0 {
        why.push(format!(
            "{} connects took a second or more (a SYN retransmit after an accept queue \
             overflowed, or the client's own lag)",
            q.slow_connects
        ));
    }
    q.poor = !why.is_empty();
    if q.poor {
        q.warning = Some(format!(
            "measurement quality is poor ({}): the client could not keep up, so \
             timings are upper bounds; {REMEDY}",
            why.join(", ")
        ));
    }
    q
}

/// Share of the sampler's ticks missed: 1 − samples / ticks expected over their span.
fn missed_ticks(input: &RunInput) -> Option<f64> {
    let interval = input.run.as_ref()?.sample_interval?;
    let (first, last) = (input.samples.first()?.at, input.samples.last()?.at);
    let span = last.since(first)?;
    let expected = (span.as_secs_f64() / interval.as_secs_f64()).floor() + 1.0;
    if expected < 2.0 {
        return None;
    }
    Some((1.0 - input.samples.len() as f64 / expected).clamp(0.0, 1.0))
}
