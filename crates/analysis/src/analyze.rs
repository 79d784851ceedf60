//! From a run's facts to its [`RunReport`]: the options, the window, counts, rates,
//! idle time, the sampled gap estimate, cost and the run's warnings. Distributions
//! are collected by the `collect` module, the time series by [`crate::series`].

use std::time::Duration;

use tpscope_model::{Cause, Occupancy, QueueTimes, Status, Timestamp};

use crate::collect::Collected;
use crate::diagnosis::{client_lag_from_samples, diagnose};
use crate::goodput::{Goals, Tally};
use crate::input::{RunInput, SpanFacts};
use crate::report::*;
use crate::series::{MAX_BUCKETS, time_series, tokens_in};
use crate::server::server_vs_client;
use crate::stats::{TokensPerSecond, ratio};
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

/// The share of a sweep level's requests that must meet the goals (`--slo-percentile 90`).
pub const DEFAULT_SLO_SHARE: f64 = 0.9;

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
    /// Latency goals for goodput (docs/design.md §15); `None`: no goodput section.
    pub goals: Option<Goals>,
    /// A sweep level meets the goals when at least this share of its requests
    /// met them (`--slo-percentile 90` is 0.9).
    pub slo_share: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            window: WindowSpec::Full,
            bucket: None,
            prices: Prices::default(),
            gap_disagreement: 0.02,
            goals: None,
            slo_share: DEFAULT_SLO_SHARE,
        }
    }
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

/// Analyses one run.
pub fn analyze(input: &RunInput, opts: &Options) -> RunReport {
    let mut warnings: Vec<String> = scaled_time_warning(input).into_iter().collect();
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
    let ramp = match (&time_series, &window) {
        (Some(ts), Some(w)) => crate::ramp::ramp_follow(input, ts, w),
        _ => None,
    };
    let diagnosis = window.map(|_| {
        let lag = client_lag_from_samples(&input.samples, input.sample_interval());
        diagnose(input, &sweep, (w0, w1), lag)
    });
    drop(sweep);

    let mut counts = Counts::default();
    let mut collected = Collected::new(input.spans.len());
    let mut goodput = opts.goals.map(Tally::new);
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
                if s.is_backlog_left() {
                    counts.backlog_left += 1;
                    continue;
                }
                let cause = s.error_cause.unwrap_or(if s.status == Status::Cancelled {
                    Cause::Cancelled
                } else {
                    Cause::Disconnect
                });
                counts.errors_by_cause.add(cause);
            }
        }
    }

    if matches!(opts.window, WindowSpec::Range { .. })
        && counts.spans == 0
        && let (Some(w), Some(f)) = (window, full)
    {
        warnings.push(format!(
            "the window {:.3}–{:.3} s holds no spans (the run covers \
             {:.3}–{:.3} s after its start): the window is empty",
            w.from.as_secs_f64(),
            w.to.as_secs_f64(),
            f.from.as_secs_f64(),
            f.to.as_secs_f64()
        ));
    }
    let win_s = win_ns as f64 / 1e9;
    let system_tps = ratio(window_tokens, win_s).map(TokensPerSecond);
    let gap_fraction = ratio(integrals.gap_ns as f64, win_ns as f64);
    let mut utilization = if integrals.uncapped_ns == 0 {
        ratio(integrals.in_flight_ns, integrals.cap_ns)
    } else {
        None
    };
    // More in flight than the cap allows cannot happen in one run: the log holds
    // merged runs or is corrupt, and a utilization above 100 % would mislead.
    if let Some(u) = utilization.filter(|u| *u > 1.0 + 1e-9) {
        warnings.push(format!(
            "more spans were in flight than the cap allows (utilization would be {:.0} %): \
             the log may hold merged runs or be corrupt; utilization is not shown",
            u * 100.0
        ));
        utilization = None;
    }

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

    let summaries = collected.summarise();
    let server = server_vs_client(
        input,
        (w0, w1),
        summaries.distributions.t_first_token.mean,
        summaries.distributions.t_queue.mean,
        &mut warnings,
    );

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

    let quality = crate::measurement_quality(input, in_window);
    if let Some(w) = &quality.warning {
        warnings.push(w.clone());
    }
    let tokenizer = input.run.as_ref().and_then(|r| r.tokenizer.as_deref());
    let count_check = input.count_tally.finish(tokenizer);
    if let Some(w) = count_check.as_ref().and_then(|c| c.warning.as_ref()) {
        warnings.push(w.clone());
    }
    let mut report = RunReport {
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
        simulated: input.load_field("simulator").is_some(),
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
        error_messages: input.error_messages.top(crate::errors::SHOWN_PER_CAUSE),
        window,
        steady_window,
        success_rate: ratio(counts.ok as f64, (counts.ok + counts.error) as f64),
        retry_rate: ratio(counts.retries as f64, counts.spans as f64),
        request_throughput: ratio(counts.ok as f64, win_s),
        total_token_throughput: (counts.ok_without_input_tokens == 0)
            .then(|| ratio((counts.input_tokens + counts.output_tokens) as f64, win_s))
            .flatten()
            .map(TokensPerSecond),
        counts,
        system_tps,
        gap_fraction,
        gap_fraction_sampled,
        gap_fraction_of_backlog: ratio(integrals.gap_ns as f64, integrals.backlog_ns as f64),
        utilization,
        mean_in_flight: ratio(integrals.in_flight_ns, win_ns as f64),
        mean_queue_depth: ratio(integrals.queue_ns, win_ns as f64),
        idle: Idle {
            gap_time: Some(integrals.gap()),
            backlog_time: Some(integrals.backlog()),
            samples: n_samples,
        },
        distributions: summaries.distributions,
        conventional: summaries.conventional,
        missing: summaries.missing,
        measurement_quality: quality,
        output_length: summaries.output_length,
        stream_tps_by_output_length: summaries.by_length,
        cost,
        goodput: goodput.map(|g| g.finish(win_s)),
        closed_loop: input.closed_loop(),
        time_series,
        ramp,
        sessions: crate::sessions::session_report(&input.spans),
        count_check,
        server,
        diagnosis,
        warnings,
    };
    if queue_unmeasured(input) {
        forget_queue(&mut report);
    }
    report
}

/// Whether the run's producer recorded no queue or schedule times (an importer
/// says so in the run record): its spans' `queued_at` is then the send time, not
/// a measurement.
fn queue_unmeasured(input: &RunInput) -> bool {
    input
        .run
        .as_ref()
        .is_some_and(|r| r.queue_times == QueueTimes::Unmeasured)
}

/// Without queue times, queue time, the user's TTFT and the gap figures cannot be
/// known: absent, never 0 (docs/design.md §3).
fn forget_queue(r: &mut RunReport) {
    r.gap_fraction = None;
    r.gap_fraction_sampled = None;
    r.gap_fraction_of_backlog = None;
    r.mean_queue_depth = None;
    r.distributions.t_queue = Default::default();
    r.distributions.ttft_user = Default::default();
    r.idle.gap_time = None;
    r.idle.backlog_time = None;
    // Every state of the diagnosis starts from whether work waited.
    r.diagnosis = None;
    r.warnings.push(
        "the producer recorded no queue or schedule times: queue time, the user's TTFT \
         and the gap fraction are not known"
            .into(),
    );
}

/// A run of the built-in simulator at another speed than real time (the run
/// record's `load.simulator.speed`) has scaled times: said, so its figures are
/// not read as a GPU's.
fn scaled_time_warning(input: &RunInput) -> Option<String> {
    let speed = input
        .run
        .as_ref()?
        .load
        .get("simulator")?
        .get("speed")?
        .as_str()?;
    match speed {
        "realtime" => None,
        "max" => Some(
            "times are not real: the built-in simulator ran as fast as it could (speed max), \
             so durations and rates measure tpscope and the simulator, not its GPU model"
                .into(),
        ),
        f => Some(format!(
            "times are scaled: the built-in simulator ran {f}× faster than real time \
             (--sim-speed {f}), so durations are 1/{f} and rates {f}× what its GPU model gives"
        )),
    }
}
