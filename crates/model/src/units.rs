//! The one duration grammar of every flag and config key (`10ms`, `1.5s`, `2m`, `1h`,
//! a bare number of seconds) and "count or duration" values (`--warmup 20` or
//! `--warmup 10s`), and the unit of timestamps written as bare numbers.

use std::fmt;
use std::time::Duration;

/// A value that is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not a duration (expected a number with a unit: 500us, 10ms, 1.5s, 2m, 1h; a bare number means seconds)"
)]
pub struct BadDuration {
    /// The offending text.
    pub text: String,
}

/// Parses `500us`, `10ms`, `1.5s`, `2m`, `1h` or a bare number of seconds. Negative,
/// non-finite and absurd (over a year) values are rejected.
pub fn parse_duration(text: &str) -> Result<Duration, BadDuration> {
    let bad = || BadDuration {
        text: text.to_string(),
    };
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(bad());
    }
    let v: f64 = num.parse().map_err(|_| bad())?;
    let scale = match unit.trim() {
        "" | "s" | "sec" | "secs" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad()),
    };
    let secs = v * scale;
    if !secs.is_finite() || secs > 366.0 * 86_400.0 {
        return Err(bad());
    }
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}

/// Renders a duration the way [`parse_duration`] reads it back (`10ms`, `1.5s`).
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0s".into()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

/// A warm-up: a number of requests, or a span of time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Warmup {
    /// The first `n` requests.
    Requests(u64),
    /// Requests that become ready within this time from the start.
    Time(Duration),
}

impl fmt::Display for Warmup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warmup::Requests(n) => write!(f, "{n}"),
            Warmup::Time(d) => f.write_str(&format_duration(*d)),
        }
    }
}

/// A warm-up value that is neither a count nor a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is neither a request count (e.g. 20) nor a duration (e.g. 10s)")]
pub struct BadWarmup(pub String);

/// Parses `20` (requests) or `10s` (time). A bare integer is a count.
pub fn parse_warmup(text: &str) -> Result<Warmup, BadWarmup> {
    let t = text.trim();
    if let Ok(n) = t.parse::<u64>() {
        return Ok(Warmup::Requests(n));
    }
    parse_duration(t)
        .map(Warmup::Time)
        .map_err(|_| BadWarmup(text.to_string()))
}

/// The unit of timestamps given as numbers (seconds, milliseconds, … since the
/// Unix epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeUnit {
    /// Seconds.
    S,
    /// Milliseconds.
    Ms,
    /// Microseconds.
    Us,
    /// Nanoseconds.
    Ns,
}

impl TimeUnit {
    /// Nanoseconds in one of this unit.
    pub fn nanos(self) -> i64 {
        match self {
            TimeUnit::S => 1_000_000_000,
            TimeUnit::Ms => 1_000_000,
            TimeUnit::Us => 1_000,
            TimeUnit::Ns => 1,
        }
    }
}

/// A `--time-unit` value that is not s, ms, us or ns.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown time unit `{0}` (expected s, ms, us or ns)")]
pub struct BadTimeUnit(pub String);

impl std::str::FromStr for TimeUnit {
    type Err = BadTimeUnit;
    fn from_str(s: &str) -> Result<Self, BadTimeUnit> {
        match s {
            "s" => Ok(TimeUnit::S),
            "ms" => Ok(TimeUnit::Ms),
            "us" | "µs" => Ok(TimeUnit::Us),
            "ns" => Ok(TimeUnit::Ns),
            _ => Err(BadTimeUnit(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("10ms").unwrap(), Duration::from_millis(10));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("60").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        for bad in ["", "s", "-1s", "1x", "1.2.3s", "ms10", "1e999s", "9999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn durations_format_round_trip() {
        for d in [
            Duration::from_millis(10),
            Duration::from_secs(60),
            Duration::from_micros(5),
        ] {
            assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
        }
    }

    #[test]
    fn warmup_is_a_count_or_a_time() {
        assert_eq!(parse_warmup("20").unwrap(), Warmup::Requests(20));
        assert_eq!(
            parse_warmup("10s").unwrap(),
            Warmup::Time(Duration::from_secs(10))
        );
        assert!(parse_warmup("ten").is_err());
    }
}
