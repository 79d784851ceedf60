//! The general readers of the `run`, `span`, `sample` and `end` records: from a
//! scanned [`Line`] to checked values, with errors naming the field.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::Duration;

use serde::Deserialize;
use tpscope_analysis::input::saturate;
use tpscope_analysis::{ClientFacts, ClientStamps, ClientTimes, SampleFacts, SpanFacts};
use tpscope_model::{
    Cause, EndRecord, Lifecycle, QueueTimes, RunRecord, ServerSampleRecord, Status, StatusCounts,
    Target, Timestamp, TokenSource, check_lifecycle,
};

use super::scan::{Line, Nested, RawAttempt};
use crate::scalar::*;

/// A parsed record, ready to be filed under its run.
pub(crate) enum Parsed<'a> {
    Run(RunRecord),
    Span {
        facts: SpanFacts,
        /// How exactly the client stamped it (kept beside the facts).
        stamps: ClientStamps,
        source: Option<TokenSource>,
        span_id: Cow<'a, str>,
        /// The `message` of a non-ok span's `error`, when it is a string.
        error_message: Option<Cow<'a, str>>,
        /// The `request_id`, when it is a string.
        request_id: Option<Cow<'a, str>>,
        /// When the last attempt started and the time between attempts (each
        /// one's end to the next's start), for a span with several.
        last_attempt_at: Option<(Timestamp, std::time::Duration)>,
        /// The `session_id` and `turn` of a multi-turn span, when both are given
        /// (numbered into [`SpanFacts::session`] when the span is filed).
        session: Option<(Cow<'a, str>, NonZeroU32)>,
        /// The tokenizer's own count of the reply (`tokenizer_output_tokens`),
        /// added to the run's count check when the span is filed (not kept).
        tokenizer_tokens: Option<u64>,
    },
    Sample(SampleFacts),
    ServerSample(Box<ServerSampleRecord>),
    End(EndRecord),
    /// A record of a kind this version does not know (from a newer writer): skipped
    /// and counted by kind, unchecked (docs/design.md §8: readers ignore what they do
    /// not know). Its run id is not read.
    Unknown(&'a str),
}

/// The record kinds this version reads.
const KINDS: [&str; 5] = ["run", "span", "sample", "server_sample", "end"];

fn parse_json<'a, T: Deserialize<'a>>(field: &str, raw: &'a str, expected: &str) -> FieldResult<T> {
    serde_json::from_str(raw)
        .map_err(|e| problem(field, "wrong_type", format!("expected {expected} ({e})")))
}

fn cause_of(field: &str, v: &Scalar<'_>) -> FieldResult<Cause> {
    as_str(field, v)?
        .parse::<Cause>()
        .map_err(|e| problem(field, "unknown_value", e.to_string()))
}

pub(super) fn opt_time(
    field: &str,
    v: &Option<Scalar<'_>>,
    unit: Option<TimeUnit>,
) -> FieldResult<Option<Timestamp>> {
    present(v).map(|s| as_time(field, s, unit)).transpose()
}

pub(super) fn req_time(
    field: &str,
    v: &Option<Scalar<'_>>,
    unit: Option<TimeUnit>,
) -> FieldResult<Timestamp> {
    as_time(field, required(field, v)?, unit)
}

/// A duration in seconds, when present.
pub(super) fn opt_secs(field: &str, v: &Option<Scalar<'_>>) -> FieldResult<Option<Duration>> {
    let Some(v) = present(v) else {
        return Ok(None);
    };
    let s = as_f64(field, v)?;
    Duration::try_from_secs_f64(s).map(Some).map_err(|_| {
        problem(
            field,
            "implausible",
            format!("{s} is not a non-negative number of seconds"),
        )
    })
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

/// Parses a scanned line of any kind: the record's run and its checked values.
#[inline(always)] // into each reader's one call: the values are returned without a copy
pub(super) fn parse_record<'l>(
    line: &'l Line<'_>,
    unit: Option<TimeUnit>,
) -> FieldResult<(&'l str, Parsed<'l>)> {
    let kind = match line.kind.as_ref() {
        Some(Scalar::Str(k)) => k.as_ref(),
        Some(other) => {
            return Err(problem(
                "kind",
                "wrong_type",
                format!("expected a string, found {}", other.describe()),
            ));
        }
        None => {
            return Err(problem(
                "kind",
                "missing_field",
                "missing (expected run, span, sample, server_sample or end)",
            ));
        }
    };
    parse_line(line, kind, unit)
}

#[inline(always)] // into each reader's one call, as before the record reader
pub(super) fn parse_line<'l>(
    line: &'l Line<'_>,
    kind: &'l str,
    unit: Option<TimeUnit>,
) -> FieldResult<(&'l str, Parsed<'l>)> {
    // Before any check: a newer kind may lack what this version requires.
    if !KINDS.contains(&kind) {
        return Ok(("", Parsed::Unknown(kind)));
    }
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
        "server_sample" => {
            // Rare (one a second) and open-ended (`raw`): serde reads it whole; the
            // instant is checked like a sample's.
            plausible("at", req_time("at", &line.at, unit)?)?;
            let rec: ServerSampleRecord =
                parse_json("server_sample", line.text, "a server_sample record")?;
            Parsed::ServerSample(Box::new(rec))
        }
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
                status: StatusCounts {
                    ok: count("ok", &line.ok)?.unwrap_or(0),
                    error,
                    cancelled: count("cancelled", &line.cancelled)?.unwrap_or(0),
                },
                samples: count("samples", &line.samples)?.unwrap_or(0),
                schedule_late_max: opt_secs("schedule_late_max_s", &line.schedule_late_max_s)?,
                queued_at_stated: count("queued_at_stated", &line.queued_at_stated)?,
                cut_at_stop: count("cut_at_stop", &line.cut_at_stop)?,
                model: present(&line.model)
                    .map(|v| as_str("model", v).map(str::to_string))
                    .transpose()?,
            })
        }
        // Not reached: unknown kinds returned above.
        other => Parsed::Unknown(other),
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
    let sample_interval = opt_secs("sample_interval_s", &line.sample_interval_s)?;
    let sample_heartbeat = opt_secs("sample_heartbeat_s", &line.sample_heartbeat_s)?;
    let queue_times = present(&line.queue_times)
        .map(|v| {
            as_str("queue_times", v)?
                .parse::<QueueTimes>()
                .map_err(|e| problem("queue_times", "unknown_value", e))
        })
        .transpose()?
        .unwrap_or_default();
    let mut run = RunRecord {
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
        sample_heartbeat,
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
        queue_times,
    };
    // Logs imported before the field carry a label instead.
    if line.queue_times.is_none() {
        run.adopt_legacy_queue_label();
    }
    Ok(Parsed::Run(run))
}

fn parse_span<'l>(line: &'l Line<'_>, unit: Option<TimeUnit>) -> FieldResult<Parsed<'l>> {
    let span_id = span_id_of(line)?;
    let status = status_of(line)?;
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
    lifecycle_of(Lifecycle {
        status,
        queued_at,
        admitted_at,
        first_token_at,
        last_token_at,
        released_at,
        output_tokens,
        has_error: error_cause.is_some(),
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
    let retry_causes = retry_causes_of(line, retry_count)?;
    let AttemptTotals {
        wasted_tokens,
        last_attempt_at,
        client,
    } = attempt_totals(line, unit)?;
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
            retry_causes: retry_causes.into(),
            wasted_tokens,
            chunks,
            client: client.times,
            session: None,
        },
        stamps: client.stamps,
        source,
        span_id,
        error_message: error_cause
            .and(line.extras.error_message)
            .and_then(string_of),
        request_id: line.extras.request_id.and_then(string_of),
        last_attempt_at,
        session: session_of(line.extras.session_id, line.extras.turn)?,
        tokenizer_tokens: count_of(
            "tokenizer_output_tokens",
            line.extras.tokenizer_output_tokens,
        )?,
    })
}

/// A span's `span_id`: a non-empty string, or a whole number read as one.
fn span_id_of<'l>(line: &'l Line<'_>) -> FieldResult<Cow<'l, str>> {
    match required("span_id", &line.span_id)? {
        Scalar::Str(s) if !s.is_empty() => Ok(Cow::Borrowed(s.as_ref())),
        Scalar::U(n) => Ok(Cow::Owned(n.to_string())),
        other => Err(problem(
            "span_id",
            "wrong_type",
            format!("expected a non-empty string, found {}", other.describe()),
        )),
    }
}

fn status_of(line: &Line<'_>) -> FieldResult<Status> {
    match as_str("status", required("status", &line.status)?)? {
        "ok" => Ok(Status::Ok),
        "error" => Ok(Status::Error),
        "cancelled" => Ok(Status::Cancelled),
        other => Err(problem(
            "status",
            "unknown_value",
            format!("unknown status `{other}` (expected ok, error or cancelled)"),
        )),
    }
}

/// The model's lifecycle check, its failure named out of order or implausible.
fn lifecycle_of(l: Lifecycle) -> FieldResult<()> {
    check_lifecycle(l).map_err(|e| {
        let category = if e.problem.contains(" before ") {
            "out_of_order"
        } else {
            "implausible"
        };
        problem(e.field, category, e.problem)
    })
}

/// `retry_causes`: one cause per retry when given.
fn retry_causes_of(line: &Line<'_>, retry_count: u32) -> FieldResult<Vec<Cause>> {
    match &line.retry_causes {
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
            Ok(causes)
        }
        None | Some(Nested::Scalar(Scalar::Null)) => Ok(Vec::new()),
        Some(Nested::Scalar(v)) => Err(wrong_nested("retry_causes", "an array of cause names", v)),
    }
}

/// What the analysis keeps of a span's attempts.
struct AttemptTotals {
    /// Tokens of the attempts that did not end ok.
    wasted_tokens: u64,
    /// When the last attempt started and the time between attempts, for a
    /// span with several.
    last_attempt_at: Option<(Timestamp, std::time::Duration)>,
    client: ClientFacts,
}

fn attempt_totals(line: &Line<'_>, unit: Option<TimeUnit>) -> FieldResult<AttemptTotals> {
    let mut t = AttemptTotals {
        wasted_tokens: 0,
        last_attempt_at: None,
        client: ClientFacts::default(),
    };
    let (mut between, mut prev_end) = (std::time::Duration::ZERO, None);
    attempts_of(line, unit, |i, _, a| {
        if a.cause.is_some() {
            t.wasted_tokens += a.tokens;
        }
        if i > 0 {
            if let (Some(s), Some(e)) = (a.started, prev_end) {
                between += s.since(e).unwrap_or_default();
            }
            t.last_attempt_at = a.started.map(|s| (s, between));
        }
        prev_end = a.ended;
        t.client.add(a.client);
        Ok(())
    })?;
    Ok(t)
}

/// A count kept as JSON text (`null` is not given), checked.
fn count_of(field: &str, raw: Option<&str>) -> FieldResult<Option<u64>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    match crate::json::Scanner::new(raw).scalar() {
        Ok(Scalar::Null) => Ok(None),
        Ok(v) => as_u64(field, &v).map(Some),
        Err(_) => Err(problem(
            field,
            "implausible",
            format!("{raw} is out of range"),
        )),
    }
}

/// A span's `session_id` (a string) and `turn` (a count from 1), from their JSON
/// text, each checked when given; `None` unless both are (`null` is not given).
fn session_of<'l>(
    id: Option<&'l str>,
    turn: Option<&'l str>,
) -> FieldResult<Option<(Cow<'l, str>, NonZeroU32)>> {
    let scalar = |field: &str, raw| {
        crate::json::Scanner::new(raw)
            .scalar()
            .map_err(|_| problem(field, "implausible", format!("{raw} is out of range")))
    };
    let id = match id.map(|raw| scalar("session_id", raw)).transpose()? {
        Some(Scalar::Str(s)) => Some(s),
        None | Some(Scalar::Null) => None,
        Some(other) => return Err(wrong_nested("session_id", "a string", &other)),
    };
    let turn = match turn.map(|raw| scalar("turn", raw)).transpose()? {
        None | Some(Scalar::Null) => None,
        Some(t) => Some(
            NonZeroU32::new(as_u32("turn", &t)?)
                .ok_or_else(|| problem("turn", "implausible", "0: turns count from 1"))?,
        ),
    };
    Ok(id.zip(turn))
}

/// A string kept as JSON text, read; `None` when it is not a string (the
/// whole-record reader names that; the analysis only goes without it).
fn string_of(raw: &str) -> Option<Cow<'_, str>> {
    match crate::json::Scanner::new(raw).scalar() {
        Ok(Scalar::Str(m)) => Some(m),
        _ => None,
    }
}

/// What the analysis reads of one attempt, checked.
pub(super) struct AttemptCore {
    pub(super) tokens: u64,
    /// When it started, if it says.
    pub(super) started: Option<Timestamp>,
    /// When it ended, if it says.
    pub(super) ended: Option<Timestamp>,
    /// Why it failed; its tokens were wasted.
    pub(super) cause: Option<Cause>,
    /// Its measurement-quality facts.
    pub(super) client: ClientFacts,
}

/// Checks each attempt of a span and hands it to `each` with its index and its
/// checked core (the analysis sums the tokens wasted; whole records build the
/// attempt). Field names in errors, `each`'s included, become `attempts[i].field`.
#[inline]
pub(super) fn attempts_of<'l, 'a>(
    line: &'l Line<'a>,
    unit: Option<TimeUnit>,
    mut each: impl FnMut(usize, &'l RawAttempt<'a>, AttemptCore) -> FieldResult<()>,
) -> FieldResult<()> {
    let attempts = match &line.attempts {
        None | Some(Nested::Scalar(Scalar::Null)) => return Ok(()),
        Some(Nested::Scalar(v)) => {
            return Err(wrong_nested("attempts", "an array of attempt objects", v));
        }
        Some(Nested::Value(attempts)) => attempts,
    };
    for (i, a) in attempts.iter().enumerate() {
        attempt_core(a, unit)
            .and_then(|core| each(i, a, core))
            .map_err(|mut p| {
                // Named only on error: formatting per attempt cost 5 % of reading.
                p.field = if p.field.is_empty() {
                    format!("attempts[{i}]")
                } else {
                    format!("attempts[{i}].{}", p.field)
                };
                p
            })?;
    }
    Ok(())
}

/// Checks the fields of one attempt that the analysis reads. Field names in
/// errors are relative to the attempt.
fn attempt_core(a: &RawAttempt<'_>, unit: Option<TimeUnit>) -> FieldResult<AttemptCore> {
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
    let cause = present(&a.cause)
        .map(|c| cause_of("cause", c))
        .transpose()?;
    let k = &a.client;
    let count =
        |field: &str, v: &Option<Scalar<'_>>| present(v).map(|v| as_u64(field, v)).transpose();
    let client = ClientFacts {
        times: ClientTimes {
            end_at: opt_time("end_at", &k.end_at, unit)?,
            connect: opt_secs("connect_s", &k.connect_s)?.map(Into::into),
        },
        stamps: ClientStamps {
            first_token_exact: present(&k.first_token_exact)
                .map(|v| as_bool("first_token_exact", v))
                .transpose()?,
            traced_chunks: saturate(count("traced_chunks", &k.traced_chunks)?.unwrap_or(0)),
            inexact_chunks: saturate(count("inexact_chunks", &k.inexact_chunks)?.unwrap_or(0)),
            reads: saturate(count("reads", &k.reads)?.unwrap_or(0)),
            lag: opt_secs("client_lag_s", &k.client_lag_s)?,
            resends: present(&k.resends)
                .map(|v| as_u32("resends", v))
                .transpose()?
                .unwrap_or(0),
        },
    };
    Ok(AttemptCore {
        tokens,
        started: start,
        ended: end,
        cause,
        client,
    })
}
