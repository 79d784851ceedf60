//! Comparison of a candidate run against a baseline (docs/design.md §5): the four
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
//!
//! This file holds the comparison's value types and [`compare`]; the criteria are
//! one table in `criteria.rs`, the headline rows tables in `headline.rs`, run
//! preparation for the bootstrap in `prepare.rs` and the comparability check in
//! `identity.rs`.

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use tpscope_model::time::duration_secs;

use crate::analyze::Options;
use crate::input::RunInput;
use crate::metrics::{Better, MetricUnit};
use crate::report::RunReport;
use crate::stats::bootstrap::{BootstrapConfig, Interval};

mod caveats;
mod criteria;
mod headline;
mod identity;
pub mod ledger;
mod prepare;
mod settings;

pub use criteria::{CRITERIA, CriterionDef, Direction, Resample};
pub use identity::check_mismatch;
pub use prepare::{MIN_UNITS, bootstrap_bucket};
pub use settings::{BadSetting, Setting};

use prepare::{Prepared, prepare};

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
    /// Goodput (requests per second meeting the goals) may fall by at most this
    /// fraction of the baseline (judged only when goals are given).
    pub max_goodput_drop: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            min_tps_gain: 0.0,
            max_success_drop: 0.01,
            min_gap_drop: 0.0,
            max_retry_rise: 0.01,
            max_goodput_drop: 0.01,
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
    /// Not judged (e.g. the gap criterion when neither run had a backlog).
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

/// The acceptance criteria, in the order of docs/design.md §5, and goodput (§15).
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
    /// Goodput does not drop (judged only when goals are given, docs/design.md §15).
    Goodput,
}

impl Criterion {
    /// The criterion's row of [`CRITERIA`].
    pub fn def(self) -> &'static CriterionDef {
        // Every variant has a row; the fallback is never taken.
        CRITERIA
            .iter()
            .find(|d| d.criterion == self)
            .unwrap_or(&CRITERIA[0])
    }

    /// The metric's name in docs/design.md and the JSON report.
    pub fn metric(self) -> &'static str {
        self.def().metric
    }

    /// What the criterion demands, in words.
    pub fn demand(self) -> &'static str {
        self.def().demand
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
    #[serde(
        rename = "window_s",
        serialize_with = "duration_secs::option::serialize"
    )]
    pub window: Option<Duration>,
    /// Spans released in the window.
    pub spans: u64,
    /// Time buckets the block bootstrap resampled.
    pub buckets: usize,
    /// Length of one bucket.
    #[serde(
        rename = "bucket_s",
        serialize_with = "duration_secs::option::serialize"
    )]
    pub bucket: Option<Duration>,
    /// Buckets per resampled block.
    pub block_len: usize,
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
    /// The four criteria, in the order of docs/design.md §5.
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
    /// Both capacity ledgers and where the slot-seconds moved (`None` unless
    /// both runs have one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<ledger::LedgerChange>,
}

impl Comparison {
    /// The result of one criterion.
    pub fn criterion(&self, c: Criterion) -> Option<&CriterionResult> {
        self.criteria.iter().find(|r| r.criterion == c)
    }
}

/// One side of a comparison: a run's input and where it was read from.
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
/// criteria, and goodput when `opts` has goals. Deterministic for a given seed.
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
    if baseline.input.run_id == candidate.input.run_id {
        warnings.push(format!(
            "the baseline and the candidate are the same run (`{}`): any difference is \
             resampling noise; compare two runs",
            baseline.input.run_id
        ));
    }

    let criteria: Vec<CriterionResult> = CRITERIA
        .iter()
        .filter(|def| (def.applies)(&b.report, &c.report))
        .map(|def| criteria::judge(def, &b, &c, &t, bs, &mut warnings))
        .collect();
    warnings.extend(caveats::workload_differs(&b.report, &c.report));
    let poor = caveats::poor_quality(&b.report, &c.report);
    let overall = if let Some(w) = poor {
        // Two identical runs once failed because the second ran in a CPU spike.
        warnings.push(w);
        Verdict::Inconclusive
    } else if criteria.iter().any(|r| r.verdict == Verdict::Fail) {
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
        headline: headline::headline(&b.report, &c.report),
        thresholds: t,
        bootstrap: BootstrapUsed {
            resamples: bs.resamples,
            seed: bs.seed,
            level: bs.level,
        },
        warnings,
        capacity: ledger::ledger_change(b.report.capacity.as_ref(), c.report.capacity.as_ref()),
    };
    Ok(Compared {
        comparison,
        baseline: b.report,
        candidate: c.report,
    })
}
