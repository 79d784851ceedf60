//! The headline metrics both runs show side by side, as tables: run-level figures,
//! percentiles of the per-span metrics, and cost when both runs were priced.

use super::HeadlineRow;
use crate::metrics::{Better, MetricUnit, SummaryRef, metric};
use crate::report::{Cost, RunReport};
use crate::stats::{Quantity, Summary};

/// A run-level figure: name, unit, direction and how to read it from a report.
type Figure = (
    &'static str,
    MetricUnit,
    Better,
    fn(&RunReport) -> Option<f64>,
);

/// The run-level figures, first.
const FIGURES: [Figure; 6] = [
    (
        "system_tps",
        MetricUnit::TokensPerSecond,
        Better::Higher,
        |r| r.system_tps.map(|v| v.0),
    ),
    ("success_rate", MetricUnit::Fraction, Better::Higher, |r| {
        r.success_rate
    }),
    ("gap_fraction", MetricUnit::Fraction, Better::Lower, |r| {
        r.gap_fraction
    }),
    (
        "gap_fraction_of_backlog",
        MetricUnit::Fraction,
        Better::Lower,
        |r| r.gap_fraction_of_backlog,
    ),
    ("retry_rate", MetricUnit::PerSpan, Better::Lower, |r| {
        r.retry_rate
    }),
    ("utilization", MetricUnit::Fraction, Better::Higher, |r| {
        r.utilization
    }),
];

/// A statistic of a distribution.
#[derive(Clone, Copy)]
enum Stat {
    P50,
    P90,
    P99,
    Min,
}

impl Stat {
    fn name(self) -> &'static str {
        match self {
            Stat::P50 => "p50",
            Stat::P90 => "p90",
            Stat::P99 => "p99",
            Stat::Min => "min",
        }
    }

    fn of<Q: Quantity>(self, s: &Summary<Q>) -> Option<f64> {
        match self {
            Stat::P50 => s.p50,
            Stat::P90 => s.p90,
            Stat::P99 => s.p99,
            Stat::Min => s.min,
        }
        .map(Quantity::to_f64)
    }
}

/// Per-span metrics (rows of [`crate::metrics::METRICS`]) and the statistics shown
/// of each: the tails of latencies, the middle and the worst of rates.
const PERCENTILES: [(&str, &[Stat]); 5] = [
    ("ttft_user", &[Stat::P50, Stat::P90, Stat::P99]),
    ("t_first_token", &[Stat::P50, Stat::P90, Stat::P99]),
    ("t_queue", &[Stat::P50, Stat::P90, Stat::P99]),
    ("stream_tps", &[Stat::P50, Stat::Min]),
    ("end_to_end_tps", &[Stat::P50, Stat::Min]),
];

/// A cost figure: shown when either run has the first one of its group.
type CostFigure = (&'static str, fn(&Cost) -> Option<f64>);

/// Cost figures in groups; a group is shown when either run has its first figure.
const COSTS: [&[CostFigure]; 2] = [
    &[
        ("cost per million output tokens", |c| {
            c.per_million_output_tokens
        }),
        ("cost per completion", |c| c.per_completion),
    ],
    &[("token cost per completion", |c| c.token_cost_per_completion)],
];

fn row(
    metric: String,
    unit: MetricUnit,
    better: Better,
    bv: Option<f64>,
    cv: Option<f64>,
) -> HeadlineRow {
    HeadlineRow {
        metric,
        unit,
        better,
        baseline: bv,
        candidate: cv,
        change: bv.zip(cv).map(|(b, c)| c - b),
        relative_change: bv
            .zip(cv)
            .and_then(|(b, c)| (b != 0.0).then(|| c / b - 1.0)),
    }
}

fn stat(r: &RunReport, name: &str, s: Stat) -> Option<f64> {
    let m = metric(name)?;
    match (m.summary)(&r.distributions, &r.conventional) {
        SummaryRef::Seconds(d) => s.of(d),
        SummaryRef::TokensPerSecond(d) => s.of(d),
    }
}

/// The headline rows of a baseline and a candidate.
pub(crate) fn headline(b: &RunReport, c: &RunReport) -> Vec<HeadlineRow> {
    let mut rows: Vec<HeadlineRow> = FIGURES
        .iter()
        .map(|(name, unit, better, get)| row(name.to_string(), *unit, *better, get(b), get(c)))
        .collect();
    for (name, stats) in PERCENTILES {
        let Some(m) = metric(name) else { continue };
        for s in stats {
            rows.push(row(
                format!("{name} {}", s.name()),
                m.unit,
                m.better,
                stat(b, name, *s),
                stat(c, name, *s),
            ));
        }
    }
    if let (Some(bc), Some(cc)) = (&b.cost, &c.cost) {
        for group in COSTS {
            let shown = group
                .first()
                .is_some_and(|(_, get)| get(bc).is_some() || get(cc).is_some());
            if shown {
                rows.extend(group.iter().map(|(name, get)| {
                    row(
                        name.to_string(),
                        MetricUnit::Money,
                        Better::Lower,
                        get(bc),
                        get(cc),
                    )
                }));
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_percentile_row_names_a_per_span_metric() {
        for (name, _) in super::PERCENTILES {
            assert!(super::metric(name).is_some(), "{name}");
        }
    }
}
