//! `tpscope.Recorder` and its per-request handle: thin wrappers whose methods stamp
//! on the Rust recorder's run clock (no Python clock, no GIL release: a stamp is a
//! clock read and a few stores).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use tpscope_model::Cause;
use tpscope_record::{
    InFlight, OpenMode, OtlpConfig, Queued, RecordError, Recorder, RunInfo, Usage,
};

use crate::args::{count, positive_cap};
use crate::err;

/// Records one run of your own requests into a span log (`tpscope.spans/1`).
#[pyclass(name = "Recorder", module = "tpscope._tpscope", subclass, frozen)]
pub struct PyRecorder {
    inner: Recorder,
    /// Set by `close()`: later calls raise instead of recording nothing.
    closed: Arc<AtomicBool>,
}

fn open_mode(mode: &str) -> PyResult<OpenMode> {
    match mode {
        "new" => Ok(OpenMode::New),
        "append" => Ok(OpenMode::Append),
        "overwrite" => Ok(OpenMode::Overwrite),
        _ => Err(err(format!(
            "mode: `{mode}` is not \"new\", \"append\" or \"overwrite\""
        ))),
    }
}

/// The recorder's open errors in Python terms (the Rust message names `OpenMode`).
fn open_error(e: RecordError) -> PyErr {
    match e {
        RecordError::Exists { path } => err(format!(
            "{}: already exists; a span log is never overwritten unless asked: pass \
             mode=\"append\" to add this run after the runs in it, mode=\"overwrite\" to \
             replace it, or choose a new path",
            path.display()
        )),
        e => err(e),
    }
}

/// The error of a call into a closed recorder.
fn closed_error(path: &std::path::Path) -> PyErr {
    err(format!(
        "the Recorder for {} is closed, so this would not be recorded: open a new \
         tpscope.Recorder (and instrument your client with it again, e.g. \
         tpscope.openai.instrument(client, rec))",
        path.display()
    ))
}

/// A cadence (keyword `name`) given as seconds (a number) or in the duration
/// grammar (`"10ms"`).
fn interval(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let d = if let Ok(text) = v.extract::<String>() {
        tpscope_model::units::parse_duration(&text).map_err(|e| err(format!("{name}: {e}")))?
    } else {
        let secs: f64 = v.extract()?;
        Duration::try_from_secs_f64(secs).map_err(|_| {
            err(format!(
                "{name}: {secs} is not a non-negative number of seconds"
            ))
        })?
    };
    if d.is_zero() {
        return Err(err(format!("{name}: must be longer than 0")));
    }
    Ok(d)
}

/// The OTLP export of `otlp_endpoint=` with `otlp_headers=` ({name: value}).
fn otlp(endpoint: &str, headers: Option<BTreeMap<String, String>>) -> PyResult<OtlpConfig> {
    let mut cfg = OtlpConfig::new(endpoint).map_err(|e| err(format!("otlp_endpoint: {e}")))?;
    for (k, v) in headers.unwrap_or_default() {
        cfg = cfg
            .header(&format!("{k}={v}"))
            .map_err(|e| err(format!("otlp_headers: {e}")))?;
    }
    Ok(cfg)
}

#[pymethods]
impl PyRecorder {
    #[new]
    #[pyo3(signature = (path, *, cap=None, labels=None, sample_interval=None, mode="new", model=None, url=None, api=None, sample_heartbeat=None, otlp_endpoint=None, otlp_headers=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        path: PathBuf,
        cap: Option<&Bound<'_, PyAny>>,
        labels: Option<BTreeMap<String, String>>,
        sample_interval: Option<&Bound<'_, PyAny>>,
        mode: &str,
        model: Option<String>,
        url: Option<String>,
        api: Option<String>,
        sample_heartbeat: Option<&Bound<'_, PyAny>>,
        otlp_endpoint: Option<String>,
        otlp_headers: Option<BTreeMap<String, String>>,
    ) -> PyResult<Self> {
        let mut info = RunInfo::new();
        info.cap = cap.map(|c| positive_cap("cap", c)).transpose()?;
        info.labels = labels.unwrap_or_default();
        if let Some(v) = sample_interval {
            info.sample_interval = Some(interval("sample_interval", v)?);
        }
        if let Some(v) = sample_heartbeat {
            info.sample_heartbeat = Some(interval("sample_heartbeat", v)?);
        }
        if otlp_headers.is_some() && otlp_endpoint.is_none() {
            return Err(err("otlp_headers: given without otlp_endpoint"));
        }
        let export = otlp_endpoint.map(|e| otlp(&e, otlp_headers)).transpose()?;
        if let Some(m) = model {
            info = info.model(m);
        }
        if let Some(u) = url {
            info = info.url(&u);
        }
        if let Some(a) = api {
            info = info.api(a);
        }
        let mut builder = Recorder::builder(path, info).mode(open_mode(mode)?);
        if let Some(cfg) = export {
            builder = builder.otlp(cfg);
        }
        let inner = builder.open().map_err(open_error)?;
        Ok(PyRecorder {
            inner,
            closed: Arc::new(AtomicBool::new(false)),
        })
    }

    /// A request became ready: stamps `queued_at` and returns its handle. `id` is
    /// written as the span's `request_id`; empty: the server's response id, if any.
    #[pyo3(signature = (id=None))]
    fn queued(&self, id: Option<String>) -> PyResult<PyRequest> {
        self.open()?;
        Ok(PyRequest {
            stage: Mutex::new(Stage::Queued(self.inner.queued(id.unwrap_or_default()))),
            closed: self.closed.clone(),
            path: self.inner.path().to_path_buf(),
        })
    }

    /// Changes the in-flight cap from now on (recorded as a sample).
    fn set_cap(&self, cap: &Bound<'_, PyAny>) -> PyResult<()> {
        self.open()?;
        self.inner.set_cap(positive_cap("cap", cap)?);
        Ok(())
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Relaxed)
    }

    /// The run's id.
    #[getter]
    fn run_id(&self) -> &str {
        self.inner.run_id()
    }

    /// The file being written.
    #[getter]
    fn path(&self) -> PathBuf {
        self.inner.path().to_path_buf()
    }

    /// Now on the run's clock, in nanoseconds since the Unix epoch.
    fn now_ns(&self) -> i64 {
        self.inner.now().unix_nanos()
    }

    /// Waits until every span finished so far is written and flushed.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.open()?;
        py.detach(|| self.inner.flush());
        Ok(())
    }

    /// What the OTLP export did not send and why (`otlp: N spans not exported
    /// (cause: n)`), once closed; `None` when everything was sent or nothing is
    /// exported.
    #[getter]
    fn otlp_warning(&self) -> Option<String> {
        self.inner.export_stats().and_then(|s| s.warning())
    }

    /// Ends the run (writes the `end` record); returns what was written:
    /// `spans`, `ok`, `error`, `cancelled`, `samples`, `unfinished`, and when
    /// exporting `not_exported` (spans the OTLP export dropped; they are in the log).
    /// Closing again returns zeros; any other call afterwards raises.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.closed.store(true, Relaxed);
        let closed = py.detach(|| self.inner.close()).map_err(err)?;
        let d = PyDict::new(py);
        let c = closed.counts;
        d.set_item("spans", c.spans)?;
        d.set_item("ok", c.status.ok)?;
        d.set_item("error", c.status.error)?;
        d.set_item("cancelled", c.status.cancelled)?;
        d.set_item("samples", c.samples)?;
        d.set_item("unfinished", closed.unfinished)?;
        if self.inner.export_stats().is_some() {
            d.set_item("not_exported", closed.not_exported)?;
        }
        Ok(d)
    }
}

impl PyRecorder {
    fn open(&self) -> PyResult<()> {
        if self.closed.load(Relaxed) {
            return Err(closed_error(self.inner.path()));
        }
        Ok(())
    }
}

enum Stage {
    Queued(Queued),
    Admitted(InFlight),
    Done,
}

/// One request: queued, then admitted (holding a slot), then finished. Dropped
/// unfinished, it is written as cancelled.
#[pyclass(name = "Request", module = "tpscope._tpscope", frozen)]
pub struct PyRequest {
    stage: Mutex<Stage>,
    /// The recorder's closed flag: a request finished after the close is not written.
    closed: Arc<AtomicBool>,
    path: PathBuf,
}

fn cause(name: &str) -> PyResult<Cause> {
    name.parse().map_err(|e| err(format!("cause: {e}")))
}

impl PyRequest {
    fn lock(&self) -> MutexGuard<'_, Stage> {
        self.stage.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The admitted handle, admitting it now if it was still queued.
    fn with<R>(&self, f: impl FnOnce(&InFlight) -> R) -> PyResult<R> {
        if self.closed.load(Relaxed) {
            return Err(closed_error(&self.path));
        }
        let mut stage = self.lock();
        if let Stage::Queued(_) = &*stage {
            let Stage::Queued(q) = std::mem::replace(&mut *stage, Stage::Done) else {
                unreachable!()
            };
            *stage = Stage::Admitted(q.admitted());
        }
        match &*stage {
            Stage::Admitted(r) => Ok(f(r)),
            _ => Err(err("the request is already finished")),
        }
    }

    /// Takes the admitted handle out to finish it (admitting a queued one now).
    fn take(&self) -> PyResult<InFlight> {
        self.with(|_| ())?;
        match std::mem::replace(&mut *self.lock(), Stage::Done) {
            Stage::Admitted(r) => Ok(r),
            _ => Err(err("the request is already finished")),
        }
    }
}

#[pymethods]
impl PyRequest {
    /// It took a slot (`admitted_at` is now). A no-op once admitted.
    fn admitted(&self) -> PyResult<()> {
        self.with(|_| ())
    }

    /// The first output arrived (a no-op after the first).
    fn first_token(&self) -> PyResult<()> {
        self.with(|r| r.first_token())
    }

    /// `n` output tokens (or chunks) arrived now; the first call stamps the first token.
    #[pyo3(signature = (n=None), text_signature = "(self, n=1)")]
    fn tokens(&self, n: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let n = n.map(|n| count("n", n)).transpose()?.unwrap_or(1);
        self.with(|r| r.tokens(n))
    }

    /// The current attempt's HTTP status (the response head's).
    fn http_status(&self, status: &Bound<'_, PyAny>) -> PyResult<()> {
        let status: u16 = crate::args::int("status", status, "an HTTP status such as 200")?;
        self.with(|r| r.http_status(status))
    }

    /// The current attempt's whole received text: without usage at the finish, the
    /// span's tokens are counted in it by the offline tokenizer (not by chunks).
    fn text(&self, text: String) -> PyResult<()> {
        self.with(|r| r.text(text))
    }

    /// The server's id for this response (the span's `request_id` when unnamed).
    fn response_id(&self, id: String) -> PyResult<()> {
        self.with(|r| r.response_id(id))
    }

    /// The current attempt failed with `cause`; a new attempt starts now.
    fn retry(&self, cause: &str) -> PyResult<()> {
        let c = self::cause(cause)?;
        self.with(|r| r.retry(c))
    }

    /// It succeeded; with `output_tokens` (the server's usage) the span counts those,
    /// otherwise the tokens given to `tokens()`.
    #[pyo3(signature = (output_tokens=None, input_tokens=None))]
    fn finish_ok(
        &self,
        output_tokens: Option<&Bound<'_, PyAny>>,
        input_tokens: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let input_tokens = input_tokens.map(|n| count("input_tokens", n)).transpose()?;
        let usage = output_tokens
            .map(|n| count("output_tokens", n))
            .transpose()?
            .map(|o| Usage::new(o, input_tokens));
        self.take()?.finish_ok(usage);
        Ok(())
    }

    /// It failed for good with `cause` (one of `tpscope.CAUSES`) and a message.
    #[pyo3(signature = (cause, message=None))]
    fn finish_err(&self, cause: &str, message: Option<String>) -> PyResult<()> {
        let message = message.unwrap_or_default();
        let c = self::cause(cause)?;
        if c == Cause::Cancelled {
            return self.cancel(&message);
        }
        self.take()?.finish_err(c, message);
        Ok(())
    }

    /// It was abandoned (a cancelled span), in the queue or holding a slot.
    #[pyo3(signature = (why="cancelled"))]
    fn cancel(&self, why: &str) -> PyResult<()> {
        match std::mem::replace(&mut *self.lock(), Stage::Done) {
            Stage::Queued(q) => q.cancel(why),
            Stage::Admitted(r) => r.cancel(why),
            Stage::Done => return Err(err("the request is already finished")),
        }
        Ok(())
    }

    /// `queued`, `admitted` or `finished`.
    #[getter]
    fn state(&self) -> &'static str {
        match &*self.lock() {
            Stage::Queued(_) => "queued",
            Stage::Admitted(_) => "admitted",
            Stage::Done => "finished",
        }
    }
}
