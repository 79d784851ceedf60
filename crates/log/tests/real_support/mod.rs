//! Helpers shared by the tests of real published result files: loading, the
//! report of an import, and the checks several of them run.
// Each test binary uses some of them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tpscope_analysis::{Options, RunInput, RunReport, Summary, WindowSpec, analyze};
use tpscope_log::import::{Format, ImportOptions, Imported, import};

pub fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import/real")
        .join(rel)
}

pub fn load_with(format: Option<Format>, rel: &str, opts: &ImportOptions) -> (Imported, RunReport) {
    let path = data(rel);
    let bytes = std::fs::read(&path).unwrap();
    let imported = import(format, &path, &bytes, opts).unwrap();
    let report = report(&imported, WindowSpec::Full);
    (imported, report)
}

pub fn load(format: Option<Format>, rel: &str) -> (Imported, RunReport) {
    load_with(format, rel, &ImportOptions::default())
}

pub fn report(imported: &Imported, window: WindowSpec) -> RunReport {
    let input = RunInput::from_records(imported.run.clone(), &imported.spans, &[]);
    analyze(
        &input,
        &Options {
            window,
            ..Options::default()
        },
    )
}

pub fn json(rel: &str) -> Value {
    serde_json::from_slice(&std::fs::read(data(rel)).unwrap()).unwrap()
}

pub fn ms(d: Option<Duration>) -> f64 {
    d.expect("a value").as_secs_f64() * 1e3
}

/// `ours` equals the file's figure within `tol` (absolute).
pub fn close(what: &str, ours: f64, file: f64, tol: f64) {
    assert!(
        (ours - file).abs() <= tol,
        "{what}: tpscope {ours} vs the file's {file}"
    );
}

pub fn warned(imported: &Imported, needle: &str) -> bool {
    imported.warnings.iter().any(|w| w.contains(needle))
}

pub fn aiperf_summary(s: &Summary<Duration>, tool: &Value, name: &str) {
    aiperf_stats(s, &tool["records"][name], name);
}

/// One of AIPerf's metric summaries (`{avg, p50, …}`) against tpscope's.
pub fn aiperf_stats(s: &Summary<Duration>, t: &Value, name: &str) {
    // AIPerf stamps whole nanoseconds; its figures are numpy's type-7 percentiles,
    // as tpscope's: equal to a nanosecond per value.
    close(
        &format!("{name} avg"),
        ms(s.mean),
        t["avg"].as_f64().unwrap(),
        1e-5,
    );
    for (p, ours) in [
        ("p50", s.p50),
        ("p90", s.p90),
        ("p95", s.p95),
        ("p99", s.p99),
    ] {
        close(
            &format!("{name} {p}"),
            ms(ours),
            t[p].as_f64().unwrap(),
            1e-5,
        );
    }
}

/// An LLMPerf result reproduces its summary; returns the import's TTFT mean and
/// LLMPerf's, in seconds.
pub fn llmperf_check(individual: &Path, summary: &Path) -> (f64, f64) {
    let read = |p: &Path| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let summary = read(summary);
    let s = |k: &str| summary[k].as_f64().unwrap();
    let opts = ImportOptions {
        clients: Some(s("num_concurrent_requests") as u32),
        ..ImportOptions::default()
    };
    let bytes = std::fs::read(individual).unwrap();
    let imported = import(None, individual, &bytes, &opts).unwrap();
    let r = report(&imported, WindowSpec::Full);
    assert_eq!(imported.format, Format::Llmperf);
    assert_eq!(
        r.counts.status.ok as f64,
        s("results_num_completed_requests")
    );
    assert_eq!(r.counts.status.error as f64, s("results_number_errors"));
    let secs = |d: Option<Duration>| d.unwrap().as_secs_f64();
    let t = &r.distributions.t_first_token;
    close("ttft mean", secs(t.mean), s("results_ttft_s_mean"), 1e-9);
    close(
        "ttft p50",
        secs(t.p50),
        s("results_ttft_s_quantiles_p50"),
        1e-9,
    );
    close(
        "ttft p90",
        secs(t.p90),
        s("results_ttft_s_quantiles_p90"),
        1e-9,
    );
    close(
        "ttft p99",
        secs(t.p99),
        s("results_ttft_s_quantiles_p99"),
        1e-9,
    );
    let e = &r.distributions.t_in_flight;
    close(
        "e2e mean",
        secs(e.mean),
        s("results_end_to_end_latency_s_mean"),
        1e-9,
    );
    close(
        "e2e p95",
        secs(e.p95),
        s("results_end_to_end_latency_s_quantiles_p95"),
        1e-9,
    );
    // LLMPerf's per-request "output throughput" is the streamed chunks (not tokens)
    // over the whole latency: times the latency it is a whole number, the chunk
    // count (0.99 to 123 tokens a chunk across the leaderboard's providers).
    let file = read(individual);
    for (span, f) in imported.spans.iter().zip(file.as_array().unwrap()) {
        if span.status != tpscope_model::Status::Ok {
            continue;
        }
        let e2e = span
            .released_at
            .since(span.admitted_at.unwrap())
            .unwrap()
            .as_secs_f64();
        close(
            "e2e",
            e2e,
            f["end_to_end_latency_s"].as_f64().unwrap(),
            1e-9,
        );
        let chunks = f["request_output_throughput_token_per_s"].as_f64().unwrap()
            * f["end_to_end_latency_s"].as_f64().unwrap();
        close("chunks", chunks, chunks.round(), 1e-6);
    }
    (secs(t.mean), s("results_ttft_s_mean"))
}

/// vLLM's summary of `ttfts`/`itls` (numpy's mean, median and linear p99).
pub fn vllm_summary(s: &Summary<Duration>, tool: &Value, name: &str) {
    close(
        &format!("mean {name}"),
        ms(s.mean),
        tool[format!("mean_{name}_ms")].as_f64().unwrap(),
        1e-5,
    );
    close(
        &format!("median {name}"),
        ms(s.p50),
        tool[format!("median_{name}_ms")].as_f64().unwrap(),
        1e-5,
    );
    close(
        &format!("p99 {name}"),
        ms(s.p99),
        tool[format!("p99_{name}_ms")].as_f64().unwrap(),
        1e-5,
    );
}

pub fn genai_bench(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    let imported = import(None, path, &bytes, &ImportOptions::default()).unwrap();
    let r = report(&imported, WindowSpec::Full);
    let doc: Value = serde_json::from_slice(&bytes).unwrap();
    let rel = path.display();
    let a = &doc["aggregated_metrics"];
    let st = &a["stats"];
    assert_eq!(imported.format, Format::GenaiBench);
    assert_eq!(
        r.counts.status.ok,
        a["num_completed_requests"].as_u64().unwrap()
    );
    assert_eq!(
        r.counts.status.error,
        a["num_error_requests"].as_u64().unwrap_or(0)
    );
    assert_eq!(
        r.counts.output_tokens,
        st["num_output_tokens"]["sum"].as_u64().unwrap()
    );
    assert_eq!(
        r.counts.input_tokens,
        st["num_input_tokens"]["sum"].as_u64().unwrap()
    );
    let secs = |d: Option<Duration>| d.unwrap().as_secs_f64();
    // Seconds with numpy's percentiles, tpscope's method: equal to the nanosecond.
    for (name, ours) in [
        ("ttft", &r.distributions.t_first_token),
        ("e2e_latency", &r.distributions.t_in_flight),
    ] {
        let s = &st[name];
        let f = |k: &str| s[k].as_f64().unwrap();
        close(
            &format!("{rel} {name} mean"),
            secs(ours.mean),
            f("mean"),
            1e-9,
        );
        close(&format!("{rel} {name} p50"), secs(ours.p50), f("p50"), 1e-9);
        close(&format!("{rel} {name} p90"), secs(ours.p90), f("p90"), 1e-9);
        close(&format!("{rel} {name} p99"), secs(ours.p99), f("p99"), 1e-9);
        close(&format!("{rel} {name} max"), secs(ours.max), f("max"), 1e-9);
    }
    close(
        &format!("{rel} tpot mean"),
        secs(r.conventional.tpot.mean),
        st["tpot"]["mean"].as_f64().unwrap(),
        1e-9,
    );
    // Its throughputs divide by its run duration, which also holds the client's
    // time between requests (the placed timeline has none): a window of that length
    // reproduces them.
    let run = a["run_duration"].as_f64().unwrap();
    // Where the placement runs past genai-bench's run (its requests overlapped
    // more), the import says so and the window misses the last placed tokens: the
    // totals over the run's length are genai-bench's figure.
    if warned(&imported, "is longer than genai-bench's run") {
        let tps = a["mean_output_throughput_tokens_per_s"].as_f64().unwrap();
        close(
            &format!("{rel} output tokens over the run"),
            r.counts.output_tokens as f64 / run,
            tps,
            tps * 1e-12,
        );
        return;
    }
    let w = report(
        &imported,
        WindowSpec::Range {
            from: Duration::ZERO,
            to: Duration::from_secs_f64(run),
        },
    );
    let tps = a["mean_output_throughput_tokens_per_s"].as_f64().unwrap();
    close(
        &format!("{rel} output throughput"),
        w.system_tps.unwrap().0,
        tps,
        tps * 1e-8,
    );
    let rps = a["requests_per_second"].as_f64().unwrap();
    close(
        &format!("{rel} requests/s"),
        w.request_throughput.unwrap(),
        rps,
        rps * 1e-8,
    );
}
