//! `vllm bench serve --save-result --save-detailed` JSON (vLLM 0.5.4 to 0.32; the
//! per-request `start_times` and `queue_times` arrays came in later versions and are
//! used when present). Columns of per-request values: `ttfts`, `itls`, `latencies`,
//! `input_lens`, `output_lens`, `errors`, `start_times` (the client's
//! `perf_counter`, so relative), `queue_times` (time waiting for the
//! `--max-concurrency` semaphore). The run is anchored at the file's `date` (whole
//! seconds; the tool writes local time, read as UTC; an RFC 3339 `date` is read as
//! such).
//!
//! vLLM 0.5 to 0.19 write no `latencies`: each request then ends at its last token
//! (TTFT plus the sum of the ITLs). The 0.6-era client's own latency ran to the
//! stream's close (where the file states its mean the import says how far below it
//! that is); later clients end it at the last token chunk, as here, to within the
//! fraction of a microsecond between the two clock reads of the first token. A
//! result without `date` (saved by a script calling vLLM's `benchmark()` itself) is
//! anchored at 2001-01-01, saying so.
//! Without `start_times` request i is placed at its rate's i-th arrival (all at once
//! at rate `inf`), up to `max_concurrency` at a time. Every instant
//! of a request is its start plus one offset summed in seconds and rounded once
//! (not a rounded sum of rounded terms), so a last token equal to the end stays
//! equal. The peak output throughput and peak concurrency of newer versions
//! (`max_output_tokens_per_s`, `max_concurrent_requests`) are kept in the run's
//! `load`. A file `--append-result` wrote holds one run's object a line: each is a
//! run (see `documents`).

use serde::Deserialize;
use tpscope_model::{Cause, ChunkMark, Target, Timestamp, TokenSource};

use super::build::{Cx, Raw, secs};
use super::{ImportError, lanes};

#[derive(Deserialize)]
struct File {
    date: Option<String>,
    backend: Option<String>,
    model_id: Option<String>,
    tokenizer_id: Option<String>,
    num_prompts: Option<u64>,
    request_rate: Option<serde_json::Value>,
    burstiness: Option<f64>,
    max_concurrency: Option<u32>,
    duration: Option<f64>,
    max_output_tokens_per_s: Option<f64>,
    max_concurrent_requests: Option<f64>,
    input_lens: Option<Vec<Option<u64>>>,
    output_lens: Option<Vec<Option<u64>>>,
    ttfts: Option<Vec<Option<f64>>>,
    itls: Option<Vec<Option<Vec<f64>>>>,
    latencies: Option<Vec<Option<f64>>>,
    /// vLLM's mean end-to-end latency (`mean_e2el_ms`; `mean_latency_ms` in some
    /// 0.6-era copies of `benchmark_serving.py`).
    #[serde(alias = "mean_latency_ms")]
    mean_e2el_ms: Option<f64>,
    start_times: Option<Vec<Option<f64>>>,
    queue_times: Option<Vec<Option<f64>>>,
    errors: Option<Vec<Option<String>>>,
}

/// The failure cause of one of vLLM's error texts: an HTTP reason phrase or a
/// Python traceback.
fn cause_of(text: &str) -> Cause {
    let t = text.to_ascii_lowercase();
    let has = |s: &str| t.contains(s);
    if has("too many requests") || has("429") {
        Cause::Http429
    } else if has("internal server error")
        || has("service unavailable")
        || has("bad gateway")
        || has("gateway timeout")
    {
        Cause::Http5xx
    } else if has("bad request")
        || has("not found")
        || has("unauthorized")
        || has("forbidden")
        || has("unprocessable")
    {
        Cause::Http4xx
    } else if has("timeout") {
        Cause::TimeoutTotal
    } else if has("connectorerror") || has("connection refused") || has("cannot connect") {
        Cause::Connect
    } else if has("jsondecodeerror") {
        Cause::Malformed
    } else {
        Cause::Disconnect
    }
}

/// Parses vLLM's `date` (`%Y%m%d-%H%M%S`).
fn date(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    if b.len() != 15
        || b[8] != b'-'
        || !s[..8]
            .bytes()
            .chain(s[9..].bytes())
            .all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let text = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &s[0..4],
        &s[4..6],
        &s[6..8],
        &s[9..11],
        &s[11..13],
        &s[13..15]
    );
    Timestamp::parse_rfc3339(&text).ok()
}

/// The run's anchor: the file's `date`, or, where it has none or one unreadable,
/// the default anchor, with a warning (the times stay right relative to the first
/// request; only the calendar date is unknown).
fn anchor(cx: &mut Cx<'_>, text: Option<&str>) -> Timestamp {
    if let Some(t) = text.and_then(|d| date(d).or_else(|| Timestamp::parse_rfc3339(d).ok())) {
        return t;
    }
    let what = match text {
        None => "no `date`".to_string(),
        Some(d) => format!("a `date` ({d:?}) that is neither YYYYMMDD-HHMMSS nor RFC 3339"),
    };
    cx.warnings.push(format!(
        "{}: this vLLM result has {what}: the run is anchored at {}, so its times are \
         right relative to its first request but its calendar date is not known",
        cx.file.display(),
        lanes::DEFAULT_ANCHOR
    ));
    lanes::DEFAULT_ANCHOR
}

/// The result objects of a file: the one object of `--save-result`, or one a line
/// where `--append-result` appended a run's object to the file each time. A part
/// that does not parse is returned whole, for the import to name its error.
pub(super) fn documents(bytes: &[u8]) -> Vec<&[u8]> {
    let mut docs = Vec::new();
    let mut stream =
        serde_json::Deserializer::from_slice(bytes).into_iter::<serde::de::IgnoredAny>();
    let mut start = 0;
    while let Some(Ok(_)) = stream.next() {
        let end = stream.byte_offset();
        docs.push(&bytes[start..end]);
        start = end;
    }
    if bytes[start..].iter().any(|b| !b.is_ascii_whitespace()) {
        docs.push(&bytes[start..]);
    }
    if docs.is_empty() {
        docs.push(bytes);
    }
    docs
}

pub(super) fn import(cx: &mut Cx<'_>, bytes: &[u8]) -> Result<(), ImportError> {
    let mut f: File = serde_json::from_slice(bytes)
        .map_err(|e| cx.not_format(format!("{e} (expected the JSON object of --save-result)")))?;
    let ttfts = f
        .ttfts
        .take()
        .ok_or_else(|| cx.not_format("no `ttfts`: save it with --save-result --save-detailed"))?;
    let n = ttfts.len();
    check_columns(cx, &f, n)?;
    let (itls, output_lens) = (
        f.itls.take().unwrap_or_default(),
        f.output_lens.take().unwrap_or_default(),
    );
    let latencies = f.latencies.as_deref();
    let anchor = anchor(cx, f.date.as_deref());
    describe_run(cx, &f);

    let starts = f.start_times.as_deref();
    let origin = starts
        .and_then(|s| s.iter().flatten().copied().reduce(f64::min))
        .unwrap_or(0.0);
    // Without start times: vLLM sent request i at its rate's i-th arrival (all at
    // once at rate `inf`), up to `--max-concurrency` at a time.
    let rate = match &f.request_rate {
        Some(serde_json::Value::Number(r)) => r.as_f64().filter(|r| *r > 0.0),
        _ => None,
    };
    // Without a cap each request starts at its arrival (no lanes to search).
    let mut placer = f.max_concurrency.map(|c| lanes::Lanes::new(c, anchor));
    let mut ended_ok = Vec::new();
    for i in 0..n {
        let record = format!("request {i}");
        let at = |field: &str, v: Option<f64>| -> Result<f64, ImportError> {
            v.filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| cx.bad(&record, Some(field), "expected a non-negative number"))
        };
        let error = f
            .errors
            .as_ref()
            .and_then(|e| e[i].as_deref())
            .filter(|e| !e.is_empty());
        let raw = (|| -> Result<Raw, ImportError> {
            let ttft = at("ttfts", ttfts[i])?;
            let gaps = itls[i].clone().unwrap_or_default();
            // Where it wrote none: to the last token (a lower bound, said below).
            let latency = match latencies {
                Some(l) => at("latencies", l[i])?,
                None => ttft + gaps.iter().sum::<f64>(),
            };
            let sent = match starts {
                Some(s) => {
                    anchor.after(secs(at("start_times", s[i])? - origin).unwrap_or_default())
                }
                None => {
                    let arrival =
                        anchor.after(secs(rate.map_or(0.0, |r| i as f64 / r)).unwrap_or_default());
                    match placer.as_mut() {
                        Some(lanes) => lanes.place_from(arrival, secs(latency).unwrap_or_default()),
                        None => arrival,
                    }
                }
            };
            if error.is_none() {
                ended_ok.push(latency);
            }
            let queued = match f.queue_times.as_ref().filter(|_| starts.is_some()) {
                Some(q) => Some(sent.before(secs(at("queue_times", q[i])?).unwrap_or_default())),
                None => None,
            };
            // One rounding per instant, each from the request's start.
            let at_offset = |s: f64| sent.after(secs(s).unwrap_or_default());
            let streamed = error.is_none() && (ttft > 0.0 || !gaps.is_empty());
            let first = streamed.then(|| at_offset(ttft));
            let last = streamed.then(|| at_offset(gaps.iter().fold(ttft, |a, g| a + g)));
            Ok(Raw {
                queued_at: queued,
                sent_at: Some(sent),
                first_token_at: first,
                last_token_at: last,
                ended_at: Some(at_offset(latency)),
                output_tokens: if error.is_some() {
                    Some(0)
                } else {
                    output_lens[i]
                },
                input_tokens: f.input_lens.as_ref().and_then(|l| l[i]),
                error: error.map(|e| (cause_of(e), e.lines().last().unwrap_or(e).to_string())),
                // Offsets from the first token, rounded from the same origin.
                chunks: first.map(|f| {
                    let mut cum = ttft;
                    std::iter::once(0.0)
                        .chain(gaps.iter().map(|g| {
                            cum += g;
                            cum
                        }))
                        .map(|o| ChunkMark {
                            offset: at_offset(o).since(f).unwrap_or_default(),
                            tokens: 1,
                        })
                        .collect()
                }),
                ..Raw::default()
            })
        })();
        match raw {
            Ok(raw) => cx.push(&record, raw)?,
            Err(e) => cx.reject(e)?,
        }
    }
    warn(cx, &f, &ended_ok);
    Ok(())
}

/// Checks that each column has one entry per request (`itls` and
/// `output_lens` are required; the others where given).
fn check_columns(cx: &Cx<'_>, f: &File, n: usize) -> Result<(), ImportError> {
    let need = |name: &str, len: Option<usize>| -> Result<(), ImportError> {
        match len {
            None => Err(cx.not_format(format!(
                "no `{name}`: save it with --save-result --save-detailed"
            ))),
            Some(l) if l != n => {
                Err(cx.not_format(format!("`{name}` has {l} entries but `ttfts` has {n}")))
            }
            _ => Ok(()),
        }
    };
    need("itls", f.itls.as_ref().map(Vec::len))?;
    need("output_lens", f.output_lens.as_ref().map(Vec::len))?;
    for (name, col) in [
        ("latencies", f.latencies.as_ref().map(Vec::len)),
        ("input_lens", f.input_lens.as_ref().map(Vec::len)),
        ("errors", f.errors.as_ref().map(Vec::len)),
        ("start_times", f.start_times.as_ref().map(Vec::len)),
        ("queue_times", f.queue_times.as_ref().map(Vec::len)),
    ] {
        if col.is_some() {
            need(name, col)?;
        }
    }
    Ok(())
}

/// The run record's tool, target, cap, token source and load from the file.
fn describe_run(cx: &mut Cx<'_>, f: &File) {
    let version = f.backend.as_deref().unwrap_or("openai");
    cx.run.tool = format!("vllm bench serve (backend {version})");
    cx.run.target = Target {
        url: None,
        model: f.model_id.clone(),
        api: Some(format!("vllm-bench:{version}").into()),
    };
    cx.run.cap = f.max_concurrency;
    cx.run.token_source = Some(TokenSource::Usage);
    cx.run.tokenizer = f.tokenizer_id.clone();
    cx.run.load = serde_json::json!({
        "num_prompts": f.num_prompts,
        "request_rate": f.request_rate,
        "burstiness": f.burstiness,
        "max_concurrency": f.max_concurrency,
        "duration_s": f.duration,
        "peak_output_tokens_per_s": f.max_output_tokens_per_s,
        "peak_concurrent_requests": f.max_concurrent_requests,
    });
    cx.queue_known = f.queue_times.is_some() && f.start_times.is_some();
}

/// What the import assumed or kept aside: placed requests, latencies
/// computed (`ended_ok`: the latencies, in seconds, of the requests that ended
/// ok), vLLM's own peaks.
fn warn(cx: &mut Cx<'_>, f: &File, ended_ok: &[f64]) {
    if f.start_times.is_none() {
        cx.warnings
            .push(lanes::placed_warning(cx.file, "vllm", "start_times"));
    }
    if f.latencies.is_none() {
        cx.warnings.push(format!(
            "{}: this vLLM result has no `latencies`: each request's latency is its TTFT \
             plus the sum of its ITLs, so it ends at its last token",
            cx.file.display()
        ));
        // vLLM's own latency runs to the end of the stream, after the last token: a
        // mean above TTFT + ΣITL says by how much these latencies read low.
        let ours = ended_ok.iter().sum::<f64>() / ended_ok.len().max(1) as f64 * 1e3;
        if let Some(theirs) = f
            .mean_e2el_ms
            .filter(|t| !ended_ok.is_empty() && t - ours > 1e-3)
        {
            cx.warnings.push(format!(
                "{}: vLLM's own mean latency ({theirs:.3} ms) is {:.3} ms above the mean \
                 TTFT + ΣITL ({ours:.3} ms): its requests ended after their last token (the \
                 stream's close), which the file does not record per request, so latencies, \
                 TPOT and end-to-end TPS read that much low",
                cx.file.display(),
                theirs - ours
            ));
        }
    }
    if let (Some(tps), Some(c)) = (f.max_output_tokens_per_s, f.max_concurrent_requests) {
        cx.warnings.push(format!(
            "{}: vLLM's own peaks (kept in the run's load): {tps} output tokens/s, {c} \
             concurrent requests",
            cx.file.display()
        ));
    }
}
