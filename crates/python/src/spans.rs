//! `tpscope.spans`: one row per span as equal-length columns (a dict of lists that
//! pandas and polars take as they are): the span's identity, status and cause, its
//! instants (seconds from the run's start, and nanoseconds since the epoch), every
//! per-span metric of `METRICS` (the report's own computation) and its tokens,
//! retries and session. The window is chosen as the report chooses it.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tpscope_analysis::{METRICS, SpanFacts, SpanText, WindowSpec, span_metrics};
use tpscope_model::Timestamp;

use crate::analysis::{read_logs, read_options};
use crate::err;

/// One of a span's instants, when it has it.
type Instant = fn(&SpanFacts) -> Option<Timestamp>;

/// The instants of a span, by column stem (`queued` → `queued_s`, `queued_at_ns`).
const INSTANTS: [(&str, Instant); 5] = [
    ("queued", |s| Some(s.queued_at)),
    ("admitted", |s| s.admitted_at),
    ("first_token", |s| s.first_token_at),
    ("last_token", |s| s.last_token_at),
    ("released", |s| Some(s.released_at)),
];

/// The columns, filled row by row.
#[derive(Default)]
struct Columns {
    run_id: Vec<String>,
    span_id: Vec<Option<String>>,
    request_id: Vec<Option<String>>,
    status: Vec<&'static str>,
    cause: Vec<Option<&'static str>>,
    error_message: Vec<Option<String>>,
    seconds: [Vec<Option<f64>>; INSTANTS.len()],
    nanos: [Vec<Option<i64>>; INSTANTS.len()],
    metrics: [Vec<Option<f64>>; METRICS.len()],
    output_tokens: Vec<u64>,
    input_tokens: Vec<Option<u64>>,
    token_source: Vec<Option<String>>,
    retry_count: Vec<u32>,
    retry_causes: Vec<Vec<&'static str>>,
    wasted_tokens: Vec<u64>,
    session: Vec<Option<String>>,
    turn: Vec<Option<u32>>,
}

/// What a row needs besides the span's facts.
struct RowCtx<'a> {
    run_id: &'a str,
    origin: Timestamp,
    default_source: Option<String>,
    sessions: &'a [Box<str>],
}

impl Columns {
    fn push(&mut self, ctx: &RowCtx<'_>, s: &SpanFacts, id: Option<&str>, text: &SpanText) {
        let owned = |v: &Option<Box<str>>| v.as_deref().map(str::to_string);
        self.run_id.push(ctx.run_id.to_string());
        self.span_id.push(id.map(str::to_string));
        self.request_id.push(owned(&text.request_id));
        self.status.push(s.status.as_str());
        self.cause.push(s.error_cause.map(|c| c.as_str()));
        self.error_message.push(owned(&text.error_message));
        for (i, (_, at)) in INSTANTS.iter().enumerate() {
            let t = at(s);
            self.seconds[i].push(t.map(|t| t.signed_nanos_since(ctx.origin) as f64 / 1e9));
            self.nanos[i].push(t.map(|t| t.unix_nanos()));
        }
        for (i, (_, v)) in span_metrics(s).iter().enumerate() {
            self.metrics[i].push(v);
        }
        self.output_tokens.push(s.output_tokens);
        self.input_tokens.push(s.input_tokens);
        // Only spans that received tokens have a source (as in the CSV export).
        let received = s.output_tokens > 0 || s.first_token_at.is_some();
        self.token_source.push(
            received
                .then(|| owned(&text.token_source).or_else(|| ctx.default_source.clone()))
                .flatten(),
        );
        self.retry_count.push(s.retry_count);
        self.retry_causes
            .push(s.retry_causes.iter().map(|c| c.as_str()).collect());
        self.wasted_tokens.push(s.wasted_tokens);
        let session = s.session.as_ref();
        self.session.push(
            session.and_then(|t| ctx.sessions.get(t.session as usize).map(|n| n.to_string())),
        );
        self.turn.push(session.map(|t| t.turn.get()));
    }

    fn into_dict(self, py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("run_id", self.run_id)?;
        d.set_item("span_id", self.span_id)?;
        d.set_item("request_id", self.request_id)?;
        d.set_item("status", self.status)?;
        d.set_item("cause", self.cause)?;
        d.set_item("error_message", self.error_message)?;
        for (i, col) in self.seconds.into_iter().enumerate() {
            d.set_item(format!("{}_s", INSTANTS[i].0), col)?;
        }
        for (i, col) in self.nanos.into_iter().enumerate() {
            d.set_item(format!("{}_at_ns", INSTANTS[i].0), col)?;
        }
        for (m, col) in METRICS.iter().zip(self.metrics) {
            d.set_item(m.name, col)?;
        }
        d.set_item("output_tokens", self.output_tokens)?;
        d.set_item("input_tokens", self.input_tokens)?;
        d.set_item("token_source", self.token_source)?;
        d.set_item("retry_count", self.retry_count)?;
        let causes = PyList::empty(py);
        for c in self.retry_causes {
            causes.append(c)?;
        }
        d.set_item("retry_causes", causes)?;
        d.set_item("wasted_tokens", self.wasted_tokens)?;
        d.set_item("session", self.session)?;
        d.set_item("turn", self.turn)?;
        Ok(d)
    }
}

/// The spans of the logs `paths` released inside each run's window, as columns.
#[pyfunction]
#[pyo3(signature = (paths, *, window="full", time_unit=None, skip_invalid=false))]
pub fn spans_columns<'py>(
    py: Python<'py>,
    paths: Vec<PathBuf>,
    window: &str,
    time_unit: Option<&str>,
    skip_invalid: bool,
) -> PyResult<Bound<'py, PyDict>> {
    if paths.is_empty() {
        return Err(err(
            "paths: no span log given (pass a path or a list of paths)",
        ));
    }
    let spec = window
        .parse::<WindowSpec>()
        .map_err(|e| err(format!("window: {e}")))?;
    let mut read_opts = read_options(time_unit, skip_invalid)?;
    read_opts.keep_span_ids = true;
    let cols = py.detach(|| {
        let set = read_logs(&paths, read_opts)?;
        let opts = tpscope_analysis::Options {
            window: spec,
            bucket: None,
            ..Default::default()
        };
        let mut cols = Columns::default();
        let none = SpanText::default();
        for run in &set.runs {
            let input = &run.input;
            // The report's own window (a steady one needs the sweep).
            let Some(w) = tpscope_analysis::analyze(input, &opts).window else {
                continue;
            };
            let ctx = RowCtx {
                run_id: &input.run_id,
                origin: input.origin().unwrap_or(w.start),
                default_source: input
                    .run
                    .as_ref()
                    .and_then(|r| r.token_source.as_ref())
                    .map(|s| s.to_string()),
                sessions: &input.session_ids.names(),
            };
            for (i, s) in input.spans.iter().enumerate() {
                if s.released_at < w.start || s.released_at > w.end {
                    continue;
                }
                let id = run.span_ids.get(i).map(|b| &**b);
                cols.push(&ctx, s, id, run.span_text.get(i).unwrap_or(&none));
            }
        }
        Ok::<_, PyErr>(cols)
    })?;
    cols.into_dict(py)
}
