//! The value grammars of two knobs: simulated [`Speed`] and the output-length
//! distribution [`OutputLen`] (parsed from flags and TOML strings, and displayed
//! back in the same form).

use std::fmt;
use std::str::FromStr;

/// How simulated time maps to wall time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Speed {
    /// One simulated second per wall second (the engine sleeps each step).
    Realtime,
    /// `factor` simulated seconds per wall second (2.0 = twice as fast).
    Scaled(f64),
    /// No sleeping at all: steps run back to back as fast as the CPU allows.
    Max,
}

impl Speed {
    /// Simulated seconds per wall second, or `None` for [`Speed::Max`].
    pub fn factor(self) -> Option<f64> {
        match self {
            Speed::Realtime => Some(1.0),
            Speed::Scaled(f) => Some(f),
            Speed::Max => None,
        }
    }
}

/// A string that is not a [`Speed`].
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("`{0}` is not a speed (expected realtime, max, or a factor > 0 such as 10)")]
pub struct ParseSpeedError(pub String);

impl FromStr for Speed {
    type Err = ParseSpeedError;
    fn from_str(s: &str) -> Result<Self, ParseSpeedError> {
        match s.trim() {
            "realtime" | "real" | "1" | "1x" => Ok(Speed::Realtime),
            "max" => Ok(Speed::Max),
            other => {
                let num = other.strip_suffix('x').unwrap_or(other);
                match num.parse::<f64>() {
                    Ok(f) if f.is_finite() && f > 0.0 => Ok(Speed::Scaled(f)),
                    _ => Err(ParseSpeedError(s.to_string())),
                }
            }
        }
    }
}

impl fmt::Display for Speed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Speed::Realtime => f.write_str("realtime"),
            Speed::Scaled(x) => write!(f, "{x}"),
            Speed::Max => f.write_str("max"),
        }
    }
}

/// How many tokens a request generates when it may stop at EOS (no `ignore_eos`).
/// The draw is capped by the request's `max_tokens` and is at least 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OutputLen {
    /// Always `n` tokens.
    Fixed(u32),
    /// Uniform over `min..=max`.
    Uniform {
        /// Smallest length.
        min: u32,
        /// Largest length.
        max: u32,
    },
    /// Log-normal with the given median and shape σ (of the underlying normal).
    LogNormal {
        /// Median length in tokens.
        median: f64,
        /// σ of ln(length).
        sigma: f64,
    },
    /// Exponential with the given mean.
    Exponential {
        /// Mean length in tokens.
        mean: f64,
    },
}

impl Default for OutputLen {
    /// Log-normal, median 200 tokens, σ 0.7 (a chat-like spread: p90 ≈ 490).
    fn default() -> Self {
        OutputLen::LogNormal {
            median: 200.0,
            sigma: 0.7,
        }
    }
}

/// A string that is not an [`OutputLen`].
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "`{0}` is not an output-length distribution (expected fixed:N, uniform:MIN,MAX, \
     lognormal:MEDIAN,SIGMA or exponential:MEAN)"
)]
pub struct ParseOutputLenError(pub String);

impl FromStr for OutputLen {
    type Err = ParseOutputLenError;
    fn from_str(s: &str) -> Result<Self, ParseOutputLenError> {
        let bad = || ParseOutputLenError(s.to_string());
        let (kind, args) = s.split_once(':').ok_or_else(bad)?;
        let nums: Vec<f64> = args
            .split(',')
            .map(|a| a.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        let pos = |x: f64| x.is_finite() && x > 0.0;
        let len = |x: f64| pos(x) && x.fract() == 0.0 && x <= u32::MAX as f64;
        match (kind.trim(), nums.as_slice()) {
            ("fixed", [n]) if len(*n) => Ok(OutputLen::Fixed(*n as u32)),
            ("uniform", [a, b]) if len(*a) && len(*b) && a <= b => Ok(OutputLen::Uniform {
                min: *a as u32,
                max: *b as u32,
            }),
            ("lognormal", [m, sg]) if pos(*m) && sg.is_finite() && *sg >= 0.0 => {
                Ok(OutputLen::LogNormal {
                    median: *m,
                    sigma: *sg,
                })
            }
            ("exponential", [m]) if pos(*m) => Ok(OutputLen::Exponential { mean: *m }),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for OutputLen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputLen::Fixed(n) => write!(f, "fixed:{n}"),
            OutputLen::Uniform { min, max } => write!(f, "uniform:{min},{max}"),
            OutputLen::LogNormal { median, sigma } => write!(f, "lognormal:{median},{sigma}"),
            OutputLen::Exponential { mean } => write!(f, "exponential:{mean}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn parses_speeds_durations_and_lengths() {
        assert_eq!("max".parse::<Speed>().unwrap(), Speed::Max);
        assert_eq!("10x".parse::<Speed>().unwrap(), Speed::Scaled(10.0));
        assert!("0".parse::<Speed>().is_err());
        // One duration grammar for every flag and key (tpscope_model::units).
        let parse = tpscope_model::parse_duration;
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(
            "fixed:64".parse::<OutputLen>().unwrap(),
            OutputLen::Fixed(64)
        );
        assert!("uniform:9,3".parse::<OutputLen>().is_err());
        assert!("lognormal:200".parse::<OutputLen>().is_err());
    }
}
