//! The collect stage of [`crate::analyze()`]: one pass over the spans released in
//! the window, counting them by status and cause ([`Counts`]), feeding the
//! distributions (`collect`), the goodput tally and measurement quality
//! (`quality`), and the window's share of every ok span's output tokens
//! (system TPS). The same pass over all the spans replays them for the what-if
//! ([`crate::whatif`]), adds their tokens to the time series' buckets
//! ([`crate::series`]) and notes whether any belongs to a session: a pass of
//! their own over a million spans' facts cost what their work did.

use std::collections::BTreeMap;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use tpscope_model::{Cause, Status, StatusCounts};

use crate::collect::Collected;
use crate::goodput::{Goals, Tally};
use crate::input::{RunInput, SpanFacts};
use crate::quality::QualityTally;
use crate::series::{BucketTokens, tokens_in};
use crate::whatif::Replay;
use crate::window::Window;

/// Span counts over the spans released in the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Counts {
    /// All spans released in the window.
    pub spans: u64,
    /// Spans by status, written flat (`ok`, `error`, `cancelled`); cancelled
    /// spans are kept apart from the success rate.
    #[serde(flatten)]
    pub status: StatusCounts,
    /// Of the cancelled spans, those never admitted: the backlog left when the
    /// run stopped admitting (end of `--duration`, Ctrl-C). They were never sent,
    /// so they are not failures and not in `errors_by_cause`.
    pub backlog_left: u64,
    /// Non-ok spans by failure cause (the backlog left at the end aside).
    pub errors_by_cause: CauseCounts,
    /// Σ retry_count.
    pub retries: u64,
    /// Retried attempts by cause.
    pub retries_by_cause: CauseCounts,
    /// Tokens received by attempts that did not end ok.
    pub wasted_tokens: u64,
    /// Output tokens of ok spans (whole spans, not only their part in the window).
    pub output_tokens: u64,
    /// Input tokens of ok spans that know theirs.
    pub input_tokens: u64,
    /// Ok spans that do not know their input tokens.
    pub ok_without_input_tokens: u64,
}

/// Counts by failure cause. Listed and serialised (as a JSON object) in the
/// alphabetical order of the cause names, the order reports have always used.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CauseCounts(BTreeMap<Cause, u64>);

impl CauseCounts {
    /// Counts one more of `cause`.
    pub fn add(&mut self, cause: Cause) {
        *self.0.entry(cause).or_default() += 1;
    }

    /// The count of `cause` (0 when none).
    pub fn get(&self, cause: Cause) -> u64 {
        self.0.get(&cause).copied().unwrap_or(0)
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The causes counted with their counts, by cause name.
    pub fn iter(&self) -> impl Iterator<Item = (Cause, u64)> + '_ {
        let mut v: Vec<(Cause, u64)> = self.0.iter().map(|(c, n)| (*c, *n)).collect();
        v.sort_unstable_by_key(|(c, _)| c.as_str());
        v.into_iter()
    }
}

/// The count of the cause named `name`; panics, like a map, when none was counted.
impl std::ops::Index<&str> for CauseCounts {
    type Output = u64;
    fn index(&self, name: &str) -> &u64 {
        name.parse::<Cause>()
            .ok()
            .and_then(|c| self.0.get(&c))
            .unwrap_or_else(|| panic!("no count for cause `{name}`"))
    }
}

impl Serialize for CauseCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (c, n) in self.iter() {
            m.serialize_entry(c.as_str(), &n)?;
        }
        m.end()
    }
}

/// What one pass over a window's spans gathers.
pub(crate) struct WindowSpans {
    /// The spans released in the window, counted.
    pub counts: Counts,
    /// Their metrics, for the distributions.
    pub collected: Collected,
    /// Whether each met the goals, when goals were given.
    pub goodput: Option<Tally>,
    /// Output tokens of every ok span that fall in the window (pro rata).
    pub window_tokens: f64,
    /// Their measurement quality, gathered in the same pass.
    pub quality: QualityTally,
    /// The what-if's replay of every span, when one was asked for.
    pub replay: Option<Replay>,
    /// Whether any span (in the window or not) belongs to a session.
    pub any_session: bool,
}

/// Whether a span counts in the window `[w0, w1]`: it was released in it.
pub(crate) fn released_in(
    s: &SpanFacts,
    (w0, w1): (tpscope_model::Timestamp, tpscope_model::Timestamp),
) -> bool {
    s.released_at >= w0 && s.released_at <= w1
}

/// The collect stage: one pass over the run's spans for the window `window`
/// (`None`: the run has no spans, so nothing is in it), feeding `replay` and
/// `series` every span.
pub(crate) fn window_spans(
    input: &RunInput,
    window: Option<Window>,
    goals: Option<Goals>,
    mut replay: Option<Replay>,
    mut series: Option<&mut BucketTokens>,
) -> WindowSpans {
    let bounds = window.map(|w| (w.start, w.end)).unwrap_or_default();
    let (w0, w1) = bounds;
    let mut counts = Counts::default();
    let mut collected = Collected::new(input.spans.len());
    let mut goodput = goals.map(Tally::new);
    let mut window_tokens = 0.0;
    let mut quality = QualityTally::default();
    let mut any_session = false;
    for (i, s) in input.spans.iter().enumerate() {
        if let Some(r) = &mut replay {
            r.add(s);
        }
        if let Some(t) = &mut series {
            t.add(s);
        }
        any_session |= s.session.is_some();
        if s.status == Status::Ok && window.is_some() {
            window_tokens += tokens_in(s, w0.unix_nanos(), w1.unix_nanos(), true);
        }
        if !released_in(s, bounds) {
            continue;
        }
        counts.spans += 1;
        quality.add(input, i, s);
        if let Some(g) = &mut goodput {
            g.add(s);
        }
        counts.retries += u64::from(s.retry_count);
        counts.wasted_tokens += s.wasted_tokens;
        for c in &s.retry_causes {
            counts.retries_by_cause.add(*c);
        }
        match s.status {
            Status::Ok => {
                counts.status.add(Status::Ok);
                counts.output_tokens += s.output_tokens;
                match s.input_tokens {
                    Some(i) => counts.input_tokens += i,
                    None => counts.ok_without_input_tokens += 1,
                }
                collected.add(s);
            }
            Status::Error | Status::Cancelled => counts.failed(s),
        }
    }
    WindowSpans {
        counts,
        collected,
        goodput,
        window_tokens,
        quality,
        replay,
        any_session,
    }
}

impl Counts {
    /// Counts a span that did not end ok: by status, and by cause unless it is
    /// the backlog left when the run stopped admitting.
    fn failed(&mut self, s: &SpanFacts) {
        self.status.add(s.status);
        if s.is_backlog_left() {
            self.backlog_left += 1;
            return;
        }
        let cause = s.error_cause.unwrap_or(if s.status == Status::Cancelled {
            Cause::Cancelled
        } else {
            Cause::Disconnect
        });
        self.errors_by_cause.add(cause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{capped_run, ok_span, ts};
    use crate::window::WindowKind;

    fn window(from_ms: i64, to_ms: i64) -> Option<Window> {
        Some(Window {
            kind: WindowKind::Range,
            start: ts(from_ms),
            end: ts(to_ms),
            duration: std::time::Duration::from_millis((to_ms - from_ms) as u64),
            from: std::time::Duration::from_millis(from_ms as u64),
            to: std::time::Duration::from_millis(to_ms as u64),
        })
    }

    #[test]
    fn spans_count_where_they_are_released_and_failures_by_cause() {
        let mut input = capped_run(4);
        let mut failed = ok_span(0, 0, 500, 0);
        failed.status = Status::Error;
        failed.error_cause = Some(Cause::TimeoutTotal);
        failed.retry_count = 2;
        let mut no_cause = failed.clone();
        no_cause.error_cause = None;
        let mut with_input = ok_span(0, 0, 1000, 10);
        with_input.input_tokens = Some(7);
        input.spans = vec![failed, no_cause, with_input, ok_span(0, 0, 3000, 10)];
        let w = window_spans(&input, window(0, 2000), None, None, None);
        let c = &w.counts;
        assert_eq!(
            (c.spans, c.status.ok, c.status.error, c.retries),
            (3, 1, 2, 4)
        );
        assert_eq!(c.errors_by_cause.get(Cause::TimeoutTotal), 1);
        assert_eq!(c.errors_by_cause.get(Cause::Disconnect), 1);
        assert_eq!((c.output_tokens, c.input_tokens), (10, 7));
        // The span released at 3 s streams 10 tokens over 0.1..2.9 s: 19/28 of
        // them by 2 s, with all 10 of the span released at 1 s.
        assert!(
            (w.window_tokens - (10.0 + 10.0 * 1.9 / 2.8)).abs() < 1e-9,
            "{}",
            w.window_tokens
        );
    }

    #[test]
    fn no_window_counts_nothing() {
        let mut input = capped_run(4);
        input.spans = vec![ok_span(0, 0, 1000, 10)];
        let w = window_spans(&input, None, None, None, None);
        assert_eq!((w.counts.spans, w.window_tokens), (0, 0.0));
    }
}
