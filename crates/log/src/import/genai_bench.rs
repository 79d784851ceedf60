//! genai-bench experiment result JSON (one file per scenario and concurrency,
//! `{aggregated_metrics, individual_request_metrics}`, genai-bench 0.0.1 to 0.0.5):
//! per request `ttft`, `e2e_latency`, `output_latency`, `tpot`, `num_input_tokens`,
//! `num_output_tokens` (the server's usage), `error_code`, `error_message`, in the
//! unit `_time_unit` names (seconds unless it says `ms`); a failed request's
//! latencies are `null` (it then ends where it started). Durations only: requests
//! are placed back to back on `num_concurrency` clients (see `lanes`).

use std::time::Duration;

use serde_json::Value;
use tpscope_model::{Cause, Target, TokenSource};

use super::ImportError;
use super::build::{Cx, Raw, cause_of_status};
use super::lanes::{self, DEFAULT_ANCHOR, Lanes};

pub(super) fn import(cx: &mut Cx<'_>, bytes: &[u8]) -> Result<(), ImportError> {
    let doc: Value = serde_json::from_slice(bytes)
        .map_err(|e| cx.not_format(format!("{e} (expected a genai-bench experiment JSON)")))?;
    let reqs = doc["individual_request_metrics"]
        .as_array()
        .ok_or_else(|| cx.not_format("no `individual_request_metrics` array"))?;
    let agg = &doc["aggregated_metrics"];
    let per = if doc["_time_unit"].as_str() == Some("ms") {
        1e-3
    } else {
        1.0
    };
    let clients = agg["num_concurrency"]
        .as_u64()
        .and_then(|c| u32::try_from(c).ok());
    cx.run.tool = "genai-bench".into();
    cx.run.cap = clients;
    cx.run.token_source = Some(TokenSource::Usage);
    cx.run.target = Target {
        api: Some("genai-bench".into()),
        ..Target::default()
    };
    cx.run.load = serde_json::json!({
        "scenario": agg["scenario"],
        "num_concurrency": agg["num_concurrency"],
        "iteration_type": agg["iteration_type"],
        "run_duration_s": agg["run_duration"],
    });
    let mut lanes = Lanes::new(clients.unwrap_or(1), DEFAULT_ANCHOR);
    let mut unmeasured_failures = 0u64;
    for (i, r) in reqs.iter().enumerate() {
        let record = format!("individual_request_metrics[{i}]");
        let secs = |field: &str| -> Result<Option<Duration>, ImportError> {
            match &r[field] {
                Value::Null => Ok(None),
                v => v
                    .as_f64()
                    .and_then(|s| Duration::try_from_secs_f64(s * per).ok())
                    .map(Some)
                    .ok_or_else(|| cx.bad(&record, Some(field), "expected a non-negative number")),
            }
        };
        let raw = (|| -> Result<Raw, ImportError> {
            let error = match &r["error_code"] {
                Value::Null => None,
                code => Some((
                    cause_of_status(code.as_u64(), Cause::Disconnect),
                    r["error_message"].as_str().unwrap_or_default().to_string(),
                )),
            };
            // A failed request records no latency (genai-bench writes `null`): it
            // ends where it started and holds no client's time.
            let e2e = match (secs("e2e_latency")?, &error) {
                (Some(d), _) => d,
                (None, Some(_)) => {
                    unmeasured_failures += 1;
                    Duration::ZERO
                }
                (None, None) => return Err(cx.bad(&record, Some("e2e_latency"), "missing")),
            };
            let sent = lanes.place(e2e);
            let out = r["num_output_tokens"].as_u64().unwrap_or(0);
            let first = secs("ttft")?
                .filter(|_| error.is_none() && out > 0)
                .map(|d| sent.after(d));
            Ok(Raw {
                sent_at: Some(sent),
                first_token_at: first,
                last_token_at: first.map(|_| sent.after(e2e)),
                ended_at: Some(sent.after(e2e)),
                output_tokens: Some(if error.is_some() { 0 } else { out }),
                input_tokens: r["num_input_tokens"].as_u64(),
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
        .push(lanes::placed_warning(cx.file, "genai-bench", "start time"));
    // genai-bench's run held these requests; a placement running past it is not
    // how they overlapped, and a window of the run's length misses its last tokens.
    // `run_duration` is in seconds whatever `_time_unit` says (it converts latencies).
    let run = agg["run_duration"]
        .as_f64()
        .and_then(|s| Duration::try_from_secs_f64(s).ok());
    let placed = lanes.end().and_then(|e| e.since(DEFAULT_ANCHOR));
    if let (Some(run), Some(placed)) = (run, placed)
        && placed > run
    {
        cx.warnings.push(format!(
            "{}: the placed timeline ({:.3} s) is longer than genai-bench's run ({:.3} s): \
             its requests overlapped more than back to back in the file's order, so the \
             system TPS over the placed timeline is lower than genai-bench's",
            cx.file.display(),
            placed.as_secs_f64(),
            run.as_secs_f64()
        ));
    }
    if unmeasured_failures > 0 {
        cx.warnings.push(format!(
            "{}: {unmeasured_failures} failed requests record no latency: each ends where \
             it started",
            cx.file.display()
        ));
    }
    Ok(())
}
