//! Reading span logs: one streaming pass per file into per-run analysis inputs,
//! with errors that name the file, line and field.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use tpscope_analysis::{RunInput, SampleFacts, SpanFacts};
use tpscope_model::{
    Cause, EndRecord, HourCache, Lifecycle, RunRecord, Status, Target, Timestamp, TokenSource,
    check_lifecycle,
};

use crate::fast::{FastRecord, fast_record};
use crate::json::{JsonResult, KeyTable, Scanner, key_word};
use crate::scalar::*;

/// How to read span logs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// The unit of timestamps written as numbers (`None`: numbers are rejected).
    pub time_unit: Option<TimeUnit>,
    /// Skip invalid records (counted by reason) instead of failing on the first.
    pub skip_invalid: bool,
    /// Keep span ids (for per-span output such as CSV).
    pub keep_span_ids: bool,
}

/// An error reading span logs.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The file could not be opened or read.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file holds no records.
    #[error("{file}: the file is empty (expected a span log: JSON Lines, one record per line)")]
    Empty {
        /// The file.
        file: PathBuf,
    },
    /// The file is not text.
    #[error("{file}:{line}: {what} — this does not look like a span log (JSON Lines text)")]
    Binary {
        /// The file.
        file: PathBuf,
        /// The line where it showed.
        line: u64,
        /// What was found.
        what: &'static str,
    },
    /// A record is invalid.
    #[error("{file}:{line}: {}{problem}", field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
    Record {
        /// The file.
        file: PathBuf,
        /// 1-based line number.
        line: u64,
        /// The offending field, when one is to blame.
        field: Option<String>,
        /// What was wrong and what was expected.
        problem: String,
    },
}

/// One run as read: its analysis input and, when asked, its span ids.
#[derive(Debug, Clone, Default)]
pub struct LoadedRun {
    /// Everything the analysis needs.
    pub input: RunInput,
    /// Span ids in span order (empty unless [`ReadOptions::keep_span_ids`]).
    pub span_ids: Vec<Box<str>>,
}

/// Everything read from one or more span logs.
#[derive(Debug, Clone, Default)]
pub struct LogSet {
    /// Runs in order of first appearance (grouped by `run_id` across files).
    pub runs: Vec<LoadedRun>,
    /// Records read (excluding skipped ones and blank lines).
    pub records: u64,
    /// Skipped records by reason (only with `skip_invalid`).
    pub skipped: BTreeMap<String, u64>,
    /// Warnings: cut-off last lines, runs without `run` or `end` records.
    pub warnings: Vec<String>,
}

/// One line of a span log, every field optional and loosely typed so that a wrong
/// type is reported with the field's name. Filled by [`scan_line`].
#[derive(Default)]
struct Line<'a> {
    kind: Option<Scalar<'a>>,
    run_id: Option<Scalar<'a>>,
    span_id: Option<Scalar<'a>>,
    status: Option<Scalar<'a>>,
    queued_at: Option<Scalar<'a>>,
    admitted_at: Option<Scalar<'a>>,
    first_token_at: Option<Scalar<'a>>,
    last_token_at: Option<Scalar<'a>>,
    released_at: Option<Scalar<'a>>,
    output_tokens: Option<Scalar<'a>>,
    input_tokens: Option<Scalar<'a>>,
    token_source: Option<Scalar<'a>>,
    retry_count: Option<Scalar<'a>>,
    retry_causes: Option<Nested<Vec<Scalar<'a>>>>,
    attempts: Option<Nested<Vec<RawAttempt<'a>>>>,
    /// A span's `{cause, message}` object, or an end record's count.
    error: Option<Nested<Option<Scalar<'a>>>>,
    chunks: Option<&'a str>,
    // sample
    at: Option<Scalar<'a>>,
    in_flight: Option<Scalar<'a>>,
    queue_depth: Option<Scalar<'a>>,
    cap: Option<Scalar<'a>>,
    // run
    schema: Option<Scalar<'a>>,
    tool: Option<Scalar<'a>>,
    started_at: Option<Scalar<'a>>,
    target: Option<&'a str>,
    tokenizer: Option<Scalar<'a>>,
    sample_interval_s: Option<Scalar<'a>>,
    load: Option<&'a str>,
    labels: Option<&'a str>,
    // end
    ended_at: Option<Scalar<'a>>,
    spans: Option<Scalar<'a>>,
    ok: Option<Scalar<'a>>,
    cancelled: Option<Scalar<'a>>,
    samples: Option<Scalar<'a>>,
    /// The first known field given twice.
    duplicate: Option<&'static str>,
}

/// A field that holds an array or object: its content, or the scalar found instead
/// (`null` included), kept for the message.
enum Nested<T> {
    Value(T),
    Scalar(Scalar<'static>),
}

#[derive(Default)]
struct RawAttempt<'a> {
    started_at: Option<Scalar<'a>>,
    ended_at: Option<Scalar<'a>>,
    cause: Option<Scalar<'a>>,
    tokens: Option<Scalar<'a>>,
    /// Set when the element is not an object.
    not_object: Option<Scalar<'static>>,
}

/// A scalar's shape without its borrowed text (for messages about a wrong type).
fn detach(v: Scalar<'_>) -> Scalar<'static> {
    match v {
        Scalar::Str(s) => Scalar::Str(std::borrow::Cow::Owned(s.into_owned())),
        Scalar::U(n) => Scalar::U(n),
        Scalar::I(n) => Scalar::I(n),
        Scalar::F(f) => Scalar::F(f),
        Scalar::Bool(b) => Scalar::Bool(b),
        Scalar::Null => Scalar::Null,
        Scalar::Other(w) => Scalar::Other(w),
    }
}

/// Stores a field's value, remembering the first field given twice.
fn set<T>(slot: &mut Option<T>, v: T, name: &'static str, duplicate: &mut Option<&'static str>) {
    if slot.is_some() && duplicate.is_none() {
        *duplicate = Some(name);
    }
    *slot = Some(v);
}

/// Declares the keys a record may have, in the order tpscope writes them (the
/// scanner predicts keys from it), and an enum to dispatch on.
macro_rules! keys {
    ($table:ident, $enum:ident: $($key:ident),* $(,)?) => {
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy)]
        enum $enum { $($key),* }
        impl $enum {
            const ALL: &[$enum] = &[$($enum::$key),*];
        }
        const $table: &KeyTable = &KeyTable {
            names: &[$(stringify!($key)),*],
            words: &[$(key_word(stringify!($key))),*],
        };
    };
}

keys!(LINE_KEYS, Key:
    // every record
    kind, run_id,
    // span, in Span's field order
    span_id, request_id, status, queued_at, admitted_at, first_token_at, last_token_at,
    released_at, output_tokens, input_tokens, token_source, retry_count, retry_causes,
    attempts, error, chunks,
    // sample
    at, in_flight, queue_depth, cap,
    // run
    schema, tool, started_at, target, tokenizer, sample_interval_s, load, labels,
    // end
    ended_at, spans, ok, cancelled, samples,
);

keys!(ATTEMPT_KEYS, AttemptKey:
    started_at, first_byte_at, first_token_at, ended_at, http_status, cause, tokens,
    connection_reused, connect_s, backoff_s,
);

/// Scans one line into a [`Line`]: every known field is read (descending into
/// `attempts`, `retry_causes` and a span's `error`), everything else is validated
/// and skipped.
fn scan_line<'a>(text: &'a str, line: &mut Line<'a>) -> JsonResult<()> {
    let mut sc = Scanner::new(text);
    let mut dup = None;
    sc.object_keyed(LINE_KEYS, |index, _, sc| {
        let Some(key) = index.map(|i| Key::ALL[i]) else {
            sc.raw()?;
            return Ok(());
        };
        macro_rules! scalar {
            ($field:ident) => {
                set(&mut line.$field, sc.scalar()?, stringify!($field), &mut dup)
            };
        }
        macro_rules! raw {
            ($field:ident) => {
                set(&mut line.$field, sc.raw()?, stringify!($field), &mut dup)
            };
        }
        match key {
            Key::kind => scalar!(kind),
            Key::run_id => scalar!(run_id),
            Key::span_id => scalar!(span_id),
            Key::request_id => {
                sc.raw()?;
            }
            Key::status => scalar!(status),
            Key::queued_at => scalar!(queued_at),
            Key::admitted_at => scalar!(admitted_at),
            Key::first_token_at => scalar!(first_token_at),
            Key::last_token_at => scalar!(last_token_at),
            Key::released_at => scalar!(released_at),
            Key::output_tokens => scalar!(output_tokens),
            Key::input_tokens => scalar!(input_tokens),
            Key::token_source => scalar!(token_source),
            Key::retry_count => scalar!(retry_count),
            Key::retry_causes => {
                let v = if sc.peek() == Some(b'[') {
                    let mut list = Vec::new();
                    sc.array(|sc| sc.scalar().map(|v| list.push(v)))?;
                    Nested::Value(list)
                } else {
                    Nested::Scalar(detach(sc.scalar()?))
                };
                set(&mut line.retry_causes, v, "retry_causes", &mut dup);
            }
            Key::attempts => {
                let v = if sc.peek() == Some(b'[') {
                    let mut list = Vec::with_capacity(2);
                    sc.array(|sc| {
                        list.push(scan_attempt(sc)?);
                        Ok(())
                    })?;
                    Nested::Value(list)
                } else {
                    Nested::Scalar(detach(sc.scalar()?))
                };
                set(&mut line.attempts, v, "attempts", &mut dup);
            }
            Key::error => {
                let v = if sc.peek() == Some(b'{') {
                    let mut cause = None;
                    sc.object(|key, sc| {
                        if key == "cause" {
                            cause = Some(sc.scalar()?);
                        } else {
                            sc.raw()?;
                        }
                        Ok(())
                    })?;
                    Nested::Value(cause)
                } else {
                    Nested::Scalar(detach(sc.scalar()?))
                };
                set(&mut line.error, v, "error", &mut dup);
            }
            Key::chunks => raw!(chunks),
            Key::at => scalar!(at),
            Key::in_flight => scalar!(in_flight),
            Key::queue_depth => scalar!(queue_depth),
            Key::cap => scalar!(cap),
            Key::schema => scalar!(schema),
            Key::tool => scalar!(tool),
            Key::started_at => scalar!(started_at),
            Key::target => raw!(target),
            Key::tokenizer => scalar!(tokenizer),
            Key::sample_interval_s => scalar!(sample_interval_s),
            Key::load => raw!(load),
            Key::labels => raw!(labels),
            Key::ended_at => scalar!(ended_at),
            Key::spans => scalar!(spans),
            Key::ok => scalar!(ok),
            Key::cancelled => scalar!(cancelled),
            Key::samples => scalar!(samples),
        }
        Ok(())
    })?;
    sc.end()?;
    line.duplicate = dup;
    Ok(())
}

/// Scans one element of `attempts`: the fields the analysis needs, or what was
/// found instead of an object.
fn scan_attempt<'a>(sc: &mut Scanner<'a>) -> JsonResult<RawAttempt<'a>> {
    let mut a = RawAttempt::default();
    if sc.peek() != Some(b'{') {
        a.not_object = Some(detach(sc.scalar()?));
        return Ok(a);
    }
    sc.object_keyed(ATTEMPT_KEYS, |index, _, sc| {
        match index.map(|i| AttemptKey::ALL[i]) {
            Some(AttemptKey::started_at) => a.started_at = Some(sc.scalar()?),
            Some(AttemptKey::ended_at) => a.ended_at = Some(sc.scalar()?),
            Some(AttemptKey::cause) => a.cause = Some(sc.scalar()?),
            Some(AttemptKey::tokens) => a.tokens = Some(sc.scalar()?),
            _ => {
                sc.raw()?;
            }
        }
        Ok(())
    })?;
    Ok(a)
}

/// A parsed record, ready to be filed under its run.
enum Parsed<'a> {
    Run(RunRecord),
    Span {
        facts: SpanFacts,
        source: Option<TokenSource>,
        span_id: Cow<'a, str>,
    },
    Sample(SampleFacts),
    End(EndRecord),
}

fn parse_json<'a, T: Deserialize<'a>>(field: &str, raw: &'a str, expected: &str) -> FieldResult<T> {
    serde_json::from_str(raw)
        .map_err(|e| problem(field, "wrong_type", format!("expected {expected} ({e})")))
}

fn cause_of(field: &str, v: &Scalar<'_>) -> FieldResult<Cause> {
    as_str(field, v)?
        .parse::<Cause>()
        .map_err(|e| problem(field, "unknown_value", e.to_string()))
}

fn opt_time(
    field: &str,
    v: &Option<Scalar<'_>>,
    unit: Option<TimeUnit>,
) -> FieldResult<Option<Timestamp>> {
    present(v).map(|s| as_time(field, s, unit)).transpose()
}

fn req_time(field: &str, v: &Option<Scalar<'_>>, unit: Option<TimeUnit>) -> FieldResult<Timestamp> {
    as_time(field, required(field, v)?, unit)
}

fn plausible(field: &str, t: Timestamp) -> FieldResult<Timestamp> {
    if t.is_plausible() {
        Ok(t)
    } else {
        Err(problem(
            field,
            "implausible",
            format!("{t} is outside 2000..2200 (a number in the wrong --time-unit?)"),
        ))
    }
}

/// What a field holding `expected` was found to hold instead.
fn wrong_nested(field: &str, expected: &str, found: &Scalar<'_>) -> FieldProblem {
    problem(
        field,
        "wrong_type",
        format!("expected {expected}, found {}", found.describe()),
    )
}

fn parse_line<'l>(
    line: &'l Line<'_>,
    kind: &str,
    unit: Option<TimeUnit>,
) -> FieldResult<(&'l str, Parsed<'l>)> {
    if let Some(field) = line.duplicate {
        return Err(problem(
            field,
            "duplicate_field",
            "the field appears twice in the record",
        ));
    }
    let run_id = as_str("run_id", required("run_id", &line.run_id)?)?;
    if run_id.is_empty() {
        return Err(problem("run_id", "missing_field", "empty"));
    }
    let parsed = match kind {
        "span" => parse_span(line, unit)?,
        "sample" => Parsed::Sample(SampleFacts {
            at: plausible("at", req_time("at", &line.at, unit)?)?,
            in_flight: as_u32("in_flight", required("in_flight", &line.in_flight)?)?,
            queue_depth: as_u32("queue_depth", required("queue_depth", &line.queue_depth)?)?,
            cap: present(&line.cap).map(|v| as_u32("cap", v)).transpose()?,
        }),
        "run" => parse_run(line, run_id, unit)?,
        "end" => {
            let count = |field: &str, v: &Option<Scalar<'_>>| {
                present(v).map(|s| as_u64(field, s)).transpose()
            };
            let error = match &line.error {
                None | Some(Nested::Scalar(Scalar::Null)) => 0,
                Some(Nested::Scalar(v)) => as_u64("error", v)?,
                Some(Nested::Value(_)) => {
                    return Err(wrong_nested(
                        "error",
                        "a count of error spans",
                        &Scalar::Other("an object"),
                    ));
                }
            };
            Parsed::End(EndRecord {
                run_id: run_id.to_string(),
                ended_at: plausible("ended_at", req_time("ended_at", &line.ended_at, unit)?)?,
                spans: as_u64("spans", required("spans", &line.spans)?)?,
                ok: count("ok", &line.ok)?.unwrap_or(0),
                error,
                cancelled: count("cancelled", &line.cancelled)?.unwrap_or(0),
                samples: count("samples", &line.samples)?.unwrap_or(0),
            })
        }
        other => {
            return Err(problem(
                "kind",
                "unknown_kind",
                format!("unknown record kind `{other}` (expected run, span, sample or end)"),
            ));
        }
    };
    Ok((run_id, parsed))
}

fn parse_run(
    line: &Line<'_>,
    run_id: &str,
    unit: Option<TimeUnit>,
) -> FieldResult<Parsed<'static>> {
    let schema = as_str("schema", required("schema", &line.schema)?)?;
    if !schema.starts_with("tpscope.spans/") {
        return Err(problem(
            "schema",
            "unknown_value",
            format!("`{schema}` is not a tpscope span log schema"),
        ));
    }
    if schema != tpscope_model::SCHEMA {
        return Err(problem(
            "schema",
            "unknown_value",
            format!(
                "`{schema}` is newer than this tpscope reads ({})",
                tpscope_model::SCHEMA
            ),
        ));
    }
    let opt_str = |field: &str, v: &Option<Scalar<'_>>| -> FieldResult<Option<String>> {
        present(v)
            .map(|s| as_str(field, s).map(str::to_string))
            .transpose()
    };
    let sample_interval = match present(&line.sample_interval_s) {
        Some(v) => {
            let s = as_f64("sample_interval_s", v)?;
            Some(Duration::try_from_secs_f64(s).map_err(|_| {
                problem(
                    "sample_interval_s",
                    "implausible",
                    format!("{s} is not a non-negative number of seconds"),
                )
            })?)
        }
        None => None,
    };
    Ok(Parsed::Run(RunRecord {
        run_id: run_id.to_string(),
        schema: schema.to_string(),
        tool: opt_str("tool", &line.tool)?.unwrap_or_default(),
        started_at: plausible(
            "started_at",
            req_time("started_at", &line.started_at, unit)?,
        )?,
        target: match line.target {
            Some(raw) => {
                parse_json::<Option<Target>>("target", raw, "an object {url, model, api}")?
                    .unwrap_or_default()
            }
            None => Target::default(),
        },
        cap: present(&line.cap).map(|v| as_u32("cap", v)).transpose()?,
        token_source: present(&line.token_source)
            .map(|v| {
                as_str("token_source", v)?
                    .parse::<TokenSource>()
                    .map_err(|e| problem("token_source", "unknown_value", e.to_string()))
            })
            .transpose()?,
        tokenizer: opt_str("tokenizer", &line.tokenizer)?,
        sample_interval,
        load: match line.load {
            Some(raw) => parse_json("load", raw, "a JSON value")?,
            None => serde_json::Value::Null,
        },
        labels: match line.labels {
            Some(raw) => parse_json::<Option<BTreeMap<String, String>>>(
                "labels",
                raw,
                "an object of strings",
            )?
            .unwrap_or_default(),
            None => BTreeMap::new(),
        },
    }))
}

fn parse_span<'l>(line: &'l Line<'_>, unit: Option<TimeUnit>) -> FieldResult<Parsed<'l>> {
    let span_id: Cow<'l, str> = match required("span_id", &line.span_id)? {
        Scalar::Str(s) if !s.is_empty() => Cow::Borrowed(s.as_ref()),
        Scalar::U(n) => Cow::Owned(n.to_string()),
        other => {
            return Err(problem(
                "span_id",
                "wrong_type",
                format!("expected a non-empty string, found {}", other.describe()),
            ));
        }
    };
    let status = match as_str("status", required("status", &line.status)?)? {
        "ok" => Status::Ok,
        "error" => Status::Error,
        "cancelled" => Status::Cancelled,
        other => {
            return Err(problem(
                "status",
                "unknown_value",
                format!("unknown status `{other}` (expected ok, error or cancelled)"),
            ));
        }
    };
    let queued_at = req_time("queued_at", &line.queued_at, unit)?;
    let admitted_at = opt_time("admitted_at", &line.admitted_at, unit)?;
    let first_token_at = opt_time("first_token_at", &line.first_token_at, unit)?;
    let last_token_at = opt_time("last_token_at", &line.last_token_at, unit)?;
    let released_at = req_time("released_at", &line.released_at, unit)?;
    let output_tokens = as_u64(
        "output_tokens",
        required("output_tokens", &line.output_tokens)?,
    )?;
    let input_tokens = present(&line.input_tokens)
        .map(|v| as_u64("input_tokens", v))
        .transpose()?;
    let error_cause = match &line.error {
        None | Some(Nested::Scalar(Scalar::Null)) => None,
        Some(Nested::Value(cause)) => {
            Some(cause_of("error.cause", required("error.cause", cause)?)?)
        }
        Some(Nested::Scalar(v)) => {
            return Err(wrong_nested("error", "an object {cause, message}", v));
        }
    };
    check_lifecycle(Lifecycle {
        status,
        queued_at,
        admitted_at,
        first_token_at,
        last_token_at,
        released_at,
        output_tokens,
        has_error: error_cause.is_some(),
    })
    .map_err(|e| {
        let category = if e.problem.contains(" before ") {
            "out_of_order"
        } else {
            "implausible"
        };
        problem(e.field, category, e.problem)
    })?;
    if let Some(n) = input_tokens
        && n > tpscope_model::MAX_PLAUSIBLE_TOKENS
    {
        return Err(problem(
            "input_tokens",
            "implausible",
            format!("{n} tokens is implausible"),
        ));
    }
    let retry_count = present(&line.retry_count)
        .map(|v| as_u32("retry_count", v))
        .transpose()?
        .unwrap_or(0);
    let retry_causes = match &line.retry_causes {
        Some(Nested::Value(list)) => {
            let causes = list
                .iter()
                .map(|c| cause_of("retry_causes", c))
                .collect::<FieldResult<Vec<_>>>()?;
            if !causes.is_empty() && causes.len() != retry_count as usize {
                return Err(problem(
                    "retry_causes",
                    "inconsistent",
                    format!("{} causes for retry_count {retry_count}", causes.len()),
                ));
            }
            causes
        }
        None | Some(Nested::Scalar(Scalar::Null)) => Vec::new(),
        Some(Nested::Scalar(v)) => {
            return Err(wrong_nested("retry_causes", "an array of cause names", v));
        }
    };
    let mut wasted_tokens = 0;
    match &line.attempts {
        None | Some(Nested::Scalar(Scalar::Null)) => {}
        Some(Nested::Scalar(v)) => {
            return Err(wrong_nested("attempts", "an array of attempt objects", v));
        }
        Some(Nested::Value(attempts)) => {
            for (i, a) in attempts.iter().enumerate() {
                wasted_tokens += attempt_waste(a, unit).map_err(|mut p| {
                    // Named only on error: formatting per attempt cost 5 % of reading.
                    p.field = if p.field.is_empty() {
                        format!("attempts[{i}]")
                    } else {
                        format!("attempts[{i}].{}", p.field)
                    };
                    p
                })?;
            }
        }
    }
    let chunks = match line.chunks {
        Some(raw) => parse_json::<Option<Vec<tpscope_model::ChunkMark>>>(
            "chunks",
            raw,
            "an array of [offset_ns, tokens] pairs",
        )?
        .map(Vec::into_boxed_slice),
        None => None,
    };
    let source = present(&line.token_source)
        .map(|v| {
            as_str("token_source", v)?
                .parse::<TokenSource>()
                .map_err(|e| problem("token_source", "unknown_value", e.to_string()))
        })
        .transpose()?;
    Ok(Parsed::Span {
        facts: SpanFacts {
            status,
            error_cause,
            queued_at,
            admitted_at,
            first_token_at,
            last_token_at,
            released_at,
            output_tokens,
            input_tokens,
            retry_count,
            retry_causes,
            wasted_tokens,
            chunks,
        },
        source,
        span_id,
    })
}

/// Checks one attempt and returns the tokens it wasted (those of an attempt that
/// did not end ok). Field names in errors are relative to the attempt.
fn attempt_waste(a: &RawAttempt<'_>, unit: Option<TimeUnit>) -> FieldResult<u64> {
    if let Some(v) = &a.not_object {
        return Err(wrong_nested("", "an attempt object", v));
    }
    let start = opt_time("started_at", &a.started_at, unit)?;
    let end = opt_time("ended_at", &a.ended_at, unit)?;
    if let (Some(s), Some(e)) = (start, end)
        && e < s
    {
        return Err(problem(
            "ended_at",
            "out_of_order",
            format!("{e} is before started_at ({s})"),
        ));
    }
    let tokens = present(&a.tokens)
        .map(|v| as_u64("tokens", v))
        .transpose()?
        .unwrap_or(0);
    // Bounded so that the span's wasted tokens cannot overflow.
    if tokens > tpscope_model::MAX_PLAUSIBLE_TOKENS {
        return Err(problem(
            "tokens",
            "implausible",
            format!("{tokens} tokens is implausible"),
        ));
    }
    let failed = present(&a.cause)
        .map(|c| cause_of("cause", c))
        .transpose()?
        .is_some();
    Ok(if failed { tokens } else { 0 })
}

/// Counts for the file being read.
#[derive(Default)]
struct FileState {
    /// Lines seen (1-based number of the current line).
    lines: u64,
    /// Records accepted.
    records: u64,
    /// Bytes of the lines seen.
    bytes: u64,
    /// The file's size, when known.
    size: Option<u64>,
}

/// Lines read before the rest of a file's records are estimated from its size.
const ESTIMATE_AFTER_LINES: u64 = 4096;

/// A hasher for keys that already are keyed hashes (span ids hashed with random
/// SipHash keys): hashing them again cost 4 % of reading.
#[derive(Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Not used by u128 keys; fold anything else in rather than drop it.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u128(&mut self, v: u128) {
        self.0 = (v as u64) ^ ((v >> 64) as u64);
    }
}

struct RunAcc {
    run: LoadedRun,
    ids: SpanIds,
}

/// Ids below this that are written as plain decimal numbers are kept in a bitset
/// (8 MiB at most); others are hashed.
const DENSE_IDS: u64 = 1 << 26;

/// The span ids of one run seen so far, to find duplicates. tpscope numbers spans
/// 1, 2, 3, …: such ids are bits in a bitset (a hash set of a million ids cost a
/// cache miss per span and 32 bytes per span); any other id is kept as a 128-bit
/// keyed hash (a false duplicate needs a 128-bit collision). Every id text goes
/// the same way each time, so the two never overlap.
#[derive(Default)]
struct SpanIds {
    dense: Vec<u64>,
    other: HashSet<u128, BuildHasherDefault<PreHashed>>,
}

impl SpanIds {
    /// Records `id`; false when it was seen before.
    fn insert(&mut self, id: &str, keys: &(RandomState, RandomState)) -> bool {
        if let Some(n) = dense_id(id) {
            let (word, bit) = ((n / 64) as usize, 1u64 << (n % 64));
            if word >= self.dense.len() {
                self.dense.resize((word + 1).next_power_of_two(), 0);
            }
            let fresh = self.dense[word] & bit == 0;
            self.dense[word] |= bit;
            return fresh;
        }
        let mut h1 = keys.0.build_hasher();
        let mut h2 = keys.1.build_hasher();
        h1.write(id.as_bytes());
        h2.write(id.as_bytes());
        self.other
            .insert((u128::from(h1.finish()) << 64) | u128::from(h2.finish()))
    }
}

/// The number an id spells in plain decimal (no sign, no leading zero), when it
/// is below [`DENSE_IDS`].
fn dense_id(id: &str) -> Option<u64> {
    let b = id.as_bytes();
    if b.is_empty() || b.len() > 8 || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    let mut n = 0u64;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d >= 10 {
            return None;
        }
        n = n * 10 + u64::from(d);
    }
    (n < DENSE_IDS).then_some(n)
}

/// Reads span logs, grouping records by `run_id` across files.
pub struct Reader {
    opts: ReadOptions,
    set: LogSet,
    index: HashMap<String, usize>,
    accs: Vec<RunAcc>,
    /// The run of the previous record.
    last: Option<usize>,
    hash_keys: (RandomState, RandomState),
    /// The hour cache of the fast path's timestamps.
    hours: HourCache,
}

impl Reader {
    /// A reader with the given options.
    pub fn new(opts: ReadOptions) -> Reader {
        Reader {
            opts,
            set: LogSet::default(),
            index: HashMap::new(),
            accs: Vec::new(),
            last: None,
            hash_keys: (RandomState::new(), RandomState::new()),
            hours: HourCache::default(),
        }
    }

    /// Reads one file.
    pub fn read_path(&mut self, path: &Path) -> Result<(), LogError> {
        let file = File::open(path).map_err(|source| LogError::Io {
            file: path.to_path_buf(),
            source,
        })?;
        let size = file
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        self.read_sized(path, file, size)
    }

    /// Reads span-log text from any reader; `name` is used in messages.
    pub fn read_from(&mut self, name: &Path, r: impl Read) -> Result<(), LogError> {
        self.read_sized(name, r, None)
    }

    /// Reads span-log text of `size` bytes, when known (to size the span vectors
    /// once instead of growing them by copying).
    fn read_sized(&mut self, name: &Path, r: impl Read, size: Option<u64>) -> Result<(), LogError> {
        let mut r = BufReader::with_capacity(1 << 20, r);
        let mut spill = Vec::new();
        let mut file = FileState {
            size,
            ..FileState::default()
        };
        let io = |source| LogError::Io {
            file: name.to_path_buf(),
            source,
        };
        loop {
            let avail = r.fill_buf().map_err(io)?;
            if avail.is_empty() {
                break;
            }
            // Lines wholly inside the buffer are parsed where they lie; only a line
            // that straddles a refill is copied.
            let mut used = 0;
            for end in memchr::memchr_iter(b'\n', avail) {
                self.line(name, &mut file, &avail[used..=end])?;
                used = end + 1;
            }
            if used > 0 {
                r.consume(used);
                continue;
            }
            spill.clear();
            r.read_until(b'\n', &mut spill).map_err(io)?;
            self.line(name, &mut file, &spill)?;
        }
        if file.records == 0 && file.lines == 0 {
            return Err(LogError::Empty {
                file: name.to_path_buf(),
            });
        }
        if file.records == 0 && !self.opts.skip_invalid && self.set.warnings.is_empty() {
            return Err(LogError::Empty {
                file: name.to_path_buf(),
            });
        }
        Ok(())
    }

    /// Handles one line (with its `\n`, unless it is a last line cut off).
    fn line(&mut self, name: &Path, file: &mut FileState, raw: &[u8]) -> Result<(), LogError> {
        file.lines += 1;
        file.bytes += raw.len() as u64;
        if file.lines == ESTIMATE_AFTER_LINES {
            self.reserve_rest(file);
        }
        let line_no = file.lines;
        let complete = raw.last() == Some(&b'\n');
        let mut bytes = raw;
        while let [rest @ .., b'\n' | b'\r'] = bytes {
            bytes = rest;
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        // Valid JSON never holds a raw NUL, so only a failed line is searched for one.
        let binary = |bytes: &[u8]| {
            memchr::memchr(0, bytes).map(|_| LogError::Binary {
                file: name.to_path_buf(),
                line: line_no,
                what: "a NUL byte",
            })
        };
        let result = match fast_record(bytes, &mut self.hours) {
            Some(FastRecord::Span {
                run_id,
                span_id,
                facts,
                source,
            }) => {
                let span_id = Cow::Borrowed(span_id);
                let parsed = Parsed::Span {
                    facts,
                    source,
                    span_id,
                };
                self.file(run_id, parsed).map_err(|p| (false, p))
            }
            Some(FastRecord::Sample { run_id, facts }) => self
                .file(run_id, Parsed::Sample(facts))
                .map_err(|p| (false, p)),
            None => {
                let text = match std::str::from_utf8(bytes) {
                    Ok(t) => t,
                    Err(e) => {
                        if let Some(b) = binary(bytes) {
                            return Err(b);
                        }
                        if line_no == 1 {
                            return Err(LogError::Binary {
                                file: name.to_path_buf(),
                                line: line_no,
                                what: "bytes that are not UTF-8",
                            });
                        }
                        let p = problem(
                            "",
                            "not_utf8",
                            format!("not UTF-8 text at byte {}", e.valid_up_to()),
                        );
                        return self.reject(name, line_no, None, p);
                    }
                };
                self.record(text)
            }
        };
        match result {
            Ok(()) => {
                file.records += 1;
                self.set.records += 1;
                Ok(())
            }
            Err(_) if let Some(b) = binary(bytes) => Err(b),
            Err((syntax, p)) if syntax && !complete => {
                // The writer was killed mid-line: keep everything before it.
                self.set.warnings.push(format!(
                    "{}:{line_no}: the last line is cut off ({} bytes, {}); ignored",
                    name.display(),
                    bytes.len(),
                    p.problem
                ));
                Ok(())
            }
            Err((syntax, p)) => {
                let field = (!syntax && !p.field.is_empty()).then(|| p.field.clone());
                self.reject(name, line_no, field, p)
            }
        }
    }

    /// Reserves room for the rest of the file, extrapolating from the lines read:
    /// growing a vector of a million spans by doubling copied it repeatedly and
    /// held two copies at the peak. Only a file of one run is extrapolated.
    fn reserve_rest(&mut self, file: &FileState) {
        let (Some(size), [acc]) = (file.size, &mut self.accs[..]) else {
            return;
        };
        if file.bytes == 0 || size <= file.bytes {
            return;
        }
        // A little over the estimate, so that a slightly longer tail does not
        // trigger a doubling.
        let scale = (size - file.bytes) as f64 / file.bytes as f64 * 1.02;
        let input = &mut acc.run.input;
        let more = |n: usize| (n as f64 * scale) as usize;
        input.spans.reserve(more(input.spans.len()));
        input.samples.reserve(more(input.samples.len()));
        acc.ids.other.reserve(more(acc.ids.other.len()));
        if self.opts.keep_span_ids {
            acc.run.span_ids.reserve(more(acc.run.span_ids.len()));
        }
    }

    fn reject(
        &mut self,
        name: &Path,
        line: u64,
        field: Option<String>,
        p: FieldProblem,
    ) -> Result<(), LogError> {
        if self.opts.skip_invalid {
            let key = if p.field.is_empty() {
                p.category.to_string()
            } else {
                format!("{} `{}`", p.category, p.field)
            };
            *self.set.skipped.entry(key).or_default() += 1;
            Ok(())
        } else {
            Err(LogError::Record {
                file: name.to_path_buf(),
                line,
                field,
                problem: p.problem,
            })
        }
    }

    /// Parses and files one record. The flag says whether the JSON itself is broken.
    fn record(&mut self, text: &str) -> Result<(), (bool, FieldProblem)> {
        // Filled in place: a `Line` is 800 bytes, and moving it showed in profiles.
        let mut line = Line::default();
        scan_line(text, &mut line)
            .map_err(|e| (true, problem("", "malformed_json", e.to_string())))?;
        let kind = match line.kind.as_ref() {
            Some(Scalar::Str(k)) => k.as_ref(),
            Some(other) => {
                return Err((
                    false,
                    problem(
                        "kind",
                        "wrong_type",
                        format!("expected a string, found {}", other.describe()),
                    ),
                ));
            }
            None => {
                return Err((
                    false,
                    problem(
                        "kind",
                        "missing_field",
                        "missing (expected run, span, sample or end)",
                    ),
                ));
            }
        };
        let (run_id, parsed) =
            parse_line(&line, kind, self.opts.time_unit).map_err(|p| (false, p))?;
        self.file(run_id, parsed).map_err(|p| (false, p))
    }

    /// Files a parsed record under its run.
    fn file(&mut self, run_id: &str, parsed: Parsed<'_>) -> FieldResult<()> {
        // Consecutive records nearly always share a run: check the last one first.
        let idx = match self
            .last
            .filter(|&i| self.accs[i].run.input.run_id == run_id)
        {
            Some(i) => i,
            None => match self.index.get(run_id) {
                Some(i) => *i,
                None => {
                    self.index.insert(run_id.to_string(), self.accs.len());
                    self.accs.push(RunAcc {
                        run: LoadedRun {
                            input: RunInput {
                                run_id: run_id.to_string(),
                                ..RunInput::default()
                            },
                            span_ids: Vec::new(),
                        },
                        ids: SpanIds::default(),
                    });
                    self.accs.len() - 1
                }
            },
        };
        self.last = Some(idx);
        let acc = &mut self.accs[idx];
        match parsed {
            Parsed::Span {
                facts,
                source,
                span_id,
            } => {
                if !acc.ids.insert(&span_id, &self.hash_keys) {
                    return Err(problem(
                        "span_id",
                        "duplicate_span_id",
                        format!("duplicate span id `{span_id}` in run `{run_id}`"),
                    ));
                }
                acc.run.input.push_span(facts, source.as_ref());
                if self.opts.keep_span_ids {
                    acc.run.span_ids.push(span_id.into());
                }
            }
            Parsed::Sample(s) => acc.run.input.samples.push(s),
            Parsed::Run(r) => {
                if acc.run.input.run.is_some() {
                    return Err(problem(
                        "run_id",
                        "duplicate_run",
                        format!("a second `run` record for run `{run_id}`"),
                    ));
                }
                acc.run.input.run = Some(r);
            }
            Parsed::End(e) => acc.run.input.end = Some(e),
        }
        Ok(())
    }

    /// Finishes reading: warnings for incomplete runs, and the runs in order.
    pub fn finish(mut self) -> LogSet {
        for acc in self.accs {
            let i = &acc.run.input;
            if i.run.is_none() {
                self.set.warnings.push(format!(
                    "run `{}` has no `run` record (its cap and settings are unknown)",
                    i.run_id
                ));
            }
            if let Some(end) = &i.end
                && end.spans != i.spans.len() as u64
            {
                self.set.warnings.push(format!(
                    "run `{}`: the `end` record counts {} spans, the log has {}",
                    i.run_id,
                    end.spans,
                    i.spans.len()
                ));
            }
            self.set.runs.push(acc.run);
        }
        self.set
    }
}

/// Reads span logs from files, grouping runs by `run_id` across them.
pub fn read_paths(paths: &[PathBuf], opts: ReadOptions) -> Result<LogSet, LogError> {
    let mut reader = Reader::new(opts);
    for p in paths {
        reader.read_path(p)?;
    }
    Ok(reader.finish())
}

#[cfg(test)]
mod tests {
    //! The fast path against the general one: whatever line the fast path
    //! accepts, the general path reads to the same record, and the fast path
    //! accepts every valid line tpscope writes with plain strings.

    use super::*;
    use proptest::prelude::*;
    use tpscope_model::{Attempt, Record, SampleRecord, Span, SpanError};

    #[derive(Debug, PartialEq)]
    enum Owned {
        Span(String, String, SpanFacts, Option<TokenSource>),
        Sample(String, SampleFacts),
    }

    /// The general path alone; `None` for a rejected line.
    fn general(text: &str) -> Option<Owned> {
        let mut line = Line::default();
        scan_line(text, &mut line).ok()?;
        let kind = match line.kind.as_ref() {
            Some(Scalar::Str(k)) => k.to_string(),
            _ => return None,
        };
        let (run_id, parsed) = parse_line(&line, &kind, None).ok()?;
        match parsed {
            Parsed::Span {
                facts,
                source,
                span_id,
            } => Some(Owned::Span(
                run_id.into(),
                span_id.into_owned(),
                facts,
                source,
            )),
            Parsed::Sample(f) => Some(Owned::Sample(run_id.into(), f)),
            _ => None,
        }
    }

    fn fast(bytes: &[u8]) -> Option<Owned> {
        match fast_record(bytes, &mut HourCache::default())? {
            FastRecord::Span {
                run_id,
                span_id,
                facts,
                source,
            } => Some(Owned::Span(run_id.into(), span_id.into(), facts, source)),
            FastRecord::Sample { run_id, facts } => Some(Owned::Sample(run_id.into(), facts)),
        }
    }

    /// Strings as writers produce them: mostly plain, sometimes empty, escaped
    /// or not ASCII.
    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => "[a-z0-9-]{1,12}",
            1 => Just(String::new()),
            1 => Just("007".to_string()),
            1 => "[a-z\"\\\\\n\u{e9}]{1,6}",
        ]
    }

    fn cause() -> impl Strategy<Value = Cause> {
        proptest::sample::select(Cause::ALL.to_vec())
    }

    /// An instant near 2026 (or, rarely, implausibly early), at nanosecond grain.
    fn at() -> impl Strategy<Value = Timestamp> {
        prop_oneof![
            20 => (0i64..4_000_000_000_000)
                .prop_map(|ns| Timestamp::from_unix_nanos(1_767_225_600_000_000_000 + ns)),
            1 => Just(Timestamp::from_unix_nanos(5)),
        ]
    }

    fn attempt() -> impl Strategy<Value = Attempt> {
        (
            (
                at(),
                proptest::option::of(at()),
                proptest::option::of(at()),
                at(),
            ),
            (
                proptest::option::of(100u16..600),
                proptest::option::of(cause()),
                0u64..500,
                proptest::option::of(any::<bool>()),
                proptest::option::of(0u64..3_000_000_000),
                proptest::option::of(0u64..3_000_000_000),
            ),
        )
            .prop_map(
                |((s, fb, ft, e), (http, cause, tokens, reused, connect, backoff))| Attempt {
                    started_at: s,
                    first_byte_at: fb,
                    first_token_at: ft,
                    ended_at: e,
                    http_status: http,
                    cause,
                    tokens,
                    connection_reused: reused,
                    connect_time: connect.map(Duration::from_nanos),
                    backoff: backoff.map(Duration::from_nanos),
                },
            )
    }

    fn span() -> impl Strategy<Value = Span> {
        (
            (text(), text(), proptest::option::of(text())),
            (
                proptest::sample::select(vec![Status::Ok, Status::Error, Status::Cancelled]),
                proptest::collection::vec(at(), 5),
                any::<[bool; 3]>(),
                proptest::bool::weighted(0.8),
            ),
            (
                prop_oneof![4 => 0u64..1000, 1 => Just(200_000_000u64)],
                proptest::option::of(prop_oneof![4 => 0u64..5000, 1 => Just(u64::MAX)]),
                proptest::option::of(proptest::sample::select(vec![
                    TokenSource::Usage,
                    TokenSource::Chunks,
                    TokenSource::Tokenizer("o200k_base".into()),
                ])),
            ),
            (
                0u32..3,
                proptest::collection::vec(cause(), 0..3),
                proptest::collection::vec(attempt(), 0..3),
                proptest::option::of((cause(), text())),
            ),
        )
            .prop_map(
                |(
                    (run_id, span_id, request_id),
                    (status, mut times, present, tidy),
                    (output_tokens, input_tokens, token_source),
                    (retry_count, mut retry_causes, mut attempts, mut error),
                )| {
                    let mut present = present;
                    // Mostly consistent, so that many spans are valid.
                    if tidy {
                        times.sort();
                        present[1] |= present[2] || status == Status::Ok;
                        present[2] |= status == Status::Ok && output_tokens > 0;
                        if status == Status::Ok {
                            error = None;
                        } else if error.is_none() {
                            error = Some((Cause::TimeoutTotal, "timed out".into()));
                        }
                        retry_causes.truncate(retry_count as usize);
                        if retry_causes.len() < retry_count as usize {
                            retry_causes.clear();
                        }
                        for a in &mut attempts {
                            a.ended_at = a.ended_at.max(a.started_at);
                        }
                    }
                    Span {
                        run_id,
                        span_id,
                        request_id,
                        status,
                        queued_at: times[0],
                        admitted_at: present[1].then_some(times[1]),
                        first_token_at: present[2].then_some(times[2]),
                        last_token_at: present[2].then_some(times[3]),
                        released_at: times[4],
                        output_tokens,
                        input_tokens,
                        token_source,
                        retry_count,
                        retry_causes,
                        attempts,
                        error: error.map(|(cause, message)| SpanError { cause, message }),
                        chunks: None,
                    }
                },
            )
    }

    fn sample() -> impl Strategy<Value = SampleRecord> {
        (
            text(),
            at(),
            0u32..100,
            0u32..100,
            proptest::option::of(0u32..100),
        )
            .prop_map(|(run_id, at, in_flight, queue_depth, cap)| SampleRecord {
                run_id,
                at,
                in_flight,
                queue_depth,
                cap,
            })
    }

    fn record() -> impl Strategy<Value = Record> {
        prop_oneof![3 => span().prop_map(Record::Span), 1 => sample().prop_map(Record::Sample)]
    }

    fn plain(s: &str) -> bool {
        s.chars().all(|c| c >= ' ' && c != '"' && c != '\\')
    }

    /// Whether every string of the record is one the fast path reads.
    fn all_plain(r: &Record) -> bool {
        match r {
            Record::Span(s) => {
                plain(&s.run_id)
                    && plain(&s.span_id)
                    && s.request_id.as_deref().is_none_or(plain)
                    && s.error.as_ref().is_none_or(|e| plain(&e.message))
            }
            Record::Sample(s) => plain(&s.run_id),
            _ => false,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn fast_path_reads_written_lines_like_the_general_path(r in record()) {
            let line = serde_json::to_string(&r).unwrap();
            let (f, g) = (fast(line.as_bytes()), general(&line));
            if f.is_some() {
                prop_assert_eq!(&f, &g, "{}", line);
            }
            if g.is_some() && all_plain(&r) {
                prop_assert!(f.is_some(), "the fast path declined a plain line: {}", line);
            }
        }

        #[test]
        fn fast_path_accepts_nothing_the_general_path_reads_otherwise(
            r in record(),
            at in any::<proptest::sample::Index>(),
            c in proptest::sample::select(br#"{}[]:,"\0123456789.eE+-Z tnulx"#.to_vec()),
            how in 0u8..3,
        ) {
            let mut b = serde_json::to_string(&r).unwrap().into_bytes();
            let i = at.index(b.len());
            match how {
                0 => b.insert(i, c),
                1 => { b.remove(i); }
                _ => b[i] = c,
            }
            if let Some(f) = fast(&b) {
                let text = std::str::from_utf8(&b).unwrap();
                prop_assert_eq!(Some(f), general(text), "{}", text);
            }
        }
    }

    /// A log as `tpscope bench` wrote it against `tpscope sim` with 429s, 500s and
    /// cut streams (one retry allowed): every span and sample line takes the fast
    /// path, and reads as the general path reads it.
    #[test]
    fn a_bench_log_with_retries_and_errors_reads_alike_on_both_paths() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/bench_sim_faults.jsonl"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let (mut spans, mut retried, mut failed) = (0, 0, 0);
        for line in text.lines() {
            let general = general(line);
            if line.starts_with(r#"{"kind":"run""#) || line.starts_with(r#"{"kind":"end""#) {
                assert_eq!(fast(line.as_bytes()), None);
                continue;
            }
            assert!(general.is_some(), "{line}");
            assert_eq!(fast(line.as_bytes()), general, "{line}");
            if let Some(Owned::Span(_, _, facts, _)) = general {
                spans += 1;
                retried += usize::from(facts.retry_count > 0);
                failed += usize::from(facts.status != Status::Ok);
            }
        }
        assert_eq!((spans, retried, failed), (24, 9, 3));
    }

    #[test]
    fn fast_path_declines_what_only_the_general_path_reads() {
        let base = r#"{"kind":"sample","run_id":"r","at":"2026-01-01T00:00:00.000000000Z","in_flight":1,"queue_depth":0}"#;
        assert!(fast(base.as_bytes()).is_some());
        for other in [
            // whitespace, reordered keys, other timestamp forms, floats, escapes
            base.replace(":1,", ": 1,"),
            base.replace(
                r#""in_flight":1,"queue_depth":0"#,
                r#""queue_depth":0,"in_flight":1"#,
            ),
            base.replace(".000000000Z", "Z"),
            base.replace(":1,", ":1.0,"),
            base.replace(r#""r""#, r#""\u0072""#),
            base.replace(":1,", ":4294967296,"),
            base.replace("2026", "1990"),
            format!("{base} "),
        ] {
            assert!(fast(other.as_bytes()).is_none(), "{other}");
        }
    }
}
