//! vLLM's result JSON (`vllm bench serve --save-result [--save-detailed]`) from a
//! tpscope run, with vLLM's keys and vLLM's arithmetic (TPOT from latency − TTFT,
//! numpy's mean, population standard deviation and linear percentiles — the same
//! method as tpscope's), so scripts that read vLLM results read ours and
//! `tpscope import --from vllm` reads it back to the same figures. The figures are
//! computed from whole span records ([`result_json`], pure); [`save`] reads the
//! run's span log and writes the file, never over an existing one.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{Map, Value, json};
use tpscope_analysis::Goals;
use tpscope_model::{Record, RunRecord, Span, Status, Timestamp};

use crate::vllm_compat::ResultSettings;

/// One request as vLLM's client records it (seconds).
struct Request {
    ok: bool,
    /// Since the run's first admission (vLLM's `start_time`, a perf counter).
    start: f64,
    queue: f64,
    ttft: f64,
    itl: Vec<f64>,
    latency: f64,
    input: u64,
    output: u64,
    error: String,
}

fn secs(later: Timestamp, earlier: Timestamp) -> f64 {
    later.since(earlier).map_or(0.0, |d| d.as_secs_f64())
}

fn request(s: &Span, origin: Timestamp) -> Request {
    let ok = s.status == Status::Ok;
    let start = s.admitted_at.unwrap_or(s.released_at);
    let mut itl = Vec::new();
    if let Some(chunks) = &s.chunks {
        for w in chunks.windows(2) {
            itl.push(w[1].offset.saturating_sub(w[0].offset).as_secs_f64());
        }
    }
    Request {
        ok,
        start: secs(start, origin),
        queue: secs(start, s.queued_at),
        ttft: s.first_token_at.map_or(0.0, |f| secs(f, start)),
        itl,
        latency: secs(s.released_at, start),
        input: s.input_tokens.unwrap_or(0),
        output: if ok { s.output_tokens } else { 0 },
        error: match (&s.error, ok) {
            (_, true) => String::new(),
            (Some(e), _) => e.message.clone(),
            (None, _) => format!("{:?}", s.status).to_lowercase(),
        },
    }
}

/// numpy's mean, median, population standard deviation and linear percentiles of
/// `values` in milliseconds (0 for none, as `np.mean(values or 0)`).
fn summary(values: &[f64], percentiles: &[f64]) -> (f64, f64, f64, Vec<(f64, f64)>) {
    let mut v: Vec<f64> = if values.is_empty() {
        vec![0.0]
    } else {
        values.to_vec()
    };
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let std = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    let q = |p: f64| tpscope_analysis::stats::quantile_sorted(&v, p).unwrap_or(0.0) * 1000.0;
    let pct = percentiles.iter().map(|&p| (p, q(p / 100.0))).collect();
    (mean * 1000.0, q(0.5), std * 1000.0, pct)
}

/// vLLM's name of a percentile: `99`, `99.9`.
fn p_word(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

/// vLLM's request rate as it writes it: a float (`4.0`) or `inf`.
fn rate_text(load: &Value) -> Value {
    match load.get("rate").and_then(Value::as_f64) {
        Some(r) => json!(r),
        None => json!("inf"),
    }
}

/// The result JSON of one run, as vLLM writes it.
pub fn result_json(
    run: &RunRecord,
    spans: &[Span],
    ended: Option<Timestamp>,
    settings: &ResultSettings,
    goals: Option<&Goals>,
) -> Value {
    let origin = spans
        .iter()
        .filter_map(|s| s.admitted_at)
        .min()
        .unwrap_or(run.started_at);
    let reqs: Vec<Request> = spans.iter().map(|s| request(s, origin)).collect();
    let end = ended
        .or_else(|| spans.iter().map(|s| s.released_at).max())
        .unwrap_or(run.started_at);
    let duration = secs(end, run.started_at);
    let ok: Vec<&Request> = reqs.iter().filter(|r| r.ok).collect();
    let completed = ok.len();
    let total_input: u64 = ok.iter().map(|r| r.input).sum();
    let total_output: u64 = ok.iter().map(|r| r.output).sum();
    let per_s = |x: f64| if duration > 0.0 { x / duration } else { 0.0 };
    // vLLM: TPOT = (latency − TTFT) / (output − 1), for outputs of two or more.
    let tpot = |r: &Request| (r.output > 1).then(|| (r.latency - r.ttft) / (r.output - 1) as f64);
    let good = goals.map(|g| {
        ok.iter()
            .filter(|r| {
                let within = |key: &str, v: f64| g.get(key).is_none_or(|b| v <= b.as_secs_f64());
                within("ttft", r.ttft)
                    && within("tpot", tpot(r).unwrap_or(0.0))
                    && within("e2e", r.latency)
            })
            .count()
    });
    let (peak_tokens, peak_requests) = peaks(&ok);
    let mut out = Map::new();
    let mut put = |k: &str, v: Value| {
        out.insert(k.to_string(), v);
    };
    let date = chrono_like(run.started_at);
    put("date", json!(date));
    put("endpoint_type", json!(settings.backend));
    put("backend", json!(settings.backend));
    put("label", json!(settings.label));
    let model_id = settings
        .model_id
        .clone()
        .or_else(|| run.target.model.clone());
    put("model_id", json!(model_id));
    put("tokenizer_id", json!(run.tokenizer));
    put("num_prompts", json!(spans.len()));
    for (k, v) in &settings.metadata {
        put(k, json!(v));
    }
    put("request_rate", rate_text(&run.load));
    // vLLM's burstiness is the gamma shape (Poisson: 1).
    let burstiness = run
        .load
        .get("arrival")
        .and_then(Value::as_str)
        .and_then(|a| a.strip_prefix("gamma:"))
        .and_then(|x| x.parse::<f64>().ok())
        .unwrap_or(1.0);
    put("burstiness", json!(burstiness));
    put("max_concurrency", json!(run.cap));
    put("duration", json!(duration));
    put("completed", json!(completed));
    put("failed", json!(reqs.len() - completed));
    put("total_input_tokens", json!(total_input));
    put("total_output_tokens", json!(total_output));
    put("request_throughput", json!(per_s(completed as f64)));
    put("request_goodput", json!(good.map(|g| per_s(g as f64))));
    put("output_throughput", json!(per_s(total_output as f64)));
    put(
        "total_token_throughput",
        json!(per_s((total_input + total_output) as f64)),
    );
    if settings.detailed {
        put(
            "input_lens",
            json!(reqs.iter().map(|r| r.input).collect::<Vec<_>>()),
        );
        put(
            "output_lens",
            json!(reqs.iter().map(|r| r.output).collect::<Vec<_>>()),
        );
        put(
            "ttfts",
            json!(reqs.iter().map(|r| r.ttft).collect::<Vec<_>>()),
        );
        put(
            "itls",
            json!(reqs.iter().map(|r| &r.itl).collect::<Vec<_>>()),
        );
        put(
            "start_times",
            json!(reqs.iter().map(|r| r.start).collect::<Vec<_>>()),
        );
        // Text is not kept in span logs: vLLM's key, empty.
        put(
            "generated_texts",
            json!(reqs.iter().map(|_| "").collect::<Vec<_>>()),
        );
        put(
            "errors",
            json!(reqs.iter().map(|r| &r.error).collect::<Vec<_>>()),
        );
    }
    // Not among the arrays --save-detailed adds: vLLM always keeps them.
    put(
        "latencies",
        json!(reqs.iter().map(|r| r.latency).collect::<Vec<_>>()),
    );
    put(
        "queue_times",
        json!(reqs.iter().map(|r| r.queue).collect::<Vec<_>>()),
    );
    put("max_output_tokens_per_s", json!(peak_tokens));
    put("max_concurrent_requests", json!(peak_requests));
    put("rtfx", json!(0.0));
    let columns: [(&str, Vec<f64>); 4] = [
        ("ttft", ok.iter().map(|r| r.ttft).collect()),
        ("tpot", ok.iter().filter_map(|r| tpot(r)).collect()),
        (
            "itl",
            ok.iter().flat_map(|r| r.itl.iter().copied()).collect(),
        ),
        ("e2el", ok.iter().map(|r| r.latency).collect()),
    ];
    for (name, values) in &columns {
        if !settings.metrics.iter().any(|m| m == name) {
            continue;
        }
        let (mean, median, std, pct) = summary(values, &settings.percentiles);
        put(&format!("mean_{name}_ms"), json!(mean));
        put(&format!("median_{name}_ms"), json!(median));
        put(&format!("std_{name}_ms"), json!(std));
        for (p, v) in pct {
            put(&format!("p{}_{name}_ms", p_word(p)), json!(v));
        }
    }
    Value::Object(out)
}

/// vLLM's peaks: the most output tokens in one whole second of the run, and the
/// most requests active in one second (from each request's start and its tokens'
/// arrivals, as vLLM buckets them).
fn peaks(ok: &[&Request]) -> (f64, u64) {
    let mut tokens: std::collections::BTreeMap<i64, u64> = Default::default();
    let mut active: std::collections::BTreeMap<i64, u64> = Default::default();
    for r in ok {
        let mut t = r.start + r.ttft;
        *tokens.entry(t as i64).or_default() += 1;
        for g in &r.itl {
            t += g;
            *tokens.entry(t as i64).or_default() += 1;
        }
        for s in (r.start as i64)..=((r.start + r.latency) as i64) {
            *active.entry(s).or_default() += 1;
        }
    }
    (
        tokens.values().copied().max().unwrap_or(0) as f64,
        active.values().copied().max().unwrap_or(0),
    )
}

/// vLLM's `date` (`%Y%m%d-%H%M%S`, UTC here).
fn chrono_like(t: Timestamp) -> String {
    let text = t.to_string();
    // RFC 3339: 2026-01-01T00:00:00.123Z → 20260101-000000.
    let digits: String = text.chars().take(19).filter(char::is_ascii_digit).collect();
    if digits.len() == 14 {
        format!("{}-{}", &digits[..8], &digits[8..])
    } else {
        text
    }
}

/// vLLM's file name: `{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json`
/// (`--result-filename` instead), under `--result-dir`.
pub fn file_name(result: &Value, settings: &ResultSettings) -> PathBuf {
    let name = settings.filename.clone().unwrap_or_else(|| {
        let label = settings.label.as_deref().unwrap_or(&settings.backend);
        let rate = match &result["request_rate"] {
            Value::String(s) => s.clone(),
            v => {
                let r = v.as_f64().unwrap_or(0.0);
                if r.fract() == 0.0 {
                    format!("{r:.1}")
                } else {
                    format!("{r}")
                }
            }
        };
        let conc = result["max_concurrency"]
            .as_u64()
            .map(|c| format!("-concurrency{c}"))
            .unwrap_or_default();
        let model = result["model_id"].as_str().unwrap_or("model");
        let model = model.rsplit('/').next().unwrap_or(model);
        let date = result["date"].as_str().unwrap_or("");
        format!("{label}-{rate}qps{conc}-{model}-{date}.json")
    });
    match &settings.dir {
        Some(d) => d.join(name),
        None => PathBuf::from(name),
    }
}

/// Reads the run's span log and writes its result file (the last run of a sweep:
/// vLLM runs one setting per command); says where on standard error.
pub fn save(settings: &ResultSettings, goals: Option<&Goals>) -> anyhow::Result<PathBuf> {
    let (run, spans, ended) = read(&settings.log)?;
    let result = result_json(&run, &spans, ended, settings, goals);
    let path = file_name(&result, settings);
    if let Some(d) = &settings.dir {
        std::fs::create_dir_all(d)
            .with_context(|| format!("--result-dir: creating {}", d.display()))?;
    }
    let bytes = serde_json::to_vec(&result)?;
    let target = crate::out_file::Target {
        flag: "--save-result",
        path: &path,
    };
    crate::out_file::check(&[target], &[&settings.log], false)?;
    crate::out_file::write(target, false, true, &bytes)?;
    eprintln!("vLLM result: {}", path.display());
    Ok(path)
}

/// The last run of a span log: its run record, spans and end.
fn read(log: &Path) -> anyhow::Result<(RunRecord, Vec<Span>, Option<Timestamp>)> {
    let mut run = None;
    let mut spans = Vec::new();
    let mut ended = None;
    for rec in tpscope_log::RecordReader::open([log], tpscope_log::ReadOptions::default()) {
        match rec
            .with_context(|| format!("--save-result: reading {}", log.display()))?
            .record
        {
            Record::Run(r) => {
                run = Some(r);
                spans.clear();
                ended = None;
            }
            Record::Span(s) => spans.push(s),
            Record::End(e) => ended = Some(e.ended_at),
            _ => {}
        }
    }
    let run = run.with_context(|| format!("--save-result: {} holds no run", log.display()))?;
    Ok((run, spans, ended))
}
