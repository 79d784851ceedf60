//! Output tokens over time: the part of a span's tokens that falls in an interval,
//! and the report's time series (tokens, occupancy, gap and backlog per bucket).

use std::time::Duration;

use serde::Serialize;
use tpscope_model::Status;
use tpscope_model::time::duration_secs;

use crate::input::{RunInput, SpanFacts};
use crate::stats::{TokensPerSecond, ratio};
use crate::steps::{Integrals, Segment};
use crate::window::Window;

/// The most buckets a time series may have; a finer bucket is refused by a warning.
pub const MAX_BUCKETS: u64 = 1_000_000;

/// One time bucket of the series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bucket {
    /// Bucket start, as an offset from the window start.
    #[serde(rename = "start_s", serialize_with = "duration_secs::serialize")]
    pub start: Duration,
    /// Bucket length (the last bucket may be shorter).
    #[serde(rename = "duration_s", serialize_with = "duration_secs::serialize")]
    pub duration: Duration,
    /// Output tokens of ok spans attributed to this bucket (spread over each span's
    /// [first_token_at, last_token_at], or at recorded chunk arrivals).
    pub tokens: f64,
    /// tokens / duration.
    pub system_tps: Option<TokensPerSecond>,
    /// Time-weighted mean in-flight.
    pub in_flight: f64,
    /// Time-weighted mean queue depth.
    pub queue_depth: f64,
    /// The cap in force at the bucket's end (`None`: uncapped or unknown).
    pub cap: Option<u32>,
    /// Gap time in the bucket.
    #[serde(rename = "gap_s", serialize_with = "duration_secs::serialize")]
    pub gap: Duration,
    /// Backlog time in the bucket.
    #[serde(rename = "backlog_s", serialize_with = "duration_secs::serialize")]
    pub backlog: Duration,
}

/// A time series over the window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimeSeries {
    /// Bucket length.
    #[serde(rename = "bucket_s", serialize_with = "duration_secs::serialize")]
    pub bucket: Duration,
    /// The buckets, from the window start.
    pub buckets: Vec<Bucket>,
}

/// The series stage of [`crate::analyze()`]: the window's series in buckets of
/// `bucket` (`None` without a bucket or a window, or, with a warning, when the
/// bucket would make more than [`MAX_BUCKETS`]), empty: its occupancy is added
/// segment by segment in the ledger's pass over the steps
/// ([`SeriesParts::add_segment`]), its tokens span by span in the collect
/// stage's pass ([`BucketTokens::add`]), the whole made by
/// [`SeriesParts::finish`].
pub(crate) fn window_series(
    window: Option<Window>,
    bucket: Option<Duration>,
    warnings: &mut Vec<String>,
) -> Option<SeriesParts> {
    let (b, w) = bucket.filter(|b| !b.is_zero()).zip(window)?;
    let n = (w.duration.as_nanos().div_ceil(b.as_nanos())).max(1) as u64;
    if n > MAX_BUCKETS {
        warnings.push(format!(
            "a {b:?} bucket would make {n} buckets (more than {MAX_BUCKETS}): no time series"
        ));
        return None;
    }
    Some(SeriesParts::new(w, b, n as usize))
}

/// Tokens of a span attributed to `[a, b]`: at recorded chunk arrivals when present,
/// else spread uniformly over `[first_token_at, last_token_at]` (a point mass at
/// the first token when the two coincide). A point on `b` counts when `closed_end`.
#[inline]
pub(crate) fn tokens_in(span: &SpanFacts, a: i64, b: i64, closed_end: bool) -> f64 {
    let (Some(f), Some(l)) = (span.first_token_at, span.last_token_at) else {
        return 0.0;
    };
    let (f, l) = (f.unix_nanos(), l.unix_nanos());
    let point_in = |t: i64| t >= a && (t < b || (closed_end && t == b));
    if let Some(chunks) = span.chunks.as_deref().filter(|c| !c.is_empty()) {
        let marked: u64 = chunks.iter().map(|c| u64::from(c.tokens)).sum();
        // Chunk counts may differ from the span's total (e.g. usage counts more):
        // scale so the span still contributes exactly its output tokens.
        let scale = if marked > 0 {
            span.output_tokens as f64 / marked as f64
        } else {
            0.0
        };
        return chunks
            .iter()
            .filter(|c| point_in(f.saturating_add(c.offset.as_nanos() as i64)))
            .map(|c| f64::from(c.tokens) * scale)
            .sum();
    }
    let n = span.output_tokens as f64;
    if l <= f {
        return if point_in(f) { n } else { 0.0 };
    }
    let overlap = (l.min(b) - f.max(a)).max(0);
    n * overlap as f64 / (l - f) as f64
}

/// The time series of a window in `n` buckets of `bucket` (the last may be
/// shorter), its tokens in a pass of its own (the analysis adds them in the
/// collect stage's).
#[cfg(test)]
pub(crate) fn time_series(
    input: &RunInput,
    steps: &crate::steps::Steps,
    w: Window,
    bucket: Duration,
    n: usize,
) -> TimeSeries {
    let mut parts = SeriesParts::new(w, bucket, n);
    for seg in steps.segments() {
        parts.add_segment(&seg);
    }
    for s in &input.spans {
        parts.tokens.add(s);
    }
    parts.finish(input)
}

/// Output tokens per bucket, added span by span in log order.
pub(crate) struct BucketTokens {
    w0: i64,
    w1: i64,
    b: i64,
    tokens: Vec<f64>,
}

impl BucketTokens {
    /// The share of an ok span's tokens in each bucket its stream crosses.
    #[inline]
    pub(crate) fn add(&mut self, s: &SpanFacts) {
        if s.status != Status::Ok {
            return;
        }
        let (Some(f), Some(l)) = (s.first_token_at, s.last_token_at) else {
            return;
        };
        let (w0, w1, b, n) = (self.w0, self.w1, self.b, self.tokens.len());
        let (f, l) = (f.unix_nanos().max(w0), l.unix_nanos().min(w1));
        if f > l {
            return;
        }
        // The buckets idx(f)..=idx(l), walked from the first (one division a
        // span, not two).
        let mut i = (((f - w0).max(0) / b) as usize).min(n - 1);
        loop {
            let a = w0 + i as i64 * b;
            let last = i == n - 1;
            self.tokens[i] += tokens_in(s, a, if last { w1 } else { a + b }, last);
            if last || a + b > l {
                break;
            }
            i += 1;
        }
    }
}

/// A time series being built: its occupancy per bucket, from the steps, and
/// its tokens, from the spans.
pub(crate) struct SeriesParts {
    bucket: Duration,
    integ: Vec<Integrals>,
    caps: Vec<Option<u32>>,
    /// The bucket the last segment began in.
    k: usize,
    /// The tokens, added by the collect stage.
    pub tokens: BucketTokens,
}

impl SeriesParts {
    /// No occupancy or tokens yet.
    fn new(w: Window, bucket: Duration, n: usize) -> SeriesParts {
        SeriesParts {
            bucket,
            integ: vec![Integrals::default(); n],
            caps: vec![None; n],
            k: 0,
            tokens: BucketTokens {
                w0: w.start.unix_nanos(),
                w1: w.end.unix_nanos(),
                b: bucket.as_nanos() as i64,
                tokens: vec![0.0; n],
            },
        }
    }

    /// Adds the next segment of the steps (segments come in time order) to
    /// the buckets it covers.
    #[inline]
    pub fn add_segment(&mut self, seg: &Segment) {
        let BucketTokens { w0, w1, b, .. } = self.tokens;
        let n = self.integ.len();
        let (s, e) = (seg.start.unix_nanos().max(w0), seg.end.unix_nanos().min(w1));
        if e <= s {
            return;
        }
        // The buckets idx(s)..=idx(e - 1); the first is walked to from the
        // last segment's, without dividing.
        while self.k + 1 < n && w0 + (self.k as i64 + 1) * b <= s {
            self.k += 1;
        }
        let mut i = self.k;
        loop {
            let a = (w0 + i as i64 * b).max(s);
            let z = (w0 + (i as i64 + 1) * b).min(e);
            self.integ[i].add(seg, z - a);
            self.caps[i] = seg.cap;
            if i + 1 >= n || w0 + (i as i64 + 1) * b > e - 1 {
                break;
            }
            i += 1;
        }
    }

    /// The bucket length and count.
    pub fn buckets(&self) -> (Duration, usize) {
        (self.bucket, self.integ.len())
    }

    /// The series, once every span's tokens were added.
    pub fn finish(self, input: &RunInput) -> TimeSeries {
        let SeriesParts {
            bucket,
            integ,
            caps,
            tokens: BucketTokens { w0, w1, b, tokens },
            ..
        } = self;
        let buckets = (0..tokens.len())
            .map(|i| {
                let start = i as i64 * b;
                let len = (b.min(w1 - w0 - start)).max(0);
                let secs = len as f64 / 1e9;
                Bucket {
                    start: Duration::from_nanos(start as u64),
                    duration: Duration::from_nanos(len as u64),
                    tokens: tokens[i],
                    system_tps: ratio(tokens[i], secs).map(TokensPerSecond),
                    in_flight: ratio(integ[i].in_flight_ns, len as f64).unwrap_or(0.0),
                    queue_depth: ratio(integ[i].queue_ns, len as f64).unwrap_or(0.0),
                    cap: caps[i].or(if i == 0 { input.run_cap() } else { None }),
                    gap: integ[i].gap(),
                    backlog: integ[i].backlog(),
                }
            })
            .collect();
        TimeSeries { bucket, buckets }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::Steps;
    use crate::test_support::{capped_run, ts};
    use crate::window::WindowKind;
    use proptest::prelude::*;

    /// The buckets as they were computed before they were walked: each span's
    /// and each segment's first and last bucket found by dividing.
    #[allow(clippy::needless_range_loop)] // the ranges are what is checked
    fn by_division(
        input: &RunInput,
        steps: &Steps,
        w: Window,
        b: i64,
        n: usize,
    ) -> Vec<(f64, Integrals)> {
        let (w0, w1) = (w.start.unix_nanos(), w.end.unix_nanos());
        let mut out = vec![(0.0, Integrals::default()); n];
        let idx = |t: i64| (((t - w0).max(0) / b) as usize).min(n - 1);
        for s in input.spans.iter().filter(|s| s.status == Status::Ok) {
            let (Some(f), Some(l)) = (s.first_token_at, s.last_token_at) else {
                continue;
            };
            let (f, l) = (f.unix_nanos().max(w0), l.unix_nanos().min(w1));
            if f > l {
                continue;
            }
            for i in idx(f)..=idx(l) {
                let a = w0 + i as i64 * b;
                let last = i == n - 1;
                out[i].0 += tokens_in(s, a, if last { w1 } else { a + b }, last);
            }
        }
        for seg in steps.segments() {
            let (s, e) = (seg.start.unix_nanos().max(w0), seg.end.unix_nanos().min(w1));
            if e <= s {
                continue;
            }
            for i in idx(s)..=idx(e - 1) {
                let a = (w0 + i as i64 * b).max(s);
                let z = (w0 + (i as i64 + 1) * b).min(e);
                out[i].1.add(&seg, z - a);
            }
        }
        out
    }

    proptest! {
        /// Walking to each span's and segment's buckets gives what dividing
        /// gave, bucket for bucket, spans reaching past either end included.
        #[test]
        fn walked_buckets_are_the_divided_ones(
            spans in proptest::collection::vec((0i64..400, 0i64..60, 0i64..200, 0i64..50, 1u64..500), 1..40),
            from in 0i64..200,
            len in 1i64..600,
            bucket_ms in 1i64..90,
        ) {
            let mut input = capped_run(3);
            for &(q, wait, stream, post, tokens) in &spans {
                let a = q + wait;
                input.spans.push(SpanFacts::ok(
                    ts(q), Some(ts(a)), Some(ts(a + 5)), Some(ts(a + 5 + stream)),
                    ts(a + 5 + stream + post), tokens,
                ));
            }
            let steps = Steps::new(&input);
            let w = Window {
                kind: WindowKind::Range,
                start: ts(from),
                end: ts(from + len),
                duration: Duration::from_millis(len as u64),
                from: Duration::from_millis(from as u64),
                to: Duration::from_millis((from + len) as u64),
            };
            let b = Duration::from_millis(bucket_ms as u64);
            let n = (len + bucket_ms - 1) / bucket_ms;
            let got = time_series(&input, &steps, w, b, n as usize);
            let want = by_division(&input, &steps, w, b.as_nanos() as i64, n as usize);
            for (g, (tokens, integ)) in got.buckets.iter().zip(want) {
                prop_assert_eq!(g.tokens, tokens);
                prop_assert_eq!(g.gap, integ.gap());
                prop_assert_eq!(g.backlog, integ.backlog());
                let len = g.duration.as_nanos() as f64;
                prop_assert_eq!(g.in_flight, ratio(integ.in_flight_ns, len).unwrap_or(0.0));
                prop_assert_eq!(g.queue_depth, ratio(integ.queue_ns, len).unwrap_or(0.0));
            }
        }
    }
}
