//! The result files people published that are kept out of the repository (their
//! sources in crates/log/tests/data/import/real/README.md), read from
//! `$TPSCOPE_REAL_IMPORTS`: each import reproduces the figures the file, or its
//! companion summary, states about itself. Run with `--ignored`.

mod real_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use real_support::*;
use serde_json::Value;
use tpscope_analysis::WindowSpec;
use tpscope_log::import::{Format, ImportOptions, Imported, import, import_runs};

/// The files kept out of the repository, read from `$TPSCOPE_REAL_IMPORTS` (see the
/// README of tests/data/import/real): GuideLLM 0.5 results (`*benchmarks.json`),
/// GuideLLM 0.3 test assets (`guidellm-stripped-*.json`/`.yaml`), LLMPerf runs
/// (`NAME_individual_responses.json` beside `NAME_summary.json`), AIPerf 0.8 to 0.10
/// runs (a folder each, `profile_export.jsonl` beside `profile_export_aiperf.json`),
/// genai-bench runs (`*_num_concurrency_*.json`),
/// vLLM results with per-request columns (`vllm-detailed-*.json`) and OpenTelemetry
/// traces of GenAI calls (`otlp-*.json`/`.jsonl`: OTLP/JSON, or the Python SDK's
/// console output). Run with `--ignored`.
#[test]
#[ignore = "needs $TPSCOPE_REAL_IMPORTS holding the uncommitted originals"]
fn uncommitted_real_files_reproduce_their_figures() {
    let dir = PathBuf::from(std::env::var("TPSCOPE_REAL_IMPORTS").expect("TPSCOPE_REAL_IMPORTS"));
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.join("profile_export_aiperf.json").is_file() {
            aiperf_0_10_check(&path);
            seen += 1;
            continue;
        }
        if name.starts_with("otlp-") {
            otlp_check(&path);
            seen += 1;
            continue;
        }
        if name.starts_with("vllm-detailed-") {
            vllm_detailed_check(&path);
            seen += 1;
            continue;
        }
        if name.contains("_num_concurrency_") && name.ends_with(".json") {
            genai_bench(&path);
            eprintln!("{name}: genai-bench's aggregated metrics reproduced");
            seen += 1;
            continue;
        }
        if let Some(stem) = name.strip_suffix("_individual_responses.json") {
            let (ours, theirs) = llmperf_check(&path, &dir.join(format!("{stem}_summary.json")));
            eprintln!("{name}: TTFT mean {ours:.6} s (LLMPerf {theirs:.6})");
            seen += 1;
            continue;
        }
        if name.starts_with("guidellm-stripped-") {
            guidellm_stripped_check(&path);
            seen += 1;
            continue;
        }
        if !name.ends_with("benchmarks.json") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let imported = import(None, &path, &bytes, &ImportOptions::default()).unwrap();
        let r = report(&imported, WindowSpec::Full);
        let doc: Value = serde_json::from_slice(&bytes).unwrap();
        let m = &doc["benchmarks"][0]["metrics"];
        assert_eq!(
            r.counts.status.ok,
            m["request_totals"]["successful"].as_u64().unwrap(),
            "{name}"
        );
        let ttft = &m["time_to_first_token_ms"]["successful"];
        let t = &r.distributions.t_first_token;
        // Within GuideLLM's f64 step of Unix seconds (see the fixture's test).
        let step = 2f64.powi(-22) * 1e3;
        close(
            &format!("{name} ttft mean"),
            ms(t.mean),
            ttft["mean"].as_f64().unwrap(),
            step,
        );
        close(
            &format!("{name} ttft max"),
            ms(t.max),
            ttft["max"].as_f64().unwrap(),
            step,
        );
        eprintln!(
            "{name}: {} requests (GuideLLM {}), TTFT mean {:.4} ms (GuideLLM {:.4}), max {:.4} ms (GuideLLM {:.4})",
            r.counts.status.ok,
            m["request_totals"]["successful"],
            ms(t.mean),
            ttft["mean"].as_f64().unwrap(),
            ms(t.max),
            ttft["max"].as_f64().unwrap()
        );
        seen += 1;
    }
    assert!(seen > 0, "no *benchmarks.json in {}", dir.display());
}

/// GuideLLM's own test asset (vllm-project/guidellm's `benchmarks_stripped.json`
/// and `.yaml`, GuideLLM 0.3): one request kept of its benchmark's 46, so the file's
/// metrics cover requests it does not hold; each kept request's own figures are
/// tpscope's, within GuideLLM's f64 step of Unix seconds. The YAML imports as the
/// JSON beside it.
fn guidellm_stripped_check(path: &Path) {
    let read = |p: &Path| {
        let bytes = std::fs::read(p).unwrap();
        let imported = import(None, p, &bytes, &ImportOptions::default()).unwrap();
        assert_eq!(imported.format, Format::Guidellm, "{}", p.display());
        (bytes, imported)
    };
    let (bytes, imported) = read(path);
    let timing = |i: &Imported| -> Vec<_> {
        i.spans
            .iter()
            .map(|s| {
                (
                    s.admitted_at,
                    s.first_token_at,
                    s.last_token_at,
                    s.released_at,
                )
            })
            .collect()
    };
    if path.extension().is_some_and(|e| e == "yaml") {
        let (_, json) = read(&path.with_extension("json"));
        assert_eq!(timing(&imported), timing(&json), "{}", path.display());
        eprintln!("{}: as its JSON", path.display());
        return;
    }
    let doc: Value = serde_json::from_slice(&bytes).unwrap();
    let kept = doc["benchmarks"][0]["requests"]["successful"]
        .as_array()
        .unwrap();
    assert_eq!(imported.spans.len(), kept.len());
    let step = 2.0 * 2f64.powi(-22) * 1e3;
    let gap = |a: Option<tpscope_model::Timestamp>, b: Option<tpscope_model::Timestamp>| {
        b.unwrap().signed_nanos_since(a.unwrap()) as f64 / 1e6
    };
    for (s, t) in imported.spans.iter().zip(kept) {
        let f = |k: &str| t[k].as_f64().unwrap();
        let n = s.output_tokens as f64;
        close(
            "ttft",
            gap(s.admitted_at, s.first_token_at),
            f("time_to_first_token_ms"),
            step,
        );
        close(
            "latency",
            gap(s.admitted_at, Some(s.released_at)),
            f("request_latency") * 1e3,
            step,
        );
        close(
            "itl",
            gap(s.first_token_at, s.last_token_at) / (n - 1.0),
            f("inter_token_latency_ms"),
            step,
        );
        eprintln!(
            "{}: kept request's TTFT {:.6} ms (GuideLLM {:.6}), of {} in its metrics",
            path.display(),
            gap(s.admitted_at, s.first_token_at),
            f("time_to_first_token_ms"),
            doc["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]["count"]
        );
    }
}

/// A published `--save-result` file with per-request columns (vLLM before 0.8
/// saved them without `--save-detailed`): TTFT and ITL as vLLM states them, its
/// throughputs over a window of its duration, and its mean latency at or above the
/// TTFT + ΣITL the file allows (the import says by how much).
fn vllm_detailed_check(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    let runs = import_runs(None, path, &bytes, &ImportOptions::default()).unwrap();
    // One object, or one a line where `--append-result` wrote the file.
    let docs: Vec<Value> = serde_json::Deserializer::from_slice(&bytes)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .collect();
    assert_eq!(runs.len(), docs.len(), "{}", path.display());
    for (k, (imported, tool)) in runs.iter().zip(&docs).enumerate() {
        let name = format!("{} #{}", path.display(), k + 1);
        let r = report(imported, WindowSpec::Full);
        assert_eq!(
            r.counts.status.ok,
            tool["completed"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(
            r.counts.output_tokens,
            tool["total_output_tokens"].as_u64().unwrap(),
            "{name}"
        );
        vllm_summary(&r.distributions.t_first_token, tool, "ttft");
        // One token a request (prefill runs): no ITL, which vLLM writes as 0 and
        // tpscope leaves absent.
        if r.conventional.inter_token_latency.mean.is_none() {
            assert_eq!(tool["mean_itl_ms"].as_f64(), Some(0.0), "{name}");
        } else {
            vllm_summary(&r.conventional.inter_token_latency, tool, "itl");
        }
        vllm_tpot(&r, imported, tool, &name);
        vllm_peaks(imported, tool, &name);
        let duration = tool["duration"].as_f64().unwrap();
        let w = report(
            imported,
            WindowSpec::Range {
                from: Duration::ZERO,
                to: Duration::from_secs_f64(duration),
            },
        );
        let tps = tool["output_throughput"].as_f64().unwrap();
        let ours_tps = w.system_tps.unwrap().0;
        let theirs = tool
            .get("mean_e2el_ms")
            .or_else(|| tool.get("mean_latency_ms"))
            .and_then(Value::as_f64);
        let ours = ms(r.distributions.t_in_flight.mean);
        if let Some(theirs) = theirs {
            assert!(
                ours <= theirs + 1e-6,
                "{name}: {ours} ms above vLLM's {theirs}"
            );
            assert_eq!(
                warned(imported, "above the mean TTFT"),
                theirs - ours > 1e-3,
                "{name}"
            );
        }
        eprintln!(
            "{name}: {} requests (cap {:?}), TTFT mean {:.4} ms, output {ours_tps:.4} tok/s over \
             vLLM's {duration:.4} s (vLLM {tps:.4}), latency mean {ours:.3} ms (vLLM {theirs:?})",
            r.counts.status.ok,
            imported.run.cap,
            ms(r.distributions.t_first_token.mean),
        );
    }
}

/// vLLM's TPOT is (latency − TTFT)/(n − 1), tpscope's (last token − first)/(n − 1).
/// The 0.6-era client's latency ran to the stream's close (the file's mean latency
/// says so): tpscope's reads lower. Later clients end it at the last token chunk but
/// read the TTFT with a second clock call after the first chunk's stamp, so TTFT +
/// ΣITL passes their latency by that fraction of a microsecond: tpscope's TPOT is
/// theirs, within 1 µs. All single-token: vLLM writes 0, tpscope leaves it absent.
fn vllm_tpot(r: &tpscope_analysis::RunReport, imported: &Imported, tool: &Value, name: &str) {
    let tpot = &r.conventional.tpot;
    if tpot.mean.is_none() {
        assert_eq!(tool["mean_tpot_ms"].as_f64(), Some(0.0), "{name}");
        return;
    }
    let closes_later = warned(imported, "above the mean TTFT");
    for (stat, ours) in [("mean", tpot.mean), ("median", tpot.p50), ("p99", tpot.p99)] {
        let (ours, theirs) = (ms(ours), tool[format!("{stat}_tpot_ms")].as_f64().unwrap());
        assert!(
            ours - theirs <= 1e-3,
            "{name} {stat} TPOT: {ours} > vLLM's {theirs}"
        );
        if !closes_later {
            close(&format!("{name} {stat} TPOT"), ours, theirs, 1e-3);
        }
    }
    eprintln!(
        "{name}: TPOT mean {:.6} ms (vLLM {:.6})",
        ms(tpot.mean),
        tool["mean_tpot_ms"].as_f64().unwrap()
    );
}

/// vLLM's peaks (newer versions, with `start_times`), in whole seconds counted from
/// the first request's start: the most tokens in one (each at its start + TTFT + the
/// ITLs before it), and the most requests in flight during some part of one. The
/// same counts over tpscope's spans (their chunk marks, start and release) give the
/// same peaks where every token and request is where vLLM put it.
fn vllm_peaks(imported: &Imported, tool: &Value, name: &str) {
    let (Some(tokens), Some(requests)) = (
        tool["max_output_tokens_per_s"].as_f64(),
        tool["max_concurrent_requests"].as_f64(),
    ) else {
        return;
    };
    if !tool["start_times"].is_array() {
        return;
    }
    let spans = &imported.spans;
    let origin = spans.iter().filter_map(|s| s.admitted_at).min().unwrap();
    let second =
        |t: tpscope_model::Timestamp| t.signed_nanos_since(origin).div_euclid(1_000_000_000);
    let mut per_second: std::collections::BTreeMap<i64, (u64, u64)> = Default::default();
    for s in spans
        .iter()
        .filter(|s| s.status == tpscope_model::Status::Ok)
    {
        let (Some(first), Some(chunks)) = (s.first_token_at, &s.chunks) else {
            continue;
        };
        for c in chunks {
            per_second
                .entry(second(first.after(c.offset)))
                .or_default()
                .0 += u64::from(c.tokens);
        }
        for k in second(s.admitted_at.unwrap())..=second(s.released_at) {
            per_second.entry(k).or_default().1 += 1;
        }
    }
    let most = |f: fn(&(u64, u64)) -> u64| per_second.values().map(f).max().unwrap_or(0) as f64;
    let (ours_tokens, ours_requests) = (most(|v| v.0), most(|v| v.1));
    assert_eq!(ours_tokens, tokens, "{name}: peak output tokens/s");
    assert_eq!(ours_requests, requests, "{name}: peak concurrent requests");
    eprintln!(
        "{name}: peaks of {ours_tokens} output tokens and {ours_requests} requests in one \
         second (vLLM {tokens}, {requests})"
    );
}

/// An AIPerf run's folder (0.8 to 0.10: summary metrics at the top level): its
/// records against its summary, the cap from the summary, and AIPerf's duration
/// (first request sent to the last response) inside tpscope's window.
fn aiperf_0_10_check(dir: &Path) {
    let file = dir.join("profile_export.jsonl");
    let runs = tpscope_log::import::import_files(None, &[file], false, false).unwrap();
    let imported = &runs[0].1;
    let r = report(imported, WindowSpec::Full);
    let tool: Value =
        serde_json::from_slice(&std::fs::read(dir.join("profile_export_aiperf.json")).unwrap())
            .unwrap();
    let avg = |k: &str| tool[k]["avg"].as_f64().unwrap();
    let name = dir.display();
    let failed = r.counts.status.error + r.counts.status.cancelled;
    if let Some(errors) = tool["error_request_count"]["avg"].as_f64() {
        assert_eq!(failed as f64, errors, "{name}");
    }
    if tool.get("request_count").is_none() {
        // Every request failed: AIPerf writes no request metric at all.
        assert_eq!(r.counts.status.ok, 0, "{name}");
        assert!(imported.run.cap.is_some(), "{name}: no cap");
        eprintln!("{name}: every one of {failed} requests failed, as AIPerf says");
        return;
    }
    assert_eq!(r.counts.status.ok as f64, avg("request_count"), "{name}");
    assert_eq!(r.counts.output_tokens as f64, avg("total_osl"), "{name}");
    assert_eq!(r.counts.input_tokens as f64, avg("total_isl"), "{name}");
    // The summary's concurrency is the cap, unless the records went past it (an
    // agentic trace's sub-agents beside its sessions).
    assert_eq!(
        imported.run.cap.is_none(),
        warned(imported, "in flight at once"),
        "{name}"
    );
    aiperf_stats(
        &r.distributions.t_first_token,
        &tool["time_to_first_token"],
        "ttft",
    );
    let spans = &imported.spans;
    // A response whose tokens all came in one chunk: AIPerf's ITL is 0 ms, tpscope's
    // tpot absent (no time per token). Its mean then counts them as zeros.
    let collapsed = spans
        .iter()
        .filter(|s| s.output_tokens > 1 && s.first_token_at.is_some())
        .filter(|s| s.status == tpscope_model::Status::Ok && s.first_token_at == s.last_token_at)
        .count() as u64;
    let tpot = &r.conventional.tpot;
    if collapsed == 0 {
        aiperf_stats(tpot, &tool["inter_token_latency"], "itl");
    } else {
        let n = tpot.count as f64;
        let mean = ms(tpot.mean) * n / (n + collapsed as f64);
        close("itl avg", mean, avg("inter_token_latency"), 1e-5);
        assert_eq!(tool["inter_token_latency"]["min"].as_f64(), Some(0.0));
        eprintln!(
            "{name}: {collapsed} responses in one chunk (AIPerf's ITL 0, tpscope's tpot absent)"
        );
    }
    // AIPerf's gaps between chunks are tpscope's inter-token latencies.
    if let Some(icl) = tool["inter_chunk_latency"]["avg"].as_f64() {
        let itl = &r.conventional.inter_token_latency;
        close("inter-chunk latency", ms(itl.mean), icl, 1e-5);
    }
    // AIPerf's request latency runs to the last response: tpscope's last token.
    let latencies: Vec<f64> = spans
        .iter()
        .filter(|s| s.status == tpscope_model::Status::Ok)
        .filter_map(|s| Some(s.last_token_at?.signed_nanos_since(s.admitted_at?) as f64 / 1e6))
        .collect();
    let mean = latencies.iter().sum::<f64>() / latencies.len() as f64;
    close("request latency", mean, avg("request_latency"), 1e-5);
    let sent = spans.iter().filter_map(|s| s.admitted_at).min().unwrap();
    let answered = spans.iter().filter_map(|s| s.last_token_at).max().unwrap();
    let aiperf = answered.signed_nanos_since(sent) as f64 / 1e9;
    // Some AIPerf builds subtract the two stamps as f64 nanoseconds since 1970 (a
    // step of 256 ns in 2026): within two steps.
    close("duration", aiperf, avg("benchmark_duration"), 512e-9);
    let window = r.window.unwrap().duration.as_secs_f64();
    // AIPerf's stretch as a window: its output throughput (a request that failed
    // with no response, as a timeout at the end, is not in it).
    let at = |t: tpscope_model::Timestamp| {
        Duration::from_nanos(t.signed_nanos_since(imported.run.started_at) as u64)
    };
    let w = report(
        imported,
        WindowSpec::Range {
            from: at(sent),
            to: at(answered),
        },
    );
    let tps = w.system_tps.unwrap().0;
    let theirs = avg("output_token_throughput");
    // Within AIPerf's f64 steps of its duration.
    let step = 1e-9 + 512e-9 / aiperf;
    assert!(
        (tps / theirs - 1.0).abs() < step,
        "{name}: {tps} vs {theirs}"
    );
    eprintln!(
        "{name}: {} requests ({failed} failed), cap {:?}, TTFT mean {:.7} ms, AIPerf's \
         duration {aiperf:.9} s, tpscope's window {window:.9} s, output {tps:.6} tok/s over \
         AIPerf's stretch (AIPerf {theirs:.6}), {:.6} over the full window",
        r.counts.status.ok,
        imported.run.cap,
        ms(r.distributions.t_first_token.mean),
        r.system_tps.unwrap().0,
    );
}

/// The spans of an OTLP/JSON file (one document, an array of them, or one a line),
/// or of the Python SDK's console output (each finished span once), each as
/// `(trace, span, parent, start ns, end ns, attributes)`; read here apart from the
/// importer.
type Raw = (
    String,
    String,
    String,
    i64,
    i64,
    serde_json::Map<String, Value>,
);

fn raw_spans(bytes: &[u8]) -> Vec<Raw> {
    let values: Vec<Value> = serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Value>()
        .map(Result::unwrap)
        .flat_map(|v| match v {
            Value::Array(a) => a,
            v => vec![v],
        })
        .collect();
    let mut out: Vec<Raw> = Vec::new();
    for v in &values {
        if v["context"]["trace_id"].is_string() {
            let t = |k: &str| {
                let text = v[k].as_str()?;
                Some(
                    tpscope_model::Timestamp::parse_rfc3339(text)
                        .ok()?
                        .unix_nanos(),
                )
            };
            let Some(end) = t("end_time") else { continue };
            let hex = |x: &Value| {
                x.as_str()
                    .unwrap_or("")
                    .trim_start_matches("0x")
                    .to_string()
            };
            let (trace, id) = (
                hex(&v["context"]["trace_id"]),
                hex(&v["context"]["span_id"]),
            );
            if out.iter().any(|r| r.0 == trace && r.1 == id) {
                continue;
            }
            let attrs = v["attributes"].as_object().cloned().unwrap_or_default();
            out.push((
                trace,
                id,
                hex(&v["parent_id"]),
                t("start_time").unwrap(),
                end,
                attrs,
            ));
            continue;
        }
        let spans = v["resourceSpans"].as_array().into_iter().flatten();
        let spans = spans.flat_map(|r| r["scopeSpans"].as_array().into_iter().flatten());
        for s in spans.flat_map(|s| s["spans"].as_array().into_iter().flatten()) {
            let n = |k: &str| s[k].as_str().and_then(|x| x.parse().ok()).unwrap_or(0);
            let attrs = s["attributes"].as_array().into_iter().flatten().map(|kv| {
                let v = kv["value"]
                    .as_object()
                    .and_then(|o| o.values().next().cloned());
                let v = match v {
                    Some(Value::String(x)) => x
                        .parse::<f64>()
                        .map(Value::from)
                        .unwrap_or(Value::String(x)),
                    v => v.unwrap_or(Value::Null),
                };
                (kv["key"].as_str().unwrap().to_string(), v)
            });
            let text = |k: &str| s[k].as_str().unwrap_or("").to_string();
            out.push((
                text("traceId"),
                text("spanId"),
                text("parentSpanId"),
                n("startTimeUnixNano"),
                n("endTimeUnixNano"),
                attrs.collect(),
            ));
        }
    }
    out
}

type Attrs = serde_json::Map<String, Value>;

fn f(a: &Attrs, k: &str) -> Option<f64> {
    a.get(k).and_then(Value::as_f64)
}

fn out(a: &Attrs) -> Option<f64> {
    f(a, "gen_ai.usage.output_tokens").or_else(|| f(a, "gen_ai.usage.completion_tokens"))
}

/// A model call: a GenAI operation other than an agent's or a tool's, or usage.
fn call(a: &Attrs) -> bool {
    match a.get("gen_ai.operation.name").and_then(Value::as_str) {
        Some(o) => !["invoke_agent", "create_agent", "execute_tool"].contains(&o),
        None => out(a).is_some() || f(a, "gen_ai.latency.time_to_first_token").is_some(),
    }
}

/// A trace's GenAI calls: the model-call spans (agent and tool spans left out)
/// with no model-call span above them count once; their output tokens are the
/// usage the spans state, and vLLM's own spans' TTFT and last token are the ones
/// they state (`gen_ai.latency.time_to_first_token`, `gen_ai.latency.e2e`).
fn otlp_check(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    let imported = import(None, path, &bytes, &ImportOptions::default()).unwrap();
    assert_eq!(imported.format, Format::Otlp, "{}", path.display());
    let spans = raw_spans(&bytes);
    let under_a_call = |r: &Raw| {
        let mut parent = r.2.clone();
        for _ in 0..64 {
            let Some(p) = spans
                .iter()
                .find(|p| p.0 == r.0 && p.1 == parent && !p.1.is_empty())
            else {
                return false;
            };
            if call(&p.5) {
                return true;
            }
            parent = p.2.clone();
        }
        false
    };
    let calls: Vec<&Raw> = spans
        .iter()
        .filter(|r| call(&r.5) && !under_a_call(r))
        .collect();
    let name = path.display();
    assert_eq!(imported.spans.len(), calls.len(), "{name}");
    // A client's span without usage takes the server's under it.
    let usage = |r: &Raw| {
        out(&r.5).or_else(|| {
            let below = |s: &&Raw| s.0 == r.0 && s.2 == r.1 && call(&s.5);
            spans.iter().filter(below).find_map(|s| out(&s.5))
        })
    };
    let ours: u64 = imported.spans.iter().map(|s| s.output_tokens).sum();
    let mut vllm = 0;
    for r in &calls {
        let Some(s) = imported.spans.iter().find(|s| {
            s.admitted_at.map(|t| t.unix_nanos()) == Some(r.3) && s.released_at.unix_nanos() == r.4
        }) else {
            panic!("{name}: no span from {} to {}", r.3, r.4)
        };
        if let Some(n) = usage(r) {
            assert_eq!(s.output_tokens as f64, n, "{name}: span from {}", r.3);
        }
        let at = |t: Option<tpscope_model::Timestamp>| (t.unwrap().unix_nanos() - r.3) as f64 / 1e9;
        if let Some(ttft) = f(&r.5, "gen_ai.latency.time_to_first_token") {
            close("ttft", at(s.first_token_at), ttft, 1e-9);
            vllm += 1;
        }
        if let Some(e2e) = f(&r.5, "gen_ai.latency.e2e") {
            let end = (r.4 - r.3) as f64 / 1e9;
            close("last token", at(s.last_token_at), e2e.min(end), 1e-9);
        }
    }
    let mean = calls.iter().map(|r| (r.4 - r.3) as f64 / 1e6).sum::<f64>() / calls.len() as f64;
    let r = report(&imported, WindowSpec::Full);
    close(
        "latency mean",
        ms(r.distributions.t_in_flight.mean),
        mean,
        1e-6,
    );
    eprintln!(
        "{name}: {} calls of {} spans, {ours} output tokens (each call's usage where stated), latency mean \
         {mean:.4} ms, {vllm} with vLLM's own TTFT",
        calls.len(),
        spans.len(),
    );
}
