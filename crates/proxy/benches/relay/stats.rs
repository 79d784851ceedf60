//! The relay benchmark's statistics, pure: percentiles of per-chunk latency (by
//! tpscope's one percentile method, `tpscope_analysis::stats::quantiles`: linear
//! interpolation between closest ranks, Hyndman & Fan type 7), the latency a path
//! adds over the direct one at the same percentile, the median of the per-chunk
//! differences paired by (stream, sequence), the spread of a figure across
//! rounds, and the interval of the rounds' median ratio.

use std::fmt;

use tpscope_analysis::stats::{MedianInterval, median_interval, quantiles, sort_values};

/// The percentiles reported for a latency distribution, in microseconds.
pub const QS: [f64; 5] = [0.5, 0.9, 0.99, 0.999, 1.0];
/// Their column names, in the order of [`QS`].
pub const Q_NAMES: [&str; 5] = ["p50", "p90", "p99", "p99.9", "max"];

/// One latency distribution summarised: the values at [`QS`] (µs), and how many
/// samples it has.
#[derive(Clone, Debug, PartialEq)]
pub struct Dist {
    /// Samples summarised.
    pub n: usize,
    /// The value at each of [`QS`] (µs); `None` without samples.
    pub q: [Option<f64>; 5],
}

impl Dist {
    /// Summarises latencies in nanoseconds (reorders the slice's copy, not it).
    pub fn of_ns(ns: &[i64]) -> Dist {
        let mut us: Vec<f64> = ns.iter().map(|&v| v as f64 / 1e3).collect();
        let q = quantiles(&mut us, &QS);
        Dist {
            n: ns.len(),
            q: [q[0], q[1], q[2], q[3], q[4]],
        }
    }

    /// The value at `name` (one of [`Q_NAMES`]).
    pub fn at(&self, name: &str) -> Option<f64> {
        let i = Q_NAMES.iter().position(|n| *n == name)?;
        self.q[i]
    }

    /// `self − base` at each percentile: the latency this path adds over `base`
    /// at the same rank (the shift function of the two distributions).
    pub fn minus(&self, base: &Dist) -> [Option<f64>; 5] {
        let mut out = [None; 5];
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.q[i].zip(base.q[i]).map(|(a, b)| a - b);
        }
        out
    }
}

/// Per-chunk latencies of one path in one round, by stream then sequence number
/// (`None`: the chunk was not received, or was a warm-up chunk).
pub type Grid = Vec<Vec<Option<i64>>>;

/// Every latency of a grid, in nanoseconds.
pub fn flatten(grid: &Grid) -> Vec<i64> {
    grid.iter().flatten().flatten().copied().collect()
}

/// The median (µs) of `path − base` over the chunks both received, paired by
/// stream and sequence number: the same chunk of the same schedule, one round
/// apart. `None` when no chunk pairs up. Its tails mix the noise of two rounds,
/// so only the median is reported.
pub fn paired_median(path: &Grid, base: &Grid) -> Option<f64> {
    let mut d: Vec<f64> = Vec::new();
    for (ps, bs) in path.iter().zip(base) {
        for (p, b) in ps.iter().zip(bs) {
            if let (Some(p), Some(b)) = (p, b) {
                d.push((p - b) as f64 / 1e3);
            }
        }
    }
    quantiles(&mut d, &[0.5])[0]
}

/// A figure across rounds: its median, smallest and largest (`None` without
/// values).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// The median round's value.
    pub median: f64,
    /// The smallest round's.
    pub min: f64,
    /// The largest round's.
    pub max: f64,
}

impl Spread {
    /// The spread of the defined values (`None` when there are none).
    pub fn of(values: impl IntoIterator<Item = Option<f64>>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().flatten().collect();
        let q = quantiles(&mut v, &[0.5, 0.0, 1.0]);
        Some(Spread {
            median: q[0]?,
            min: q[1]?,
            max: q[2]?,
        })
    }
}

/// A number of microseconds as the tables print it: `12.3` below 100, `1234`
/// above; `–` for none.
pub fn us(v: Option<f64>) -> String {
    match v {
        None => "–".into(),
        Some(v) if v.abs() < 100.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.0}"),
    }
}

/// A spread as `median [min – max]`.
pub fn spread(s: Option<Spread>) -> String {
    match s {
        None => "–".into(),
        Some(s) => format!(
            "{} [{} – {}]",
            us(Some(s.median)),
            us(Some(s.min)),
            us(Some(s.max))
        ),
    }
}

/// One figure's ratio between two paths, round by round (each round's ratio
/// within the round, under the same load): its spread, and the 95 % interval
/// of the median ratio (`tpscope_analysis::stats::median_interval`), which says
/// whether this run shows the first path below the other, above it, or cannot
/// tell them apart.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RoundRatios {
    pub spread: Option<Spread>,
    pub interval: Option<MedianInterval>,
}

/// What a run's rounds show of a ratio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The whole interval is below 1.
    Below,
    /// The whole interval is above 1.
    Above,
    /// The interval holds 1.
    NotResolved,
}

impl RoundRatios {
    /// The rounds' ratios (`None`: a round where either figure is missing).
    pub fn of(ratios: impl IntoIterator<Item = Option<f64>>) -> RoundRatios {
        let mut v: Vec<f64> = ratios.into_iter().flatten().collect();
        sort_values(&mut v);
        RoundRatios {
            spread: Spread::of(v.iter().map(|&x| Some(x))),
            interval: median_interval(&v, 0.95),
        }
    }

    /// `None` below 6 rounds (no 95 % interval from fewer).
    pub fn verdict(&self) -> Option<Verdict> {
        let i = self.interval?;
        Some(if i.hi < 1.0 {
            Verdict::Below
        } else if i.lo > 1.0 {
            Verdict::Above
        } else {
            Verdict::NotResolved
        })
    }
}

impl fmt::Display for RoundRatios {
    /// `0.95 [0.89 – 1.05]; 95 % 0.91 – 0.99: below` (the interval and
    /// verdict only from 6 rounds).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(s) = self.spread else {
            return f.write_str("–");
        };
        write!(f, "{:.2} [{:.2} – {:.2}]", s.median, s.min, s.max)?;
        if let (Some(i), Some(v)) = (self.interval, self.verdict()) {
            let said = match v {
                Verdict::Below => "below",
                Verdict::Above => "above",
                Verdict::NotResolved => "not resolved",
            };
            write!(f, "; 95 % {:.2} – {:.2}: {said}", i.lo, i.hi)?;
        }
        Ok(())
    }
}

/// The busiest worker's share of a proxy's CPU over a round, from each worker's
/// CPU seconds (a serving thread of tpscope, a worker process of nginx): 1/n is
/// an even spread, near 1 one worker relayed while the others idled (and, lagging,
/// read backlogs). `None` with fewer than two workers or no CPU spent.
pub fn busiest_share(workers_cpu_s: &[f64]) -> Option<f64> {
    if workers_cpu_s.len() < 2 {
        return None;
    }
    let sum: f64 = workers_cpu_s.iter().sum();
    let max = workers_cpu_s.iter().copied().fold(f64::MIN, f64::max);
    (sum > 0.0).then(|| max / sum)
}
