//! Comparison of a candidate run against a baseline (DESIGN.md §5): the four
//! acceptance criteria with bootstrap confidence intervals and a verdict each, the
//! check that the runs count tokens the same way on the same model, and the other
//! headline metrics side by side. Pure: the caller reads the logs.
//!
//! Intervals: system TPS and gap fraction come from a circular block bootstrap over
//! time buckets of the analysed window (a bucket contributes its tokens, or its gap
//! seconds, and its length); success rate and retry rate from an i.i.d. bootstrap
//! over the window's spans. Baseline and candidate are resampled independently and
//! the i-th replicates are paired; the interval is the percentile interval of the
//! paired changes.

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};
use tpscope_model::{Status, TokenSource};

use crate::analyze::{Options, analyze};
use crate::input::RunInput;
use crate::report::RunReport;
use crate::stats::Quantity;
use crate::stats::bootstrap::{
    BootstrapConfig, Interval, Replicates, SplitMix64, Unit, auto_block_len,
    block_ratio_replicates, iid_ratio_replicates, paired_change, percentile_interval,
};

/// The schema name of the JSON comparison.
pub const COMPARE_SCHEMA: &str = "tpscope.compare/1";

/// How much change each criterion demands or tolerates.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    /// System TPS must rise by more than this fraction of the baseline (0.0: any
    /// rise; 0.05: more than 5%).
    pub min_tps_gain: f64,
    /// Success rate may fall by at most this much, in absolute terms (0.01 = one
    /// percentage point).
    pub max_success_drop: f64,
    /// Gap fraction must fall by more than this much, in absolute terms (0.0: any
    /// drop; 0.02: more than two percentage points of the window).
    pub min_gap_drop: f64,
    /// Retry rate (retries per span) may rise by at most this much.
    pub max_retry_rise: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_tps_gain: 0.0,
            max_success_drop: 0.01,
            min_gap_drop: 0.0,
            max_retry_rise: 0.01,
        }
    }
}

/// How to compare two runs.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct CompareConfig {
    /// What each criterion demands.
    pub thresholds: Thresholds,
    /// Resamples, seed and interval level.
    pub bootstrap: BootstrapConfig,
    /// Judge runs even when their token source, tokenizer or model differ (the
    /// differences are then listed in [`Comparison::mismatches`]).
    pub allow_mismatch: bool,
}

/// A criterion's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The whole interval satisfies the criterion.
    Pass,
    /// The whole interval violates it.
    Fail,
    /// The interval spans the threshold, or there is no interval.
    Inconclusive,
    /// Not judged (e.g. the gap criterion when the baseline had no backlog).
    Skipped,
}

impl Verdict {
    /// The word used in every output format.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Skipped => "skipped",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The four acceptance criteria, in the order of DESIGN.md §5.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// System TPS improves.
    SystemTps,
    /// Success rate does not drop.
    SuccessRate,
    /// Gap fraction drops (judged only where the baseline had a backlog).
    GapFraction,
    /// Retry rate does not rise.
    RetryRate,
}

impl Criterion {
    /// The metric's name in DESIGN.md and the JSON report.
    pub fn metric(self) -> &'static str {
        match self {
            Criterion::SystemTps => "system_tps",
            Criterion::SuccessRate => "success_rate",
            Criterion::GapFraction => "gap_fraction",
            Criterion::RetryRate => "retry_rate",
        }
    }

    /// What the criterion demands, in words.
    pub fn demand(self) -> &'static str {
        match self {
            Criterion::SystemTps => "system TPS improves",
            Criterion::SuccessRate => "success rate does not drop",
            Criterion::GapFraction => "gap fraction drops",
            Criterion::RetryRate => "retry rate does not rise",
        }
    }
}

/// How a change is expressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// candidate / baseline − 1.
    Relative,
    /// candidate − baseline.
    Absolute,
}

/// One criterion judged.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CriterionResult {
    /// Which criterion.
    pub criterion: Criterion,
    /// The baseline's value (the same number `tpscope report` prints).
    pub baseline: Option<f64>,
    /// The candidate's value.
    pub candidate: Option<f64>,
    /// How `change`, `interval` and `threshold` are expressed.
    pub change_kind: ChangeKind,
    /// The change from baseline to candidate.
    pub change: Option<f64>,
    /// The bootstrap interval of the change.
    pub interval: Option<Interval>,
    /// The bound the interval is judged against: pass needs the interval above it
    /// (system TPS) or below it (gap fraction), or not past it (success rate: not
    /// below; retry rate: not above).
    pub threshold: f64,
    /// The outcome.
    pub verdict: Verdict,
    /// Why, in a sentence.
    pub reason: String,
}

/// A property the two runs must share to be comparable, and the two values.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mismatch {
    /// `token source`, `tokenizer` or `model`.
    pub what: &'static str,
    /// The baseline's value.
    pub baseline: String,
    /// The candidate's value.
    pub candidate: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} differs: baseline {}, candidate {}",
            self.what, self.baseline, self.candidate
        )
    }
}

/// Comparison refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompareError {
    /// The runs are not comparable (use `allow_mismatch` to compare anyway).
    #[error("the runs are not comparable: {}", list(.0))]
    Mismatch(Vec<Mismatch>),
    /// The bootstrap settings are unusable.
    #[error("{0}")]
    Config(String),
}

fn list(m: &[Mismatch]) -> String {
    m.iter()
        .map(|m| m.to_string())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The unit a headline metric is measured in (renderers format by it).
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

/// One headline metric of both runs, side by side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeadlineRow {
    /// The metric (`system_tps`, `ttft_user p50`, …).
    pub metric: String,
    /// Its unit.
    pub unit: MetricUnit,
    /// Which direction is better.
    pub better: Better,
    /// The baseline's value.
    pub baseline: Option<f64>,
    /// The candidate's value.
    pub candidate: Option<f64>,
    /// candidate − baseline.
    pub change: Option<f64>,
    /// candidate / baseline − 1, when the baseline is not zero.
    pub relative_change: Option<f64>,
}

/// One side of a comparison, in brief.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Side {
    /// The run's id.
    pub run_id: String,
    /// Where the run came from (a file name), as the caller says.
    pub source: String,
    /// The model, when the run record names it.
    pub model: Option<String>,
    /// Token sources with span counts.
    pub token_sources: Vec<String>,
    /// Length of the analysed window.
    #[serde(rename = "window_s", serialize_with = "opt_secs")]
    pub window: Option<Duration>,
    /// Spans released in the window.
    pub spans: u64,
    /// Time buckets the block bootstrap resampled.
    pub buckets: usize,
    /// Length of one bucket.
    #[serde(rename = "bucket_s", serialize_with = "opt_secs")]
    pub bucket: Option<Duration>,
    /// Buckets per resampled block.
    pub block_len: usize,
}

fn opt_secs<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// Bootstrap settings as used, for the record.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BootstrapUsed {
    /// Replicates per run and metric.
    pub resamples: usize,
    /// The seed.
    pub seed: u64,
    /// Interval coverage.
    pub level: f64,
}

/// A whole comparison: what `tpscope compare` prints.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// Always [`COMPARE_SCHEMA`].
    pub schema: &'static str,
    /// The baseline.
    pub baseline: Side,
    /// The candidate.
    pub candidate: Side,
    /// The four criteria, in the order of DESIGN.md §5.
    pub criteria: Vec<CriterionResult>,
    /// Fail if any criterion failed; else inconclusive if any was; else pass.
    pub overall: Verdict,
    /// Differences that would have refused the comparison (compared anyway).
    pub mismatches: Vec<Mismatch>,
    /// The other headline metrics side by side.
    pub headline: Vec<HeadlineRow>,
    /// The thresholds used.
    pub thresholds: Thresholds,
    /// The bootstrap settings used.
    pub bootstrap: BootstrapUsed,
    /// Things a reader should know (e.g. a skipped criterion's consequence).
    pub warnings: Vec<String>,
}

impl Comparison {
    /// The result of one criterion.
    pub fn criterion(&self, c: Criterion) -> Option<&CriterionResult> {
        self.criteria.iter().find(|r| r.criterion == c)
    }
}

/// The token source kinds, tokenizer names and model a run states.
struct Identity {
    kinds: Vec<&'static str>,
    sources: Vec<String>,
    tokenizers: Vec<String>,
    model: Option<String>,
}

fn identity(input: &RunInput) -> Identity {
    let sources = input.effective_token_sources();
    let mut kinds: Vec<&'static str> = sources
        .iter()
        .map(|(s, _)| match s {
            TokenSource::Usage => "usage",
            TokenSource::Tokenizer(_) => "tokenizer",
            TokenSource::Chunks => "chunks",
        })
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let run = input.run.as_ref();
    let mut tokenizers: Vec<String> = sources
        .iter()
        .filter_map(|(s, _)| match s {
            TokenSource::Tokenizer(n) => Some(n.clone()),
            _ => None,
        })
        .chain(run.and_then(|r| r.tokenizer.clone()))
        .collect();
    tokenizers.sort_unstable();
    tokenizers.dedup();
    Identity {
        kinds,
        sources: sources
            .iter()
            .map(|(s, n)| format!("{s} ({n} spans)"))
            .collect(),
        tokenizers,
        model: run.and_then(|r| r.target.model.clone()),
    }
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none stated".to_string()
    } else {
        v.join(", ")
    }
}

/// What makes two runs incomparable (DESIGN.md §4): different token source kinds,
/// different tokenizers (named by a `tokenizer:` source or the run record), or
/// different models. A property that one run does not state is not a mismatch.
pub fn check_mismatch(baseline: &RunInput, candidate: &RunInput) -> Vec<Mismatch> {
    let (b, c) = (identity(baseline), identity(candidate));
    let mut out = Vec::new();
    if !b.kinds.is_empty() && !c.kinds.is_empty() && b.kinds != c.kinds {
        out.push(Mismatch {
            what: "token source",
            baseline: or_none(&b.sources),
            candidate: or_none(&c.sources),
        });
    }
    if !b.tokenizers.is_empty() && !c.tokenizers.is_empty() && b.tokenizers != c.tokenizers {
        out.push(Mismatch {
            what: "tokenizer",
            baseline: or_none(&b.tokenizers),
            candidate: or_none(&c.tokenizers),
        });
    }
    if let (Some(bm), Some(cm)) = (&b.model, &c.model)
        && bm != cm
    {
        out.push(Mismatch {
            what: "model",
            baseline: bm.clone(),
            candidate: cm.clone(),
        });
    }
    out
}

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
/// `released_at`) over [`TARGET_BUCKETS`], between 1 ms and 1 s, so that short runs
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
struct Prepared {
    report: RunReport,
    tokens: Vec<Unit>,
    gaps: Vec<Unit>,
    success: Vec<Unit>,
    retries: Vec<Unit>,
    bucket: Duration,
    block_len: usize,
}

fn prepare(input: &RunInput, opts: &Options) -> Prepared {
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
        bucket,
        block_len,
    }
}

/// Independent generator streams per run and metric, all from one seed.
fn stream(seed: u64, side: u64, metric: u64) -> SplitMix64 {
    let mut mix = SplitMix64::new(seed ^ (side << 32) ^ (metric << 40));
    SplitMix64::new(mix.next_u64())
}

enum Resample {
    Blocks,
    Spans,
}

struct Judged {
    interval: Option<Interval>,
    units_note: Option<String>,
}

#[allow(clippy::too_many_arguments)]
fn interval_of(
    base: &[Unit],
    cand: &[Unit],
    base_block: usize,
    cand_block: usize,
    how: Resample,
    metric: u64,
    cfg: &BootstrapConfig,
    change: impl Fn(f64, f64) -> Option<f64>,
) -> Judged {
    let what = match how {
        Resample::Blocks => "time buckets",
        Resample::Spans => "spans",
    };
    let fewest = base.len().min(cand.len());
    if fewest < MIN_UNITS {
        return Judged {
            interval: None,
            units_note: Some(format!(
                "too few {what} to resample ({fewest}; at least {MIN_UNITS} needed)"
            )),
        };
    }
    let draw = |units: &[Unit], block: usize, side: u64| -> Replicates {
        let mut rng = stream(cfg.seed, side, metric);
        match how {
            Resample::Blocks => block_ratio_replicates(units, block, cfg.resamples, &mut rng),
            Resample::Spans => iid_ratio_replicates(units, cfg.resamples, &mut rng),
        }
    };
    let b = draw(base, base_block, 1);
    let c = draw(cand, cand_block, 2);
    let interval = percentile_interval(&paired_change(&b, &c, change), cfg.level);
    Judged {
        units_note: interval
            .is_none()
            .then(|| format!("no interval: too many resamples of the {what} had no value")),
        interval,
    }
}

/// A threshold in the criterion's terms: signed percent of the baseline for system
/// TPS, signed percentage points for the rates of time and spans, retries per span.
fn bound_text(c: Criterion, v: f64) -> String {
    let v = if v == 0.0 { 0.0 } else { v };
    let s = match c {
        Criterion::SystemTps => format!("{:+.2} %", v * 100.0),
        Criterion::SuccessRate | Criterion::GapFraction => format!("{:+.2} pp", v * 100.0),
        Criterion::RetryRate => format!("{v:+.4} retries per span"),
    };
    s.replace('-', "−")
}

fn judge_higher(iv: &Interval, threshold: f64) -> Verdict {
    if iv.low > threshold {
        Verdict::Pass
    } else if iv.high <= threshold {
        Verdict::Fail
    } else {
        Verdict::Inconclusive
    }
}

fn judge_not_below(iv: &Interval, threshold: f64) -> Verdict {
    if iv.low >= threshold {
        Verdict::Pass
    } else if iv.high < threshold {
        Verdict::Fail
    } else {
        Verdict::Inconclusive
    }
}

fn judge_lower(iv: &Interval, threshold: f64) -> Verdict {
    if iv.high < threshold {
        Verdict::Pass
    } else if iv.low >= threshold {
        Verdict::Fail
    } else {
        Verdict::Inconclusive
    }
}

fn judge_not_above(iv: &Interval, threshold: f64) -> Verdict {
    if iv.high <= threshold {
        Verdict::Pass
    } else if iv.low > threshold {
        Verdict::Fail
    } else {
        Verdict::Inconclusive
    }
}

fn relative(b: f64, c: f64) -> Option<f64> {
    (b > 0.0).then(|| c / b - 1.0)
}

fn absolute(b: f64, c: f64) -> Option<f64> {
    Some(c - b)
}

struct Spec {
    criterion: Criterion,
    kind: ChangeKind,
    threshold: f64,
    judge: fn(&Interval, f64) -> Verdict,
    baseline: Option<f64>,
    candidate: Option<f64>,
}

fn finish(spec: Spec, judged: Judged) -> CriterionResult {
    let change = match (spec.baseline, spec.candidate) {
        (Some(b), Some(c)) => match spec.kind {
            ChangeKind::Relative => relative(b, c),
            ChangeKind::Absolute => absolute(b, c),
        },
        _ => None,
    };
    let (verdict, reason) = match (spec.baseline, spec.candidate, judged.interval) {
        (None, _, _) => (
            Verdict::Inconclusive,
            format!("the baseline has no {}", spec.criterion.metric()),
        ),
        (_, None, _) => (
            Verdict::Inconclusive,
            format!("the candidate has no {}", spec.criterion.metric()),
        ),
        (Some(b), _, _) if spec.kind == ChangeKind::Relative && b <= 0.0 => (
            Verdict::Inconclusive,
            format!(
                "the baseline's {} is 0: no relative change",
                spec.criterion.metric()
            ),
        ),
        (_, _, None) => (
            Verdict::Inconclusive,
            judged.units_note.unwrap_or_else(|| "no interval".into()),
        ),
        (_, _, Some(iv)) => {
            let v = (spec.judge)(&iv, spec.threshold);
            let bound = bound_text(spec.criterion, spec.threshold);
            let side = match (spec.criterion, v) {
                (_, Verdict::Inconclusive) => format!("the interval spans {bound}"),
                (Criterion::SystemTps, Verdict::Pass) => {
                    format!("the whole interval is above {bound}")
                }
                (Criterion::SystemTps, _) => format!("the interval does not rise above {bound}"),
                (Criterion::SuccessRate, Verdict::Pass) => {
                    format!("the interval stays at or above {bound}")
                }
                (Criterion::SuccessRate, _) => format!("the whole interval is below {bound}"),
                (Criterion::GapFraction, Verdict::Pass) => {
                    format!("the whole interval is below {bound}")
                }
                (Criterion::GapFraction, _) => format!("the interval does not fall below {bound}"),
                (Criterion::RetryRate, Verdict::Pass) => {
                    format!("the interval stays at or below {bound}")
                }
                (Criterion::RetryRate, _) => format!("the whole interval is above {bound}"),
            };
            (v, side)
        }
    };
    CriterionResult {
        criterion: spec.criterion,
        baseline: spec.baseline,
        candidate: spec.candidate,
        change_kind: spec.kind,
        change,
        interval: judged.interval,
        threshold: spec.threshold,
        verdict,
        reason,
    }
}

fn headline(b: &RunReport, c: &RunReport) -> Vec<HeadlineRow> {
    let mut rows = Vec::new();
    let mut row = |metric: &str, unit, better, bv: Option<f64>, cv: Option<f64>| {
        rows.push(HeadlineRow {
            metric: metric.to_string(),
            unit,
            better,
            baseline: bv,
            candidate: cv,
            change: bv.zip(cv).map(|(b, c)| c - b),
            relative_change: bv
                .zip(cv)
                .and_then(|(b, c)| (b != 0.0).then(|| c / b - 1.0)),
        });
    };
    use Better::*;
    use MetricUnit::*;
    let q = |v: Option<crate::stats::TokensPerSecond>| v.map(|v| v.0);
    let d = |v: Option<Duration>| v.map(|v| v.as_secs_f64());
    row(
        "system_tps",
        TokensPerSecond,
        Higher,
        q(b.system_tps),
        q(c.system_tps),
    );
    row(
        "success_rate",
        Fraction,
        Higher,
        b.success_rate,
        c.success_rate,
    );
    row(
        "gap_fraction",
        Fraction,
        Lower,
        b.gap_fraction,
        c.gap_fraction,
    );
    row(
        "gap_fraction_of_backlog",
        Fraction,
        Lower,
        b.gap_fraction_of_backlog,
        c.gap_fraction_of_backlog,
    );
    row("retry_rate", PerSpan, Lower, b.retry_rate, c.retry_rate);
    row(
        "utilization",
        Fraction,
        Higher,
        b.utilization,
        c.utilization,
    );
    let (bd, cd) = (&b.distributions, &c.distributions);
    for (name, bs, cs) in [
        ("ttft_user", &bd.ttft_user, &cd.ttft_user),
        ("t_first_token", &bd.t_first_token, &cd.t_first_token),
        ("t_queue", &bd.t_queue, &cd.t_queue),
    ] {
        row(&format!("{name} p50"), Seconds, Lower, d(bs.p50), d(cs.p50));
        row(&format!("{name} p90"), Seconds, Lower, d(bs.p90), d(cs.p90));
        row(&format!("{name} p99"), Seconds, Lower, d(bs.p99), d(cs.p99));
    }
    for (name, bs, cs) in [
        ("stream_tps", &bd.stream_tps, &cd.stream_tps),
        ("end_to_end_tps", &bd.end_to_end_tps, &cd.end_to_end_tps),
    ] {
        row(
            &format!("{name} p50"),
            TokensPerSecond,
            Higher,
            q(bs.p50),
            q(cs.p50),
        );
        row(
            &format!("{name} min"),
            TokensPerSecond,
            Higher,
            q(bs.min),
            q(cs.min),
        );
    }
    if let (Some(bc), Some(cc)) = (&b.cost, &c.cost) {
        if bc.per_million_output_tokens.is_some() || cc.per_million_output_tokens.is_some() {
            row(
                "cost per million output tokens",
                Money,
                Lower,
                bc.per_million_output_tokens,
                cc.per_million_output_tokens,
            );
            row(
                "cost per completion",
                Money,
                Lower,
                bc.per_completion,
                cc.per_completion,
            );
        }
        if bc.token_cost_per_completion.is_some() || cc.token_cost_per_completion.is_some() {
            row(
                "token cost per completion",
                Money,
                Lower,
                bc.token_cost_per_completion,
                cc.token_cost_per_completion,
            );
        }
    }
    rows
}

/// A run as one side of a comparison: its input and a name for where it came from.
#[derive(Clone, Copy, Debug)]
pub struct RunRef<'a> {
    /// The run.
    pub input: &'a RunInput,
    /// Where it came from (a file name, perhaps with `#run_id`).
    pub source: &'a str,
}

/// Both runs' reports as the comparison analysed them (with the bootstrap's time
/// series), for renderers that show more than the verdicts.
#[derive(Clone, Debug)]
pub struct Compared {
    /// The verdicts and side-by-side metrics.
    pub comparison: Comparison,
    /// The baseline's report.
    pub baseline: RunReport,
    /// The candidate's report.
    pub candidate: RunReport,
}

/// Compares `candidate` against `baseline`: analyses both with `opts` (its bucket is
/// replaced by the bootstrap's), checks they are comparable, and judges the four
/// criteria. Deterministic for a given seed.
pub fn compare(
    baseline: RunRef<'_>,
    candidate: RunRef<'_>,
    opts: &Options,
    cfg: &CompareConfig,
) -> Result<Compared, CompareError> {
    let bs = &cfg.bootstrap;
    if bs.resamples == 0 {
        return Err(CompareError::Config(
            "the number of resamples must be at least 1".into(),
        ));
    }
    if !(bs.level > 0.0 && bs.level < 1.0) {
        return Err(CompareError::Config(format!(
            "the interval level must be between 0 and 1 (exclusive), not {}",
            bs.level
        )));
    }
    let mismatches = check_mismatch(baseline.input, candidate.input);
    if !mismatches.is_empty() && !cfg.allow_mismatch {
        return Err(CompareError::Mismatch(mismatches));
    }
    let b = prepare(baseline.input, opts);
    let c = prepare(candidate.input, opts);
    let t = cfg.thresholds;
    let mut warnings: Vec<String> = Vec::new();
    for (side, p) in [("baseline", &b), ("candidate", &c)] {
        warnings.extend(p.report.warnings.iter().map(|w| format!("{side}: {w}")));
    }
    for m in &mismatches {
        warnings.push(format!("compared although {m}"));
    }

    let tps = finish(
        Spec {
            criterion: Criterion::SystemTps,
            kind: ChangeKind::Relative,
            threshold: t.min_tps_gain,
            judge: judge_higher,
            baseline: b.report.system_tps.map(|v| v.0),
            candidate: c.report.system_tps.map(|v| v.0),
        },
        interval_of(
            &b.tokens,
            &c.tokens,
            b.block_len,
            c.block_len,
            Resample::Blocks,
            1,
            bs,
            relative,
        ),
    );
    let success = finish(
        Spec {
            criterion: Criterion::SuccessRate,
            kind: ChangeKind::Absolute,
            threshold: -t.max_success_drop,
            judge: judge_not_below,
            baseline: b.report.success_rate,
            candidate: c.report.success_rate,
        },
        interval_of(
            &b.success,
            &c.success,
            1,
            1,
            Resample::Spans,
            2,
            bs,
            absolute,
        ),
    );
    let gap_spec = Spec {
        criterion: Criterion::GapFraction,
        kind: ChangeKind::Absolute,
        threshold: -t.min_gap_drop,
        judge: judge_lower,
        baseline: b.report.gap_fraction,
        candidate: c.report.gap_fraction,
    };
    let gap = if b.report.idle.backlog_time.is_zero() {
        skipped(
            gap_spec,
            "the baseline had no backlog (nothing waited for a slot): not judged",
        )
    } else if b.report.idle.gap_time.is_zero() {
        if c.report.idle.gap_time > Duration::ZERO {
            warnings.push(format!(
                "the candidate has gap time ({:.3} s) where the baseline had none",
                c.report.idle.gap_time.as_secs_f64()
            ));
        }
        skipped(
            gap_spec,
            "the baseline had a backlog but no gap time: nothing to drop",
        )
    } else {
        finish(
            gap_spec,
            interval_of(
                &b.gaps,
                &c.gaps,
                b.block_len,
                c.block_len,
                Resample::Blocks,
                3,
                bs,
                absolute,
            ),
        )
    };
    let retry = finish(
        Spec {
            criterion: Criterion::RetryRate,
            kind: ChangeKind::Absolute,
            threshold: t.max_retry_rise,
            judge: judge_not_above,
            baseline: b.report.retry_rate,
            candidate: c.report.retry_rate,
        },
        interval_of(
            &b.retries,
            &c.retries,
            1,
            1,
            Resample::Spans,
            4,
            bs,
            absolute,
        ),
    );
    let criteria = vec![tps, success, gap, retry];
    let overall = if criteria.iter().any(|r| r.verdict == Verdict::Fail) {
        Verdict::Fail
    } else if criteria.iter().any(|r| r.verdict == Verdict::Inconclusive) {
        Verdict::Inconclusive
    } else {
        Verdict::Pass
    };
    let side = |r: RunRef<'_>, p: &Prepared| Side {
        run_id: p.report.run_id.clone(),
        source: r.source.to_string(),
        model: p.report.target.model.clone(),
        token_sources: p
            .report
            .token_sources
            .iter()
            .map(|s| format!("{} ({} spans)", s.source, s.spans))
            .collect(),
        window: p.report.window.map(|w| w.duration),
        spans: p.report.counts.spans,
        buckets: p.tokens.len(),
        bucket: Some(p.bucket),
        block_len: p.block_len,
    };
    let comparison = Comparison {
        schema: COMPARE_SCHEMA,
        baseline: side(baseline, &b),
        candidate: side(candidate, &c),
        criteria,
        overall,
        mismatches,
        headline: headline(&b.report, &c.report),
        thresholds: t,
        bootstrap: BootstrapUsed {
            resamples: bs.resamples,
            seed: bs.seed,
            level: bs.level,
        },
        warnings,
    };
    Ok(Compared {
        comparison,
        baseline: b.report,
        candidate: c.report,
    })
}

fn skipped(spec: Spec, reason: &str) -> CriterionResult {
    let change = spec.baseline.zip(spec.candidate).map(|(b, c)| c - b);
    CriterionResult {
        criterion: spec.criterion,
        baseline: spec.baseline,
        candidate: spec.candidate,
        change_kind: spec.kind,
        change,
        interval: None,
        threshold: spec.threshold,
        verdict: Verdict::Skipped,
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::SpanFacts;
    use tpscope_model::{Cause, RunRecord, SCHEMA, Target, Timestamp};

    fn ts(ms: i64) -> Timestamp {
        Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
    }

    /// Spans through cap 2 with queueing, gaps, failures, a cancellation and retries.
    fn input() -> RunInput {
        let mut input = RunInput {
            run_id: "r".into(),
            run: Some(RunRecord {
                run_id: "r".into(),
                schema: SCHEMA.into(),
                tool: String::new(),
                started_at: ts(0),
                target: Target::default(),
                cap: Some(2),
                token_source: None,
                tokenizer: None,
                sample_interval: None,
                load: serde_json::Value::Null,
                labels: Default::default(),
            }),
            ..RunInput::default()
        };
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
                    retry_causes: vec![],
                    wasted_tokens: 0,
                    chunks: None,
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
        assert!(p.block_len >= 1 && p.block_len <= p.tokens.len());
    }
}
