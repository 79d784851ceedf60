//! Arrival schedules (pure): when each request becomes ready, as an offset from the
//! run's start. One schedule feeds the one executor for every mode.
//!
//! - closed loop (no `--rate`): a backlog — every request is ready at the start
//!   (offset 0); with no request count the backlog is endless and is kept one cap
//!   deep (see the executor);
//! - open loop (`--rate R`): the first request at 0, then inter-arrival gaps drawn
//!   from an exponential (poisson), a constant `1/R`, or a gamma with shape k and mean
//!   `1/R` (k < 1 burstier than Poisson, k > 1 smoother; k = 1 is Poisson);
//! - trace replay: the trace's own offsets times `--time-scale`;
//! - ramped rate (`--rate` with `--ramp-up`): the same processes with a rate that
//!   grows (see [`crate::ramp`]): over time by time-rescaling (unit-mean gaps on the
//!   expected-arrivals axis, mapped back to time), over requests by drawing each
//!   gap at the rate of its place in the run;
//! - ramped backlog (closed loop with `--ramp-up`): a backlog whose cap grows
//!   (the executor applies [`Schedule::cap_ramp`]).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Gamma};

use crate::ramp::{RampOver, RampPlan};

/// How inter-arrival gaps are drawn in open loop.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrival {
    /// Exponential gaps (a Poisson process).
    Poisson,
    /// Equal gaps of `1/rate`.
    Constant,
    /// Gamma gaps with this shape and mean `1/rate` (vLLM's `--burstiness`).
    Gamma {
        /// Shape k > 0: below 1 burstier than Poisson, above 1 smoother.
        shape: f64,
    },
}

/// An `--arrival` value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not an arrival process (expected poisson, constant or gamma:<shape> with shape > 0)"
)]
pub struct BadArrival(pub String);

impl FromStr for Arrival {
    type Err = BadArrival;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadArrival(s.to_string());
        match s.trim() {
            "poisson" => Ok(Arrival::Poisson),
            "constant" => Ok(Arrival::Constant),
            t => {
                let shape: f64 = t
                    .strip_prefix("gamma:")
                    .ok_or_else(bad)?
                    .trim()
                    .parse()
                    .map_err(|_| bad())?;
                if !(shape.is_finite() && shape > 0.0 && shape <= 1e6) {
                    return Err(bad());
                }
                Ok(Arrival::from_burstiness(shape))
            }
        }
    }
}

impl Arrival {
    /// The process vLLM's `--burstiness F` means: gamma with shape F, which is
    /// Poisson when F = 1.
    pub fn from_burstiness(shape: f64) -> Arrival {
        if shape == 1.0 {
            Arrival::Poisson
        } else {
            Arrival::Gamma { shape }
        }
    }
}

impl fmt::Display for Arrival {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arrival::Poisson => f.write_str("poisson"),
            Arrival::Constant => f.write_str("constant"),
            Arrival::Gamma { shape } => write!(f, "gamma:{shape}"),
        }
    }
}

/// When requests become ready.
#[derive(Clone, Debug, PartialEq)]
pub enum Schedule {
    /// Closed loop: a backlog ready at the start.
    Backlog,
    /// Open loop at `rate` requests per second.
    Rate {
        /// Requests per second (mean).
        rate: f64,
        /// The inter-arrival process.
        arrival: Arrival,
    },
    /// Trace replay: these offsets (already scaled), in order.
    Trace {
        /// Ready offsets from the start, non-decreasing.
        offsets: Arc<Vec<Duration>>,
    },
    /// Open loop whose rate (requests per second) ramps.
    RampedRate {
        /// The rate's ramp.
        ramp: RampPlan,
        /// The inter-arrival process.
        arrival: Arrival,
    },
    /// Closed loop whose cap ramps.
    RampedBacklog {
        /// The cap's ramp.
        ramp: RampPlan,
    },
}

impl Schedule {
    /// The ready offsets in order, for `seed`. A backlog yields 0 forever; a rate
    /// yields forever; a trace yields its offsets once. Callers bound it by count
    /// and duration.
    pub fn offsets(&self, seed: u64) -> Offsets {
        Offsets {
            schedule: self.clone(),
            rng: StdRng::seed_from_u64(seed ^ 0xA11_1CE),
            next_index: 0,
            t: 0.0,
        }
    }

    /// Whether the schedule is a closed-loop backlog.
    pub fn is_backlog(&self) -> bool {
        matches!(self, Schedule::Backlog | Schedule::RampedBacklog { .. })
    }

    /// The ramp of the cap, for a ramped closed loop.
    pub fn cap_ramp(&self) -> Option<&RampPlan> {
        match self {
            Schedule::RampedBacklog { ramp } => Some(ramp),
            _ => None,
        }
    }
}

/// One gap of mean `mean` drawn from `arrival`.
fn draw_gap(arrival: Arrival, mean: f64, rng: &mut StdRng) -> f64 {
    match arrival {
        Arrival::Constant => mean,
        // Inverse-CDF of the exponential; 1 - u is in (0, 1].
        Arrival::Poisson => -(1.0 - rng.random::<f64>()).ln() * mean,
        Arrival::Gamma { shape } => match Gamma::new(shape, mean / shape) {
            Ok(g) => g.sample(rng),
            Err(_) => mean,
        },
    }
}

/// The iterator of ready offsets of a [`Schedule`].
pub struct Offsets {
    schedule: Schedule,
    rng: StdRng,
    next_index: u64,
    /// Seconds since the start of the current (open-loop) arrival.
    t: f64,
}

impl Iterator for Offsets {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        let i = self.next_index;
        self.next_index += 1;
        match &self.schedule {
            Schedule::Backlog | Schedule::RampedBacklog { .. } => Some(Duration::ZERO),
            Schedule::Trace { offsets } => offsets.get(i as usize).copied(),
            Schedule::Rate { rate, arrival } => {
                if i > 0 {
                    self.t += draw_gap(*arrival, 1.0 / rate, &mut self.rng);
                }
                // Constant: compute from the index so rounding does not accumulate.
                let secs = if *arrival == Arrival::Constant {
                    i as f64 / rate
                } else {
                    self.t
                };
                Some(Duration::from_secs_f64(secs.min(1e9)))
            }
            Schedule::RampedRate { ramp, arrival } => {
                let secs = match ramp.over {
                    RampOver::Duration(d) => {
                        // `t` counts expected arrivals here, not seconds.
                        if i > 0 {
                            self.t += draw_gap(*arrival, 1.0, &mut self.rng);
                        }
                        let n = if *arrival == Arrival::Constant {
                            i as f64
                        } else {
                            self.t
                        };
                        ramp.ramp.time_of_arrivals(n, d.as_secs_f64())
                    }
                    RampOver::Requests(_) => {
                        if i > 0 {
                            // The gap before request i, at the rate of its middle.
                            let p = ramp.request_progress(i as f64 - 0.5).unwrap_or(1.0);
                            let rate = ramp.ramp.value(p).max(1e-9);
                            self.t += draw_gap(*arrival, 1.0 / rate, &mut self.rng);
                        }
                        self.t
                    }
                };
                Some(Duration::from_secs_f64(secs.clamp(0.0, 1e9)))
            }
        }
    }
}

/// Scales trace offsets by `--time-scale` (2.0 = twice as slow, 0.5 = twice as fast).
pub fn scale_offsets(offsets: impl IntoIterator<Item = Duration>, scale: f64) -> Vec<Duration> {
    offsets
        .into_iter()
        .map(|d| Duration::from_secs_f64((d.as_secs_f64() * scale).min(1e9)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gaps(s: &Schedule, n: usize) -> Vec<f64> {
        let o: Vec<f64> = s.offsets(3).take(n + 1).map(|d| d.as_secs_f64()).collect();
        o.windows(2).map(|w| w[1] - w[0]).collect()
    }

    fn mean_cv(g: &[f64]) -> (f64, f64) {
        let m = g.iter().sum::<f64>() / g.len() as f64;
        let var = g.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / g.len() as f64;
        (m, var.sqrt() / m)
    }

    #[test]
    fn poisson_has_the_mean_rate_and_unit_cv() {
        let s = Schedule::Rate {
            rate: 20.0,
            arrival: Arrival::Poisson,
        };
        let (m, cv) = mean_cv(&gaps(&s, 50_000));
        assert!((m - 0.05).abs() < 0.05 * 0.02, "mean gap {m}");
        assert!((cv - 1.0).abs() < 0.03, "cv {cv}");
        assert_eq!(s.offsets(3).next(), Some(Duration::ZERO));
    }

    #[test]
    fn gamma_shape_sets_burstiness_at_the_same_rate() {
        for shape in [0.25, 4.0] {
            let s = Schedule::Rate {
                rate: 10.0,
                arrival: Arrival::Gamma { shape },
            };
            let (m, cv) = mean_cv(&gaps(&s, 50_000));
            assert!((m - 0.1).abs() < 0.1 * 0.03, "shape {shape}: mean gap {m}");
            let want = 1.0 / shape.sqrt();
            assert!(
                (cv - want).abs() / want < 0.05,
                "shape {shape}: cv {cv}, want {want}"
            );
        }
    }

    #[test]
    fn constant_is_exact_and_seeded_schedules_repeat() {
        let s = Schedule::Rate {
            rate: 4.0,
            arrival: Arrival::Constant,
        };
        let o: Vec<Duration> = s.offsets(0).take(5).collect();
        assert_eq!(
            o,
            (0..5)
                .map(|i| Duration::from_millis(250 * i))
                .collect::<Vec<_>>()
        );
        let p = Schedule::Rate {
            rate: 4.0,
            arrival: Arrival::Poisson,
        };
        assert_eq!(
            p.offsets(9).take(100).collect::<Vec<_>>(),
            p.offsets(9).take(100).collect::<Vec<_>>()
        );
    }

    #[test]
    fn backlog_and_trace_offsets() {
        assert!(Schedule::Backlog.offsets(0).take(10).all(|d| d.is_zero()));
        let t = Schedule::Trace {
            offsets: Arc::new(scale_offsets([Duration::ZERO, Duration::from_secs(2)], 0.5)),
        };
        assert_eq!(
            t.offsets(0).collect::<Vec<_>>(),
            vec![Duration::ZERO, Duration::from_secs(1)]
        );
    }

    #[test]
    fn arrival_names_parse() {
        assert_eq!("poisson".parse::<Arrival>().unwrap(), Arrival::Poisson);
        assert_eq!(
            "gamma:0.5".parse::<Arrival>().unwrap(),
            Arrival::Gamma { shape: 0.5 }
        );
        assert_eq!("gamma:1".parse::<Arrival>().unwrap(), Arrival::Poisson);
        for bad in ["gamma", "gamma:0", "gamma:-1", "bursty", "gamma:nan"] {
            assert!(bad.parse::<Arrival>().is_err(), "{bad}");
        }
    }

    fn ramped(shape: &str, over: RampOver, arrival: Arrival) -> Schedule {
        Schedule::RampedRate {
            ramp: RampPlan {
                ramp: shape.parse().unwrap(),
                over,
            },
            arrival,
        }
    }

    #[test]
    fn linear_ramp_over_time_has_the_rate_of_its_moment() {
        // 1 → 21 req/s over 10 s: 110 expected arrivals.
        let s = ramped(
            "linear:1..21",
            RampOver::Duration(Duration::from_secs(10)),
            Arrival::Constant,
        );
        let o: Vec<f64> = s
            .offsets(0)
            .take_while(|d| *d < Duration::from_secs(10))
            .map(|d| d.as_secs_f64())
            .collect();
        assert_eq!(o.len(), 110, "arrivals before the end");
        // The local rate (1/gap) follows 1 + 2t.
        for w in o.windows(2).skip(5) {
            let mid = (w[0] + w[1]) / 2.0;
            let rate = 1.0 / (w[1] - w[0]);
            assert!(
                (rate - (1.0 + 2.0 * mid)).abs() / rate < 0.05,
                "{mid}: {rate}"
            );
        }
        // Poisson: the same count, about, and more in the second half.
        let p = ramped(
            "linear:1..21",
            RampOver::Duration(Duration::from_secs(10)),
            Arrival::Poisson,
        );
        let o: Vec<Duration> = p
            .offsets(7)
            .take_while(|d| *d < Duration::from_secs(10))
            .collect();
        assert!((90..=130).contains(&o.len()), "{}", o.len());
        let late = o.iter().filter(|d| **d >= Duration::from_secs(5)).count();
        assert!(late > 2 * (o.len() - late), "{late} of {}", o.len());
    }

    #[test]
    fn exponential_ramp_doubles_the_rate_at_equal_steps() {
        // 1 → 64 req/s over 6 s: the rate doubles every second.
        let s = ramped(
            "exponential:1..64",
            RampOver::Duration(Duration::from_secs(6)),
            Arrival::Constant,
        );
        let o: Vec<f64> = s
            .offsets(0)
            .take_while(|d| *d < Duration::from_secs(6))
            .map(|d| d.as_secs_f64())
            .collect();
        // Expected arrivals: 63 / ln 2 ≈ 90.9.
        assert_eq!(o.len(), 91);
        let per_second: Vec<usize> = (0..6)
            .map(|k| {
                o.iter()
                    .filter(|t| **t >= k as f64 && **t < (k + 1) as f64)
                    .count()
            })
            .collect();
        for w in per_second.windows(2).skip(2) {
            let ratio = w[1] as f64 / w[0] as f64;
            assert!((ratio - 2.0).abs() < 0.25, "{per_second:?}");
        }
    }

    #[test]
    fn ramp_over_requests_spaces_the_first_gaps_widest() {
        let s = ramped("linear:2..20", RampOver::Requests(10), Arrival::Constant);
        let o: Vec<f64> = s.offsets(0).take(10).map(|d| d.as_secs_f64()).collect();
        let g: Vec<f64> = o.windows(2).map(|w| w[1] - w[0]).collect();
        // Gap k is drawn at the rate of progress (k + ½) / 9.
        for (k, gap) in g.iter().enumerate() {
            let rate = 2.0 + 18.0 * (k as f64 + 0.5) / 9.0;
            assert!((gap - 1.0 / rate).abs() < 1e-9, "{k}: {gap}");
        }
        assert!(g.windows(2).all(|w| w[1] < w[0]));
        assert!(
            Schedule::RampedBacklog {
                ramp: RampPlan {
                    ramp: "linear:1..4".parse().unwrap(),
                    over: RampOver::Requests(10)
                }
            }
            .is_backlog()
        );
    }
}
