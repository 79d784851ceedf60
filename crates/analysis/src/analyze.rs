//! From a run's facts to its [`RunReport`]: windows, counts, rates, idle time,
//! distributions, length buckets, time series and cost.

use std::collections::BTreeMap;
use std::time::Duration;

use tpscope_model::{Cause, Occupancy, Status, Timestamp};

use crate::input::{RunInput, SpanFacts};
use crate::report::*;
use crate::stats::{Summary, Tokens, TokensPerSecond, ratio};
use crate::sweep::{Integrals, Sweep};

/// Which window the figures cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WindowSpec {
    /// First `queued_at` to last `released_at`.
    #[default]
    Full,
    /// From in-flight first reaching the cap to the backlog last emptying (falls back
    /// to the full window, with a warning, when the run has no such stretch).
    Steady,
    /// `[from, to]` as offsets from the run's start.
    Range {
        /// Start offset.
        from: Duration,
        /// End offset (after `from`).
        to: Duration,
    },
}

/// Prices for the cost section (any currency; the report uses the same one).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Prices {
    /// Price of the deployment per hour.
    pub per_hour: Option<f64>,
    /// Price per million input tokens.
    pub per_mtok_in: Option<f64>,
    /// Price per million output tokens.
    pub per_mtok_out: Option<f64>,
}

impl Prices {
    /// Whether any price is set.
    pub fn any(&self) -> bool {
        self.per_hour.is_some() || self.per_mtok_in.is_some() || self.per_mtok_out.is_some()
    }
}

/// How to analyse a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// The window.
    pub window: WindowSpec,
    /// Bucket length of the time series (`None`: no series).
    pub bucket: Option<Duration>,
    /// Prices for the cost section.
    pub prices: Prices,
    /// Warn when the exact and sampled gap fractions differ by more than this.
    pub gap_disagreement: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            window: WindowSpec::Full,
            bucket: None,
            prices: Prices::default(),
            gap_disagreement: 0.02,
        }
    }
}

/// The most buckets a time series may have; a finer bucket is refused by a warning.
pub const MAX_BUCKETS: u64 = 1_000_000;

/// Output-length bucket edges for stream TPS by length (inclusive upper bounds).
pub const LENGTH_EDGES: [u64; 5] = [16, 64, 256, 1024, 4096];

/// Why a span lacks a metric.
pub mod missing {
    /// The span never took a slot.
    pub const NOT_ADMITTED: &str = "not_admitted";
    /// No chunk carrying output arrived.
    pub const NO_FIRST_TOKEN: &str = "no_first_token";
    /// First and last token arrived at the same instant (one chunk).
    pub const ZERO_STREAM_TIME: &str = "zero_stream_time";
    /// Admission and release at the same instant.
    pub const ZERO_IN_FLIGHT_TIME: &str = "zero_in_flight_time";
    /// One output token: no gap between tokens.
    pub const SINGLE_TOKEN: &str = "single_token";
    /// Chunk arrivals were not recorded.
    pub const NO_CHUNKS_RECORDED: &str = "no_chunks_recorded";
}

fn window_of(kind: WindowKind, start: Timestamp, end: Timestamp, origin: Timestamp) -> Window {
    Window {
        kind,
        start,
        end,
        duration: end.since(start).unwrap_or_default(),
        from: start.since(origin).unwrap_or_default(),
        to: end.since(origin).unwrap_or_default(),
    }
}

/// The steady-state window: from the first instant in-flight reaches the cap to the
/// last instant the backlog empties. `None` without a cap, a backlog, or a stretch
/// between the two.
pub fn steady_bounds(sweep: &Sweep) -> Option<(Timestamp, Timestamp)> {
    let mut start = None;
    let mut last_backlog_end = None;
    for seg in sweep.segments() {
        if start.is_none() && seg.occupancy().at_cap() {
            start = Some(seg.start);
        }
        if seg.is_backlog() {
            last_backlog_end = Some(seg.end);
        }
    }
    let (s, e) = (start?, last_backlog_end?);
    (e > s).then_some((s, e))
}

/// Tokens of a span attributed to `[a, b]`: at recorded chunk arrivals when present,
/// else spread uniformly over `[first_token_at, last_token_at]` (a point mass at
/// the first token when the two coincide). A point on `b` counts when `closed_end`.
fn tokens_in(span: &SpanFacts, a: i64, b: i64, closed_end: bool) -> f64 {
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

struct Collected {
    t_queue: Vec<f64>,
    t_first_token: Vec<f64>,
    ttft_user: Vec<f64>,
    t_stream: Vec<f64>,
    t_in_flight: Vec<f64>,
    t_post: Vec<f64>,
    stream_tps: Vec<f64>,
    end_to_end_tps: Vec<f64>,
    tpot: Vec<f64>,
    decode_tps: Vec<f64>,
    itl: Vec<f64>,
    output_len: Vec<f64>,
    by_length: Vec<Vec<f64>>,
    missing: BTreeMap<&'static str, BTreeMap<&'static str, u64>>,
}

impl Collected {
    fn new(n: usize) -> Collected {
        let v = || Vec::with_capacity(n);
        Collected {
            t_queue: v(),
            t_first_token: v(),
            ttft_user: v(),
            t_stream: v(),
            t_in_flight: v(),
            t_post: v(),
            stream_tps: v(),
            end_to_end_tps: v(),
            tpot: v(),
            decode_tps: v(),
            itl: Vec::new(),
            output_len: v(),
            by_length: vec![Vec::new(); LENGTH_EDGES.len() + 1],
            missing: BTreeMap::new(),
        }
    }

    fn lack(&mut self, metric: &'static str, reason: &'static str) {
        *self
            .missing
            .entry(metric)
            .or_default()
            .entry(reason)
            .or_default() += 1;
    }

    /// Collects the metrics of one ok span, or the reason each is absent.
    fn add(&mut self, s: &SpanFacts) {
        let n = s.output_tokens;
        self.output_len.push(n as f64);
        let m = span_metrics(s);
        let reason = |zero: &'static str| {
            if s.admitted_at.is_none() {
                missing::NOT_ADMITTED
            } else if s.first_token_at.is_none() {
                missing::NO_FIRST_TOKEN
            } else {
                zero
            }
        };
        let d = |v: Option<Duration>| v.map(|d| d.as_secs_f64());
        let cols: [(&'static str, Option<f64>, &'static str); 10] = [
            ("t_queue", d(m.t_queue), missing::NOT_ADMITTED),
            ("t_first_token", d(m.t_first_token), missing::NO_FIRST_TOKEN),
            ("ttft_user", d(m.ttft_user), missing::NO_FIRST_TOKEN),
            ("t_stream", d(m.t_stream), missing::NO_FIRST_TOKEN),
            ("t_in_flight", d(m.t_in_flight), missing::NOT_ADMITTED),
            ("t_post", d(m.t_post), missing::NO_FIRST_TOKEN),
            (
                "stream_tps",
                m.stream_tps.map(|r| r.0),
                missing::ZERO_STREAM_TIME,
            ),
            (
                "end_to_end_tps",
                m.end_to_end_tps.map(|r| r.0),
                missing::ZERO_IN_FLIGHT_TIME,
            ),
            ("tpot", d(m.tpot), missing::SINGLE_TOKEN),
            (
                "decode_tps",
                m.decode_tps.map(|r| r.0),
                if n <= 1 {
                    missing::SINGLE_TOKEN
                } else {
                    missing::ZERO_STREAM_TIME
                },
            ),
        ];
        for (i, (name, value, zero)) in cols.into_iter().enumerate() {
            match value {
                Some(v) => match i {
                    0 => self.t_queue.push(v),
                    1 => self.t_first_token.push(v),
                    2 => self.ttft_user.push(v),
                    3 => self.t_stream.push(v),
                    4 => self.t_in_flight.push(v),
                    5 => self.t_post.push(v),
                    6 => self.stream_tps.push(v),
                    7 => self.end_to_end_tps.push(v),
                    8 => self.tpot.push(v),
                    _ => self.decode_tps.push(v),
                },
                None => {
                    let why = if name == "end_to_end_tps" && s.admitted_at.is_none() {
                        missing::NOT_ADMITTED
                    } else if matches!(name, "t_queue" | "t_in_flight" | "end_to_end_tps") {
                        zero
                    } else {
                        reason(zero)
                    };
                    self.lack(name, why);
                }
            }
        }
        if let Some(tps) = m.stream_tps {
            let bucket = LENGTH_EDGES
                .iter()
                .position(|e| n <= *e)
                .unwrap_or(LENGTH_EDGES.len());
            self.by_length[bucket].push(tps.0);
        }
        match s.chunks.as_deref() {
            _ if s.first_token_at.is_none() => {
                self.lack("inter_token_latency", reason(missing::NO_FIRST_TOKEN))
            }
            Some(chunks) if chunks.len() > 1 => {
                for w in chunks.windows(2) {
                    let gap = w[1].offset.saturating_sub(w[0].offset).as_secs_f64();
                    let k = w[1].tokens.max(1);
                    let per = gap / f64::from(k);
                    self.itl.extend(std::iter::repeat_n(per, k as usize));
                }
            }
            Some(_) => self.lack("inter_token_latency", missing::SINGLE_TOKEN),
            None => self.lack("inter_token_latency", missing::NO_CHUNKS_RECORDED),
        }
    }
}

/// The derived metrics of one span (DESIGN.md §3); each is `None` when it cannot
/// be computed for the span (missing instant, zero duration, too few tokens).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpanMetrics {
    /// admitted_at − queued_at.
    pub t_queue: Option<Duration>,
    /// first_token_at − admitted_at.
    pub t_first_token: Option<Duration>,
    /// first_token_at − queued_at.
    pub ttft_user: Option<Duration>,
    /// last_token_at − first_token_at.
    pub t_stream: Option<Duration>,
    /// released_at − admitted_at.
    pub t_in_flight: Option<Duration>,
    /// released_at − last_token_at.
    pub t_post: Option<Duration>,
    /// output_tokens / t_stream (t_stream > 0).
    pub stream_tps: Option<TokensPerSecond>,
    /// output_tokens / t_in_flight (t_in_flight > 0).
    pub end_to_end_tps: Option<TokensPerSecond>,
    /// t_stream / (output_tokens − 1) (at least 2 tokens).
    pub tpot: Option<Duration>,
    /// (output_tokens − 1) / t_stream (at least 2 tokens, t_stream > 0).
    pub decode_tps: Option<TokensPerSecond>,
}

/// The derived metrics of one span. The one place they are computed.
pub fn span_metrics(s: &SpanFacts) -> SpanMetrics {
    let n = s.output_tokens;
    let adm = s.admitted_at;
    let first = s.first_token_at.filter(|_| adm.is_some());
    let last = s.last_token_at.filter(|_| first.is_some());
    let t_in_flight = adm.and_then(|a| s.released_at.since(a));
    let t_stream = first.zip(last).and_then(|(f, l)| l.since(f));
    let per_sec = |num: f64, d: Option<Duration>| {
        d.filter(|d| !d.is_zero())
            .map(|d| TokensPerSecond(num / d.as_secs_f64()))
    };
    SpanMetrics {
        t_queue: adm.and_then(|a| a.since(s.queued_at)),
        t_first_token: adm.zip(first).and_then(|(a, f)| f.since(a)),
        ttft_user: first.and_then(|f| f.since(s.queued_at)),
        t_stream,
        t_in_flight,
        t_post: last.and_then(|l| s.released_at.since(l)),
        stream_tps: per_sec(n as f64, t_stream),
        end_to_end_tps: per_sec(n as f64, t_in_flight),
        tpot: t_stream
            .filter(|_| n > 1)
            .map(|d| d / (n - 1).min(u64::from(u32::MAX)) as u32),
        decode_tps: per_sec(n.saturating_sub(1) as f64, t_stream).filter(|_| n > 1),
    }
}

/// Analyses one run.
pub fn analyze(input: &RunInput, opts: &Options) -> RunReport {
    let mut warnings = Vec::new();
    let sweep = Sweep::new(input);
    let first_queued = input.spans.iter().map(|s| s.queued_at).min();
    let last_released = input.spans.iter().map(|s| s.released_at).max();
    let origin = input.origin().or(first_queued).unwrap_or_default();
    let steady_window =
        steady_bounds(&sweep).map(|(s, e)| window_of(WindowKind::Steady, s, e, origin));
    let full = first_queued
        .zip(last_released)
        .map(|(s, e)| window_of(WindowKind::Full, s, e, origin));
    let window = match opts.window {
        WindowSpec::Full => full,
        WindowSpec::Steady => match steady_window {
            Some(w) => Some(w),
            None => {
                warnings.push(
                    "no steady-state window (in-flight never reached the cap while work waited); \
                     figures cover the full window"
                        .to_string(),
                );
                full
            }
        },
        WindowSpec::Range { from, to } => Some(window_of(
            WindowKind::Range,
            origin.after(from),
            origin.after(to),
            origin,
        )),
    };

    let (w0, w1) = window.map(|w| (w.start, w.end)).unwrap_or_default();
    let win_ns = w1.signed_nanos_since(w0);
    let in_window = |s: &SpanFacts| s.released_at >= w0 && s.released_at <= w1;

    // Everything that needs the sweep first, so its edges are freed before the
    // per-metric vectors are built (peak memory stays near one copy of each).
    let integrals = if window.is_some() {
        sweep.integrate(w0, w1)
    } else {
        Integrals::default()
    };
    let time_series = match (opts.bucket, window) {
        (Some(b), Some(w)) if !b.is_zero() => {
            let n = (w.duration.as_nanos().div_ceil(b.as_nanos())).max(1) as u64;
            if n > MAX_BUCKETS {
                warnings.push(format!(
                    "a {b:?} bucket would make {n} buckets (more than {MAX_BUCKETS}): no time series"
                ));
                None
            } else {
                Some(time_series(input, &sweep, w, b, n as usize))
            }
        }
        _ => None,
    };
    drop(sweep);

    let mut counts = Counts::default();
    let mut collected = Collected::new(input.spans.len());
    let mut window_tokens = 0.0;
    let (mut in_cost, mut out_cost_tokens) = (0u64, 0u64);
    for s in &input.spans {
        if s.status == Status::Ok && window.is_some() {
            window_tokens += tokens_in(s, w0.unix_nanos(), w1.unix_nanos(), true);
        }
        if !in_window(s) {
            continue;
        }
        counts.spans += 1;
        counts.retries += u64::from(s.retry_count);
        counts.wasted_tokens += s.wasted_tokens;
        for c in &s.retry_causes {
            *counts
                .retries_by_cause
                .entry(c.as_str().to_string())
                .or_default() += 1;
        }
        match s.status {
            Status::Ok => {
                counts.ok += 1;
                counts.output_tokens += s.output_tokens;
                out_cost_tokens += s.output_tokens;
                match s.input_tokens {
                    Some(i) => {
                        counts.input_tokens += i;
                        in_cost += i;
                    }
                    None => counts.ok_without_input_tokens += 1,
                }
                collected.add(s);
            }
            Status::Error | Status::Cancelled => {
                if s.status == Status::Error {
                    counts.error += 1;
                } else {
                    counts.cancelled += 1;
                }
                let cause = s.error_cause.unwrap_or(if s.status == Status::Cancelled {
                    Cause::Cancelled
                } else {
                    Cause::Disconnect
                });
                *counts
                    .errors_by_cause
                    .entry(cause.as_str().to_string())
                    .or_default() += 1;
            }
        }
    }

    let win_s = win_ns as f64 / 1e9;
    let system_tps = ratio(window_tokens, win_s).map(TokensPerSecond);
    let gap_fraction = ratio(integrals.gap_ns as f64, win_ns as f64);
    let utilization = if integrals.uncapped_ns == 0 {
        ratio(integrals.in_flight_ns, integrals.cap_ns)
    } else {
        None
    };

    // The sampled estimate: the cap a sample sees is the last one stated by a
    // sample at or before it, else the run's.
    let mut cap = input.run_cap();
    let (mut n_samples, mut n_gap) = (0u64, 0u64);
    let mut samples: Vec<_> = input.samples.clone();
    samples.sort_by_key(|s| s.at);
    for smp in &samples {
        if smp.cap.is_some() {
            cap = smp.cap;
        }
        if window.is_some() && smp.at >= w0 && smp.at <= w1 {
            n_samples += 1;
            let occ = Occupancy {
                in_flight: smp.in_flight,
                queue_depth: smp.queue_depth,
                cap,
            };
            if occ.is_gap() {
                n_gap += 1;
            }
        }
    }
    let gap_fraction_sampled = ratio(n_gap as f64, n_samples as f64);
    if let (Some(exact), Some(sampled)) = (gap_fraction, gap_fraction_sampled)
        && (exact - sampled).abs() > opts.gap_disagreement
    {
        warnings.push(format!(
            "exact gap fraction {exact:.4} and sampled {sampled:.4} differ by more than {}: \
             samples may be too sparse, or spans are missing from the log",
            opts.gap_disagreement
        ));
    }
    if input.run.is_none() {
        warnings.push(
            "no `run` record: the cap is unknown, so every queued moment counts as a gap".into(),
        );
    } else if input.run_cap().is_none() && integrals.backlog_ns > 0 {
        warnings.push("the run has no cap: every queued moment counts as a gap".into());
    }
    if input.end.is_none() {
        warnings.push("no `end` record: the run may be incomplete".into());
    }
    let sources = input.effective_token_sources();
    if sources.len() > 1 {
        let list: Vec<String> = sources.iter().map(|(s, n)| format!("{s} ({n})")).collect();
        warnings.push(format!(
            "spans count tokens from different sources: {}",
            list.join(", ")
        ));
    }

    let summ_d = |v: &mut Vec<f64>| Summary::<Duration>::of(v);
    let summ_r = |v: &mut Vec<f64>| Summary::<TokensPerSecond>::of(v);
    let c = &mut collected;
    let distributions = Distributions {
        t_queue: summ_d(&mut c.t_queue),
        t_first_token: summ_d(&mut c.t_first_token),
        ttft_user: summ_d(&mut c.ttft_user),
        t_stream: summ_d(&mut c.t_stream),
        t_in_flight: summ_d(&mut c.t_in_flight),
        t_post: summ_d(&mut c.t_post),
        stream_tps: summ_r(&mut c.stream_tps),
        end_to_end_tps: summ_r(&mut c.end_to_end_tps),
    };
    let conventional = Conventional {
        tpot: summ_d(&mut c.tpot),
        decode_tps: summ_r(&mut c.decode_tps),
        inter_token_latency: summ_d(&mut c.itl),
    };
    let mut lower = 1u64;
    let stream_tps_by_output_length = c
        .by_length
        .iter_mut()
        .enumerate()
        .map(|(i, v)| {
            let max = LENGTH_EDGES.get(i).copied();
            let b = LengthBucket {
                min_tokens: lower,
                max_tokens: max,
                stream_tps: summ_r(v),
            };
            lower = max.map_or(lower, |m| m + 1);
            b
        })
        .collect();

    let cost = opts.prices.any().then(|| {
        let per_hour = opts.prices.per_hour;
        let hours = win_s / 3600.0;
        let token_cost = (opts.prices.per_mtok_in.is_some() || opts.prices.per_mtok_out.is_some())
            .then(|| {
                (in_cost as f64 * opts.prices.per_mtok_in.unwrap_or(0.0)
                    + out_cost_tokens as f64 * opts.prices.per_mtok_out.unwrap_or(0.0))
                    / 1e6
            });
        Cost {
            price_per_hour: per_hour,
            per_million_output_tokens: per_hour
                .zip(system_tps)
                .and_then(|(p, tps)| ratio(p, tps.0 * 3600.0))
                .map(|v| v * 1e6),
            per_completion: per_hour.and_then(|p| ratio(p, ratio(counts.ok as f64, hours)?)),
            price_per_mtok_in: opts.prices.per_mtok_in,
            price_per_mtok_out: opts.prices.per_mtok_out,
            token_cost_total: token_cost,
            token_cost_per_completion: token_cost.and_then(|t| ratio(t, counts.ok as f64)),
        }
    });
    if cost.as_ref().is_some_and(|c| c.price_per_mtok_in.is_some())
        && counts.ok_without_input_tokens > 0
    {
        warnings.push(format!(
            "{} ok spans do not know their input tokens: the input part of the token cost leaves them out",
            counts.ok_without_input_tokens
        ));
    }

    RunReport {
        run_id: input.run_id.clone(),
        tool: input
            .run
            .as_ref()
            .map(|r| r.tool.clone())
            .filter(|t| !t.is_empty()),
        target: input
            .run
            .as_ref()
            .map(|r| r.target.clone())
            .unwrap_or_default(),
        labels: input
            .run
            .as_ref()
            .map(|r| r.labels.clone())
            .unwrap_or_default(),
        cap: input.run_cap(),
        token_sources: sources
            .into_iter()
            .map(|(s, n)| SourceCount {
                source: s.to_string(),
                spans: n,
            })
            .collect(),
        complete: input.end.is_some(),
        window,
        steady_window,
        success_rate: ratio(counts.ok as f64, (counts.ok + counts.error) as f64),
        retry_rate: ratio(counts.retries as f64, counts.spans as f64),
        counts,
        system_tps,
        gap_fraction,
        gap_fraction_sampled,
        gap_fraction_of_backlog: ratio(integrals.gap_ns as f64, integrals.backlog_ns as f64),
        utilization,
        mean_in_flight: ratio(integrals.in_flight_ns, win_ns as f64),
        mean_queue_depth: ratio(integrals.queue_ns, win_ns as f64),
        idle: Idle {
            gap_time: integrals.gap(),
            backlog_time: integrals.backlog(),
            samples: n_samples,
        },
        distributions,
        conventional,
        missing: collected.missing,
        output_length: Summary::<Tokens>::of(&mut collected.output_len),
        stream_tps_by_output_length,
        cost,
        time_series,
        warnings,
    }
}

fn time_series(
    input: &RunInput,
    sweep: &Sweep,
    w: Window,
    bucket: Duration,
    n: usize,
) -> TimeSeries {
    let w0 = w.start.unix_nanos();
    let w1 = w.end.unix_nanos();
    let b = bucket.as_nanos() as i64;
    let mut tokens = vec![0.0; n];
    let mut integ = vec![Integrals::default(); n];
    let mut caps = vec![None; n];
    let idx = |t: i64| (((t - w0).max(0) / b) as usize).min(n - 1);
    for s in input.spans.iter().filter(|s| s.status == Status::Ok) {
        let (Some(f), Some(l)) = (s.first_token_at, s.last_token_at) else {
            continue;
        };
        let (f, l) = (f.unix_nanos().max(w0), l.unix_nanos().min(w1));
        if f > l {
            continue;
        }
        for (i, slot) in tokens.iter_mut().enumerate().take(idx(l) + 1).skip(idx(f)) {
            let a = w0 + i as i64 * b;
            let last = i == n - 1;
            *slot += tokens_in(s, a, if last { w1 } else { a + b }, last);
        }
    }
    for seg in sweep.segments() {
        let (s, e) = (seg.start.unix_nanos().max(w0), seg.end.unix_nanos().min(w1));
        if e <= s {
            continue;
        }
        for (i, slot) in integ
            .iter_mut()
            .enumerate()
            .take(idx(e - 1) + 1)
            .skip(idx(s))
        {
            let a = (w0 + i as i64 * b).max(s);
            let z = (w0 + (i as i64 + 1) * b).min(e);
            slot.add(&seg, z - a);
            caps[i] = seg.cap;
        }
    }
    let buckets = (0..n)
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
