//! Token-length distributions for synthetic requests (`--input-tokens`,
//! `--output-tokens`): their text syntax, validation and seeded sampling.
//!
//! Syntax (every length is clamped to [1, 1,000,000] tokens and rounded):
//! - `512` — always 512;
//! - `uniform:100..900` — uniform integers in [100, 900];
//! - `normal:512,128` — normal with mean 512 and standard deviation 128;
//! - `lognormal:512,256` — log-normal with *mean* 512 and standard deviation 256 (in
//!   tokens, not in log space): long-tailed like real prompts and replies;
//! - `exp:200` — exponential with mean 200;
//! - `azure` — the bundled Azure 2023 conversation trace's input (or output) lengths.

use std::fmt;
use std::str::FromStr;

use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal, Normal};

use crate::azure::azure_lengths;

/// The largest length a distribution may produce.
pub const MAX_LENGTH: u32 = 1_000_000;

/// A distribution of token lengths.
#[derive(Clone, Debug, PartialEq)]
pub enum LengthDist {
    /// Always this length.
    Fixed(u32),
    /// Uniform integers in `[lo, hi]`.
    Uniform {
        /// Smallest length.
        lo: u32,
        /// Largest length.
        hi: u32,
    },
    /// Normal, rounded and clamped.
    Normal {
        /// Mean, tokens.
        mean: f64,
        /// Standard deviation, tokens.
        sd: f64,
    },
    /// Log-normal with this mean and standard deviation (in tokens).
    LogNormal {
        /// Mean, tokens.
        mean: f64,
        /// Standard deviation, tokens.
        sd: f64,
    },
    /// Exponential with this mean.
    Exp {
        /// Mean, tokens.
        mean: f64,
    },
    /// Drawn from the bundled Azure conversation trace (input or output column).
    Azure(Column),
}

/// Which column of a (input, output) length table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// Prompt lengths.
    Input,
    /// Reply lengths.
    Output,
}

/// A distribution text that does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "`{text}`: {problem} (expected N, uniform:LO..HI, normal:MEAN,SD, lognormal:MEAN,SD, exp:MEAN or azure)"
)]
pub struct BadDist {
    /// The offending text.
    pub text: String,
    /// What was wrong.
    pub problem: String,
}

impl LengthDist {
    /// Parses the syntax in the module docs. `column` says which Azure column `azure`
    /// means (input for `--input-tokens`, output for `--output-tokens`).
    pub fn parse(text: &str, column: Column) -> Result<LengthDist, BadDist> {
        let bad = |p: &str| BadDist {
            text: text.to_string(),
            problem: p.to_string(),
        };
        let t = text.trim();
        let num = |s: &str, what: &str| -> Result<f64, BadDist> {
            let v: f64 = s
                .trim()
                .parse()
                .map_err(|_| bad(&format!("{what} `{}` is not a number", s.trim())))?;
            if !v.is_finite() || v < 0.0 || v > f64::from(MAX_LENGTH) {
                return Err(bad(&format!("{what} must be in 0..={MAX_LENGTH}")));
            }
            Ok(v)
        };
        let pair = |args: &str| -> Result<(f64, f64), BadDist> {
            let (a, b) = args
                .split_once(',')
                .ok_or_else(|| bad("expected two numbers MEAN,SD"))?;
            Ok((num(a, "the mean")?, num(b, "the standard deviation")?))
        };
        let (kind, args) = match t.split_once(':') {
            Some((k, a)) => (k.trim(), a),
            None => (t, ""),
        };
        let d = match kind {
            "azure" if args.is_empty() => LengthDist::Azure(column),
            "uniform" => {
                let (a, b) = args
                    .split_once("..")
                    .ok_or_else(|| bad("expected uniform:LO..HI"))?;
                let (lo, hi) = (num(a, "LO")?, num(b, "HI")?);
                if lo.fract() != 0.0 || hi.fract() != 0.0 {
                    return Err(bad("LO and HI must be whole numbers"));
                }
                if lo < 1.0 || hi < lo {
                    return Err(bad("need 1 <= LO <= HI"));
                }
                LengthDist::Uniform {
                    lo: lo as u32,
                    hi: hi as u32,
                }
            }
            "normal" => {
                let (mean, sd) = pair(args)?;
                if mean < 1.0 {
                    return Err(bad("the mean must be at least 1"));
                }
                LengthDist::Normal { mean, sd }
            }
            "lognormal" => {
                let (mean, sd) = pair(args)?;
                if mean < 1.0 {
                    return Err(bad("the mean must be at least 1"));
                }
                LengthDist::LogNormal { mean, sd }
            }
            "exp" => {
                let mean = num(args, "the mean")?;
                if mean < 1.0 {
                    return Err(bad("the mean must be at least 1"));
                }
                LengthDist::Exp { mean }
            }
            _ if args.is_empty() => {
                let n: u32 = t
                    .parse()
                    .map_err(|_| bad("not a whole number of tokens or a known distribution"))?;
                if n == 0 || n > MAX_LENGTH {
                    return Err(bad(&format!("a length must be in 1..={MAX_LENGTH}")));
                }
                LengthDist::Fixed(n)
            }
            _ => return Err(bad(&format!("unknown distribution `{kind}`"))),
        };
        Ok(d)
    }

    /// One length drawn from the distribution, in [1, MAX_LENGTH].
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let v: f64 = match *self {
            LengthDist::Fixed(n) => return n,
            LengthDist::Uniform { lo, hi } => return rng.random_range(lo..=hi),
            LengthDist::Normal { mean, sd } => match Normal::new(mean, sd) {
                Ok(d) => d.sample(rng),
                Err(_) => mean,
            },
            LengthDist::LogNormal { mean, sd } => {
                // Moments in token space → parameters in log space.
                let s2 = (1.0 + (sd * sd) / (mean * mean)).ln();
                let mu = mean.ln() - s2 / 2.0;
                match LogNormal::new(mu, s2.sqrt()) {
                    Ok(d) => d.sample(rng),
                    Err(_) => mean,
                }
            }
            LengthDist::Exp { mean } => match Exp::new(1.0 / mean) {
                Ok(d) => d.sample(rng),
                Err(_) => mean,
            },
            LengthDist::Azure(col) => {
                let t = azure_lengths();
                let (i, o) = t[rng.random_range(0..t.len())];
                return match col {
                    Column::Input => i,
                    Column::Output => o,
                };
            }
        };
        clamp_len(v)
    }

    /// The distribution's mean, in tokens (before clamping), for summaries.
    pub fn mean(&self) -> f64 {
        match *self {
            LengthDist::Fixed(n) => f64::from(n),
            LengthDist::Uniform { lo, hi } => (f64::from(lo) + f64::from(hi)) / 2.0,
            LengthDist::Normal { mean, .. }
            | LengthDist::LogNormal { mean, .. }
            | LengthDist::Exp { mean } => mean,
            LengthDist::Azure(col) => {
                let t = azure_lengths();
                let sum: f64 = t
                    .iter()
                    .map(|&(i, o)| f64::from(if col == Column::Input { i } else { o }))
                    .sum();
                sum / t.len().max(1) as f64
            }
        }
    }
}

fn clamp_len(v: f64) -> u32 {
    if v.is_nan() {
        return 1;
    }
    v.round().clamp(1.0, f64::from(MAX_LENGTH)) as u32
}

impl fmt::Display for LengthDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LengthDist::Fixed(n) => write!(f, "{n}"),
            LengthDist::Uniform { lo, hi } => write!(f, "uniform:{lo}..{hi}"),
            LengthDist::Normal { mean, sd } => write!(f, "normal:{mean},{sd}"),
            LengthDist::LogNormal { mean, sd } => write!(f, "lognormal:{mean},{sd}"),
            LengthDist::Exp { mean } => write!(f, "exp:{mean}"),
            LengthDist::Azure(_) => f.write_str("azure"),
        }
    }
}

impl FromStr for LengthDist {
    type Err = BadDist;
    /// Parses with `azure` meaning the output column; use [`LengthDist::parse`] to choose.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LengthDist::parse(s, Column::Output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn mean_of(d: &LengthDist, n: usize) -> f64 {
        let mut rng = StdRng::seed_from_u64(7);
        (0..n).map(|_| f64::from(d.sample(&mut rng))).sum::<f64>() / n as f64
    }

    #[test]
    fn parses_every_form() {
        let p = |s: &str| LengthDist::parse(s, Column::Input).unwrap();
        assert_eq!(p("512"), LengthDist::Fixed(512));
        assert_eq!(
            p("uniform:100..900"),
            LengthDist::Uniform { lo: 100, hi: 900 }
        );
        assert_eq!(
            p("normal:512,128"),
            LengthDist::Normal {
                mean: 512.0,
                sd: 128.0
            }
        );
        assert_eq!(
            p("lognormal:512, 256"),
            LengthDist::LogNormal {
                mean: 512.0,
                sd: 256.0
            }
        );
        assert_eq!(p("exp:200"), LengthDist::Exp { mean: 200.0 });
        assert_eq!(p("azure"), LengthDist::Azure(Column::Input));
        for d in ["512", "uniform:100..900", "normal:512,128", "exp:200"] {
            assert_eq!(p(&p(d).to_string()), p(d));
        }
    }

    #[test]
    fn rejects_bad_distributions_with_the_reason() {
        for (text, needle) in [
            ("0", "1..="),
            ("abc", "not a whole number"),
            ("uniform:900..100", "LO <= HI"),
            ("uniform:1-5", "LO..HI"),
            ("normal:512", "two numbers"),
            ("normal:x,1", "not a number"),
            ("gauss:1,2", "unknown distribution"),
            ("normal:-5,1", "0..="),
            ("azure:3", "unknown distribution"),
        ] {
            let e = LengthDist::parse(text, Column::Input).unwrap_err();
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn samples_have_the_stated_mean_and_stay_in_range() {
        for (d, mean) in [
            (LengthDist::Fixed(64), 64.0),
            (LengthDist::Uniform { lo: 100, hi: 900 }, 500.0),
            (
                LengthDist::Normal {
                    mean: 512.0,
                    sd: 64.0,
                },
                512.0,
            ),
            (
                LengthDist::LogNormal {
                    mean: 512.0,
                    sd: 256.0,
                },
                512.0,
            ),
            (LengthDist::Exp { mean: 200.0 }, 200.0),
        ] {
            let m = mean_of(&d, 20_000);
            assert!(
                (m - mean).abs() / mean < 0.03,
                "{d}: mean {m}, expected {mean}"
            );
        }
        let mut rng = StdRng::seed_from_u64(1);
        let wide = LengthDist::Normal {
            mean: 2.0,
            sd: 100.0,
        };
        assert!((0..1000).all(|_| wide.sample(&mut rng) >= 1));
    }

    #[test]
    fn azure_lengths_look_like_chat_traffic() {
        let m_in = mean_of(&LengthDist::Azure(Column::Input), 20_000);
        let m_out = mean_of(&LengthDist::Azure(Column::Output), 20_000);
        assert!((1000.0..1300.0).contains(&m_in), "input mean {m_in}");
        assert!((180.0..240.0).contains(&m_out), "output mean {m_out}");
    }
}
