//! GuideLLM benchmarks JSON or YAML (`--output kind=json` / `kind=yaml`, report
//! `metadata.version` 2, GuideLLM 0.4 to 0.8; the YAML is read into the same tree as
//! the JSON): `benchmarks[].requests.{successful,errored,incomplete}[]`, each with
//! `info.timings` in Unix seconds — `queued` (the request entered GuideLLM's queue),
//! `request_start`, `first_token_iteration`, `last_token_iteration`,
//! `request_end` — and `output_metrics.text_tokens`/`input_metrics.text_tokens`
//! (the server's usage when it sent one, GuideLLM's `prefer_response_metrics`).
//! Each benchmark of the file is one run (a sweep gives several, see
//! [`super::import_runs`]), with its strategy's concurrency or rate.

use serde_json::Value;
use tpscope_model::{Cause, Target, Timestamp, TokenSource};

use super::ImportError;
use super::build::{Cx, Raw};

fn unix(v: &Value) -> Option<Timestamp> {
    let s = v.as_f64().filter(|s| s.is_finite() && *s > 0.0)?;
    Some(Timestamp::from_unix_nanos((s * 1e9).round() as i64))
}

fn request(cx: &Cx<'_>, record: &str, r: &Value, errored: bool) -> Result<Raw, ImportError> {
    let t = &r["info"]["timings"];
    if !t.is_object() {
        return Err(cx.bad(
            record,
            Some("info.timings"),
            "missing (expected an object of Unix times)",
        ));
    }
    let start = unix(&t["request_start"]).or_else(|| unix(&r["request_start_time"]));
    let end = unix(&t["request_end"]).or_else(|| unix(&r["request_end_time"]));
    let out = r["output_metrics"]["text_tokens"]
        .as_u64()
        .or_else(|| r["output_tokens"].as_u64());
    let first = unix(&t["first_token_iteration"]);
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
        queued_at: unix(&t["queued"]),
        sent_at: start,
        first_token_at: if errored { None } else { first },
        last_token_at: if errored {
            None
        } else {
            unix(&t["last_token_iteration"]).or(first)
        },
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
pub(super) fn parse(cx: &Cx<'_>, bytes: &[u8]) -> Result<Value, ImportError> {
    let json = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let doc: Value = if json {
        serde_json::from_slice(bytes)
            .map_err(|e| cx.not_format(format!("{e} (expected GuideLLM's benchmarks JSON)")))?
    } else {
        serde_norway::from_slice(bytes)
            .map_err(|e| cx.not_format(format!("{e} (expected GuideLLM's benchmarks YAML)")))?
    };
    if !doc["benchmarks"].is_array() {
        return Err(cx.not_format("no `benchmarks` array"));
    }
    Ok(doc)
}

/// How many benchmarks (runs) the document holds.
pub(super) fn count(doc: &Value) -> usize {
    doc["benchmarks"].as_array().map_or(0, Vec::len)
}

/// Imports benchmark `index` of a parsed document into `cx`.
pub(super) fn import(cx: &mut Cx<'_>, doc: &Value, index: usize) -> Result<(), ImportError> {
    let benches = doc["benchmarks"]
        .as_array()
        .ok_or_else(|| cx.not_format("no `benchmarks` array"))?;
    let b = benches.get(index).ok_or_else(|| {
        cx.not_format(format!(
            "no benchmark {index} (the file has {})",
            benches.len()
        ))
    })?;
    let version = doc["metadata"]["guidellm_version"].as_str().unwrap_or("?");
    cx.run.tool = format!("guidellm {version}");
    let strategy = &b["config"]["strategy"];
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
    for (kind, errored) in [
        ("successful", false),
        ("errored", true),
        ("incomplete", true),
    ] {
        for (i, r) in reqs[kind].as_array().into_iter().flatten().enumerate() {
            let record = format!("benchmarks[{index}].requests.{kind}[{i}]");
            match request(cx, &record, r, errored) {
                Ok(mut raw) => {
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
    Ok(())
}
