//! Reading span logs: one streaming pass per file into per-run analysis inputs,
//! with errors that name the file, line and field.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::hash::{BuildHasher, Hasher};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use tpscope_analysis::{RunInput, SampleFacts, SpanFacts};
use tpscope_model::{
    Cause, EndRecord, Lifecycle, RunRecord, Status, Target, Timestamp, TokenSource, check_lifecycle,
};

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
/// type is reported with the field's name.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    kind: Option<Scalar<'a>>,
    #[serde(borrow)]
    run_id: Option<Scalar<'a>>,
    #[serde(borrow)]
    span_id: Option<Scalar<'a>>,
    #[serde(borrow)]
    status: Option<Scalar<'a>>,
    #[serde(borrow)]
    queued_at: Option<Scalar<'a>>,
    #[serde(borrow)]
    admitted_at: Option<Scalar<'a>>,
    #[serde(borrow)]
    first_token_at: Option<Scalar<'a>>,
    #[serde(borrow)]
    last_token_at: Option<Scalar<'a>>,
    #[serde(borrow)]
    released_at: Option<Scalar<'a>>,
    #[serde(borrow)]
    output_tokens: Option<Scalar<'a>>,
    #[serde(borrow)]
    input_tokens: Option<Scalar<'a>>,
    #[serde(borrow)]
    token_source: Option<Scalar<'a>>,
    #[serde(borrow)]
    retry_count: Option<Scalar<'a>>,
    #[serde(borrow)]
    retry_causes: Option<&'a RawValue>,
    #[serde(borrow)]
    attempts: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    #[serde(borrow)]
    chunks: Option<&'a RawValue>,
    // sample
    #[serde(borrow)]
    at: Option<Scalar<'a>>,
    #[serde(borrow)]
    in_flight: Option<Scalar<'a>>,
    #[serde(borrow)]
    queue_depth: Option<Scalar<'a>>,
    #[serde(borrow)]
    cap: Option<Scalar<'a>>,
    // run
    #[serde(borrow)]
    schema: Option<Scalar<'a>>,
    #[serde(borrow)]
    tool: Option<Scalar<'a>>,
    #[serde(borrow)]
    started_at: Option<Scalar<'a>>,
    #[serde(borrow)]
    target: Option<&'a RawValue>,
    #[serde(borrow)]
    tokenizer: Option<Scalar<'a>>,
    #[serde(borrow)]
    sample_interval_s: Option<Scalar<'a>>,
    #[serde(borrow)]
    load: Option<&'a RawValue>,
    #[serde(borrow)]
    labels: Option<&'a RawValue>,
    // end
    #[serde(borrow)]
    ended_at: Option<Scalar<'a>>,
    #[serde(borrow)]
    spans: Option<Scalar<'a>>,
    #[serde(borrow)]
    ok: Option<Scalar<'a>>,
    #[serde(borrow)]
    cancelled: Option<Scalar<'a>>,
    #[serde(borrow)]
    samples: Option<Scalar<'a>>,
}

#[derive(Deserialize)]
struct RawAttempt<'a> {
    #[serde(borrow)]
    started_at: Option<Scalar<'a>>,
    #[serde(borrow)]
    ended_at: Option<Scalar<'a>>,
    #[serde(borrow)]
    cause: Option<Scalar<'a>>,
    #[serde(borrow)]
    tokens: Option<Scalar<'a>>,
}

#[derive(Deserialize)]
struct RawError<'a> {
    #[serde(borrow)]
    cause: Option<Scalar<'a>>,
}

/// A parsed record, ready to be filed under its run.
enum Parsed {
    Run(RunRecord),
    Span {
        facts: SpanFacts,
        source: Option<TokenSource>,
        span_id: Box<str>,
    },
    Sample(SampleFacts),
    End(EndRecord),
}

fn parse_json<'a, T: Deserialize<'a>>(
    field: &str,
    raw: &'a RawValue,
    expected: &str,
) -> FieldResult<T> {
    serde_json::from_str(raw.get())
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

fn parse_line(
    line: &Line<'_>,
    kind: &str,
    unit: Option<TimeUnit>,
) -> FieldResult<(String, Parsed)> {
    let run_id = as_str("run_id", required("run_id", &line.run_id)?)?.to_string();
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
        "run" => parse_run(line, &run_id, unit)?,
        "end" => {
            let count = |field: &str, v: &Option<Scalar<'_>>| {
                present(v).map(|s| as_u64(field, s)).transpose()
            };
            let error = match line.error {
                Some(raw) => {
                    parse_json::<Option<u64>>("error", raw, "a count of error spans")?.unwrap_or(0)
                }
                None => 0,
            };
            Parsed::End(EndRecord {
                run_id: run_id.clone(),
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

fn parse_run(line: &Line<'_>, run_id: &str, unit: Option<TimeUnit>) -> FieldResult<Parsed> {
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

fn parse_span(line: &Line<'_>, unit: Option<TimeUnit>) -> FieldResult<Parsed> {
    let span_id: Box<str> = match required("span_id", &line.span_id)? {
        Scalar::Str(s) if !s.is_empty() => s.as_ref().into(),
        Scalar::U(n) => n.to_string().into(),
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
    let error_cause = match line.error {
        Some(raw) => {
            match parse_json::<Option<RawError<'_>>>("error", raw, "an object {cause, message}")? {
                Some(e) => Some(cause_of("error.cause", required("error.cause", &e.cause)?)?),
                None => None,
            }
        }
        None => None,
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
    let retry_causes = match line.retry_causes {
        Some(raw) => {
            let list = parse_json::<Option<Vec<Scalar<'_>>>>(
                "retry_causes",
                raw,
                "an array of cause names",
            )?
            .unwrap_or_default();
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
        None => Vec::new(),
    };
    let mut wasted_tokens = 0;
    if let Some(raw) = line.attempts {
        let attempts = parse_json::<Option<Vec<RawAttempt<'_>>>>(
            "attempts",
            raw,
            "an array of attempt objects",
        )?
        .unwrap_or_default();
        for (i, a) in attempts.iter().enumerate() {
            let f = |name: &str| format!("attempts[{i}].{name}");
            let start = opt_time(&f("started_at"), &a.started_at, unit)?;
            let end = opt_time(&f("ended_at"), &a.ended_at, unit)?;
            if let (Some(s), Some(e)) = (start, end)
                && e < s
            {
                return Err(problem(
                    f("ended_at"),
                    "out_of_order",
                    format!("{e} is before started_at ({s})"),
                ));
            }
            let tokens = present(&a.tokens)
                .map(|v| as_u64(&f("tokens"), v))
                .transpose()?
                .unwrap_or(0);
            if present(&a.cause)
                .map(|c| cause_of(&f("cause"), c))
                .transpose()?
                .is_some()
            {
                wasted_tokens += tokens;
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

struct RunAcc {
    run: LoadedRun,
    ids: HashSet<u128>,
}

/// Reads span logs, grouping records by `run_id` across files.
pub struct Reader {
    opts: ReadOptions,
    set: LogSet,
    index: HashMap<String, usize>,
    accs: Vec<RunAcc>,
    hash_keys: (std::hash::RandomState, std::hash::RandomState),
}

impl Reader {
    /// A reader with the given options.
    pub fn new(opts: ReadOptions) -> Reader {
        Reader {
            opts,
            set: LogSet::default(),
            index: HashMap::new(),
            accs: Vec::new(),
            hash_keys: (std::hash::RandomState::new(), std::hash::RandomState::new()),
        }
    }

    /// Reads one file.
    pub fn read_path(&mut self, path: &Path) -> Result<(), LogError> {
        let file = File::open(path).map_err(|source| LogError::Io {
            file: path.to_path_buf(),
            source,
        })?;
        self.read_from(path, file)
    }

    /// Reads span-log text from any reader; `name` is used in messages.
    pub fn read_from(&mut self, name: &Path, r: impl Read) -> Result<(), LogError> {
        let mut r = BufReader::with_capacity(1 << 20, r);
        let mut buf = Vec::with_capacity(4096);
        let mut line_no = 0u64;
        let mut records_here = 0u64;
        let io = |source| LogError::Io {
            file: name.to_path_buf(),
            source,
        };
        loop {
            buf.clear();
            let n = r.read_until(b'\n', &mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            line_no += 1;
            let complete = buf.last() == Some(&b'\n');
            let mut bytes = &buf[..];
            while let [rest @ .., b'\n' | b'\r'] = bytes {
                bytes = rest;
            }
            if bytes.contains(&0) {
                return Err(LogError::Binary {
                    file: name.to_path_buf(),
                    line: line_no,
                    what: "a NUL byte",
                });
            }
            if bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let text = match std::str::from_utf8(bytes) {
                Ok(t) => t,
                Err(_) if line_no == 1 => {
                    return Err(LogError::Binary {
                        file: name.to_path_buf(),
                        line: line_no,
                        what: "bytes that are not UTF-8",
                    });
                }
                Err(e) => {
                    let p = problem(
                        "",
                        "not_utf8",
                        format!("not UTF-8 text at byte {}", e.valid_up_to()),
                    );
                    self.reject(name, line_no, None, p)?;
                    continue;
                }
            };
            match self.record(text) {
                Ok(()) => {
                    records_here += 1;
                    self.set.records += 1;
                }
                Err((syntax, p)) if syntax && !complete => {
                    // The writer was killed mid-line: keep everything before it.
                    self.set.warnings.push(format!(
                        "{}:{line_no}: the last line is cut off ({} bytes, {}); ignored",
                        name.display(),
                        bytes.len(),
                        p.problem
                    ));
                }
                Err((syntax, p)) => {
                    let field = (!syntax && !p.field.is_empty()).then(|| p.field.clone());
                    self.reject(name, line_no, field, p)?;
                }
            }
        }
        if records_here == 0 && line_no == 0 {
            return Err(LogError::Empty {
                file: name.to_path_buf(),
            });
        }
        if records_here == 0 && !self.opts.skip_invalid && self.set.warnings.is_empty() {
            return Err(LogError::Empty {
                file: name.to_path_buf(),
            });
        }
        Ok(())
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
        let line: Line<'_> = serde_json::from_str(text).map_err(|e| {
            let what = if e.is_eof() {
                "the JSON ends early"
            } else {
                "malformed JSON"
            };
            (true, problem("", "malformed_json", format!("{what}: {e}")))
        })?;
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
        let idx = match self.index.get(&run_id) {
            Some(i) => *i,
            None => {
                self.index.insert(run_id.clone(), self.accs.len());
                self.accs.push(RunAcc {
                    run: LoadedRun {
                        input: RunInput {
                            run_id: run_id.clone(),
                            ..RunInput::default()
                        },
                        span_ids: Vec::new(),
                    },
                    ids: HashSet::new(),
                });
                self.accs.len() - 1
            }
        };
        let keys = &self.hash_keys;
        let acc = &mut self.accs[idx];
        match parsed {
            Parsed::Span {
                facts,
                source,
                span_id,
            } => {
                let mut h1 = keys.0.build_hasher();
                let mut h2 = keys.1.build_hasher();
                h1.write(span_id.as_bytes());
                h2.write(span_id.as_bytes());
                let key = (u128::from(h1.finish()) << 64) | u128::from(h2.finish());
                if !acc.ids.insert(key) {
                    return Err((
                        false,
                        problem(
                            "span_id",
                            "duplicate_span_id",
                            format!("duplicate span id `{span_id}` in run `{run_id}`"),
                        ),
                    ));
                }
                acc.run.input.push_span(facts, source.as_ref());
                if self.opts.keep_span_ids {
                    acc.run.span_ids.push(span_id);
                }
            }
            Parsed::Sample(s) => acc.run.input.samples.push(s),
            Parsed::Run(r) => {
                if acc.run.input.run.is_some() {
                    return Err((
                        false,
                        problem(
                            "run_id",
                            "duplicate_run",
                            format!("a second `run` record for run `{run_id}`"),
                        ),
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
