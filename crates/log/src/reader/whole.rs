//! Whole records: a line the general reader has checked, completed with what the
//! analysis does not read (the request id, every field of each attempt, the error
//! message, the chunks), for importers, merging and re-exporting.

use std::borrow::Cow;
use std::collections::BTreeMap;

use tpscope_analysis::SpanFacts;
use tpscope_model::{Attempt, Record, RunRecord, SampleRecord, Span, SpanError, TokenSource};

use super::lines::Failure;
use super::parse::{AttemptCore, Parsed, attempts_of, opt_secs, opt_time, parse_record, req_time};
use super::runs::{RunData, Runs, count_kind, repeated_run};
use super::scan::{AttemptExtras, Line, RawAttempt, scan_whole_line};
use crate::json::Scanner;
use crate::scalar::*;

/// What the record reader keeps of a run: enough for the checks and warnings the
/// analysis reader makes.
pub(super) struct Seen {
    pub(super) run_id: String,
    /// Its first `run` record (a repeat is checked against it).
    pub(super) run: Option<RunRecord>,
    pub(super) spans: u64,
    pub(super) end_spans: Option<u64>,
}

impl RunData for Seen {
    fn new(run_id: &str) -> Seen {
        Seen {
            run_id: run_id.to_string(),
            run: None,
            spans: 0,
            end_spans: None,
        }
    }
    fn run_id(&self) -> &str {
        &self.run_id
    }
}

/// Reads one line into a whole record, checked as the analysis reader checks it
/// (a duplicate span id or a differing `run` record included); `None` for a
/// record of a kind this version does not read, counted in `unknown_kinds`.
pub(super) fn record_of(
    text: &str,
    unit: Option<TimeUnit>,
    runs: &mut Runs<Seen>,
    unknown_kinds: &mut BTreeMap<String, u64>,
) -> Result<Option<Record>, Failure> {
    let mut line = Line::default();
    scan_whole_line(text, &mut line).map_err(Failure::syntax)?;
    let (run_id, parsed) = parse_record(&line, unit)?;
    Ok(Some(match parsed {
        Parsed::Span {
            facts,
            source,
            span_id,
            tokenizer_tokens,
            ..
        } => {
            let span = span_of(&line, run_id, span_id, facts, source, unit)?;
            let span = Span {
                tokenizer_output_tokens: tokenizer_tokens,
                ..span
            };
            runs.span(run_id, &span.span_id)?.spans += 1;
            Record::Span(span)
        }
        Parsed::Sample(f) => {
            runs.run(run_id);
            Record::Sample(SampleRecord {
                run_id: run_id.to_string(),
                at: f.at,
                in_flight: f.in_flight,
                queue_depth: f.queue_depth,
                cap: f.cap,
            })
        }
        Parsed::ServerSample(s) => {
            runs.run(run_id);
            Record::ServerSample(s)
        }
        Parsed::Run(r) => {
            let seen = runs.run(run_id);
            match &seen.run {
                Some(first) => repeated_run(first, &r)?,
                None => seen.run = Some(r.clone()),
            }
            Record::Run(r)
        }
        Parsed::End(e) => {
            runs.run(run_id).end_spans = Some(e.spans);
            Record::End(e)
        }
        Parsed::Unknown(kind) => {
            count_kind(unknown_kinds, kind);
            return Ok(None);
        }
    }))
}

/// The span of a checked line: its facts and the fields the analysis skips.
fn span_of(
    line: &Line<'_>,
    run_id: &str,
    span_id: Cow<'_, str>,
    facts: SpanFacts,
    token_source: Option<TokenSource>,
    unit: Option<TimeUnit>,
) -> FieldResult<Span> {
    let opt_string = |field: &str, raw: Option<&str>| {
        present(&scalar_of(field, raw)?)
            .map(|v| as_str(field, v).map(str::to_string))
            .transpose()
    };
    let extras = &line.extras;
    let request_id = opt_string("request_id", extras.request_id)?;
    let session_id = opt_string("session_id", extras.session_id)?;
    let finish_reason = opt_string("finish_reason", extras.finish_reason)?;
    let turn = match present(&scalar_of("turn", extras.turn)?) {
        Some(v) => Some(as_u32("turn", v)?),
        None => None,
    };
    let mut attempts = Vec::new();
    let none = AttemptExtras::default();
    attempts_of(line, unit, |i, raw, core| {
        let more = extras.attempts.get(i).unwrap_or(&none);
        attempts.push(attempt_of(raw, more, core, unit)?);
        Ok(())
    })?;
    let error = match facts.error_cause {
        Some(cause) => Some(SpanError {
            cause,
            message: opt_string("error.message", extras.error_message)?.unwrap_or_default(),
        }),
        None => None,
    };
    Ok(Span {
        run_id: run_id.to_string(),
        span_id: span_id.into_owned(),
        request_id,
        status: facts.status,
        queued_at: facts.queued_at,
        admitted_at: facts.admitted_at,
        first_token_at: facts.first_token_at,
        last_token_at: facts.last_token_at,
        released_at: facts.released_at,
        output_tokens: facts.output_tokens,
        input_tokens: facts.input_tokens,
        token_source,
        retry_count: facts.retry_count,
        retry_causes: facts.retry_causes.into_vec(),
        attempts,
        error,
        chunks: facts.chunks.map(Vec::from),
        session_id,
        turn,
        // Read by the general reader (the analysis tallies it): the caller's.
        tokenizer_output_tokens: None,
        finish_reason,
    })
}

/// One attempt whose core the general reader has checked. Field names in errors
/// are relative to the attempt.
fn attempt_of(
    a: &RawAttempt<'_>,
    more: &AttemptExtras<'_>,
    core: AttemptCore,
    unit: Option<TimeUnit>,
) -> FieldResult<Attempt> {
    let http_status = scalar_of("http_status", more.http_status)?;
    let connection_reused = scalar_of("connection_reused", more.connection_reused)?;
    Ok(Attempt {
        started_at: req_time("started_at", &a.started_at, unit)?,
        first_byte_at: opt_time(
            "first_byte_at",
            &scalar_of("first_byte_at", more.first_byte_at)?,
            unit,
        )?,
        first_token_at: opt_time(
            "first_token_at",
            &scalar_of("first_token_at", more.first_token_at)?,
            unit,
        )?,
        ended_at: req_time("ended_at", &a.ended_at, unit)?,
        end_at: opt_time("end_at", &scalar_of("end_at", more.end_at)?, unit)?,
        http_status: present(&http_status)
            .map(|v| as_u16("http_status", v))
            .transpose()?,
        cause: core.cause,
        tokens: core.tokens,
        connection_reused: present(&connection_reused)
            .map(|v| as_bool("connection_reused", v))
            .transpose()?,
        connect_time: opt_secs("connect_s", &scalar_of("connect_s", more.connect_s)?)?,
        backoff: opt_secs("backoff_s", &scalar_of("backoff_s", more.backoff_s)?)?,
        client_lag: opt_secs(
            "client_lag_s",
            &scalar_of("client_lag_s", more.client_lag_s)?,
        )?,
        reads: opt_with("reads", more.reads, as_u64)?,
        traced_chunks: opt_with("traced_chunks", more.traced_chunks, as_u64)?,
        inexact_chunks: opt_with("inexact_chunks", more.inexact_chunks, as_u64)?,
        first_token_exact: opt_with("first_token_exact", more.first_token_exact, as_bool)?,
        resends: opt_with("resends", more.resends, as_u32)?.unwrap_or(0),
    })
}

/// An optional field read with `read` (absent or `null`: `None`).
fn opt_with<T>(
    field: &str,
    raw: Option<&str>,
    read: fn(&str, &Scalar<'_>) -> FieldResult<T>,
) -> FieldResult<Option<T>> {
    present(&scalar_of(field, raw)?)
        .map(|v| read(field, v))
        .transpose()
}

/// A field that the general reader only validated (kept as its JSON text), read
/// now: the one thing that can still fail is a number too large for a float.
fn scalar_of<'a>(field: &str, raw: Option<&'a str>) -> FieldResult<Option<Scalar<'a>>> {
    raw.map(|raw| {
        Scanner::new(raw)
            .scalar()
            .map_err(|_| problem(field, "implausible", format!("{raw} is out of range")))
    })
    .transpose()
}
