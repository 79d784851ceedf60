//! Measurement quality (docs/design.md §13): how far a run's own stamps can be trusted —
//! the share of first tokens and chunks stamped with their own bytes' kernel
//! arrival, the client's lag, its lateness at release, the sampler's missed
//! ticks — and the verdict: *poor* only when the client's lag changes a
//! reported figure, *fair* when it lagged without doing so, with
//! what it does not touch, else *good*.

use std::time::Duration;

use serde::Serialize;
use tpscope_model::time::duration_secs;

use crate::input::{RunInput, SpanFacts};

/// The least share of exact first tokens (and chunks) of a run measured well.
pub const EXACT_SHARE_MIN: f64 = 0.95;
/// The largest share of sampler ticks a run measured well may miss.
pub const MISSED_TICKS_MAX: f64 = 0.05;
/// The largest p99 of the client's per-request worst lag of a run measured well.
pub const LAG_P99_MAX: Duration = Duration::from_millis(5);
/// The most the client's lag may move a reported figure (a median it touches,
/// or the gap and ledger through late releases) for the run to be fair.
pub const MOVES_MAX: f64 = 0.01;
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
    #[serde(serialize_with = "duration_secs::option::serialize")]
    pub client_lag_max_s: Option<Duration>,
    /// p99 over requests of their worst lag, seconds.
    #[serde(serialize_with = "duration_secs::option::serialize")]
    pub client_lag_p99_s: Option<Duration>,
    /// The longest time from the end marker's arrival to the slot's release (the
    /// client's lateness, kept out of `t_post`), seconds.
    #[serde(serialize_with = "duration_secs::option::serialize")]
    pub release_late_max_s: Option<Duration>,
    /// Share of the sampler's ticks that were missed (the sampler thread ran late).
    pub sampler_missed_ticks: Option<f64>,
    /// Open loop: the latest a request was queued after its scheduled time (the
    /// client's pacing lateness, kept out of the gap), seconds.
    #[serde(serialize_with = "duration_secs::option::serialize")]
    pub schedule_late_max_s: Option<Duration>,
    /// Requests sent again at once after a keep-alive race (not retries).
    pub resends: u64,
    /// The longest connect, seconds.
    #[serde(serialize_with = "duration_secs::option::serialize")]
    pub connect_max_s: Option<Duration>,
    /// Connects of a second or more (a SYN retransmit: an accept queue overflowed).
    pub slow_connects: u64,
    /// Spans of several tokens whose first and last token lie within the stamp
    /// resolution (one read: a buffering proxy, a client that fell behind): they
    /// have no stream TPS or TPOT.
    pub collapsed_streams: u64,
    /// Whether the figures above say the run's timings are not to be trusted.
    pub poor: bool,
    /// `good`, `fair` (the client lagged, moving no reported figure by more
    /// than 1 %) or `poor`.
    pub verdict: &'static str,
    /// What a fair verdict's lag does and does not touch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Why, and what to do, when poor.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// The measurement quality of the spans released in the window (`in_window`).
pub fn measurement_quality(
    input: &RunInput,
    in_window: impl Fn(&SpanFacts) -> bool,
) -> MeasurementQuality {
    let mut tally = QualityTally::default();
    for (i, s) in input.spans.iter().enumerate().filter(|(_, s)| in_window(s)) {
        tally.add(input, i, s);
    }
    tally.finish(input)
}

/// Measurement quality gathered span by span, so that the analysis' one pass
/// over the window's spans ([`crate::counts`]) gathers it too.
#[derive(Default)]
pub(crate) struct QualityTally {
    q: MeasurementQuality,
    exact_first: u64,
    inexact: u64,
    reads: u64,
    lags: Vec<Duration>,
    touched: Touched,
}

impl QualityTally {
    /// Adds span `s`, the `i`th of `input`'s spans.
    #[inline]
    pub(crate) fn add(&mut self, input: &RunInput, i: usize, s: &SpanFacts) {
        let q = &mut self.q;
        let c = input.client_stamps_of(i);
        self.touched.add(s, c.lag);
        if let Some(exact) = c.first_token_exact {
            q.first_tokens += 1;
            self.exact_first += u64::from(exact);
        }
        q.chunks += u64::from(c.traced_chunks);
        self.inexact += u64::from(c.inexact_chunks);
        self.reads += u64::from(c.reads);
        if let Some(l) = c.lag {
            self.lags.push(l);
        }
        if let Some(end) = s.client.end_at
            && let Some(late) = s.released_at.since(end)
        {
            q.release_late_max_s = q.release_late_max_s.max(Some(late));
            self.touched.late_ns += late.as_nanos() as f64;
        }
        q.resends += u64::from(c.resends);
        let connect = s.client.connect.map(crate::input::Nanos::get);
        q.connect_max_s = q.connect_max_s.max(connect);
        q.slow_connects += u64::from(connect.is_some_and(|d| d >= SLOW_CONNECT));
        q.collapsed_streams += u64::from(crate::metrics::collapsed_stream(s));
    }

    /// The section, from the spans added and the run's samples and end.
    pub(crate) fn finish(self, input: &RunInput) -> MeasurementQuality {
        let QualityTally {
            mut q,
            exact_first,
            inexact,
            reads,
            mut lags,
            mut touched,
        } = self;
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
        judge(&mut q, &mut touched, input.run_cap());
        q
    }
}

/// What the client's lag could move: the median TTFT after admission and the
/// median stream time of the ok spans (a stamp is late by at most the lag),
/// and the slot-time that late releases kept busy.
#[derive(Default)]
struct Touched {
    ttft: Vec<f64>,
    stream: Vec<f64>,
    late_ns: f64,
    first: Option<tpscope_model::Timestamp>,
    last: Option<tpscope_model::Timestamp>,
}

impl Touched {
    /// Adds span `s`, whose client's worst lag was `lag`.
    fn add(&mut self, s: &SpanFacts, lag: Option<Duration>) {
        self.first = Some(self.first.map_or(s.queued_at, |f| f.min(s.queued_at)));
        self.last = Some(self.last.map_or(s.released_at, |l| l.max(s.released_at)));
        if s.status != tpscope_model::Status::Ok || lag.is_none() {
            return;
        }
        if let (Some(a), Some(f)) = (s.admitted_at, s.first_token_at) {
            self.ttft.push(f.signed_nanos_since(a) as f64 / 1e9);
        }
        if let (Some(f), Some(l)) = (s.first_token_at, s.last_token_at) {
            self.stream.push(l.signed_nanos_since(f) as f64 / 1e9);
        }
    }

    /// The share of `lag` in the median of `v` (`None` without one).
    fn moves(v: &mut [f64], lag: f64) -> Option<f64> {
        if v.is_empty() {
            return None;
        }
        let mid = v.len() / 2;
        let (_, m, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
        (*m > 0.0).then(|| lag / *m)
    }
}

/// The verdict: poor when stamps are inexact or the lag moves a reported
/// figure by more than [`MOVES_MAX`]; fair when the client lagged without that.
fn judge(q: &mut MeasurementQuality, t: &mut Touched, cap: Option<u32>) {
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
    let lag = q.client_lag_p99_s.map_or(0.0, |l| l.as_secs_f64());
    let on_ttft = Touched::moves(&mut t.ttft, lag);
    let on_stream = Touched::moves(&mut t.stream, lag);
    for (name, share) in [
        ("the median TTFT", on_ttft),
        ("the median stream time", on_stream),
    ] {
        if let Some(x) = share.filter(|&x| x > MOVES_MAX) {
            why.push(format!(
                "client lag p99 {:.1} ms is {:.1} % of {name}",
                lag * 1e3,
                x * 100.0
            ));
        }
    }
    let slot_ns = cap
        .zip(t.first.zip(t.last))
        .map(|(c, (a, b))| f64::from(c) * b.signed_nanos_since(a).max(0) as f64);
    let on_ledger = slot_ns.filter(|&s| s > 0.0).map(|s| t.late_ns / s);
    if let Some(x) = on_ledger.filter(|&x| x > MOVES_MAX) {
        why.push(format!(
            "late releases held {:.1} % of the slot-time (the gap and the ledger move by as much)",
            x * 100.0
        ));
    }
    q.poor = !why.is_empty();
    if q.poor {
        q.verdict = "poor";
        q.warning = Some(format!(
            "measurement quality is poor ({}): the client could not keep up, so \
             timings are upper bounds; {REMEDY}",
            why.join(", ")
        ));
        return;
    }
    // Lagged without touching a figure: say so, and what it does not touch.
    let mut lagged = Vec::new();
    if let Some(l) = q.client_lag_p99_s.filter(|&l| l > LAG_P99_MAX) {
        let pct = |x: Option<f64>| x.map_or("–".into(), |x| format!("{:.2} %", x * 100.0));
        lagged.push(format!(
            "client lag p99 {:.1} ms ({} of the median TTFT, {} of the median stream time)",
            l.as_secs_f64() * 1e3,
            pct(on_ttft),
            pct(on_stream)
        ));
    }
    if let Some(x) = q.sampler_missed_ticks.filter(|&x| x > MISSED_TICKS_MAX) {
        lagged.push(format!(
            "the sampler missed {:.0} % of its ticks (only the sampled gap estimate uses them)",
            x * 100.0
        ));
    }
    if let Some(l) = q.schedule_late_max_s.filter(|&l| l > LAG_P99_MAX) {
        lagged.push(format!(
            "requests queued up to {:.1} ms after their schedule (kept out of the gap)",
            l.as_secs_f64() * 1e3
        ));
    }
    if q.slow_connects > 0 {
        lagged.push(format!(
            "{} connects took a second or more (in their spans' connect time)",
            q.slow_connects
        ));
    }
    if lagged.is_empty() {
        q.verdict = "good";
    } else {
        q.verdict = "fair";
        q.note = Some(format!(
            "{}: stamps are exact and no reported figure moves by more than 1 %",
            lagged.join("; ")
        ));
    }
}

/// Share of the sampler's ticks missed: 1 − samples / ticks expected over their
/// span. With a heartbeat (a sample on a change and at least that often) a gap
/// between samples is expected up to the heartbeat and a tick, so only the ticks beyond it
/// count as missed: a lower bound, since a late tick with no change is unseen.
fn missed_ticks(input: &RunInput) -> Option<f64> {
    let interval = input.run.as_ref()?.sample_interval?;
    let (first, last) = (input.samples.first()?.at, input.samples.last()?.at);
    let span = last.since(first)?;
    let expected = (span.as_secs_f64() / interval.as_secs_f64()).floor() + 1.0;
    if expected < 2.0 {
        return None;
    }
    let Some(beat) = input.sample_heartbeat() else {
        return Some((1.0 - input.samples.len() as f64 / expected).clamp(0.0, 1.0));
    };
    let mut at: Vec<_> = input.samples.iter().map(|s| s.at).collect();
    at.sort_unstable();
    let missed: f64 = at
        .windows(2)
        // The heartbeat's sample is taken on the first tick a heartbeat on.
        .filter_map(|w| w[1].since(w[0])?.checked_sub(beat + interval))
        .map(|over| (over.as_secs_f64() / interval.as_secs_f64()).floor())
        .sum();
    Some((missed / expected).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::SampleFacts;
    use crate::test_support::{capped_run, ts};

    fn sampled(at_ms: &[i64], heartbeat: Option<Duration>) -> RunInput {
        let mut input = capped_run(2);
        let run = input.run.as_mut().unwrap();
        run.sample_interval = Some(Duration::from_millis(10));
        run.sample_heartbeat = heartbeat;
        input.samples = at_ms
            .iter()
            .map(|&ms| SampleFacts {
                at: ts(ms),
                in_flight: 0,
                queue_depth: 0,
                cap: None,
            })
            .collect();
        input
    }

    #[test]
    fn a_heartbeat_gap_is_not_a_missed_tick_but_a_longer_one_is() {
        let beat = Some(Duration::from_secs(1));
        // Idle: a sample a heartbeat (and a tick) apart is on time.
        let on_time = sampled(&[0, 1_010, 2_020, 3_030], beat);
        assert_eq!(missed_ticks(&on_time), Some(0.0));
        // The same samples without a heartbeat: most ticks are missing.
        assert!(missed_ticks(&sampled(&[0, 1_010, 2_020, 3_030], None)).unwrap() > 0.9);
        // 1.5 s between samples: the 49 ticks after the heartbeat's were missed.
        let late = sampled(&[0, 1_500, 2_500], beat);
        assert_eq!(missed_ticks(&late), Some(49.0 / 251.0));
    }
}
