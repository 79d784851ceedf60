//! LLMPerf (ray-project/llmperf, `token_benchmark_ray.py`, every version to date)
//! `*_individual_responses.json`: an array of per-request metrics with durations
//! only (`ttft_s`, `end_to_end_latency_s`, `inter_token_latency_s` — the mean of the
//! time to each chunk, first included, over the output tokens —, token counts from
//! LLMPerf's tokenizer, `error_code`, `error_msg`). With no start times, requests are
//! placed back to back per concurrent client (see `lanes`), and the queue is absent.

use serde::Deserialize;
use tpscope_model::{Cause, Target, TokenSource};

use super::ImportError;
use super::build::{Cx, Raw, cause_of_status, secs};
use super::lanes::{self, DEFAULT_ANCHOR, Lanes};

#[derive(Deserialize)]
struct Response {
    error_code: Option<serde_json::Value>,
    #[serde(default)]
    error_msg: Option<String>,
    inter_token_latency_s: Option<f64>,
    ttft_s: Option<f64>,
    end_to_end_latency_s: Option<f64>,
    number_output_tokens: Option<u64>,
    number_input_tokens: Option<u64>,
}

pub(super) fn import(
    cx: &mut Cx<'_>,
    bytes: &[u8],
    clients: Option<u32>,
) -> Result<(), ImportError> {
    let items: Vec<serde_json::Value> = serde_json::from_slice(bytes).map_err(|e| {
        cx.not_format(format!(
            "{e} (expected the JSON array of *_individual_responses.json)"
        ))
    })?;
    cx.run.tool = "llmperf".into();
    cx.run.target = Target {
        api: Some("llmperf".into()),
        ..Target::default()
    };
    cx.run.cap = clients;
    cx.run.token_source = Some(TokenSource::Tokenizer("llmperf".into()));
    cx.run.load = serde_json::json!({ "num_concurrent_requests": clients });
    let mut lanes = Lanes::new(clients.unwrap_or(1), DEFAULT_ANCHOR);
    for (i, item) in items.into_iter().enumerate() {
        let record = format!("request {i}");
        let raw = (|| -> Result<Raw, ImportError> {
            let r: Response = serde_json::from_value(item).map_err(|e| {
                cx.bad(
                    &record,
                    None,
                    format!("{e} (expected an object of per-request metrics)"),
                )
            })?;
            let dur = |field: &str, v: Option<f64>| {
                v.and_then(secs).ok_or_else(|| {
                    cx.bad(
                        &record,
                        Some(field),
                        "expected a non-negative number of seconds",
                    )
                })
            };
            let e2e = dur("end_to_end_latency_s", r.end_to_end_latency_s)?;
            let error = match r.error_code {
                None | Some(serde_json::Value::Null) => None,
                Some(code) => {
                    let status = code.as_u64();
                    let cause = cause_of_status(status, Cause::Disconnect);
                    let msg = r.error_msg.clone().unwrap_or_default();
                    Some((cause, format!("error_code {code}: {msg}")))
                }
            };
            let sent = lanes.place(e2e);
            let out = r.number_output_tokens.unwrap_or(0);
            let ttft = dur("ttft_s", r.ttft_s)?;
            let streamed = error.is_none() && out > 0 && !ttft.is_zero();
            let first = streamed.then(|| sent.after(ttft));
            // inter_token_latency_s × tokens is the time from sending to the last chunk.
            let last = match (
                first,
                r.inter_token_latency_s.and_then(|v| secs(v * out as f64)),
            ) {
                (Some(f), Some(to_last)) => Some(sent.after(to_last.min(e2e)).max(f)),
                (f, _) => f,
            };
            Ok(Raw {
                sent_at: Some(sent),
                first_token_at: first,
                last_token_at: last,
                ended_at: Some(sent.after(e2e)),
                output_tokens: Some(if error.is_some() { 0 } else { out }),
                input_tokens: r.number_input_tokens,
                error,
                ..Raw::default()
            })
        })();
        match raw {
            Ok(raw) => cx.push(&record, raw)?,
            Err(e) => cx.reject(e)?,
        }
    }
    cx.warnings
        .push(lanes::placed_warning(cx.file, "llmperf", "start time"));
    if clients.is_none() {
        cx.warnings.push(format!(
            "{}: the concurrency is unknown (no *_summary.json beside it): requests were placed on one client",
            cx.file.display()
        ));
    }
    Ok(())
}
