//! The acceptance criteria as one table: each row names its metric, reads the value
//! from a report, says how its change is expressed, which units are resampled and
//! how, which threshold applies and on which side of it an interval passes, and
//! when the criterion is not judged. Judging a criterion reads only its row, so a
//! new criterion is one row (and its [`Criterion`] variant).

use super::prepare::{MIN_UNITS, Prepared};
use super::{ChangeKind, Criterion, CriterionResult, Thresholds, Verdict};
use crate::metrics::MetricUnit;
use crate::report::RunReport;
use crate::stats::bootstrap::{
    BootstrapConfig, Interval, Replicates, SplitMix64, Unit, block_ratio_replicates,
    iid_ratio_replicates, paired_change, percentile_interval,
};

/// How a criterion's units are resampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resample {
    /// Circular block bootstrap over the window's time buckets.
    Blocks,
    /// i.i.d. bootstrap over the window's spans.
    Spans,
}

impl Resample {
    fn units_name(self) -> &'static str {
        match self {
            Resample::Blocks => "time buckets",
            Resample::Spans => "spans",
        }
    }
}

/// Where the interval of the change must lie, relative to the threshold, to pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Wholly above (a gain is demanded).
    Above,
    /// At or above throughout (a loss is bounded).
    NotBelow,
    /// Wholly below (a drop is demanded).
    Below,
    /// At or below throughout (a rise is bounded).
    NotAbove,
}

impl Direction {
    /// The verdict of an interval against a threshold.
    pub fn judge(self, iv: &Interval, threshold: f64) -> Verdict {
        let (pass, fail) = match self {
            Direction::Above => (iv.low > threshold, iv.high <= threshold),
            Direction::NotBelow => (iv.low >= threshold, iv.high < threshold),
            Direction::Below => (iv.high < threshold, iv.low >= threshold),
            Direction::NotAbove => (iv.high <= threshold, iv.low > threshold),
        };
        if pass {
            Verdict::Pass
        } else if fail {
            Verdict::Fail
        } else {
            Verdict::Inconclusive
        }
    }

    /// The comparison the interval must satisfy: `>`, `≥`, `<` or `≤`.
    pub fn symbol(self) -> &'static str {
        match self {
            Direction::Above => ">",
            Direction::NotBelow => "≥",
            Direction::Below => "<",
            Direction::NotAbove => "≤",
        }
    }

    /// Why a verdict was given, with the bound in words.
    fn explain(self, v: Verdict, bound: &str) -> String {
        match (self, v) {
            (_, Verdict::Inconclusive | Verdict::Skipped) => format!("the interval spans {bound}"),
            (Direction::Above, Verdict::Pass) => format!("the whole interval is above {bound}"),
            (Direction::Above, _) => format!("the interval does not rise above {bound}"),
            (Direction::NotBelow, Verdict::Pass) => {
                format!("the interval stays at or above {bound}")
            }
            (Direction::NotBelow, _) => format!("the whole interval is below {bound}"),
            (Direction::Below, Verdict::Pass) => format!("the whole interval is below {bound}"),
            (Direction::Below, _) => format!("the interval does not fall below {bound}"),
            (Direction::NotAbove, Verdict::Pass) => {
                format!("the interval stays at or below {bound}")
            }
            (Direction::NotAbove, _) => format!("the whole interval is above {bound}"),
        }
    }
}

/// One acceptance criterion.
#[derive(Clone, Copy)]
pub struct CriterionDef {
    /// Which criterion.
    pub criterion: Criterion,
    /// The metric's name in docs/design.md and the JSON report.
    pub metric: &'static str,
    /// What the criterion demands, in words.
    pub demand: &'static str,
    /// The unit of the metric's value.
    pub unit: MetricUnit,
    /// How the change is expressed.
    pub change: ChangeKind,
    /// Where the interval must lie to pass.
    pub direction: Direction,
    /// The bound the interval is judged against, from the thresholds given.
    pub threshold: fn(&Thresholds) -> f64,
    /// The run's value, as `tpscope report` shows it.
    pub value: fn(&RunReport) -> Option<f64>,
    /// How the units are resampled.
    pub resample: Resample,
    /// The units whose ratio of sums is the value.
    pub(crate) units: fn(&Prepared) -> &[Unit],
    /// The criterion's generator stream: fixed per row, so that adding a criterion
    /// leaves the others' intervals as they were.
    pub stream: u64,
    /// Whether the criterion is part of the comparison at all (goodput only when
    /// goals were given); one that applies may still be skipped.
    pub applies: fn(&RunReport, &RunReport) -> bool,
    /// Why the criterion is not judged for a baseline and a candidate, if it is
    /// not; it may add warnings.
    pub(crate) skip: fn(&RunReport, &RunReport, &mut Vec<String>) -> Option<&'static str>,
}

impl std::fmt::Debug for CriterionDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CriterionDef")
            .field("criterion", &self.criterion)
            .finish_non_exhaustive()
    }
}

/// The four acceptance criteria, in the order of docs/design.md §5, then goodput (§15),
/// which applies only when goals are given.
pub const CRITERIA: [CriterionDef; 5] = [
    CriterionDef {
        criterion: Criterion::SystemTps,
        metric: "system_tps",
        demand: "system TPS improves",
        unit: MetricUnit::TokensPerSecond,
        change: ChangeKind::Relative,
        direction: Direction::Above,
        threshold: |t| t.min_tps_gain,
        value: |r| r.system_tps.map(|v| v.0),
        resample: Resample::Blocks,
        units: |p| &p.tokens,
        stream: 1,
        applies: |_, _| true,
        skip: |_, _, _| None,
    },
    CriterionDef {
        criterion: Criterion::SuccessRate,
        metric: "success_rate",
        demand: "success rate does not drop",
        unit: MetricUnit::Fraction,
        change: ChangeKind::Absolute,
        direction: Direction::NotBelow,
        threshold: |t| -t.max_success_drop,
        value: |r| r.success_rate,
        resample: Resample::Spans,
        units: |p| &p.success,
        stream: 2,
        applies: |_, _| true,
        skip: |_, _, _| None,
    },
    CriterionDef {
        criterion: Criterion::GapFraction,
        metric: "gap_fraction",
        demand: "gap fraction drops",
        unit: MetricUnit::Fraction,
        change: ChangeKind::Absolute,
        direction: Direction::Below,
        threshold: |t| -t.min_gap_drop,
        value: |r| r.gap_fraction,
        resample: Resample::Blocks,
        units: |p| &p.gaps,
        stream: 3,
        applies: |_, _| true,
        // Judged where either run had a backlog (docs/design.md §5): a rise from a baseline
        // of 0 is a failure, not a skip.
        skip: |b, c, _| {
            let zero = |d: Option<std::time::Duration>| d.is_none_or(|d| d.is_zero());
            if zero(b.idle.backlog_time) && zero(c.idle.backlog_time) {
                return Some("neither run had a backlog (nothing waited for a slot): not judged");
            }
            if zero(b.idle.gap_time) && zero(c.idle.gap_time) {
                return Some("neither run had gap time: nothing to drop");
            }
            None
        },
    },
    CriterionDef {
        criterion: Criterion::RetryRate,
        metric: "retry_rate",
        demand: "retry rate does not rise",
        unit: MetricUnit::PerSpan,
        change: ChangeKind::Absolute,
        direction: Direction::NotAbove,
        threshold: |t| t.max_retry_rise,
        value: |r| r.retry_rate,
        resample: Resample::Spans,
        units: |p| &p.retries,
        stream: 4,
        applies: |_, _| true,
        skip: |_, _, _| None,
    },
    CriterionDef {
        criterion: Criterion::Goodput,
        metric: "goodput",
        demand: "goodput does not drop",
        unit: MetricUnit::RequestsPerSecond,
        change: ChangeKind::Relative,
        direction: Direction::NotBelow,
        threshold: |t| -t.max_goodput_drop,
        value: |r| r.goodput.as_ref().and_then(|g| g.requests_per_second),
        resample: Resample::Blocks,
        units: |p| &p.good,
        stream: 5,
        applies: |b, c| b.goodput.is_some() || c.goodput.is_some(),
        skip: |_, _, _| None,
    },
];

/// Independent generator streams per run and metric, all from one seed.
fn stream(seed: u64, side: u64, metric: u64) -> SplitMix64 {
    let mut mix = SplitMix64::new(seed ^ (side << 32) ^ (metric << 40));
    SplitMix64::new(mix.next_u64())
}

/// The change from `b` to `c` as `kind` expresses it.
fn change_of(kind: ChangeKind, b: f64, c: f64) -> Option<f64> {
    match kind {
        ChangeKind::Relative => (b > 0.0).then(|| c / b - 1.0),
        ChangeKind::Absolute => Some(c - b),
    }
}

/// The interval of the change, or why there is none.
fn interval_of(
    def: &CriterionDef,
    b: &Prepared,
    c: &Prepared,
    cfg: &BootstrapConfig,
) -> Result<Interval, String> {
    let what = def.resample.units_name();
    let (base, cand) = ((def.units)(b), (def.units)(c));
    let fewest = base.len().min(cand.len());
    if fewest < MIN_UNITS {
        return Err(format!(
            "too few {what} to resample ({fewest}; at least {MIN_UNITS} needed)"
        ));
    }
    let draw = |units: &[Unit], block: usize, side: u64| -> Replicates {
        let mut rng = stream(cfg.seed, side, def.stream);
        match def.resample {
            Resample::Blocks => block_ratio_replicates(units, block, cfg.resamples, &mut rng),
            Resample::Spans => iid_ratio_replicates(units, cfg.resamples, &mut rng),
        }
    };
    let rb = draw(base, b.block_len, 1);
    let rc = draw(cand, c.block_len, 2);
    let kind = def.change;
    percentile_interval(
        &paired_change(&rb, &rc, |b, c| change_of(kind, b, c)),
        cfg.level,
    )
    .ok_or_else(|| format!("no interval: too many resamples of the {what} had no value"))
}

/// A threshold in the criterion's terms: signed percent of the baseline for a
/// relative change, signed percentage points for fractions, retries per span.
fn bound_text(def: &CriterionDef, v: f64) -> String {
    let v = if v == 0.0 { 0.0 } else { v };
    let s = match (def.change, def.unit) {
        (ChangeKind::Relative, _) => format!("{:+.2} %", v * 100.0),
        (_, MetricUnit::Fraction) => format!("{:+.2} pp", v * 100.0),
        (_, MetricUnit::RequestsPerSecond) => format!("{v:+.4} req/s"),
        _ => format!("{v:+.4} retries per span"),
    };
    s.replace('-', "−")
}

/// Judges one criterion for a prepared baseline and candidate.
pub(crate) fn judge(
    def: &CriterionDef,
    b: &Prepared,
    c: &Prepared,
    thresholds: &Thresholds,
    cfg: &BootstrapConfig,
    warnings: &mut Vec<String>,
) -> CriterionResult {
    let (bv, cv) = ((def.value)(&b.report), (def.value)(&c.report));
    let threshold = (def.threshold)(thresholds);
    let result = |change, interval, verdict, reason: String| CriterionResult {
        criterion: def.criterion,
        baseline: bv,
        candidate: cv,
        change_kind: def.change,
        change,
        interval,
        threshold,
        verdict,
        reason,
    };
    if let Some(reason) = (def.skip)(&b.report, &c.report, warnings) {
        let change = bv.zip(cv).map(|(b, c)| c - b);
        return result(change, None, Verdict::Skipped, reason.to_string());
    }
    let change = bv.zip(cv).and_then(|(b, c)| change_of(def.change, b, c));
    let interval = interval_of(def, b, c, cfg);
    let (verdict, reason) = match (bv, cv, &interval) {
        (None, _, _) => (
            Verdict::Inconclusive,
            format!("the baseline has no {}", def.metric),
        ),
        (_, None, _) => (
            Verdict::Inconclusive,
            format!("the candidate has no {}", def.metric),
        ),
        (Some(b), _, _) if def.change == ChangeKind::Relative && b <= 0.0 => (
            Verdict::Inconclusive,
            format!("the baseline's {} is 0: no relative change", def.metric),
        ),
        (_, _, Err(why)) => (Verdict::Inconclusive, why.clone()),
        (_, _, Ok(iv)) => {
            let v = def.direction.judge(iv, threshold);
            (v, def.direction.explain(v, &bound_text(def, threshold)))
        }
    };
    result(change, interval.ok(), verdict, reason)
}
