//! GuideLLM benchmarks JSON or YAML (`--output kind=json` / `kind=yaml`, report
//! `metadata.version` 2, GuideLLM 0.4 to 0.8; the YAML is read into the same tree as
//! the JSON): `benchmarks[].requests.{successful,errored,incomplete}[]`, each with
//! `info.timings` in Unix seconds — `queued` (the request entered GuideLLM's queue),
//! `request_start`, `first_token_iteration`, `last_token_iteration`,
//! `request_end` — and `output_metrics.text_tokens`/`input_metrics.text_tokens`
//! (the server's usage when it sent one, GuideLLM's `prefer_response_metrics`).
//! Each benchmark of the file is one run (a sweep gives several, see
//! [`super::import_runs`]), with its strategy's concurrency or rate.
//!
//! GuideLLM 0.5 and later measure between `scheduler_metrics.measure_start_time`
//! and `measure_end_time` (after the configured warm-up, before the cool-down): a
//! request counts when it ended after the start and started before the end. The
//! others are left out by default, as GuideLLM leaves them out of its metrics, and
//! the import says how many (`keep_transient` keeps them). The reports of GuideLLM
//! 0.2 and 0.3 (`requests.successful[]` with `start_time`, `first_token_time`,
//! `last_token_time`, `end_time`, `scheduler_info.queued_time`, no `info.timings`)
//! are read too. Unix seconds are read exactly from their decimal text.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tpscope_model::{Cause, Target, Timestamp, TokenSource};

use super::ImportError;
use super::build::{Cx, Raw, unix_seconds, unix_seconds_text};

fn unix(v: &Value) -> Option<Timestamp> {
    unix_seconds(v.as_f64()?)
}

/// A parsed GuideLLM file: its tree, and (for JSON) the decimal text of its Unix
/// seconds, which an `f64` would round to 0.24 µs (and serde_json's fast parse by
/// a further step).
pub(super) struct Doc<'a> {
    pub tree: Value,
    exact: Option<Exact<'a>>,
}

type Stamps<'a> = HashMap<&'a str, &'a RawValue>;

#[derive(Deserialize, Default)]
struct Exact<'a> {
    #[serde(borrow, default)]
    benchmarks: Vec<ExactBench<'a>>,
}

#[derive(Deserialize, Default)]
struct ExactBench<'a> {
    #[serde(borrow, default)]
    requests: ExactRequests<'a>,
    #[serde(borrow, default)]
    scheduler_metrics: Stamps<'a>,
}

#[derive(Deserialize, Default)]
struct ExactRequests<'a> {
    #[serde(borrow, default)]
    successful: Vec<ExactRequest<'a>>,
    #[serde(borrow, default)]
    errored: Vec<ExactRequest<'a>>,
    #[serde(borrow, default)]
    incomplete: Vec<ExactRequest<'a>>,
}

#[derive(Deserialize, Default)]
struct ExactRequest<'a> {
    #[serde(borrow, default)]
    info: ExactInfo<'a>,
    #[serde(borrow, default)]
    scheduler_info: Stamps<'a>,
    #[serde(borrow, default)]
    start_time: Option<&'a RawValue>,
    #[serde(borrow, default)]
    end_time: Option<&'a RawValue>,
    #[serde(borrow, default)]
    first_token_time: Option<&'a RawValue>,
    #[serde(borrow, default)]
    last_token_time: Option<&'a RawValue>,
    #[serde(borrow, default)]
    request_start_time: Option<&'a RawValue>,
    #[serde(borrow, default)]
    request_end_time: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct ExactInfo<'a> {
    #[serde(borrow, default)]
    timings: Stamps<'a>,
}

impl ExactRequest<'_> {
    fn get(&self, path: &[&str]) -> Option<&RawValue> {
        match path {
            ["info", "timings", k] => self.info.timings.get(k).copied(),
            ["scheduler_info", k] => self.scheduler_info.get(k).copied(),
            ["start_time"] => self.start_time,
            ["end_time"] => self.end_time,
            ["first_token_time"] => self.first_token_time,
            ["last_token_time"] => self.last_token_time,
            ["request_start_time"] => self.request_start_time,
            ["request_end_time"] => self.request_end_time,
            _ => None,
        }
    }
}

/// One request of the file: its tree and, for JSON, its exact stamps.
struct Request<'v> {
    tree: &'v Value,
    exact: Option<&'v ExactRequest<'v>>,
}

impl Request<'_> {
    /// The Unix instant at `path`: from its decimal text where the file is JSON.
    fn at(&self, path: &[&str]) -> Option<Timestamp> {
        if let Some(raw) = self.exact.and_then(|e| e.get(path))
            && let Some(t) = unix_seconds_text(raw.get())
        {
            return Some(t);
        }
        unix(path.iter().fold(self.tree, |v, k| &v[*k]))
    }
}

/// The request's instants: GuideLLM ≥ 0.4's `info.timings`, or the flat fields of
/// 0.2/0.3 (`start_time`…, the queue in `scheduler_info`).
struct Instants {
    queued: Option<Timestamp>,
    start: Option<Timestamp>,
    first: Option<Timestamp>,
    last: Option<Timestamp>,
    end: Option<Timestamp>,
}

fn instants(cx: &Cx<'_>, record: &str, q: &Request<'_>) -> Result<Instants, ImportError> {
    let r = q.tree;
    let t = |k: &str| q.at(&["info", "timings", k]);
    if r["info"]["timings"].is_object() {
        return Ok(Instants {
            queued: t("queued"),
            start: t("request_start").or_else(|| q.at(&["request_start_time"])),
            first: t("first_token_iteration"),
            last: t("last_token_iteration"),
            end: t("request_end").or_else(|| q.at(&["request_end_time"])),
        });
    }
    if r["start_time"].is_number() {
        return Ok(Instants {
            queued: q.at(&["scheduler_info", "queued_time"]),
            start: q.at(&["start_time"]),
            first: q.at(&["first_token_time"]),
            last: q.at(&["last_token_time"]),
            end: q.at(&["end_time"]),
        });
    }
    Err(cx.bad(
        record,
        Some("info.timings"),
        "missing (expected an object of Unix times, or the `start_time`… of a GuideLLM 0.2/0.3 report)",
    ))
}

fn request(cx: &Cx<'_>, record: &str, q: &Request<'_>, errored: bool) -> Result<Raw, ImportError> {
    let r = q.tree;
    let Instants {
        queued,
        start,
        first,
        last,
        end,
    } = instants(cx, record, q)?;
    let out = r["output_metrics"]["text_tokens"]
        .as_u64()
        .or_else(|| r["output_tokens"].as_u64());
    let error = errored.then(|| {
        let msg = r["info"]["error"].as_str().unwrap_or("errored").to_string();
        let lower = msg.to_ascii_lowercase();
        let cause = if lower.contains("429") {
            Cause::Http429
        } else if lower.contains("timeout") {
            Cause::TimeoutTotal
        } else if lower.contains(" 5") && lower.contains("server error") {
            Cause::Http5xx
        } else {
            Cause::Disconnect
        };
        (cause, msg)
    });
    Ok(Raw {
        request_id: r["response_id"]
            .as_str()
            .or_else(|| r["request_id"].as_str())
            .map(str::to_string),
        queued_at: queued,
        sent_at: start,
        first_token_at: if errored { None } else { first },
        last_token_at: if errored { None } else { last.or(first) },
        ended_at: end,
        output_tokens: Some(if errored { 0 } else { out.unwrap_or(0) }),
        input_tokens: r["input_metrics"]["text_tokens"]
            .as_u64()
            .or_else(|| r["prompt_tokens"].as_u64()),
        error,
        ..Raw::default()
    })
}

/// The file's document: JSON when it starts with `{`, else GuideLLM's YAML.
pub(super) fn parse<'a>(cx: &Cx<'_>, bytes: &'a [u8]) -> Result<Doc<'a>, ImportError> {
    let json = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let tree: Value = if json {
        serde_json::from_slice(bytes)
            .map_err(|e| cx.not_format(format!("{e} (expected GuideLLM's benchmarks JSON)")))?
    } else {
        // YAML floats are parsed correctly rounded: their shortest form is the text.
        serde_norway::from_slice(bytes)
            .map_err(|e| cx.not_format(format!("{e} (expected GuideLLM's benchmarks YAML)")))?
    };
    if !tree["benchmarks"].is_array() {
        return Err(cx.not_format("no `benchmarks` array"));
    }
    // The tree parsed, so this can only fail on an unexpected shape: then the
    // tree's `f64`s are used.
    let exact = json
        .then(|| serde_json::from_slice::<Exact<'a>>(bytes).ok())
        .flatten();
    Ok(Doc { tree, exact })
}

/// How many benchmarks (runs) the document holds.
pub(super) fn count(doc: &Doc<'_>) -> usize {
    doc.tree["benchmarks"].as_array().map_or(0, Vec::len)
}

/// Imports benchmark `index` of a parsed document into `cx`.
pub(super) fn import(cx: &mut Cx<'_>, parsed: &Doc<'_>, index: usize) -> Result<(), ImportError> {
    let doc = &parsed.tree;
    let exact = parsed.exact.as_ref().and_then(|e| e.benchmarks.get(index));
    let benches = doc["benchmarks"]
        .as_array()
        .ok_or_else(|| cx.not_format("no `benchmarks` array"))?;
    let b = benches.get(index).ok_or_else(|| {
        cx.not_format(format!(
            "no benchmark {index} (the file has {})",
            benches.len()
        ))
    })?;
    // GuideLLM 0.2/0.3 reports have no `metadata` and keep the strategy in `args`.
    let old = !doc["metadata"].is_object() && b["args"].is_object();
    let version = doc["metadata"]["guidellm_version"]
        .as_str()
        .unwrap_or(if old { "0.2/0.3" } else { "?" });
    cx.run.tool = format!("guidellm {version}");
    let strategy = if old {
        &b["args"]["strategy"]
    } else {
        &b["config"]["strategy"]
    };
    cx.run.cap = strategy["max_concurrency"]
        .as_u64()
        .or_else(|| strategy["streams"].as_u64())
        .and_then(|c| u32::try_from(c).ok());
    cx.run.token_source = Some(TokenSource::Usage);
    cx.run.target = Target {
        api: Some("guidellm".into()),
        ..Target::default()
    };
    // `benchmark` counts from 1, as the run id's `#N` does.
    cx.run.load = serde_json::json!({
        "strategy": strategy,
        "max_concurrency": cx.run.cap,
        "request_rate": strategy["rate"].as_f64(),
        "benchmark": index + 1,
        "benchmarks": benches.len(),
    });
    cx.queue_known = true;
    let reqs = &b["requests"];
    if !reqs.is_object() {
        return Err(cx.not_format(format!(
            "benchmark {index} has no `requests` (save per-request data)"
        )));
    }
    let window = Measured::of(b, exact.map(|e| &e.scheduler_metrics));
    let mut outside = (0u64, 0u64);
    for (kind, errored) in [
        ("successful", false),
        ("errored", true),
        ("incomplete", true),
    ] {
        let exact = exact.map(|e| match kind {
            "successful" => &e.requests.successful,
            "errored" => &e.requests.errored,
            _ => &e.requests.incomplete,
        });
        for (i, r) in reqs[kind].as_array().into_iter().flatten().enumerate() {
            let record = format!("benchmarks[{index}].requests.{kind}[{i}]");
            let q = Request {
                tree: r,
                exact: exact.and_then(|e| e.get(i)),
            };
            match request(cx, &record, &q, errored) {
                Ok(mut raw) => {
                    if Measured::excludes(&window, &raw, &mut outside) && !cx.keep_transient() {
                        continue;
                    }
                    if kind == "incomplete" {
                        raw.error = Some((
                            Cause::Cancelled,
                            "incomplete when the benchmark ended".into(),
                        ));
                    }
                    if cx.run.target.model.is_none() {
                        cx.run.target.model = serde_json::from_str::<Value>(
                            r["request_args"].as_str().unwrap_or("{}"),
                        )
                        .ok()
                        .and_then(|a| a["body"]["model"].as_str().map(str::to_string));
                    }
                    cx.push(&record, raw)?
                }
                Err(e) => cx.reject(e)?,
            }
        }
    }
    if let Some(w) = window {
        w.note(cx, b, outside);
    }
    Ok(())
}

/// GuideLLM's measured window (≥ 0.5): requests outside it are its warm-up and
/// cool-down, left out of its metrics.
#[derive(Clone, Copy)]
struct Measured {
    start: Timestamp,
    end: Timestamp,
    request_start: Option<Timestamp>,
}

impl Measured {
    fn of(b: &Value, exact: Option<&Stamps<'_>>) -> Option<Measured> {
        let m = &b["scheduler_metrics"];
        let at = |k: &str| {
            exact
                .and_then(|e| e.get(k))
                .and_then(|r| unix_seconds_text(r.get()))
                .or_else(|| unix(&m[k]))
        };
        Some(Measured {
            start: at("measure_start_time")?,
            end: at("measure_end_time")?,
            request_start: at("request_start_time"),
        })
    }

    /// Whether GuideLLM's own selection (ended at or after the start; started at or
    /// before the end, or ended by it when never started) leaves `raw` out; counts
    /// it as warm-up (`.0`) or cool-down (`.1`).
    fn excludes(this: &Option<Measured>, raw: &Raw, outside: &mut (u64, u64)) -> bool {
        let Some(w) = this else { return false };
        let Some(end) = raw.ended_at else {
            return false;
        };
        if end < w.start {
            outside.0 += 1;
            return true;
        }
        let late = match raw.sent_at {
            Some(start) => start > w.end,
            None => end > w.end,
        };
        if late {
            outside.1 += 1;
        }
        late
    }

    fn note(self, cx: &mut Cx<'_>, b: &Value, (warm, cool): (u64, u64)) {
        let from = self.request_start.unwrap_or(self.start);
        let secs = |t: Timestamp| t.signed_nanos_since(from) as f64 / 1e9;
        let setting = |key: &str| {
            let c = &b["config"][key];
            match (c["percent"].as_f64(), c["value"].as_f64()) {
                (Some(p), _) => format!("{}%", p * 100.0),
                (None, Some(v)) => format!("{v}"),
                _ => "none".into(),
            }
        };
        cx.run.labels.insert(
            "guidellm_measured".into(),
            format!("{:.3}s..{:.3}s", secs(self.start), secs(self.end)),
        );
        if warm + cool == 0 {
            return;
        }
        let what = if cx.keep_transient() {
            "kept (their spans are in the run; `--window` narrows it to GuideLLM's)"
        } else {
            "left out, as GuideLLM leaves them out of its metrics (`--keep-transient` keeps them)"
        };
        cx.warnings.push(format!(
            "{}: GuideLLM measured from {:.3} s to {:.3} s after its first request \
             (warm-up {}, cool-down {}): {warm} warm-up and {cool} cool-down requests {what}",
            cx.file.display(),
            secs(self.start),
            secs(self.end),
            setting("warmup"),
            setting("cooldown"),
        ));
    }
}
