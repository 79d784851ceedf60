//! The per-span derived metrics (docs/design.md §3) as one table: each row names a
//! metric, computes it from a span's facts, gives its unit and direction, names why
//! a span lacks it, and says where its distribution sits in the report. Analysis,
//! the per-span export, the charts and the renderers all read these rows, so a new
//! metric is one row (and its report field).

use std::time::Duration;

use serde::Serialize;
use tpscope_model::Timestamp;

use crate::distributions::{Conventional, Distributions};
use crate::input::SpanFacts;
use crate::stats::{Summary, TokensPerSecond};

/// The unit a metric is measured in (renderers format by it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetricUnit {
    /// Output tokens per second.
    TokensPerSecond,
    /// Seconds.
    Seconds,
    /// A fraction in [0, 1].
    Fraction,
    /// Retries per span.
    PerSpan,
    /// Money, in the currency of the prices given.
    Money,
    /// Requests per second.
    RequestsPerSecond,
}

/// Which direction of change is an improvement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Larger is better (throughput, success).
    Higher,
    /// Smaller is better (latency, gaps, cost).
    Lower,
}

/// Why a span lacks a metric.
pub mod missing {
    /// The span never took a slot.
    pub const NOT_ADMITTED: &str = "not_admitted";
    /// No chunk carrying output arrived.
    pub const NO_FIRST_TOKEN: &str = "no_first_token";
    /// First and last token arrived at the same instant, or within the stamp
    /// resolution ([`super::STAMP_RESOLUTION`]): one chunk or one read, no stream to
    /// time.
    pub const ZERO_STREAM_TIME: &str = "zero_stream_time";
    /// Admission and release at the same instant.
    pub const ZERO_IN_FLIGHT_TIME: &str = "zero_in_flight_time";
    /// One output token: no gap between tokens.
    pub const SINGLE_TOKEN: &str = "single_token";
    /// Chunk arrivals were not recorded.
    pub const NO_CHUNKS_RECORDED: &str = "no_chunks_recorded";
}

/// Where a metric's distribution is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// [`Distributions`]: the metrics of docs/design.md §3.
    Distributions,
    /// [`Conventional`]: the forms other tools print.
    Conventional,
}

/// A metric's distribution in a report, typed by its unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SummaryRef<'a> {
    /// A distribution of durations.
    Seconds(&'a Summary<Duration>),
    /// A distribution of rates.
    TokensPerSecond(&'a Summary<TokensPerSecond>),
}

impl<'a> From<&'a Summary<Duration>> for SummaryRef<'a> {
    fn from(s: &'a Summary<Duration>) -> Self {
        SummaryRef::Seconds(s)
    }
}

impl<'a> From<&'a Summary<TokensPerSecond>> for SummaryRef<'a> {
    fn from(s: &'a Summary<TokensPerSecond>) -> Self {
        SummaryRef::TokensPerSecond(s)
    }
}

/// One per-span metric.
#[derive(Clone, Copy)]
pub struct SpanMetric {
    /// The name in docs/design.md, the JSON report and the CSV header.
    pub name: &'static str,
    /// [`MetricUnit::Seconds`] or [`MetricUnit::TokensPerSecond`].
    pub unit: MetricUnit,
    /// Which direction is better.
    pub better: Better,
    /// Where the distribution is reported.
    pub section: Section,
    /// The metric of one span in its unit's base (seconds, tokens/s); `None` when
    /// it cannot be computed (missing instant, zero duration, too few tokens).
    pub value: fn(&SpanFacts) -> Option<f64>,
    /// Why an ok span lacks the metric (one of [`missing`]).
    pub missing: fn(&SpanFacts) -> &'static str,
    /// The metric's distribution in a report.
    pub summary: for<'a> fn(&'a Distributions, &'a Conventional) -> SummaryRef<'a>,
    /// Stores the distribution of `values` (reordering them).
    pub(crate) store: fn(&mut Distributions, &mut Conventional, &mut [f64]),
}

impl std::fmt::Debug for SpanMetric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpanMetric")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The finest difference between two stamps that measures time: a first and last
/// token closer than this arrived together (one read, a buffering proxy), and a rate
/// over their difference would be the clock's, not the stream's (5,000,000,000
/// tok/s once led a report).
pub const STAMP_RESOLUTION: Duration = Duration::from_micros(1);

/// Whether a span of several tokens streamed them all at one instant (within
/// [`STAMP_RESOLUTION`]): it has no stream TPS, TPOT or decode TPS.
pub fn collapsed_stream(s: &SpanFacts) -> bool {
    s.output_tokens > 1 && t_stream(s).is_some_and(|d| d < STAMP_RESOLUTION)
}

// The lifecycle as the metrics read it: an instant counts only when the one before
// it exists (a first token without admission is none).
fn admitted(s: &SpanFacts) -> Option<Timestamp> {
    s.admitted_at
}
fn first(s: &SpanFacts) -> Option<Timestamp> {
    s.first_token_at.filter(|_| s.admitted_at.is_some())
}
fn last(s: &SpanFacts) -> Option<Timestamp> {
    s.last_token_at.filter(|_| first(s).is_some())
}
fn t_stream(s: &SpanFacts) -> Option<Duration> {
    first(s).zip(last(s)).and_then(|(f, l)| l.since(f))
}
fn t_in_flight(s: &SpanFacts) -> Option<Duration> {
    admitted(s).and_then(|a| s.released_at.since(a))
}
/// The stream's time when it can divide tokens: at least [`STAMP_RESOLUTION`].
fn t_stream_timed(s: &SpanFacts) -> Option<Duration> {
    t_stream(s).filter(|d| *d >= STAMP_RESOLUTION)
}
fn secs(d: Option<Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64())
}
fn per_sec(num: f64, d: Option<Duration>) -> Option<f64> {
    d.filter(|d| !d.is_zero()).map(|d| num / d.as_secs_f64())
}

// Missing reasons: not admitted comes first, then no first token, then the
// metric's own reason.
fn unadmitted_or(s: &SpanFacts, own: &'static str) -> &'static str {
    if s.admitted_at.is_none() {
        missing::NOT_ADMITTED
    } else {
        own
    }
}
pub(crate) fn unstreamed_or(s: &SpanFacts, own: &'static str) -> &'static str {
    if s.admitted_at.is_none() {
        missing::NOT_ADMITTED
    } else if s.first_token_at.is_none() {
        missing::NO_FIRST_TOKEN
    } else {
        own
    }
}

/// The per-span metrics, in the order of the report, the CSV columns and the charts.
pub const METRICS: [SpanMetric; 10] = [
    SpanMetric {
        name: "t_queue",
        unit: MetricUnit::Seconds,
        better: Better::Lower,
        section: Section::Distributions,
        value: |s| secs(admitted(s).and_then(|a| a.since(s.queued_at))),
        missing: |_| missing::NOT_ADMITTED,
        summary: |d, _| (&d.t_queue).into(),
        store: |d, _, v| d.t_queue = Summary::of(v),
    },
    SpanMetric {
        name: "t_first_token",
        unit: MetricUnit::Seconds,
        better: Better::Lower,
        section: Section::Distributions,
        value: |s| secs(admitted(s).zip(first(s)).and_then(|(a, f)| f.since(a))),
        missing: |s| unstreamed_or(s, missing::NO_FIRST_TOKEN),
        summary: |d, _| (&d.t_first_token).into(),
        store: |d, _, v| d.t_first_token = Summary::of(v),
    },
    SpanMetric {
        name: "ttft_user",
        unit: MetricUnit::Seconds,
        better: Better::Lower,
        section: Section::Distributions,
        value: |s| secs(first(s).and_then(|f| f.since(s.queued_at))),
        missing: |s| unstreamed_or(s, missing::NO_FIRST_TOKEN),
        summary: |d, _| (&d.ttft_user).into(),
        store: |d, _, v| d.ttft_user = Summary::of(v),
    },
    SpanMetric {
        name: "t_stream",
        unit: MetricUnit::Seconds,
        better: Better::Lower,
        section: Section::Distributions,
        value: |s| secs(t_stream(s)),
        missing: |s| unstreamed_or(s, missing::NO_FIRST_TOKEN),
        summary: |d, _| (&d.t_stream).into(),
        store: |d, _, v| d.t_stream = Summary::of(v),
    },
    SpanMetric {
        name: "t_in_flight",
        unit: MetricUnit::Seconds,
        better: Better::Lower,
        section: Section::Distributions,
        value: |s| secs(t_in_flight(s)),
        missing: |_| missing::NOT_ADMITTED,
        summary: |d, _| (&d.t_in_flight).into(),
        store: |d, _, v| d.t_in_flight = Summary::of(v),
    },
    SpanMetric {
        name: "t_post",
        unit: MetricUnit::Seconds,
        better: Better::Lower,
        section: Section::Distributions,
        // To the end marker's arrival when the client recorded it: what the
        // server did, without the client's own lateness (measurement quality).
        value: |s| secs(last(s).and_then(|l| s.client.end_at.unwrap_or(s.released_at).since(l))),
        missing: |s| unstreamed_or(s, missing::NO_FIRST_TOKEN),
        summary: |d, _| (&d.t_post).into(),
        store: |d, _, v| d.t_post = Summary::of(v),
    },
    SpanMetric {
        name: "stream_tps",
        unit: MetricUnit::TokensPerSecond,
        better: Better::Higher,
        section: Section::Distributions,
        value: |s| per_sec(s.output_tokens as f64, t_stream_timed(s)),
        missing: |s| unstreamed_or(s, missing::ZERO_STREAM_TIME),
        summary: |d, _| (&d.stream_tps).into(),
        store: |d, _, v| d.stream_tps = Summary::of(v),
    },
    SpanMetric {
        name: "end_to_end_tps",
        unit: MetricUnit::TokensPerSecond,
        better: Better::Higher,
        section: Section::Distributions,
        value: |s| per_sec(s.output_tokens as f64, t_in_flight(s)),
        missing: |s| unadmitted_or(s, missing::ZERO_IN_FLIGHT_TIME),
        summary: |d, _| (&d.end_to_end_tps).into(),
        store: |d, _, v| d.end_to_end_tps = Summary::of(v),
    },
    SpanMetric {
        name: "tpot",
        unit: MetricUnit::Seconds,
        better: Better::Lower,
        section: Section::Conventional,
        // Divided as a duration (whole nanoseconds), as vLLM does.
        value: |s| {
            let n = s.output_tokens;
            secs(
                t_stream_timed(s)
                    .filter(|_| n > 1)
                    .map(|d| d / (n - 1).min(u64::from(u32::MAX)) as u32),
            )
        },
        // A collapsed stream (every token at one instant) has no time per token,
        // as it has no stream TPS: not 0 ms.
        missing: decode_missing,
        summary: |_, c| (&c.tpot).into(),
        store: |_, c, v| c.tpot = Summary::of(v),
    },
    SpanMetric {
        name: "decode_tps",
        unit: MetricUnit::TokensPerSecond,
        better: Better::Higher,
        section: Section::Conventional,
        value: |s| {
            let n = s.output_tokens;
            per_sec(n.saturating_sub(1) as f64, t_stream_timed(s)).filter(|_| n > 1)
        },
        missing: decode_missing,
        summary: |_, c| (&c.decode_tps).into(),
        store: |_, c, v| c.decode_tps = Summary::of(v),
    },
];

/// Why an ok span has no per-token decode figure (`tpot`, `decode_tps`).
fn decode_missing(s: &SpanFacts) -> &'static str {
    let own = if s.output_tokens <= 1 {
        missing::SINGLE_TOKEN
    } else {
        missing::ZERO_STREAM_TIME
    };
    unstreamed_or(s, own)
}

/// The row of the metric named `name`.
pub fn metric(name: &str) -> Option<&'static SpanMetric> {
    METRICS.iter().find(|m| m.name == name)
}

/// The derived metrics of one span, one value per row of [`METRICS`] in its order.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpanMetrics {
    values: [Option<f64>; METRICS.len()],
}

impl SpanMetrics {
    /// Every metric with its value, in the order of [`METRICS`].
    pub fn iter(&self) -> impl Iterator<Item = (&'static SpanMetric, Option<f64>)> + '_ {
        METRICS.iter().zip(self.values.iter().copied())
    }

    /// The value of the metric named `name` (`None` also for an unknown name).
    pub fn get(&self, name: &str) -> Option<f64> {
        self.iter()
            .find(|(m, _)| m.name == name)
            .and_then(|(_, v)| v)
    }
}

/// The derived metrics of one span. The one place they are computed.
pub fn span_metrics(s: &SpanFacts) -> SpanMetrics {
    SpanMetrics {
        values: METRICS.map(|m| (m.value)(s)),
    }
}

/// One span with its derived metrics: a row of the per-span export.
#[derive(Clone, Copy, Debug)]
pub struct SpanRow<'a> {
    /// The span's facts.
    pub facts: &'a SpanFacts,
    /// Its derived metrics.
    pub metrics: SpanMetrics,
}

/// The rows of a run's spans, in span order.
pub fn span_rows(input: &crate::input::RunInput) -> impl Iterator<Item = SpanRow<'_>> {
    input.spans.iter().map(|facts| SpanRow {
        facts,
        metrics: span_metrics(facts),
    })
}
