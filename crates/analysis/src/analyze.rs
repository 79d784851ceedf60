//! From a run's facts to its [`RunReport`], in stages, each a function beside the
//! section it computes: the window ([`crate::window`]), the steps' figures
//! (the series' occupancy, the ledger, the diagnosis), one pass over the
//! spans ([`crate::counts`]: distributions by `collect`, the series' tokens,
//! the what-if's replay), the ramp, idle time and the
//! gap ([`crate::idle`]), the server's side, cost ([`crate::cost`]) and the
//! measurement's quality. Warnings are pushed in that order.

use tpscope_model::QueueTimes;

use crate::counts::{WindowSpans, window_spans};
use crate::diagnosis::{client_lag_from_samples, diagnose_with};
use crate::idle::idle;
use crate::input::RunInput;
use crate::report::{RunReport, SourceCount};
use crate::series::window_series;
use crate::server::server_vs_client;
use crate::stats::{TokensPerSecond, ratio};
use crate::steps::{Integrals, Steps};
use crate::window::{empty_range_warning, windows};

pub use crate::cost::Prices;
pub use crate::settings::{DEFAULT_SLO_SHARE, Options};
pub use crate::window::{WindowSpec, steady_bounds};

/// Analyses one run.
pub fn analyze(input: &RunInput, opts: &Options) -> RunReport {
    let mut warnings: Vec<String> = scaled_time_warning(input).into_iter().collect();
    let steps = Steps::new(input);
    let windows = windows(input, &steps, opts.window, &mut warnings);
    let window = windows.chosen;
    let (w0, w1) = windows.bounds();
    // Everything that needs the steps first, so its edges are freed before the
    // per-metric vectors are built (peak memory stays near one copy of each).
    let mut series = window_series(window, opts.bucket, &mut warnings);
    // The ledger's pass over the steps gives the idle stage's integrals too.
    let (capacity, integrals) = match window {
        Some(_) => {
            let buckets = series.as_ref().map(|t| t.buckets());
            let unmeasured = queue_unmeasured(input);
            // Its walk of the steps fills the series' occupancy too.
            let (c, i) = crate::ledger::capacity_integrals_and(
                input,
                &steps,
                (w0, w1),
                buckets,
                opts.handoff,
                unmeasured,
                |seg| {
                    if let Some(t) = &mut series {
                        t.add_segment(seg);
                    }
                },
            );
            (Some(c), i)
        }
        None => (None, Integrals::default()),
    };
    let diagnosis = window.map(|_| {
        let lag = client_lag_from_samples(
            &input.samples,
            input.sample_interval(),
            input.sample_heartbeat(),
        );
        diagnose_with(input, &steps, (w0, w1), lag, Some(&integrals))
    });
    drop(steps);

    let replay = (!queue_unmeasured(input))
        .then(|| crate::whatif::Replay::new(input))
        .flatten();
    let spans = window_spans(
        input,
        window,
        opts.goals,
        replay,
        series.as_mut().map(|t| &mut t.tokens),
    );
    let time_series = series.map(|t| t.finish(input));
    let ramp = match (&time_series, &window) {
        (Some(ts), Some(w)) => crate::ramp::ramp_follow(input, ts, w),
        _ => None,
    };
    if let Some(w) = empty_range_warning(opts.window, &windows, spans.counts.spans) {
        warnings.push(w);
    }
    let win_s = w1.signed_nanos_since(w0) as f64 / 1e9;
    let system_tps = ratio(spans.window_tokens, win_s).map(TokensPerSecond);
    let window_tokens = spans.window_tokens;
    let idle = idle(
        input,
        &integrals,
        window,
        opts.gap_disagreement,
        &mut warnings,
    );
    let sources = run_warnings(input, &mut warnings);

    let WindowSpans {
        counts,
        collected,
        goodput,
        quality,
        replay,
        any_session,
        ..
    } = spans;
    let summaries = collected.summarise();
    let server = server_vs_client(
        input,
        (w0, w1),
        summaries.distributions.t_first_token.mean,
        summaries.distributions.t_queue.mean,
        &mut warnings,
    );
    let energy = crate::energy::energy(
        input,
        (w0, w1),
        window_tokens,
        idle.gap_fraction,
        opts.prices.per_kwh,
    );
    let cost = crate::cost::cost(&opts.prices, win_s, system_tps, &counts, &mut warnings);
    let quality = quality.finish(input);
    if let Some(w) = &quality.warning {
        warnings.push(w.clone());
    }
    let tokenizer = input.run.as_ref().and_then(|r| r.tokenizer.as_deref());
    let count_check = input
        .count_tally
        .finish_in(tokenizer, crate::count_check::context_of(input));
    if let Some(w) = count_check.as_ref().and_then(|c| c.warning.as_ref()) {
        warnings.push(w.clone());
    }
    let run = input.run.as_ref();
    let mut report = RunReport {
        run_id: input.run_id.clone(),
        tool: run.map(|r| r.tool.clone()).filter(|t| !t.is_empty()),
        target: input.target(),
        simulated: input.load_field("simulator").is_some(),
        labels: run.map(|r| r.labels.clone()).unwrap_or_default(),
        command: crate::run_command::command(input.load_field("flags_given")),
        cap: input.run_cap(),
        token_sources: sources,
        complete: input.end.is_some(),
        error_messages: input.error_messages.top(crate::errors::SHOWN_PER_CAUSE),
        window,
        steady_window: windows.steady,
        success_rate: ratio(
            counts.status.ok as f64,
            (counts.status.ok + counts.status.error) as f64,
        ),
        retry_rate: ratio(counts.retries as f64, counts.spans as f64),
        request_throughput: ratio(counts.status.ok as f64, win_s),
        total_token_throughput: (counts.ok_without_input_tokens == 0)
            .then(|| ratio((counts.input_tokens + counts.output_tokens) as f64, win_s))
            .flatten()
            .map(TokensPerSecond),
        counts,
        system_tps,
        gap_fraction: idle.gap_fraction,
        gap_fraction_sampled: idle.gap_fraction_sampled,
        gap_fraction_inferred: window
            .filter(|_| crate::infer::queue_times_unstated(input))
            .and_then(|_| {
                let width = opts
                    .pipeline_width
                    .or_else(|| crate::infer::stated_width(input));
                crate::infer::infer_gap(&input.spans, (w0, w1), width)
            }),
        gap_fraction_of_backlog: idle.gap_fraction_of_backlog,
        utilization: idle.utilization,
        mean_in_flight: idle.mean_in_flight,
        mean_queue_depth: idle.mean_queue_depth,
        idle: idle.idle,
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
        sessions: any_session
            .then(|| crate::sessions::session_report(&input.spans))
            .flatten(),
        count_check,
        server,
        energy,
        diagnosis,
        capacity,
        what_if: replay
            .and_then(|r| r.finish(input, system_tps.map(|t| t.0), opts.prices.per_hour)),
        warnings,
    };
    if queue_unmeasured(input) {
        forget_queue(&mut report);
    }
    report
}

/// The run's own warnings (no `end` record, several token sources), and its
/// token sources with their span counts.
fn run_warnings(input: &RunInput, warnings: &mut Vec<String>) -> Vec<SourceCount> {
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
    sources
        .into_iter()
        .map(|(s, n)| SourceCount {
            source: s.to_string(),
            spans: n,
        })
        .collect()
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
