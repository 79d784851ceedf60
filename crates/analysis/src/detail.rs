//! Chart data for the HTML report, bounded in size whatever the run's length: the
//! step series of in-flight, cap and queue depth, the gap intervals, system TPS
//! over time, a request waterfall, CDFs of the latency and rate metrics, and stream
//! TPS against output length. Renderers draw these and compute nothing.
//!
//! Every instant is an offset from the run's origin (the run record's start, else
//! the first `queued_at`), the same origin the report's window offsets use.

use std::time::Duration;

use serde::Serialize;
use tpscope_model::{Status, Timestamp};

use crate::analyze::span_metrics;
use crate::input::{RunInput, SpanFacts};
use crate::report::{RunReport, WindowKind};
use crate::stats::{TokensPerSecond, quantile_sorted, ratio, sort_values};
use crate::sweep::Sweep;

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
    #[serde(rename = "at_s", serialize_with = "secs")]
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
pub struct Occupancy {
    /// The steps, in time order.
    pub steps: Vec<OccupancyStep>,
    /// Where the last step ends.
    #[serde(rename = "end_s", serialize_with = "secs")]
    pub end: Duration,
    /// The bin width when the series was binned; `None` when every step is exact.
    #[serde(rename = "bin_s", serialize_with = "opt_secs")]
    pub bin: Option<Duration>,
}

/// A stretch of gap time (queue depth > 0 and in-flight < cap).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct GapBand {
    /// Start, from the origin.
    #[serde(rename = "from_s", serialize_with = "secs")]
    pub from: Duration,
    /// End, from the origin.
    #[serde(rename = "to_s", serialize_with = "secs")]
    pub to: Duration,
    /// The part of `[from, to)` that is gap: 1 for an exact interval, the gap
    /// fraction of the bin when binned.
    pub share: f64,
}

/// System TPS of one time bucket (the report's time series).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TpsPoint {
    /// Bucket start, from the origin.
    #[serde(rename = "start_s", serialize_with = "secs")]
    pub start: Duration,
    /// Bucket length.
    #[serde(rename = "duration_s", serialize_with = "secs")]
    pub duration: Duration,
    /// Output tokens attributed to the bucket / its length.
    pub system_tps: Option<TokensPerSecond>,
}

/// One request of the waterfall: its lifecycle instants from the origin.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct WaterfallRow {
    /// Entered the queue.
    #[serde(rename = "queued_s", serialize_with = "secs")]
    pub queued: Duration,
    /// Took a slot (`None`: never admitted).
    #[serde(rename = "admitted_s", serialize_with = "opt_secs")]
    pub admitted: Option<Duration>,
    /// First output chunk.
    #[serde(rename = "first_token_s", serialize_with = "opt_secs")]
    pub first_token: Option<Duration>,
    /// Last output chunk.
    #[serde(rename = "last_token_s", serialize_with = "opt_secs")]
    pub last_token: Option<Duration>,
    /// Gave the slot back (or left the queue).
    #[serde(rename = "released_s", serialize_with = "secs")]
    pub released: Duration,
    /// How it ended.
    pub status: Status,
    /// Output tokens.
    pub output_tokens: u64,
    /// Retries.
    pub retries: u32,
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
    /// The metric's name in DESIGN.md.
    pub fn name(self) -> &'static str {
        match self {
            CdfMetric::TtftUser => "ttft_user",
            CdfMetric::TFirstToken => "t_first_token",
            CdfMetric::TQueue => "t_queue",
            CdfMetric::StreamTps => "stream_tps",
            CdfMetric::EndToEndTps => "end_to_end_tps",
        }
    }

    /// Whether values are seconds (else tokens per second).
    pub fn is_duration(self) -> bool {
        matches!(
            self,
            CdfMetric::TtftUser | CdfMetric::TFirstToken | CdfMetric::TQueue
        )
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
    #[serde(rename = "from_s", serialize_with = "secs")]
    pub from: Duration,
    /// End.
    #[serde(rename = "to_s", serialize_with = "secs")]
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
    pub occupancy: Occupancy,
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

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn opt_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
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

fn occupancy_and_gaps(input: &RunInput, origin: Timestamp) -> (Occupancy, Vec<GapBand>, bool) {
    let sweep = Sweep::new(input);
    let segments: Vec<_> = sweep.segments().collect();
    let (Some(first), Some(last)) = (segments.first(), segments.last()) else {
        return (Occupancy::default(), Vec::new(), false);
    };
    let (t0, t1) = (first.start.unix_nanos(), last.end.unix_nanos());
    let o = origin.unix_nanos();
    let at = |ns: i64| Duration::from_nanos((ns - o).max(0) as u64);
    let end = at(t1);

    // Exact gap intervals, contiguous ones merged.
    let mut gaps: Vec<(i64, i64)> = Vec::new();
    for s in segments.iter().filter(|s| s.is_gap()) {
        let (a, b) = (s.start.unix_nanos(), s.end.unix_nanos());
        match gaps.last_mut() {
            Some(g) if g.1 == a => g.1 = b,
            _ => gaps.push((a, b)),
        }
    }

    let span_ns = (t1 - t0).max(1);
    let bins = OCCUPANCY_BINS as i64;
    let bin_ns = (span_ns + bins - 1) / bins;
    let bin_of = |ns: i64| (((ns - t0) / bin_ns).clamp(0, bins - 1)) as usize;

    let occupancy = if segments.len() <= MAX_EXACT_STEPS {
        Occupancy {
            steps: segments
                .iter()
                .map(|s| OccupancyStep {
                    at: at(s.start.unix_nanos()),
                    in_flight_min: s.in_flight,
                    in_flight_max: s.in_flight,
                    queue_min: s.queue_depth,
                    queue_max: s.queue_depth,
                    cap: s.cap,
                })
                .collect(),
            end,
            bin: None,
        }
    } else {
        let mut steps: Vec<Option<OccupancyStep>> = vec![None; OCCUPANCY_BINS];
        for s in &segments {
            let (a, b) = (s.start.unix_nanos(), s.end.unix_nanos());
            for slot in steps.iter_mut().take(bin_of(b - 1) + 1).skip(bin_of(a)) {
                let st = slot.get_or_insert(OccupancyStep {
                    at: Duration::ZERO,
                    in_flight_min: u32::MAX,
                    in_flight_max: 0,
                    queue_min: u32::MAX,
                    queue_max: 0,
                    cap: s.cap,
                });
                st.in_flight_min = st.in_flight_min.min(s.in_flight);
                st.in_flight_max = st.in_flight_max.max(s.in_flight);
                st.queue_min = st.queue_min.min(s.queue_depth);
                st.queue_max = st.queue_max.max(s.queue_depth);
                st.cap = match (st.cap, s.cap) {
                    (Some(x), Some(y)) => Some(x.min(y)),
                    (x, y) => x.or(y),
                };
            }
        }
        Occupancy {
            steps: steps
                .into_iter()
                .enumerate()
                .filter_map(|(i, s)| {
                    s.map(|mut s| {
                        s.at = at(t0 + i as i64 * bin_ns);
                        s
                    })
                })
                .collect(),
            end,
            bin: Some(Duration::from_nanos(bin_ns as u64)),
        }
    };

    if gaps.len() <= MAX_GAP_INTERVALS {
        let bands = gaps
            .iter()
            .map(|(a, b)| GapBand {
                from: at(*a),
                to: at(*b),
                share: 1.0,
            })
            .collect();
        return (occupancy, bands, false);
    }
    let mut gap_ns = vec![0i64; OCCUPANCY_BINS];
    for (a, b) in gaps {
        for (i, slot) in gap_ns
            .iter_mut()
            .enumerate()
            .take(bin_of(b - 1) + 1)
            .skip(bin_of(a))
        {
            let lo = t0 + i as i64 * bin_ns;
            *slot += (b.min(lo + bin_ns) - a.max(lo)).max(0);
        }
    }
    let bands = gap_ns
        .iter()
        .enumerate()
        .filter(|(_, g)| **g > 0)
        .map(|(i, g)| {
            let lo = t0 + i as i64 * bin_ns;
            let hi = (lo + bin_ns).min(t1);
            GapBand {
                from: at(lo),
                to: at(hi),
                share: (*g as f64 / (hi - lo).max(1) as f64).min(1.0),
            }
        })
        .collect();
    (occupancy, bands, true)
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

    let mut windowed: Vec<&SpanFacts> = input.spans.iter().filter(in_window).collect();
    windowed.sort_by_key(|s| s.queued_at);
    let shown = windowed.len().min(MAX_WATERFALL);
    let first = (windowed.len() - shown) / 2;
    let waterfall = Waterfall {
        first,
        rows: windowed[first..first + shown]
            .iter()
            .map(|s| WaterfallRow {
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

    let mut cols: [Vec<f64>; 5] = Default::default();
    let mut scatter_all: Vec<(u64, TokensPerSecond)> = Vec::new();
    for s in windowed.iter().filter(|s| s.status == Status::Ok) {
        let m = span_metrics(s);
        let d = |v: Option<Duration>| v.map(|d| d.as_secs_f64());
        for (col, v) in cols.iter_mut().zip([
            d(m.ttft_user),
            d(m.t_first_token),
            d(m.t_queue),
            m.stream_tps.map(|r| r.0),
            m.end_to_end_tps.map(|r| r.0),
        ]) {
            col.extend(v);
        }
        if let Some(r) = m.stream_tps {
            scatter_all.push((s.output_tokens, r));
        }
    }
    let [ttft_user, t_first, t_queue, stream, e2e] = cols;
    let cdfs = vec![
        cdf(CdfMetric::TtftUser, ttft_user),
        cdf(CdfMetric::TFirstToken, t_first),
        cdf(CdfMetric::TQueue, t_queue),
        cdf(CdfMetric::StreamTps, stream),
        cdf(CdfMetric::EndToEndTps, e2e),
    ];
    let scatter = Scatter {
        points: even_sample(scatter_all.len(), MAX_SCATTER)
            .into_iter()
            .map(|i| scatter_all[i])
            .collect(),
        total: scatter_all.len(),
    };

    let span_of = |w: &crate::report::Window| TimeRange {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyze::{Options, analyze};
    use tpscope_model::{RunRecord, SCHEMA, Target};

    fn ts(ms: i64) -> Timestamp {
        Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
    }

    fn span(q: i64, a: i64, f: i64, l: i64, r: i64, tokens: u64) -> SpanFacts {
        SpanFacts {
            status: Status::Ok,
            error_cause: None,
            queued_at: ts(q),
            admitted_at: Some(ts(a)),
            first_token_at: Some(ts(f)),
            last_token_at: Some(ts(l)),
            released_at: ts(r),
            output_tokens: tokens,
            input_tokens: None,
            retry_count: 0,
            retry_causes: vec![],
            wasted_tokens: 0,
            chunks: None,
        }
    }

    fn input(spans: Vec<SpanFacts>, cap: u32) -> RunInput {
        let mut i = RunInput {
            run_id: "r".into(),
            run: Some(RunRecord {
                run_id: "r".into(),
                schema: SCHEMA.into(),
                tool: String::new(),
                started_at: ts(0),
                target: Target::default(),
                cap: Some(cap),
                token_source: None,
                tokenizer: None,
                sample_interval: None,
                load: serde_json::Value::Null,
                labels: Default::default(),
            }),
            ..RunInput::default()
        };
        for s in spans {
            i.push_span(s, None);
        }
        i
    }

    #[test]
    fn small_run_has_exact_steps_gaps_and_phases() {
        // cap 1: A holds the slot 0..1000; B waits from 0, admitted at 1200 after a
        // 200 ms gap (queue 1, in-flight 0 < cap 1), released at 2000.
        let inp = input(
            vec![
                span(0, 0, 100, 900, 1000, 81),
                span(0, 1200, 1300, 1900, 2000, 61),
            ],
            1,
        );
        let rep = analyze(
            &inp,
            &Options {
                bucket: Some(Duration::from_millis(500)),
                ..Options::default()
            },
        );
        let d = detail(&inp, &rep);
        assert!(d.occupancy.bin.is_none());
        let steps: Vec<_> = d
            .occupancy
            .steps
            .iter()
            .map(|s| (s.at.as_millis(), s.in_flight_max, s.queue_max, s.cap))
            .collect();
        assert_eq!(
            steps,
            vec![
                (0, 1, 1, Some(1)),
                (1000, 0, 1, Some(1)),
                (1200, 1, 0, Some(1))
            ]
        );
        assert_eq!(d.occupancy.end, Duration::from_millis(2000));
        assert_eq!(
            d.gaps,
            vec![GapBand {
                from: Duration::from_millis(1000),
                to: Duration::from_millis(1200),
                share: 1.0
            }]
        );
        assert_eq!(d.waterfall.total, 2);
        assert!(!d.waterfall.sampled());
        assert_eq!(
            d.waterfall.rows[1].admitted,
            Some(Duration::from_millis(1200))
        );
        // TPS buckets cover the window, offset from the origin.
        assert_eq!(d.tps.len(), 4);
        assert_eq!(d.tps[0].start, Duration::ZERO);
        // CDF ends are min and max; the middle is the report's p50.
        let q = d.cdf(CdfMetric::TQueue).unwrap();
        assert_eq!(q.count, 2);
        assert_eq!(q.points.first().unwrap(), &(0.0, 0.0));
        assert_eq!(q.points.last().unwrap(), &(1.2, 1.0));
        let p50 = q.points[(CDF_POINTS - 1) / 2].0;
        assert!((p50 - rep.distributions.t_queue.p50.unwrap().as_secs_f64()).abs() < 1e-12);
        // stream TPS: 81 tokens / 0.8 s and 61 / 0.6 s.
        let sc: Vec<_> = d
            .scatter
            .points
            .iter()
            .map(|(n, r)| (*n, (r.0 * 1000.0).round()))
            .collect();
        assert_eq!(sc, vec![(81, 101250.0), (61, 101667.0)]);
    }

    #[test]
    fn big_runs_are_bounded_and_keep_maxima() {
        // 5,000 short requests through cap 4, one burst of 50 queued at 1 s.
        let mut spans = Vec::new();
        for i in 0..5000i64 {
            let t = i * 10;
            spans.push(span(t, t, t + 2, t + 8, t + 9, 10));
        }
        for k in 0..50 {
            spans.push(span(
                1000,
                1000 + k * 9,
                1000 + k * 9 + 1,
                1000 + k * 9 + 5,
                1000 + k * 9 + 6,
                5,
            ));
        }
        let inp = input(spans, 4);
        let rep = analyze(&inp, &Options::default());
        let d = detail(&inp, &rep);
        assert!(d.occupancy.bin.is_some());
        assert!(d.occupancy.steps.len() <= OCCUPANCY_BINS);
        let max_q = d.occupancy.steps.iter().map(|s| s.queue_max).max().unwrap();
        assert!(max_q >= 49, "the burst's queue survives binning: {max_q}");
        assert_eq!(d.waterfall.rows.len(), MAX_WATERFALL);
        assert_eq!(d.waterfall.total, 5050);
        assert_eq!(d.waterfall.first, (5050 - MAX_WATERFALL) / 2);
        assert!(
            d.waterfall
                .rows
                .windows(2)
                .all(|w| w[0].queued <= w[1].queued)
        );
        assert!(d.waterfall.sampled());
        assert!(d.scatter.points.len() <= MAX_SCATTER);
        assert_eq!(d.scatter.total, 5050);
        for c in &d.cdfs {
            assert!(c.points.len() <= CDF_POINTS);
        }
        // Without a time series there is no TPS data, and nothing breaks.
        assert!(d.tps.is_empty());
        // With a fine one, neighbouring buckets merge, keeping the total.
        let rep = analyze(
            &inp,
            &Options {
                bucket: Some(Duration::from_millis(20)),
                ..Options::default()
            },
        );
        let buckets = rep.time_series.as_ref().unwrap().buckets.len();
        assert!(buckets > MAX_TPS_POINTS);
        let d = detail(&inp, &rep);
        assert!(d.tps.len() <= MAX_TPS_POINTS);
        let total: f64 = d
            .tps
            .iter()
            .map(|p| p.system_tps.unwrap().0 * p.duration.as_secs_f64())
            .sum();
        assert!(
            (total - rep.counts.output_tokens as f64).abs() < 1e-6 * total,
            "{total}"
        );
    }

    #[test]
    fn empty_run_gives_empty_charts() {
        let inp = input(vec![], 2);
        let rep = analyze(&inp, &Options::default());
        let d = detail(&inp, &rep);
        assert!(d.occupancy.steps.is_empty() && d.gaps.is_empty() && d.waterfall.rows.is_empty());
        assert!(d.cdfs.iter().all(|c| c.points.is_empty() && c.count == 0));
    }

    #[test]
    fn even_sample_keeps_ends_and_bounds() {
        assert_eq!(even_sample(3, 10), vec![0, 1, 2]);
        let s = even_sample(10_000, 1000);
        assert_eq!(s.len(), 1000);
        assert_eq!((s[0], s[999]), (0, 9999));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }
}
