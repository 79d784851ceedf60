//! Chart data for the HTML report, bounded in size whatever the run's length: the
//! step series of in-flight, cap and queue depth, the gap intervals, system TPS
//! over time, a request waterfall, CDFs of the latency and rate metrics, and stream
//! TPS against output length. Renderers draw these and compute nothing.
//!
//! Every instant is an offset from the run's origin (the run record's start, else
//! the first `queued_at`), the same origin the report's window offsets use.

use std::time::Duration;

use serde::Serialize;
use tpscope_model::time::duration_secs;
use tpscope_model::{Status, Timestamp};

use crate::input::{RunInput, SpanFacts};
use crate::metrics::{MetricUnit, metric, span_metrics};
use crate::report::RunReport;
use crate::stats::{TokensPerSecond, quantile_sorted, ratio, sort_values};
use crate::window::WindowKind;

mod occupancy;

use occupancy::occupancy_and_gaps;

/// Most steps the occupancy series keeps exactly; a busier run is binned.
pub const MAX_EXACT_STEPS: usize = 2000;
/// Bins of a binned occupancy series (and of binned gap shading).
pub const OCCUPANCY_BINS: usize = 1000;
/// Most gap intervals kept exactly; more are binned.
pub const MAX_GAP_INTERVALS: usize = 2000;
/// Most points of the system TPS series; longer series merge neighbouring buckets.
pub const MAX_TPS_POINTS: usize = 600;
/// Most requests in the waterfall; a larger run shows that many consecutive ones.
pub const MAX_WATERFALL: usize = 1000;
/// Points of each CDF (quantiles at evenly spaced fractions, ends included).
pub const CDF_POINTS: usize = 201;
/// Most points of the length/rate scatter; more are sampled evenly.
pub const MAX_SCATTER: usize = 2000;

/// One step of the occupancy series: the state from `at` until the next step's
/// `at` (or the series' end). Exact steps have `min == max`; a bin holds the
/// smallest and largest value seen inside it, so no spike is lost.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct OccupancyStep {
    /// Start of the step, from the origin.
    #[serde(rename = "at_s", serialize_with = "duration_secs::serialize")]
    pub at: Duration,
    /// Fewest requests in flight during the step.
    pub in_flight_min: u32,
    /// Most requests in flight during the step.
    pub in_flight_max: u32,
    /// Shortest queue during the step.
    pub queue_min: u32,
    /// Longest queue during the step.
    pub queue_max: u32,
    /// The cap in force (the lowest, in a bin); `None` when uncapped or unknown.
    pub cap: Option<u32>,
}

/// In-flight, queue depth and cap over the whole run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OccupancySeries {
    /// The steps, in time order.
    pub steps: Vec<OccupancyStep>,
    /// Where the last step ends.
    #[serde(rename = "end_s", serialize_with = "duration_secs::serialize")]
    pub end: Duration,
    /// The bin width when the series was binned; `None` when every step is exact.
    #[serde(rename = "bin_s", serialize_with = "duration_secs::option::serialize")]
    pub bin: Option<Duration>,
}

/// A stretch of gap time (queue depth > 0 and in-flight < cap).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GapBand {
    /// Start, from the origin.
    #[serde(rename = "from_s", serialize_with = "duration_secs::serialize")]
    pub from: Duration,
    /// End, from the origin.
    #[serde(rename = "to_s", serialize_with = "duration_secs::serialize")]
    pub to: Duration,
    /// The part of `[from, to)` that is gap: 1 for an exact interval, the gap
    /// fraction of the bin when binned.
    pub share: f64,
}

/// System TPS of one time bucket (the report's time series).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TpsPoint {
    /// Bucket start, from the origin.
    #[serde(rename = "start_s", serialize_with = "duration_secs::serialize")]
    pub start: Duration,
    /// Bucket length.
    #[serde(rename = "duration_s", serialize_with = "duration_secs::serialize")]
    pub duration: Duration,
    /// Output tokens attributed to the bucket / its length.
    pub system_tps: Option<TokensPerSecond>,
}

/// One request of the waterfall: its lifecycle instants from the origin.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct WaterfallRow {
    /// Entered the queue.
    #[serde(rename = "queued_s", serialize_with = "duration_secs::serialize")]
    pub queued: Duration,
    /// Took a slot (`None`: never admitted).
    #[serde(
        rename = "admitted_s",
        serialize_with = "duration_secs::option::serialize"
    )]
    pub admitted: Option<Duration>,
    /// First output chunk.
    #[serde(
        rename = "first_token_s",
        serialize_with = "duration_secs::option::serialize"
    )]
    pub first_token: Option<Duration>,
    /// Last output chunk.
    #[serde(
        rename = "last_token_s",
        serialize_with = "duration_secs::option::serialize"
    )]
    pub last_token: Option<Duration>,
    /// Gave the slot back (or left the queue).
    #[serde(rename = "released_s", serialize_with = "duration_secs::serialize")]
    pub released: Duration,
    /// How it ended.
    pub status: Status,
    /// Output tokens.
    pub output_tokens: u64,
    /// Retries.
    pub retries: u32,
    /// When the last attempt started, for a request that made several: from
    /// admission to here its slot went to failed attempts and back-off.
    #[serde(
        rename = "last_attempt_s",
        serialize_with = "duration_secs::option::serialize"
    )]
    pub last_attempt: Option<Duration>,
}

/// Requests with their phases: all of the window's, or for a big run the
/// [`MAX_WATERFALL`] consecutive ones (in queue order) in the middle of the window,
/// so that each bar stays wide enough to read.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Waterfall {
    /// The requests shown, in queue order.
    pub rows: Vec<WaterfallRow>,
    /// Position of the first row among the window's requests in queue order (0-based).
    pub first: usize,
    /// Requests released in the window; more than `rows.len()` means sampled.
    pub total: usize,
}

impl Waterfall {
    /// Whether the rows are a sample of the window's requests.
    pub fn sampled(&self) -> bool {
        self.rows.len() < self.total
    }
}

/// Which metric a CDF shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CdfMetric {
    /// first_token_at − queued_at (seconds).
    TtftUser,
    /// first_token_at − admitted_at (seconds).
    TFirstToken,
    /// admitted_at − queued_at (seconds).
    TQueue,
    /// output_tokens / t_stream (tokens/s).
    StreamTps,
    /// output_tokens / t_in_flight (tokens/s).
    EndToEndTps,
}

impl CdfMetric {
    /// The metric's name in docs/design.md.
    pub fn name(self) -> &'static str {
        match self {
            CdfMetric::TtftUser => "ttft_user",
            CdfMetric::TFirstToken => "t_first_token",
            CdfMetric::TQueue => "t_queue",
            CdfMetric::StreamTps => "stream_tps",
            CdfMetric::EndToEndTps => "end_to_end_tps",
        }
    }

    /// Every CDF, in the order of [`Detail::cdfs`].
    pub const ALL: [CdfMetric; 5] = [
        CdfMetric::TtftUser,
        CdfMetric::TFirstToken,
        CdfMetric::TQueue,
        CdfMetric::StreamTps,
        CdfMetric::EndToEndTps,
    ];

    /// Whether values are seconds (else tokens per second).
    pub fn is_duration(self) -> bool {
        metric(self.name()).is_some_and(|m| m.unit == MetricUnit::Seconds)
    }
}

/// An empirical CDF drawn through the metric's quantiles (the report's percentile
/// method), so the chart's p50 and p99 are the report's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cdf {
    /// The metric.
    pub metric: CdfMetric,
    /// Ok spans in the window that have the metric.
    pub count: usize,
    /// `(value, fraction)`: the value (seconds or tokens/s) at each fraction in [0, 1].
    pub points: Vec<(f64, f64)>,
}

/// Stream TPS against output length, one point per ok span.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Scatter {
    /// `(output_tokens, stream_tps)`.
    pub points: Vec<(u64, TokensPerSecond)>,
    /// Ok spans in the window with a stream TPS; more than `points.len()` means sampled.
    pub total: usize,
}

/// A window as offsets from the origin.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TimeRange {
    /// Start.
    #[serde(rename = "from_s", serialize_with = "duration_secs::serialize")]
    pub from: Duration,
    /// End.
    #[serde(rename = "to_s", serialize_with = "duration_secs::serialize")]
    pub to: Duration,
}

/// Everything the HTML charts of one run show.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Detail {
    /// The run's id.
    pub run_id: String,
    /// The instant every offset is measured from.
    pub origin: Timestamp,
    /// The analysed window, and whether it is the full run.
    pub window: Option<TimeRange>,
    /// Whether the analysed window is the full run.
    pub window_is_full: bool,
    /// The steady-state window, when the run has one.
    pub steady: Option<TimeRange>,
    /// In-flight, queue depth and cap over the whole run.
    pub occupancy: OccupancySeries,
    /// Gap time over the whole run.
    pub gaps: Vec<GapBand>,
    /// Whether `gaps` is binned (then `share` is each bin's gap fraction).
    pub gaps_binned: bool,
    /// System TPS per bucket over the window (empty without a time series); a
    /// long series has runs of buckets merged, see [`MAX_TPS_POINTS`].
    pub tps: Vec<TpsPoint>,
    /// The request waterfall.
    pub waterfall: Waterfall,
    /// CDFs of ttft_user, t_first_token, t_queue, stream_tps and end_to_end_tps.
    pub cdfs: Vec<Cdf>,
    /// Stream TPS against output length.
    pub scatter: Scatter,
}

impl Detail {
    /// The CDF of one metric.
    pub fn cdf(&self, m: CdfMetric) -> Option<&Cdf> {
        self.cdfs.iter().find(|c| c.metric == m)
    }
}

fn offset(origin: Timestamp, t: Timestamp) -> Duration {
    t.since(origin).unwrap_or_default()
}

/// Indices `0..n` thinned evenly to at most `max` (all of them when `n ≤ max`),
/// first and last included.
fn even_sample(n: usize, max: usize) -> Vec<usize> {
    if n <= max {
        return (0..n).collect();
    }
    if max <= 1 {
        return vec![0; max.min(n)];
    }
    (0..max)
        .map(|i| ((i as u128 * (n - 1) as u128) / (max - 1) as u128) as usize)
        .collect()
}

fn cdf(metric: CdfMetric, mut values: Vec<f64>) -> Cdf {
    sort_values(&mut values);
    let points = if values.is_empty() {
        Vec::new()
    } else {
        (0..CDF_POINTS)
            .filter_map(|i| {
                let q = i as f64 / (CDF_POINTS - 1) as f64;
                quantile_sorted(&values, q).map(|v| (v, q))
            })
            .collect()
    };
    Cdf {
        metric,
        count: values.len(),
        points,
    }
}

/// The chart data of one run, from its input and the report analysed from it (the
/// window and time series are the report's; give it a report made with a bucket
/// to get the TPS chart).
pub fn detail(input: &RunInput, report: &RunReport) -> Detail {
    let first_queued = input.spans.iter().map(|s| s.queued_at).min();
    let origin = input.origin().or(first_queued).unwrap_or_default();
    let (occupancy, gaps, gaps_binned) = occupancy_and_gaps(input, origin);
    let in_window = |s: &&SpanFacts| {
        report
            .window
            .is_some_and(|w| s.released_at >= w.start && s.released_at <= w.end)
    };

    // At most MAX_TPS_POINTS points: runs of k consecutive buckets are merged
    // into one (their tokens over their length), k = 1 for most runs.
    let tps = match (&report.time_series, report.window) {
        (Some(ts), Some(w)) if !ts.buckets.is_empty() => {
            let k = ts.buckets.len().div_ceil(MAX_TPS_POINTS);
            ts.buckets
                .chunks(k)
                .map(|group| {
                    let duration: Duration = group.iter().map(|b| b.duration).sum();
                    let tokens: f64 = group.iter().map(|b| b.tokens).sum();
                    TpsPoint {
                        start: w.from + group[0].start,
                        duration,
                        system_tps: if k == 1 {
                            group[0].system_tps
                        } else {
                            ratio(tokens, duration.as_secs_f64()).map(TokensPerSecond)
                        },
                    }
                })
                .collect()
        }
        _ => Vec::new(),
    };

    let mut windowed: Vec<(usize, &SpanFacts)> = input
        .spans
        .iter()
        .enumerate()
        .filter(|(_, s)| in_window(s))
        .collect();
    windowed.sort_by_key(|(_, s)| s.queued_at);
    let last_attempts: std::collections::HashMap<usize, Timestamp> =
        input.last_attempts.iter().copied().collect();
    let shown = windowed.len().min(MAX_WATERFALL);
    let first = (windowed.len() - shown) / 2;
    let waterfall = Waterfall {
        first,
        rows: windowed[first..first + shown]
            .iter()
            .map(|&(i, s)| WaterfallRow {
                last_attempt: last_attempts.get(&i).map(|&t| offset(origin, t)),
                queued: offset(origin, s.queued_at),
                admitted: s.admitted_at.map(|t| offset(origin, t)),
                first_token: s.first_token_at.map(|t| offset(origin, t)),
                last_token: s.last_token_at.map(|t| offset(origin, t)),
                released: offset(origin, s.released_at),
                status: s.status,
                output_tokens: s.output_tokens,
                retries: s.retry_count,
            })
            .collect(),
        total: windowed.len(),
    };

    let mut cols: [Vec<f64>; CdfMetric::ALL.len()] = Default::default();
    let mut scatter_all: Vec<(u64, TokensPerSecond)> = Vec::new();
    for (_, s) in windowed.iter().filter(|(_, s)| s.status == Status::Ok) {
        let m = span_metrics(s);
        for (col, c) in cols.iter_mut().zip(CdfMetric::ALL) {
            col.extend(m.get(c.name()));
        }
        if let Some(r) = m.get(CdfMetric::StreamTps.name()) {
            scatter_all.push((s.output_tokens, TokensPerSecond(r)));
        }
    }
    let cdfs = CdfMetric::ALL
        .into_iter()
        .zip(cols)
        .map(|(c, values)| cdf(c, values))
        .collect();
    let scatter = Scatter {
        points: even_sample(scatter_all.len(), MAX_SCATTER)
            .into_iter()
            .map(|i| scatter_all[i])
            .collect(),
        total: scatter_all.len(),
    };

    let span_of = |w: &crate::window::Window| TimeRange {
        from: offset(origin, w.start),
        to: offset(origin, w.end),
    };
    Detail {
        run_id: input.run_id.clone(),
        origin,
        window: report.window.as_ref().map(span_of),
        window_is_full: report.window.is_some_and(|w| w.kind == WindowKind::Full),
        steady: report.steady_window.as_ref().map(span_of),
        occupancy,
        gaps,
        gaps_binned,
        tps,
        waterfall,
        cdfs,
        scatter,
    }
}

/// Buckets the TPS chart of a comparison aims for across its time axis.
pub const CHART_BUCKETS: u32 = 60;

/// A readable bucket for a TPS chart whose time axis spans `extent`: the smallest
/// 1–2–5 value (10 ms, 20 ms, 50 ms, 100 ms, …) at or above `extent` /
/// [`CHART_BUCKETS`], so the line has about 30–60 steps whatever the run's length
/// (the bootstrap's own buckets, about 200 per run, are too fine to read).
pub fn chart_bucket(extent: Duration) -> Duration {
    let want = (extent / CHART_BUCKETS).max(Duration::from_millis(10));
    let mut unit = Duration::from_millis(10);
    loop {
        for m in [1u32, 2, 5] {
            if unit * m >= want {
                return unit * m;
            }
        }
        unit *= 10;
    }
}

/// The chart data of a comparison's two runs, analysed with `opts` and their TPS
/// over one [`chart_bucket`] chosen for the longer run, so the two lines share
/// their steps and can be read against each other.
pub fn compare_details(
    baseline: &RunInput,
    candidate: &RunInput,
    opts: &crate::settings::Options,
) -> (Detail, Detail) {
    let extent = |i: &RunInput| {
        let last = i.spans.iter().map(|s| s.released_at).max();
        i.origin()
            .zip(last)
            .and_then(|(o, l)| l.since(o))
            .unwrap_or_default()
    };
    let bucket = chart_bucket(extent(baseline).max(extent(candidate)));
    let opts = crate::settings::Options {
        bucket: Some(bucket),
        ..*opts
    };
    let one = |i: &RunInput| detail(i, &crate::analyze::analyze(i, &opts));
    (one(baseline), one(candidate))
}

#[cfg(test)]
mod tests;
