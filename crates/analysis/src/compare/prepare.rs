//! A run made ready for the bootstrap: the bucket length, its report with a time
//! series, and the units each criterion resamples.

use std::time::Duration;

use tpscope_model::Status;

use crate::analyze::{Options, analyze};
use crate::input::RunInput;
use crate::report::RunReport;
use crate::stats::Quantity;
use crate::stats::bootstrap::{Unit, auto_block_len};

/// Buckets the block bootstrap aims for over a run's extent.
const TARGET_BUCKETS: u32 = 200;
/// The longest bucket: one second, the report's default.
const MAX_BUCKET: Duration = Duration::from_secs(1);
/// The shortest bucket.
const MIN_BUCKET: Duration = Duration::from_millis(1);
/// Below this many buckets or spans, an interval is not trusted (the bootstrap
/// cannot see variation it has no room for).
pub const MIN_UNITS: usize = 10;

/// The bucket length used for a run: its extent (first `queued_at` to last
/// `released_at`) over `TARGET_BUCKETS`, between 1 ms and 1 s, so that short runs
/// still have enough buckets to resample and long ones use the report's 1 s.
pub fn bootstrap_bucket(input: &RunInput) -> Duration {
    let first = input.spans.iter().map(|s| s.queued_at).min();
    let last = input.spans.iter().map(|s| s.released_at).max();
    let extent = first
        .zip(last)
        .and_then(|(a, b)| b.since(a))
        .unwrap_or(MAX_BUCKET);
    let ms = (extent / TARGET_BUCKETS).as_millis();
    Duration::from_millis(ms as u64).clamp(MIN_BUCKET, MAX_BUCKET)
}

/// A run analysed for comparison: its report (with a time series) and the units
/// each criterion resamples.
pub(crate) struct Prepared {
    pub report: RunReport,
    /// Per time bucket: (tokens, seconds).
    pub tokens: Vec<Unit>,
    /// Per time bucket: (gap seconds, seconds).
    pub gaps: Vec<Unit>,
    /// Per span released in the window: (1 if ok, 1 if ok or error).
    pub success: Vec<Unit>,
    /// Per span released in the window: (retries, 1).
    pub retries: Vec<Unit>,
    /// Per time bucket: (requests released in it that met the goals, seconds);
    /// empty without goals.
    pub good: Vec<Unit>,
    pub bucket: Duration,
    pub block_len: usize,
}

pub(crate) fn prepare(input: &RunInput, opts: &Options) -> Prepared {
    let bucket = bootstrap_bucket(input);
    let report = analyze(
        input,
        &Options {
            bucket: Some(bucket),
            ..*opts
        },
    );
    let buckets = report
        .time_series
        .as_ref()
        .map(|t| t.buckets.as_slice())
        .unwrap_or_default();
    let tokens: Vec<Unit> = buckets
        .iter()
        .map(|b| Unit::new(b.tokens, b.duration.as_secs_f64()))
        .collect();
    let gaps: Vec<Unit> = buckets
        .iter()
        .map(|b| Unit::new(b.gap.as_secs_f64(), b.duration.as_secs_f64()))
        .collect();
    // The spans the report's rates count: those released in the window.
    let (mut success, mut retries) = (Vec::new(), Vec::new());
    let good = good_units(input, opts, &report, &tokens, bucket);
    if let Some(w) = report.window {
        for s in input
            .spans
            .iter()
            .filter(|s| s.released_at >= w.start && s.released_at <= w.end)
        {
            success.push(match s.status {
                Status::Ok => Unit::new(1.0, 1.0),
                Status::Error => Unit::new(0.0, 1.0),
                Status::Cancelled => Unit::new(0.0, 0.0),
            });
            retries.push(Unit::new(f64::from(s.retry_count), 1.0));
        }
    }
    // Blocks at least as long as a typical request, so that the correlation a
    // request induces between the buckets it spans stays inside one block.
    let typical = report
        .distributions
        .t_in_flight
        .p50
        .map_or(0.0, Quantity::to_f64);
    let by_request = (typical / bucket.as_secs_f64()).ceil() as usize;
    let block_len = auto_block_len(tokens.len())
        .max(by_request)
        .min(tokens.len().max(1));
    Prepared {
        report,
        tokens,
        gaps,
        success,
        retries,
        good,
        bucket,
        block_len,
    }
}

/// Per time bucket of the report's series: the requests released in it that met
/// the goals, over its seconds, so the ratio of sums is the report's goodput (a
/// release on the window's end counts in the last bucket, as the report counts it).
fn good_units(
    input: &RunInput,
    opts: &Options,
    report: &RunReport,
    buckets: &[Unit],
    bucket: Duration,
) -> Vec<Unit> {
    let (Some(goals), Some(w)) = (opts.goals, report.window) else {
        return Vec::new();
    };
    let mut good = vec![0.0; buckets.len()];
    let b_ns = bucket.as_nanos().max(1) as i64;
    for s in input
        .spans
        .iter()
        .filter(|s| s.released_at >= w.start && s.released_at <= w.end && goals.met_by(s))
    {
        let i = (s.released_at.signed_nanos_since(w.start) / b_ns) as usize;
        if let Some(g) = good.get_mut(i.min(buckets.len().saturating_sub(1))) {
            *g += 1.0;
        }
    }
    good.into_iter()
        .zip(buckets)
        .map(|(n, u)| Unit::new(n, u.den))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::SpanFacts;
    use crate::test_support::{capped_run, ts};
    use tpscope_model::Cause;

    /// Spans through cap 2 with queueing, gaps, failures, a cancellation and retries.
    fn input() -> RunInput {
        let mut input = capped_run(2);
        for i in 0..60i64 {
            let q = i * 150;
            let a = q + (i % 4) * 90;
            let status = match i % 11 {
                3 => Status::Error,
                7 => Status::Cancelled,
                _ => Status::Ok,
            };
            input.push_span(
                SpanFacts {
                    status,
                    error_cause: (status != Status::Ok).then_some(Cause::Http5xx),
                    queued_at: ts(q),
                    admitted_at: Some(ts(a)),
                    first_token_at: Some(ts(a + 40)),
                    last_token_at: Some(ts(a + 240 + i * 3)),
                    released_at: ts(a + 250 + i * 3),
                    output_tokens: 20 + i as u64,
                    input_tokens: None,
                    retry_count: (i % 5 == 0) as u32,
                    retry_causes: Box::default(),
                    wasted_tokens: 0,
                    client: Default::default(),
                    chunks: None,
                    session: None,
                },
                None,
            );
        }
        input
    }

    fn ratio_of_units(units: &[Unit]) -> f64 {
        let num: f64 = units.iter().map(|u| u.num).sum();
        let den: f64 = units.iter().map(|u| u.den).sum();
        num / den
    }

    #[test]
    fn bootstrap_units_reproduce_the_report_values() {
        // The bootstrap resamples units whose ratio must be the report's figure, or
        // its intervals would be centred on a different number than the one shown.
        let inp = input();
        let p = prepare(&inp, &Options::default());
        let r = &p.report;
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        assert!(close(ratio_of_units(&p.tokens), r.system_tps.unwrap().0));
        assert!(close(ratio_of_units(&p.gaps), r.gap_fraction.unwrap()));
        assert!(r.gap_fraction.unwrap() > 0.0);
        assert!(close(ratio_of_units(&p.success), r.success_rate.unwrap()));
        assert!(close(ratio_of_units(&p.retries), r.retry_rate.unwrap()));
        assert!(p.good.is_empty());
        // With goals, the goodput units reproduce the report's goodput.
        let opts = Options {
            goals: Some(crate::goodput::parse_goals("ttft:45ms,e2e:400ms").unwrap()),
            ..Options::default()
        };
        let p = prepare(&inp, &opts);
        let g = p.report.goodput.as_ref().unwrap();
        assert!(g.met > 0 && g.met < g.judged);
        assert_eq!(p.good.len(), p.tokens.len());
        assert!(close(
            ratio_of_units(&p.good),
            g.requests_per_second.unwrap()
        ));
        assert!(p.block_len >= 1 && p.block_len <= p.tokens.len());
    }
}
