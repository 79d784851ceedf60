//! Ramp-up (pure): `--ramp-up linear:FROM..TO` or `exponential:FROM..TO`, a load
//! knob (the open-loop rate, or the closed-loop concurrency cap) that grows from
//! FROM to TO over the run — over `--duration` when the run has one (a function of
//! time), else over its request count (a function of the request's index, as
//! `vllm bench serve --ramp-up-strategy` does).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How the knob grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RampShape {
    /// `FROM + (TO - FROM) · p`.
    Linear,
    /// `FROM · (TO / FROM)^p` (FROM > 0).
    Exponential,
}

/// A parsed `--ramp-up` value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ramp {
    /// How it grows.
    pub shape: RampShape,
    /// The value at the start.
    pub from: f64,
    /// The value at the end.
    pub to: f64,
}

/// A `--ramp-up` value that does not parse or cannot ramp.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--ramp-up: `{0}` is not a ramp (expected linear:FROM..TO or exponential:FROM..TO with 0 ≤ FROM < TO, FROM > 0 for exponential)"
)]
pub struct BadRamp(pub String);

impl FromStr for Ramp {
    type Err = BadRamp;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadRamp(s.to_string());
        let (shape, range) = s.trim().split_once(':').ok_or_else(bad)?;
        let shape = match shape.trim() {
            "linear" => RampShape::Linear,
            "exponential" | "exp" => RampShape::Exponential,
            _ => return Err(bad()),
        };
        let (a, b) = range.split_once("..").ok_or_else(bad)?;
        let num = |x: &str| x.trim().parse::<f64>().ok().filter(|v| v.is_finite());
        let (from, to) = (num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?);
        Ramp::new(shape, from, to).ok_or_else(bad)
    }
}

impl Ramp {
    /// A ramp from `from` up to `to`; `None` unless 0 ≤ from < to (from > 0 for
    /// exponential, whose value never reaches 0).
    pub fn new(shape: RampShape, from: f64, to: f64) -> Option<Ramp> {
        let ok = from.is_finite()
            && to.is_finite()
            && from >= 0.0
            && from < to
            && (shape == RampShape::Linear || from > 0.0);
        ok.then_some(Ramp { shape, from, to })
    }

    /// The value at progress `p` (0 at the start, 1 at the end; clamped).
    pub fn value(&self, p: f64) -> f64 {
        let p = p.clamp(0.0, 1.0);
        match self.shape {
            RampShape::Linear => self.from + (self.to - self.from) * p,
            RampShape::Exponential => self.from * (self.to / self.from).powf(p),
        }
    }

    /// The progress at which the value reaches `v` (inverse of [`Ramp::value`]),
    /// clamped to 0..=1.
    pub fn progress_of(&self, v: f64) -> f64 {
        let p = match self.shape {
            RampShape::Linear => (v - self.from) / (self.to - self.from),
            RampShape::Exponential => (v / self.from).ln() / (self.to / self.from).ln(),
        };
        if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) }
    }

    /// The integral of the value over progress 0..p, times `span` (seconds): the
    /// expected arrivals by time `p · span` when the value is a rate.
    fn area(&self, p: f64, span: f64) -> f64 {
        match self.shape {
            RampShape::Linear => span * (self.from * p + (self.to - self.from) * p * p / 2.0),
            RampShape::Exponential => {
                let k = (self.to / self.from).ln();
                span * self.from * ((k * p).exp() - 1.0) / k
            }
        }
    }

    /// The time (seconds) at which the expected arrivals of a rate ramped over
    /// `span` seconds reach `n` (inverse of the area; past the end the rate stays
    /// at TO).
    pub fn time_of_arrivals(&self, n: f64, span: f64) -> f64 {
        let total = self.area(1.0, span);
        if n >= total {
            return span + (n - total) / self.to;
        }
        let p = match self.shape {
            RampShape::Linear => {
                let (a, b) = ((self.to - self.from) / 2.0, self.from);
                let c = n / span;
                if a <= 0.0 {
                    c / b
                } else {
                    // Root of a·p² + b·p − c = 0, written so that b ≫ a stays exact.
                    2.0 * c / (b + (b * b + 4.0 * a * c).sqrt())
                }
            }
            RampShape::Exponential => {
                let k = (self.to / self.from).ln();
                (n * k / (span * self.from)).ln_1p() / k
            }
        };
        p.clamp(0.0, 1.0) * span
    }

    /// The concurrency cap at progress `p`: the value rounded, at least 1.
    pub fn cap_at(&self, p: f64) -> u32 {
        self.value(p).round().clamp(1.0, u32::MAX as f64) as u32
    }

    /// When the cap of a ramp over `span` takes each new value: `(time, cap)` for
    /// every step after the start, in order.
    pub fn cap_steps(&self, span: Duration) -> Vec<(Duration, u32)> {
        let first = self.cap_at(0.0);
        let last = self.cap_at(1.0);
        ((first + 1)..=last)
            .map(|c| {
                // `round` moves to c when the value reaches c − ½.
                let p = self.progress_of(f64::from(c) - 0.5);
                (span.mul_f64(p), c)
            })
            .collect()
    }
}

impl fmt::Display for Ramp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape = match self.shape {
            RampShape::Linear => "linear",
            RampShape::Exponential => "exponential",
        };
        write!(f, "{shape}:{}..{}", self.from, self.to)
    }
}

/// What a ramp is spread over.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RampOver {
    /// The run's `--duration`: the value is a function of time.
    Duration(Duration),
    /// The run's request count: the value is a function of the request's index.
    Requests(u64),
}

/// A ramp and what it is spread over.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RampPlan {
    /// The ramp.
    pub ramp: Ramp,
    /// Over what.
    pub over: RampOver,
}

impl RampPlan {
    /// The progress of request `index` in a ramp over requests (0 for the first,
    /// 1 for the last); `None` for a ramp over time.
    pub fn request_progress(&self, index: f64) -> Option<f64> {
        match self.over {
            RampOver::Requests(n) => Some(if n <= 1 {
                1.0
            } else {
                (index / (n - 1) as f64).clamp(0.0, 1.0)
            }),
            RampOver::Duration(_) => None,
        }
    }

    /// `"duration"` or `"requests"`, for the run record.
    pub fn over_name(&self) -> &'static str {
        match self.over {
            RampOver::Duration(_) => "duration",
            RampOver::Requests(_) => "requests",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramps_parse_and_bad_ones_are_refused() {
        let r: Ramp = "linear:1..20".parse().unwrap();
        assert_eq!((r.shape, r.from, r.to), (RampShape::Linear, 1.0, 20.0));
        assert_eq!(r.to_string(), "linear:1..20");
        let e: Ramp = "exponential: 2 .. 64".parse().unwrap();
        assert_eq!(e.shape, RampShape::Exponential);
        assert!("linear:0..5".parse::<Ramp>().is_ok());
        for bad in [
            "linear",
            "linear:5",
            "linear:5..5",
            "linear:9..3",
            "linear:-1..3",
            "exponential:0..8",
            "cubic:1..2",
            "linear:a..b",
            "linear:1..inf",
        ] {
            let err = bad.parse::<Ramp>().unwrap_err().to_string();
            assert!(err.contains("--ramp-up"), "{bad}: {err}");
        }
    }

    #[test]
    fn values_at_given_progress() {
        let l = Ramp::new(RampShape::Linear, 2.0, 10.0).unwrap();
        assert_eq!(
            [0.0, 0.25, 0.5, 1.0, 2.0].map(|p| l.value(p)),
            [2.0, 4.0, 6.0, 10.0, 10.0]
        );
        let e = Ramp::new(RampShape::Exponential, 1.0, 16.0).unwrap();
        // Exponential: equal steps of progress multiply the value equally.
        for (p, want) in [
            (0.0, 1.0),
            (0.25, 2.0),
            (0.5, 4.0),
            (0.75, 8.0),
            (1.0, 16.0),
        ] {
            assert!((e.value(p) - want).abs() < 1e-9, "{p}: {}", e.value(p));
            assert!((e.progress_of(want) - p).abs() < 1e-9);
        }
    }

    #[test]
    fn arrivals_over_time_integrate_the_rate() {
        // Linear 0..10 over 10 s: 50 expected arrivals, n(t) = t²/2.
        let l = Ramp::new(RampShape::Linear, 0.0, 10.0).unwrap();
        assert!((l.time_of_arrivals(50.0, 10.0) - 10.0).abs() < 1e-9);
        assert!((l.time_of_arrivals(12.5, 10.0) - 5.0).abs() < 1e-9);
        // Past the end the rate stays at TO.
        assert!((l.time_of_arrivals(60.0, 10.0) - 11.0).abs() < 1e-9);
        // Exponential 1..16 over 4 s: n(t) = (2^t − 1) / ln 2.
        let e = Ramp::new(RampShape::Exponential, 1.0, 16.0).unwrap();
        for t in [0.5, 1.0, 3.0, 4.0] {
            let n = (2f64.powf(t) - 1.0) / 2f64.ln();
            assert!((e.time_of_arrivals(n, 4.0) - t).abs() < 1e-9, "{t}");
        }
    }

    #[test]
    fn cap_steps_are_where_the_rounded_value_changes() {
        let l = Ramp::new(RampShape::Linear, 1.0, 4.0).unwrap();
        let steps = l.cap_steps(Duration::from_secs(6));
        assert_eq!(
            steps,
            vec![
                (Duration::from_secs(1), 2),
                (Duration::from_secs(3), 3),
                (Duration::from_secs(5), 4)
            ]
        );
        for (t, c) in steps {
            assert_eq!(l.cap_at(t.as_secs_f64() / 6.0 + 1e-9), c);
        }
        assert_eq!(
            Ramp::new(RampShape::Linear, 0.0, 3.0).unwrap().cap_at(0.0),
            1
        );
    }
}
