//! The span: one request's lifecycle (docs/design.md §2), its attempts, and its validation.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::cause::{Cause, Status};
use crate::time::{Timestamp, duration_secs};

/// Where a span's token counts came from (docs/design.md §4).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TokenSource {
    /// The server's own count (`usage`, asked for with `stream_options.include_usage`).
    Usage,
    /// The received text counted offline by the named tokenizer (e.g. `o200k_base`).
    Tokenizer(String),
    /// One token per content chunk: a lower bound when a chunk carries several.
    Chunks,
}

impl TokenSource {
    /// How much the source is trusted: usage, then a tokenizer, then chunks.
    pub fn preference(&self) -> u8 {
        match self {
            TokenSource::Usage => 0,
            TokenSource::Tokenizer(_) => 1,
            TokenSource::Chunks => 2,
        }
    }
}

impl fmt::Display for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenSource::Usage => f.write_str("usage"),
            TokenSource::Tokenizer(name) => write!(f, "tokenizer:{name}"),
            TokenSource::Chunks => f.write_str("chunks"),
        }
    }
}

/// A token-source text that is not `usage`, `tokenizer:<name>` or `chunks`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown token source `{0}` (expected usage, tokenizer:<name> or chunks)")]
pub struct UnknownTokenSource(pub String);

impl FromStr for TokenSource {
    type Err = UnknownTokenSource;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "usage" => Ok(TokenSource::Usage),
            "chunks" => Ok(TokenSource::Chunks),
            _ => match s.strip_prefix("tokenizer:") {
                Some(name) if !name.is_empty() => Ok(TokenSource::Tokenizer(name.to_string())),
                _ => Err(UnknownTokenSource(s.to_string())),
            },
        }
    }
}

impl Serialize for TokenSource {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TokenSource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Why a span that did not end ok failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpanError {
    /// The failure cause (closed list, docs/design.md §7).
    pub cause: Cause,
    /// A human-readable message (no prompt or completion text, no credentials).
    #[serde(default)]
    pub message: String,
}

/// When one content chunk arrived and how many output tokens it carried, recorded
/// only when asked for (for inter-token latency).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkMark {
    /// Arrival after the span's `first_token_at`.
    pub offset: Duration,
    /// Output tokens the chunk carried (at least 1 for a content chunk).
    pub tokens: u32,
}

impl Serialize for ChunkMark {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.offset.as_nanos() as u64, self.tokens).serialize(s)
    }
}

impl<'de> Deserialize<'de> for ChunkMark {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (ns, tokens) = <(u64, u32)>::deserialize(d)?;
        Ok(ChunkMark {
            offset: Duration::from_nanos(ns),
            tokens,
        })
    }
}

/// Whether a count is zero (so it is left out of the record).
pub(crate) fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Declares a struct from a field list of [`crate::fields`], with its `FIELDS`.
macro_rules! declare_fields {
    (
        [$(#[$meta:meta])* pub struct $struct:ident]
        $($(#[$attr:meta])* $name:ident $(as $key:literal)?: $ty:ty,)*
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        pub struct $struct {
            $($(#[$attr])* $(#[serde(rename = $key)])? pub $name: $ty,)*
        }

        impl $struct {
            /// The keys of its JSON object in the order tpscope writes them (a span
            /// record has `kind` before them).
            pub const FIELDS: &'static [&'static str] =
                &[$($crate::field_key!($name $(as $key)?)),*];
        }
    };
}

crate::span_fields!(declare_fields [
    /// One request's lifecycle: the same type out of `bench`, `proxy` and importers.
    ///
    /// Invariant (checked by [`Span::validate`]):
    /// `queued_at ≤ admitted_at ≤ first_token_at ≤ last_token_at ≤ released_at` for the
    /// instants present.
    pub struct Span
]);

crate::attempt_fields!(declare_fields [
    /// One HTTP attempt of a request. A request with retries has several; the last one
    /// decides the span's status.
    pub struct Attempt
]);

/// The largest token count a single span may claim before it is called absurd.
pub const MAX_PLAUSIBLE_TOKENS: u64 = 100_000_000;
/// The longest a single span may last (queued to released) before it is called absurd.
pub const MAX_PLAUSIBLE_SPAN: Duration = Duration::from_secs(30 * 24 * 3600);

/// A span that breaks an invariant: which field, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {problem}")]
pub struct Invalid {
    /// The offending field (as named in the span log).
    pub field: &'static str,
    /// What was expected and what was found.
    pub problem: String,
}

fn invalid(field: &'static str, problem: impl Into<String>) -> Invalid {
    Invalid {
        field,
        problem: problem.into(),
    }
}

/// The instants and counts of a span that [`check_lifecycle`] checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifecycle {
    /// How the request ended.
    pub status: Status,
    /// Entered the queue.
    pub queued_at: Timestamp,
    /// Took a slot.
    pub admitted_at: Option<Timestamp>,
    /// First output chunk.
    pub first_token_at: Option<Timestamp>,
    /// Last output chunk.
    pub last_token_at: Option<Timestamp>,
    /// Gave the slot back.
    pub released_at: Timestamp,
    /// Output tokens.
    pub output_tokens: u64,
    /// Whether the span carries an `error`.
    pub has_error: bool,
}

/// Checks the lifecycle order and plausibility of a span's timestamps and counts.
/// Shared by [`Span::validate`] and readers that never build a full [`Span`].
pub fn check_lifecycle(l: Lifecycle) -> Result<(), Invalid> {
    let Lifecycle {
        status,
        queued_at,
        admitted_at,
        first_token_at,
        last_token_at,
        released_at,
        output_tokens,
        has_error,
    } = l;
    for (field, t) in [
        ("queued_at", Some(queued_at)),
        ("admitted_at", admitted_at),
        ("first_token_at", first_token_at),
        ("last_token_at", last_token_at),
        ("released_at", Some(released_at)),
    ] {
        if let Some(t) = t
            && !t.is_plausible()
        {
            return Err(invalid(
                field,
                format!("{t} is outside 2000..2200 (a number in the wrong --time-unit?)"),
            ));
        }
    }
    let order = [
        ("queued_at", Some(queued_at)),
        ("admitted_at", admitted_at),
        ("first_token_at", first_token_at),
        ("last_token_at", last_token_at),
        ("released_at", Some(released_at)),
    ];
    let mut prev: Option<(&'static str, Timestamp)> = None;
    for (field, t) in order {
        let Some(t) = t else { continue };
        if let Some((pf, pt)) = prev
            && t < pt
        {
            return Err(invalid(field, format!("{t} is before {pf} ({pt})")));
        }
        prev = Some((field, t));
    }
    if first_token_at.is_some() != last_token_at.is_some() {
        return Err(invalid(
            if first_token_at.is_some() {
                "last_token_at"
            } else {
                "first_token_at"
            },
            "first_token_at and last_token_at must be both present or both absent",
        ));
    }
    if first_token_at.is_some() && admitted_at.is_none() {
        return Err(invalid(
            "admitted_at",
            "missing, but the span has a first token",
        ));
    }
    if released_at
        .since(queued_at)
        .is_some_and(|d| d > MAX_PLAUSIBLE_SPAN)
    {
        return Err(invalid(
            "released_at",
            "the span lasts more than 30 days from queued_at",
        ));
    }
    if output_tokens > MAX_PLAUSIBLE_TOKENS {
        return Err(invalid(
            "output_tokens",
            format!("{output_tokens} is more than {MAX_PLAUSIBLE_TOKENS} tokens"),
        ));
    }
    if output_tokens > 0 && first_token_at.is_none() && status == Status::Ok {
        return Err(invalid(
            "first_token_at",
            "missing, but the ok span has output tokens",
        ));
    }
    if status == Status::Ok && admitted_at.is_none() {
        return Err(invalid("admitted_at", "missing, but the span is ok"));
    }
    if status != Status::Ok && !has_error {
        return Err(invalid(
            "error",
            format!("missing for a span with status {status}"),
        ));
    }
    Ok(())
}

impl Span {
    /// Checks the invariants of a span: lifecycle order, plausible instants and
    /// counts, an `error` for spans that did not end ok, and retry bookkeeping.
    pub fn validate(&self) -> Result<(), Invalid> {
        if self.run_id.is_empty() {
            return Err(invalid("run_id", "empty"));
        }
        if self.span_id.is_empty() {
            return Err(invalid("span_id", "empty"));
        }
        check_lifecycle(Lifecycle {
            status: self.status,
            queued_at: self.queued_at,
            admitted_at: self.admitted_at,
            first_token_at: self.first_token_at,
            last_token_at: self.last_token_at,
            released_at: self.released_at,
            output_tokens: self.output_tokens,
            has_error: self.error.is_some(),
        })?;
        if let Some(n) = self.input_tokens
            && n > MAX_PLAUSIBLE_TOKENS
        {
            return Err(invalid(
                "input_tokens",
                format!("{n} is more than {MAX_PLAUSIBLE_TOKENS} tokens"),
            ));
        }
        if !self.retry_causes.is_empty() && self.retry_causes.len() != self.retry_count as usize {
            return Err(invalid(
                "retry_causes",
                format!(
                    "{} causes for retry_count {}",
                    self.retry_causes.len(),
                    self.retry_count
                ),
            ));
        }
        for a in &self.attempts {
            if a.ended_at < a.started_at {
                return Err(invalid(
                    "attempts",
                    format!(
                        "an attempt ends ({}) before it starts ({})",
                        a.ended_at, a.started_at
                    ),
                ));
            }
            if a.tokens > MAX_PLAUSIBLE_TOKENS {
                return Err(invalid(
                    "attempts",
                    format!("an attempt claims {} tokens", a.tokens),
                ));
            }
        }
        Ok(())
    }

    /// Tokens received by attempts that did not end ok (docs/design.md §3 `wasted_tokens`).
    pub fn wasted_tokens(&self) -> u64 {
        self.attempts
            .iter()
            .filter(|a| a.cause.is_some())
            .map(|a| a.tokens)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
    }

    fn ok_span() -> Span {
        Span {
            run_id: "r".into(),
            span_id: "1".into(),
            request_id: None,
            status: Status::Ok,
            queued_at: t(0),
            admitted_at: Some(t(10)),
            first_token_at: Some(t(50)),
            last_token_at: Some(t(150)),
            released_at: t(151),
            output_tokens: 11,
            input_tokens: Some(100),
            token_source: Some(TokenSource::Usage),
            retry_count: 0,
            retry_causes: vec![],
            attempts: vec![],
            error: None,
            chunks: None,
            session_id: None,
            turn: None,
            tokenizer_output_tokens: None,
            finish_reason: None,
        }
    }

    #[test]
    fn a_well_ordered_span_is_valid_and_round_trips() {
        let s = ok_span();
        s.validate().unwrap();
        let json = serde_json::to_string(&s).unwrap();
        let back: Span = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
    }

    /// The keys of a JSON object, in the order written.
    struct Keys(Vec<String>);

    impl<'de> Deserialize<'de> for Keys {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Keys;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut m: A,
                ) -> Result<Keys, A::Error> {
                    let mut keys = Vec::new();
                    while let Some(k) = m.next_key::<String>()? {
                        m.next_value::<serde::de::IgnoredAny>()?;
                        keys.push(k);
                    }
                    Ok(Keys(keys))
                }
            }
            d.deserialize_map(V)
        }
    }

    #[test]
    fn fields_are_the_keys_serde_writes_in_order() {
        let mut s = ok_span();
        s.request_id = Some("req".into());
        s.retry_count = 1;
        s.retry_causes = vec![Cause::Http429];
        s.attempts = vec![Attempt {
            ended_at: t(1),
            http_status: Some(429),
            cause: Some(Cause::Http429),
            ..Attempt::started(t(0))
        }];
        s.error = Some(SpanError {
            cause: Cause::Disconnect,
            message: String::new(),
        });
        s.chunks = Some(vec![]);
        s.session_id = Some("1".into());
        s.turn = Some(1);
        s.tokenizer_output_tokens = Some(1);
        s.finish_reason = Some("stop".into());
        let Keys(keys) = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(keys, Span::FIELDS);
        let a = Attempt {
            first_byte_at: Some(t(0)),
            first_token_at: Some(t(1)),
            connection_reused: Some(true),
            connect_time: Some(Duration::from_millis(1)),
            backoff: Some(Duration::from_millis(2)),
            end_at: Some(t(1)),
            client_lag: Some(Duration::from_micros(3)),
            reads: Some(4),
            traced_chunks: Some(5),
            inexact_chunks: Some(0),
            first_token_exact: Some(true),
            resends: 1,
            ..s.attempts[0].clone()
        };
        let Keys(keys) = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(keys, Attempt::FIELDS);
    }

    #[test]
    fn first_token_before_admission_names_the_field() {
        let mut s = ok_span();
        s.first_token_at = Some(t(5));
        let e = s.validate().unwrap_err();
        assert_eq!(e.field, "first_token_at");
        assert!(e.problem.contains("before admitted_at"), "{e}");
    }

    #[test]
    fn error_span_needs_an_error() {
        let mut s = ok_span();
        s.status = Status::Error;
        assert_eq!(s.validate().unwrap_err().field, "error");
    }

    #[test]
    fn token_source_text_forms() {
        assert_eq!(
            "tokenizer:o200k_base"
                .parse::<TokenSource>()
                .unwrap()
                .to_string(),
            "tokenizer:o200k_base"
        );
        assert!("tokenizer:".parse::<TokenSource>().is_err());
        assert!("words".parse::<TokenSource>().is_err());
    }
}
