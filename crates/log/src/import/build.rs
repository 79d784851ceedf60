//! What every importer shares: the import context (file, format, options, the run
//! record being filled, the spans so far, skipped records) and the one place a
//! foreign request becomes a checked [`Span`].

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use tpscope_model::{
    Cause, ChunkMark, QueueTimes, RunRecord, SCHEMA, Span, SpanError, Status, Target, Timestamp,
    TokenSource,
};

use super::{Format, ImportError, ImportOptions, Imported};

/// One foreign request, in tpscope's terms, before it is checked.
#[derive(Clone, Debug, Default)]
pub struct Raw {
    /// The tool's request id, when it has one.
    pub request_id: Option<String>,
    /// When the tool had the request ready (its own queue or schedule), if it says.
    pub queued_at: Option<Timestamp>,
    /// When the request was sent.
    pub sent_at: Option<Timestamp>,
    /// First output token.
    pub first_token_at: Option<Timestamp>,
    /// Last output token.
    pub last_token_at: Option<Timestamp>,
    /// When the request finished (stream closed).
    pub ended_at: Option<Timestamp>,
    /// Output tokens.
    pub output_tokens: Option<u64>,
    /// Prompt tokens.
    pub input_tokens: Option<u64>,
    /// Where the counts came from, when not the run's default.
    pub token_source: Option<TokenSource>,
    /// The failure, when the request failed.
    pub error: Option<(Cause, String)>,
    /// Chunk arrivals after the first token (gaps are turned into offsets by the caller).
    pub chunks: Option<Vec<ChunkMark>>,
}

/// The import of one file in progress.
pub struct Cx<'a> {
    pub format: Format,
    pub file: &'a Path,
    opts: &'a ImportOptions,
    /// The run record; importers fill tool, target, cap, token source, load, labels.
    pub run: RunRecord,
    /// Whether the tool recorded its own queue (or schedule) times.
    pub queue_known: bool,
    pub spans: Vec<Span>,
    skipped: BTreeMap<String, u64>,
    pub warnings: Vec<String>,
}

/// A run id derived from a file's content: the format and a 64-bit FNV-1a digest of
/// the bytes. Tools write fixed file names (AIPerf's `profile_export.jsonl`), so a
/// name-derived id would call two different runs the same one.
pub fn content_run_id(format: Format, bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{}:{h:016x}", format.name())
}

impl<'a> Cx<'a> {
    pub fn new(format: Format, file: &'a Path, bytes: &[u8], opts: &'a ImportOptions) -> Cx<'a> {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| file.display().to_string());
        let run_id = opts
            .run_id
            .clone()
            .unwrap_or_else(|| content_run_id(format, bytes));
        let mut labels = BTreeMap::new();
        labels.insert("imported_from".to_string(), format.name().to_string());
        labels.insert("source_file".to_string(), name);
        Cx {
            format,
            file,
            opts,
            run: RunRecord {
                run_id,
                schema: SCHEMA.to_string(),
                tool: format.name().to_string(),
                started_at: Timestamp::default(),
                target: Target::default(),
                cap: None,
                token_source: None,
                tokenizer: None,
                sample_interval: None,
                sample_heartbeat: None,
                load: serde_json::Value::Null,
                labels,
                // Settled by `finish` from `queue_known`.
                queue_times: QueueTimes::Measured,
            },
            queue_known: false,
            spans: Vec::new(),
            skipped: BTreeMap::new(),
            warnings: Vec::new(),
        }
    }

    /// The file is not this format at all.
    pub fn not_format(&self, problem: impl Into<String>) -> ImportError {
        ImportError::NotFormat {
            file: self.file.to_path_buf(),
            format: self.format,
            problem: problem.into(),
        }
    }

    /// One record is wrong.
    pub fn bad(
        &self,
        record: &str,
        field: Option<&str>,
        problem: impl Into<String>,
    ) -> ImportError {
        ImportError::Record {
            file: self.file.to_path_buf(),
            record: record.to_string(),
            field: field.map(str::to_string),
            problem: problem.into(),
        }
    }

    /// A record that cannot be mapped: skipped and counted with `skip_invalid`,
    /// else the error.
    pub fn reject(&mut self, e: ImportError) -> Result<(), ImportError> {
        if !self.opts.skip_invalid {
            return Err(e);
        }
        let reason = match &e {
            ImportError::Record { field: Some(f), .. } => format!("{}: bad `{f}`", self.format),
            _ => format!("{}: unreadable record", self.format),
        };
        *self.skipped.entry(reason).or_default() += 1;
        Ok(())
    }

    /// Checks and keeps one request (or rejects it, see [`Cx::reject`]).
    pub fn push(&mut self, record: &str, raw: Raw) -> Result<(), ImportError> {
        match self.span_of(record, raw) {
            Ok(span) => {
                self.spans.push(span);
                Ok(())
            }
            Err(e) => self.reject(e),
        }
    }

    fn span_of(&self, record: &str, raw: Raw) -> Result<Span, ImportError> {
        let sent = raw
            .sent_at
            .ok_or_else(|| self.bad(record, Some("start time"), "missing"))?;
        let released = raw
            .ended_at
            .ok_or_else(|| self.bad(record, Some("end time"), "missing"))?;
        let (status, error) = match raw.error {
            Some((cause, message)) => (Status::Error, Some(SpanError { cause, message })),
            None => (Status::Ok, None),
        };
        // A failed request keeps its first token only when it has output.
        let (first, last) = match (raw.first_token_at, raw.last_token_at) {
            (Some(f), Some(l)) => (Some(f), Some(l.max(f))),
            (Some(f), None) => (Some(f), Some(f)),
            _ => (None, None),
        };
        // Tools stamp in floating-point seconds: an instant computed as a sum of
        // terms can land a rounding error after the release it equals.
        let clamp = |t: Timestamp| match t.since(released) {
            Some(over) if over <= ROUNDING_TOLERANCE => released,
            _ => t,
        };
        let (first, last) = (first.map(clamp), last.map(clamp));
        let output_tokens = raw.output_tokens.unwrap_or(0);
        let span = Span {
            run_id: self.run.run_id.clone(),
            span_id: (self.spans.len()).to_string(),
            request_id: raw.request_id,
            status,
            queued_at: raw.queued_at.unwrap_or(sent).min(sent),
            admitted_at: Some(sent),
            first_token_at: first,
            last_token_at: last,
            released_at: released,
            output_tokens,
            input_tokens: raw.input_tokens,
            token_source: if output_tokens > 0 {
                raw.token_source
            } else {
                None
            },
            retry_count: 0,
            retry_causes: vec![],
            attempts: vec![],
            error,
            chunks: raw.chunks,
            // Multi-turn ids and the count check are tpscope's own; no importer
            // maps them (yet).
            session_id: None,
            turn: None,
            tokenizer_output_tokens: None,
            finish_reason: None,
        };
        span.validate()
            .map_err(|e| self.bad(record, Some(e.field), e.problem))?;
        Ok(span)
    }

    /// Whether requests a tool left out of its own metrics (warm-up, cool-down)
    /// are kept.
    pub fn keep_transient(&self) -> bool {
        self.opts.keep_transient
    }

    /// The imported run.
    pub fn finish(mut self) -> Imported {
        if let Some(t) = self.spans.iter().map(|s| s.queued_at).min()
            && (self.run.started_at == Timestamp::default() || t < self.run.started_at)
        {
            self.run.started_at = t;
        }
        // Renderers read a run without a URL as the built-in simulator's.
        if self.run.target.url.is_none() {
            self.run.target.url = Some(format!("(not recorded by {})", self.format));
        }
        if !self.queue_known {
            self.run.queue_times = QueueTimes::Unmeasured;
            self.warnings.push(format!(
                "{}: {} records no queue or schedule times, so queue time and the gap \
                 fraction cannot be known (shown as absent)",
                self.file.display(),
                self.format
            ));
        }
        Imported {
            format: self.format,
            run: self.run,
            spans: self.spans,
            skipped: self.skipped,
            warnings: self.warnings,
        }
    }
}

/// How far past its release a token instant may be and still be read as the
/// release (floating-point rounding of the tool's own sums, not a real event).
pub const ROUNDING_TOLERANCE: Duration = Duration::from_micros(1);

/// Unix seconds as the tools write them (Python's shortest round-trip decimal) to
/// an instant, exactly: the decimal text is recovered from the `f64` (its shortest
/// round-trip form is the text Python wrote) and read digit by digit, so no
/// nanosecond is lost to binary arithmetic; `None` for non-positive or absurd values.
pub fn unix_seconds(v: f64) -> Option<Timestamp> {
    if !v.is_finite() || v <= 0.0 {
        return None;
    }
    decimal_nanos(&format!("{v}")).map(Timestamp::from_unix_nanos)
}

/// Unix seconds from a JSON number's own text (`1772473397.7375433`), exactly;
/// `None` for other text (an exponent, a negative number, `null`).
pub fn unix_seconds_text(text: &str) -> Option<Timestamp> {
    decimal_nanos(text.trim())
        .filter(|n| *n > 0)
        .map(Timestamp::from_unix_nanos)
}

/// A non-negative decimal (`123.456`, no exponent) in nanoseconds, rounded half up
/// at the tenth digit.
fn decimal_nanos(text: &str) -> Option<i64> {
    let (int, frac) = text.split_once('.').unwrap_or((text, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: i64 = int.parse().ok()?;
    let mut nanos: i64 = 0;
    for d in frac.bytes().chain(std::iter::repeat(b'0')).take(9) {
        nanos = nanos * 10 + i64::from(d - b'0');
    }
    if frac.as_bytes().get(9).is_some_and(|d| *d >= b'5') {
        nanos += 1;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Seconds (as the tools write them) to a duration; `None` for negative, NaN or
/// absurd values.
pub fn secs(v: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(v).ok()
}

/// The failure cause of an HTTP status, when it is one; other failures are
/// `fallback`.
pub fn cause_of_status(status: Option<u64>, fallback: Cause) -> Cause {
    status
        .and_then(|s| u16::try_from(s).ok())
        .and_then(Cause::from_http_status)
        .unwrap_or(fallback)
}
