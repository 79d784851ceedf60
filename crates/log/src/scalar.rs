//! A JSON value read without committing to a type, so that a wrong type becomes an
//! error that names the field (serde's own messages do not).

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use tpscope_model::Timestamp;
pub use tpscope_model::units::{BadTimeUnit, TimeUnit};

/// One JSON value of a record field, borrowed from the line where possible.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar<'a> {
    /// A string.
    Str(Cow<'a, str>),
    /// A non-negative integer.
    U(u64),
    /// A negative integer.
    I(i64),
    /// A number with a fraction or exponent.
    F(f64),
    /// true or false.
    Bool(bool),
    /// null.
    Null,
    /// An object or an array (named, for the message).
    Other(&'static str),
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Scalar::U(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(if v >= 0 {
                    Scalar::U(v as u64)
                } else {
                    Scalar::I(v)
                })
            }
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Scalar::F(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Null)
            }
            fn visit_none<E>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Null)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other("an object"))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Self::Value, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other("an array"))
            }
        }
        d.deserialize_any(V)
    }
}

impl Scalar<'_> {
    /// What the value is, for messages ("a string", "a negative number", …).
    pub fn describe(&self) -> String {
        match self {
            Scalar::Str(s) if s.len() > 40 => "a string".to_string(),
            Scalar::Str(s) => format!("the string \"{s}\""),
            Scalar::U(v) => format!("the number {v}"),
            Scalar::I(v) => format!("the negative number {v}"),
            Scalar::F(v) => format!("the number {v}"),
            Scalar::Bool(b) => format!("{b}"),
            Scalar::Null => "null".to_string(),
            Scalar::Other(what) => (*what).to_string(),
        }
    }
}

/// The problem with one field: its name (dotted path) and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldProblem {
    /// The field, e.g. `queued_at` or `attempts[1].cause`.
    pub field: String,
    /// What was expected and found.
    pub problem: String,
    /// A short category for counting skipped records.
    pub category: &'static str,
}

pub(crate) fn problem(
    field: impl Into<String>,
    category: &'static str,
    problem: impl Into<String>,
) -> FieldProblem {
    FieldProblem {
        field: field.into(),
        problem: problem.into(),
        category,
    }
}

pub(crate) type FieldResult<T> = Result<T, FieldProblem>;

pub(crate) fn required<'a, 'b>(
    field: &str,
    v: &'b Option<Scalar<'a>>,
) -> FieldResult<&'b Scalar<'a>> {
    match v {
        None | Some(Scalar::Null) => Err(problem(field, "missing_field", "missing (required)")),
        Some(s) => Ok(s),
    }
}

pub(crate) fn present<'a, 'b>(v: &'b Option<Scalar<'a>>) -> Option<&'b Scalar<'a>> {
    v.as_ref().filter(|s| !matches!(s, Scalar::Null))
}

pub(crate) fn as_str<'b>(field: &str, v: &'b Scalar<'_>) -> FieldResult<&'b str> {
    match v {
        Scalar::Str(s) => Ok(s),
        other => Err(problem(
            field,
            "wrong_type",
            format!("expected a string, found {}", other.describe()),
        )),
    }
}

pub(crate) fn as_u64(field: &str, v: &Scalar<'_>) -> FieldResult<u64> {
    match v {
        Scalar::U(n) => Ok(*n),
        Scalar::F(f) if f.fract() == 0.0 && *f >= 0.0 && *f < 9.0e15 => Ok(*f as u64),
        other => Err(problem(
            field,
            "wrong_type",
            format!(
                "expected a non-negative whole number, found {}",
                other.describe()
            ),
        )),
    }
}

pub(crate) fn as_u32(field: &str, v: &Scalar<'_>) -> FieldResult<u32> {
    narrow(field, as_u64(field, v)?, u32::MAX)
}

pub(crate) fn as_u16(field: &str, v: &Scalar<'_>) -> FieldResult<u16> {
    narrow(field, as_u64(field, v)?, u16::MAX)
}

/// `n` as a narrower type whose largest value is `max`.
fn narrow<T: TryFrom<u64> + fmt::Display>(field: &str, n: u64, max: T) -> FieldResult<T> {
    T::try_from(n).map_err(|_| {
        problem(
            field,
            "implausible",
            format!("{n} is too large (at most {max})"),
        )
    })
}

pub(crate) fn as_bool(field: &str, v: &Scalar<'_>) -> FieldResult<bool> {
    match v {
        Scalar::Bool(b) => Ok(*b),
        other => Err(problem(
            field,
            "wrong_type",
            format!("expected true or false, found {}", other.describe()),
        )),
    }
}

pub(crate) fn as_f64(field: &str, v: &Scalar<'_>) -> FieldResult<f64> {
    match v {
        Scalar::U(n) => Ok(*n as f64),
        Scalar::I(n) => Ok(*n as f64),
        Scalar::F(f) => Ok(*f),
        other => Err(problem(
            field,
            "wrong_type",
            format!("expected a number, found {}", other.describe()),
        )),
    }
}

/// The unit that puts a number of time since the Unix epoch in this century, as
/// a hint (`; as ms it is 2026-01-01T00:00:00Z: give --time-unit ms`): a number
/// read in the wrong unit lands in 1970 or past the year 2262.
fn unit_hint(n: f64) -> Option<String> {
    const Y2000_S: f64 = 946_684_800.0;
    const Y2100_S: f64 = 4_102_444_800.0;
    [
        (TimeUnit::S, "s"),
        (TimeUnit::Ms, "ms"),
        (TimeUnit::Us, "us"),
        (TimeUnit::Ns, "ns"),
    ]
    .into_iter()
    .find(|(u, _)| (Y2000_S..Y2100_S).contains(&(n * u.nanos() as f64 / 1e9)))
    .map(|(u, name)| {
        let at = Timestamp::from_unix_nanos((n * u.nanos() as f64) as i64);
        format!("; as {name} it is {at}: give --time-unit {name}")
    })
}

/// A timestamp: an RFC 3339 string, or a number in `unit` since the Unix epoch.
pub(crate) fn as_time(
    field: &str,
    v: &Scalar<'_>,
    unit: Option<TimeUnit>,
) -> FieldResult<Timestamp> {
    let number = match v {
        Scalar::U(n) => Some(*n as f64),
        Scalar::I(n) => Some(*n as f64),
        Scalar::F(f) => Some(*f),
        _ => None,
    };
    let hint = number.and_then(unit_hint).unwrap_or_default();
    let numeric = |unit: Option<TimeUnit>| {
        unit.ok_or_else(|| {
            problem(
                field,
                "wrong_type",
                format!(
                    "{} is a number, but no --time-unit was given (s, ms, us or ns){hint}",
                    v.describe()
                ),
            )
        })
    };
    let out_of_range = || {
        problem(
            field,
            "implausible",
            format!("{} is out of range{hint}", v.describe()),
        )
    };
    match v {
        Scalar::Str(s) => {
            Timestamp::parse_rfc3339(s).map_err(|e| problem(field, "bad_timestamp", e.to_string()))
        }
        Scalar::U(n) => {
            let u = numeric(unit)?;
            i64::try_from(*n)
                .ok()
                .and_then(|n| n.checked_mul(u.nanos()))
                .map(Timestamp::from_unix_nanos)
                .ok_or_else(out_of_range)
        }
        Scalar::I(n) => {
            let u = numeric(unit)?;
            n.checked_mul(u.nanos())
                .map(Timestamp::from_unix_nanos)
                .ok_or_else(out_of_range)
        }
        Scalar::F(f) => {
            let u = numeric(unit)?;
            let ns = (f * u.nanos() as f64).round();
            if ns.is_finite() && ns.abs() < 9.2e18 {
                Ok(Timestamp::from_unix_nanos(ns as i64))
            } else {
                Err(out_of_range())
            }
        }
        other => Err(problem(
            field,
            "wrong_type",
            format!(
                "expected an RFC 3339 timestamp string, found {}",
                other.describe()
            ),
        )),
    }
}
