//! The importers against result files people published (crates/log/tests/data/import/
//! real/, sources in its README): each import reproduces the figures the file, or
//! its companion summary, states about itself. Where a file's licence keeps it out
//! of the repository, a minimal fixture of the same layout stands in for it and
//! holds the defect it showed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tpscope_analysis::{Options, RunInput, RunReport, Summary, WindowSpec, analyze};
use tpscope_log::import::{Format, ImportOptions, Imported, import, import_runs};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import/real")
        .join(rel)
}

fn load_with(format: Option<Format>, rel: &str, opts: &ImportOptions) -> (Imported, RunReport) {
    let path = data(rel);
    let bytes = std::fs::read(&path).unwrap();
    let imported = import(format, &path, &bytes, opts).unwrap();
    let report = report(&imported, WindowSpec::Full);
    (imported, report)
}

fn load(format: Option<Format>, rel: &str) -> (Imported, RunReport) {
    load_with(format, rel, &ImportOptions::default())
}

fn report(imported: &Imported, window: WindowSpec) -> RunReport {
    let input = RunInput::from_records(imported.run.clone(), &imported.spans, &[]);
    analyze(
        &input,
        &Options {
            window,
            ..Options::default()
        },
    )
}

fn json(rel: &str) -> Value {
    serde_json::from_slice(&std::fs::read(data(rel)).unwrap()).unwrap()
}

fn ms(d: Option<Duration>) -> f64 {
    d.expect("a value").as_secs_f64() * 1e3
}

/// `ours` equals the file's figure within `tol` (absolute).
fn close(what: &str, ours: f64, file: f64, tol: f64) {
    assert!(
        (ours - file).abs() <= tol,
        "{what}: tpscope {ours} vs the file's {file}"
    );
}

fn warned(imported: &Imported, needle: &str) -> bool {
    imported.warnings.iter().any(|w| w.contains(needle))
}

fn aiperf_summary(s: &Summary<Duration>, tool: &Value, name: &str) {
    aiperf_stats(s, &tool["records"][name], name);
}

/// One of AIPerf's metric summaries (`{avg, p50, …}`) against tpscope's.
fn aiperf_stats(s: &Summary<Duration>, t: &Value, name: &str) {
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

#[test]
fn aiperf_records_before_0_3_are_read_and_reproduce_its_summary() {
    // AIPerf's own example run (ai-dynamo/aiperf examples/artifacts/run1): the
    // record layout before 0.3 (`timestamp_ns`, `credit_phase`, metric `ttft`), 11
    // requests cancelled on purpose, a reasoning model (its reasoning tokens are in
    // `output_sequence_length`).
    let (imported, r) = load(None, "aiperf-0.2-run1/profile_export.jsonl");
    let tool = json("aiperf-0.2-run1/profile_export_aiperf.json");
    let rec = |k: &str| tool["records"][k]["avg"].as_f64().unwrap();
    assert_eq!(imported.format, Format::Aiperf);
    assert!(warned(&imported, "before 0.3"));
    assert_eq!(r.counts.status.ok as f64, rec("request_count"));
    assert_eq!(
        (r.counts.status.error + r.counts.status.cancelled) as f64,
        rec("error_request_count")
    );
    assert_eq!(r.counts.output_tokens as f64, rec("total_osl"));
    assert_eq!(r.counts.input_tokens as f64, rec("total_isl"));
    aiperf_summary(&r.distributions.t_first_token, &tool, "ttft");
    // AIPerf's per-request ITL is (latency − TTFT)/(OSL − 1): tpscope's tpot.
    aiperf_summary(&r.conventional.tpot, &tool, "inter_token_latency");
    // AIPerf divides by its own benchmark duration (first request sent to the last
    // response, the cancelled ones included): tpscope's full window is the same.
    let window = r.window.unwrap().duration.as_secs_f64();
    close("duration", window, rec("benchmark_duration"), 1e-9);
    close(
        "output token throughput",
        r.system_tps.unwrap().0,
        rec("output_token_throughput"),
        1e-6,
    );
    close(
        "request throughput",
        r.request_throughput.unwrap(),
        rec("request_throughput"),
        1e-9,
    );
}

#[test]
fn aiperf_0_10_records_reproduce_its_summary() {
    // The layout of AIPerf 0.10's results (anud18/qwen36-vllm-aiperf-benchmark, no
    // licence: synthetic values, the summary computed as AIPerf computes it; the
    // originals are checked in docs/import-real-files.md).
    let (imported, r) = load(None, "aiperf-0.10-layout/profile_export.jsonl");
    let tool = json("aiperf-0.10-layout/profile_export_aiperf.json");
    let avg = |k: &str| tool[k]["avg"].as_f64().unwrap();
    assert_eq!(imported.format, Format::Aiperf);
    assert!(!warned(&imported, "before 0.3"), "{:?}", imported.warnings);
    assert_eq!(r.counts.status.ok as f64, avg("request_count"));
    assert_eq!(r.counts.output_tokens as f64, avg("total_osl"));
    assert_eq!(r.counts.input_tokens as f64, avg("total_isl"));
    aiperf_stats(
        &r.distributions.t_first_token,
        &tool["time_to_first_token"],
        "ttft",
    );
    aiperf_stats(&r.conventional.tpot, &tool["inter_token_latency"], "itl");
    // AIPerf's duration runs from the first request sent to the last response;
    // tpscope's full window from the first request queued (AIPerf's credit) to the
    // last one released (`request_end_ns`, its stream closed after its last
    // response). The two differ by exactly those two stretches.
    let spans = &imported.spans;
    let queued = spans.iter().map(|s| s.queued_at).min().unwrap();
    let sent = spans.iter().filter_map(|s| s.admitted_at).min().unwrap();
    let answered = spans.iter().filter_map(|s| s.last_token_at).max().unwrap();
    let released = spans.iter().map(|s| s.released_at).max().unwrap();
    let aiperf = answered.signed_nanos_since(sent) as f64 / 1e9;
    close("duration", aiperf, avg("benchmark_duration"), 1e-9);
    let window = r.window.unwrap().duration.as_secs_f64();
    let extra = (sent.signed_nanos_since(queued) + released.signed_nanos_since(answered)) as f64;
    close("window", window, aiperf + extra / 1e9, 1e-9);
    assert!(extra > 0.0);
    close(
        "output token throughput",
        r.system_tps.unwrap().0 * window / aiperf,
        avg("output_token_throughput"),
        1e-6,
    );
    close(
        "request throughput",
        r.request_throughput.unwrap() * window / aiperf,
        avg("request_throughput"),
        1e-9,
    );
}

#[test]
fn aiperf_concurrency_in_the_summary_beside_the_records_is_the_cap() {
    // AIPerf's records hold no concurrency: imported alone, a run had no cap (so no
    // utilization and no capacity ledger). The summary beside them has it: in the
    // profiling phase (0.10), or under `loadgen` (AIPerf's example run).
    for (dir, cap) in [("aiperf-0.10-layout", 2), ("aiperf-0.2-run1", 100)] {
        let file = data(&format!("{dir}/profile_export.jsonl"));
        let runs = tpscope_log::import::import_files(None, &[file], false, false).unwrap();
        assert_eq!(runs[0].1.run.cap, Some(cap), "{dir}");
    }
    // Without the summary (a renamed copy elsewhere), the cap stays unknown.
    let tmp = tempfile::tempdir().unwrap();
    let alone = tmp.path().join("profile_export.jsonl");
    std::fs::copy(data("aiperf-0.10-layout/profile_export.jsonl"), &alone).unwrap();
    let runs = tpscope_log::import::import_files(None, &[alone], false, false).unwrap();
    assert_eq!(runs[0].1.run.cap, None);
}

fn llmperf_leaderboard(name: &str) {
    // The LLMPerf leaderboard's raw data (ray-project/llmperf-leaderboard): requests
    // without start times, placed back to back per client.
    llmperf_check(
        &data(&format!(
            "llmperf-leaderboard/{name}_individual_responses.json"
        )),
        &data(&format!("llmperf-leaderboard/{name}_summary.json")),
    );
}

/// An LLMPerf result reproduces its summary; returns the import's TTFT mean and
/// LLMPerf's, in seconds.
fn llmperf_check(individual: &Path, summary: &Path) -> (f64, f64) {
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

#[test]
fn llmperf_leaderboard_groq_figures_are_reproduced() {
    llmperf_leaderboard("groq_70b");
}

#[test]
fn llmperf_leaderboard_anyscale_figures_are_reproduced() {
    llmperf_leaderboard("anyscale_70b");
}

/// vLLM's summary of `ttfts`/`itls` (numpy's mean, median and linear p99).
fn vllm_summary(s: &Summary<Duration>, tool: &Value, name: &str) {
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

#[test]
fn vllm_results_without_latencies_import() {
    for rel in [
        "vllm-0.5.4/vllm-infqps-m-20250301-101500.json",
        "vllm-0.19.1/vllm-infqps-concurrency4-m-20250301-101500.json",
    ] {
        let (imported, r) = load(None, rel);
        let tool = json(rel);
        assert_eq!(imported.format, Format::Vllm, "{rel}");
        assert!(warned(&imported, "no `latencies`"), "{rel}");
        assert_eq!(r.counts.status.ok, tool["completed"].as_u64().unwrap());
        assert_eq!(
            r.counts.output_tokens,
            tool["total_output_tokens"].as_u64().unwrap()
        );
        vllm_summary(&r.distributions.t_first_token, &tool, "ttft");
        vllm_summary(&r.conventional.inter_token_latency, &tool, "itl");
        // Latency = TTFT + ΣITL, so the request ends at its last token.
        assert!(
            imported
                .spans
                .iter()
                .all(|s| s.last_token_at == Some(s.released_at))
        );
    }
}

#[test]
fn vllm_window_of_its_duration_reproduces_its_throughputs() {
    let rel = "vllm-0.19.1/vllm-infqps-concurrency4-m-20250301-101500.json";
    let (imported, _) = load(None, rel);
    let tool = json(rel);
    let duration = Duration::from_secs_f64(tool["duration"].as_f64().unwrap());
    let r = report(
        &imported,
        WindowSpec::Range {
            from: Duration::ZERO,
            to: duration,
        },
    );
    // Equal but for the window's length, rounded to the nanosecond.
    let f = |k: &str| tool[k].as_f64().unwrap();
    let rel = |k: &str| f(k) * 1e-8;
    close(
        "output throughput",
        r.system_tps.unwrap().0,
        f("output_throughput"),
        rel("output_throughput"),
    );
    close(
        "request throughput",
        r.request_throughput.unwrap(),
        f("request_throughput"),
        rel("request_throughput"),
    );
    close(
        "total token throughput",
        r.total_token_throughput.unwrap().0,
        f("total_token_throughput"),
        rel("total_token_throughput"),
    );
    // Its peaks are kept in the run's load.
    assert_eq!(imported.run.load["peak_output_tokens_per_s"], 412.0);
    assert_eq!(imported.run.load["peak_concurrent_requests"], 4.0);
}

#[test]
fn vllm_0_6_results_sent_at_once_reproduce_their_figures_and_say_latency_reads_low() {
    // The layout of a published vLLM 0.6 run (LambdaLabsML/vllm-benchmark): no
    // `start_times` at rate inf (placed one after another before: 23.95 s and 81 tok/s
    // for vLLM's 8.57 s and 227), several tokens a chunk, and a mean latency above
    // TTFT + ΣITL (the stream's close), which the import called vLLM's definition.
    let rel = "vllm-0.6-chunked/vllm-infqps-m-20240907-082900.json";
    let (imported, r) = load(None, rel);
    let tool = json(rel);
    let sent: Vec<_> = imported.spans.iter().map(|s| s.admitted_at).collect();
    assert!(sent.iter().all(|t| *t == sent[0]), "all sent at once");
    vllm_summary(&r.distributions.t_first_token, &tool, "ttft");
    vllm_summary(&r.conventional.inter_token_latency, &tool, "itl");
    let duration = tool["duration"].as_f64().unwrap();
    let w = report(
        &imported,
        WindowSpec::Range {
            from: Duration::ZERO,
            to: Duration::from_secs_f64(duration),
        },
    );
    let tps = tool["output_throughput"].as_f64().unwrap();
    close(
        "output throughput",
        w.system_tps.unwrap().0,
        tps,
        tps * 1e-8,
    );
    let theirs = tool["mean_latency_ms"].as_f64().unwrap();
    let ours = ms(r.distributions.t_in_flight.mean);
    assert!(ours < theirs);
    let gap = format!("is {:.3} ms above the mean", theirs - ours);
    assert!(warned(&imported, &gap), "{gap}: {:?}", imported.warnings);
}

#[test]
fn guidellm_warmup_and_cooldown_requests_are_left_out_as_guidellm_does() {
    let rel = "guidellm-0.5-warmup/benchmarks.json";
    let (imported, r) = load(None, rel);
    let doc = json(rel);
    let m = &doc["benchmarks"][0]["metrics"];
    let totals = m["request_totals"]["successful"].as_u64().unwrap();
    assert_eq!(r.counts.status.ok, totals);
    assert!(totals < 8, "the fixture has requests outside the window");
    let ttft = &m["time_to_first_token_ms"]["successful"];
    // GuideLLM subtracts Unix seconds as f64 (a step of 2^-22 s, 0.24 µs, in
    // 2026); tpscope reads their decimals exactly: equal within that step.
    let step = 2f64.powi(-22) * 1e3;
    close(
        "ttft mean",
        ms(r.distributions.t_first_token.mean),
        ttft["mean"].as_f64().unwrap(),
        step,
    );
    close(
        "ttft max",
        ms(r.distributions.t_first_token.max),
        ttft["max"].as_f64().unwrap(),
        step,
    );
    assert!(
        warned(&imported, "warm-up (warm-up 10%, cool-down 10%)")
            || warned(&imported, "warm-up and")
    );
    assert!(imported.run.labels.contains_key("guidellm_measured"));
    // Kept on request, with the same note.
    let keep = ImportOptions {
        keep_transient: true,
        ..ImportOptions::default()
    };
    let (all, _) = load_with(None, rel, &keep);
    assert_eq!(all.spans.len(), 8);
    assert!(warned(&all, "kept"));
}

#[test]
fn guidellm_0_3_reports_are_read() {
    let (imported, r) = load(None, "guidellm-0.3/benchmarks.json");
    assert_eq!(imported.format, Format::Guidellm);
    assert_eq!(imported.run.tool, "guidellm 0.2/0.3");
    assert_eq!(r.cap, Some(2));
    assert_eq!(r.counts.status.ok, 3);
    close("ttft", ms(r.distributions.t_first_token.mean), 125.0, 1e-3);
    // The queue (scheduler_info.queued_time) is kept.
    close("queue", ms(r.distributions.t_queue.mean), 250.0, 1e-3);
}

#[test]
fn otlp_client_and_server_spans_of_one_call_count_once() {
    // vLLM's server spans exported as a JSON array of documents, one of them under
    // an instrumented client's span.
    let (imported, r) = load(None, "otlp-client-and-vllm/traces.json");
    assert_eq!(imported.format, Format::Otlp);
    assert_eq!(imported.spans.len(), 3);
    assert_eq!(r.counts.output_tokens, 42);
    let call = &imported.spans[0];
    // The client's times, the first token from vLLM's own TTFT attribute.
    let ttft = call
        .first_token_at
        .unwrap()
        .since(call.admitted_at.unwrap())
        .unwrap();
    assert_eq!(ttft, Duration::from_nanos(20_000_000 + 73_286_057));
    assert_eq!(call.output_tokens, 40);
    let server_only = &imported.spans[2];
    let ttft = server_only
        .first_token_at
        .unwrap()
        .since(server_only.admitted_at.unwrap());
    assert_eq!(ttft, Some(Duration::from_nanos(86_948_156)));
    // The streamed call without usage is not silently a 0-token success.
    assert!(warned(
        &imported,
        "1 spans ended ok with no output-token count"
    ));
    assert_eq!(imported.run.labels["tokens_unknown_spans"], "1");
}

#[test]
fn two_different_files_of_one_name_are_two_runs() {
    let a = std::fs::read(data("aiperf-0.2-run1/profile_export.jsonl")).unwrap();
    let b: Vec<u8> = String::from_utf8(a.clone())
        .unwrap()
        .lines()
        .take(20)
        .flat_map(|l| format!("{l}\n").into_bytes())
        .collect();
    let name = Path::new("artifacts/profile_export.jsonl");
    let opts = ImportOptions::default();
    let ra = import(None, name, &a, &opts).unwrap();
    let rb = import(None, name, &b, &opts).unwrap();
    assert_ne!(ra.run.run_id, rb.run.run_id);
    // The same content is the same run, whatever its name.
    let again = import(None, Path::new("elsewhere.jsonl"), &a, &opts).unwrap();
    assert_eq!(ra.run.run_id, again.run.run_id);
}

/// The files kept out of the repository, read from `$TPSCOPE_REAL_IMPORTS` (see the
/// README of tests/data/import/real): GuideLLM 0.5 results (`*benchmarks.json`),
/// LLMPerf runs (`NAME_individual_responses.json` beside `NAME_summary.json`), AIPerf
/// 0.10 runs (a folder each, `profile_export.jsonl` beside
/// `profile_export_aiperf.json`), genai-bench runs (`*_num_concurrency_*.json`) and
/// vLLM results with per-request columns (`vllm-detailed-*.json`). Run with
/// `--ignored`.
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

fn genai_bench(path: &Path) {
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

#[test]
fn genai_bench_regression_runs_reproduce_their_aggregated_metrics() {
    // genai-bench's own regression runs (sgl-project/genai-bench, MIT).
    genai_bench(&data(
        "genai-bench/main/D100_100_text-to-text_num_concurrency_1_time_120s.json",
    ));
    genai_bench(&data(
        "genai-bench/feature-no-flag/D100_100_text-to-text_zai-org_GLM-4.6_num_concurrency_1_time_120s.json",
    ));
    genai_bench(&data(
        "genai-bench/parallel/D100_100_text-to-text_zai-org_GLM-4.6_num_concurrency_1_time_300s.json",
    ));
}

#[test]
fn otlp_openllmetry_client_with_vllm_server_spans_counts_each_call_once() {
    // The layout of an OpenLLMetry client tracing calls to a vLLM that traces too:
    // five GenAI spans for three calls (126 tokens counted for 86 before), plus a
    // streamed call whose client saw chunks but no usage.
    let (imported, r) = load(None, "otlp-openllmetry-and-vllm/traces.json");
    assert_eq!(imported.spans.len(), 4);
    let s = &imported.spans;
    assert_eq!(
        s.iter().map(|s| s.output_tokens).collect::<Vec<_>>(),
        [40, 22, 24, 3]
    );
    assert_eq!(r.counts.output_tokens, 89);
    let ttft = |k: usize| {
        s[k].first_token_at
            .unwrap()
            .since(s[k].admitted_at.unwrap())
    };
    // Not streamed: the client had its first token with the whole answer.
    assert_eq!(s[0].first_token_at, Some(s[0].released_at));
    // Streamed: the client's first chunk event, the tokens from vLLM's usage.
    assert_eq!(ttft(1), Some(Duration::from_millis(80)));
    assert_eq!(s[1].token_source, None);
    // Streamed without usage anywhere: its chunk events, a lower bound.
    assert_eq!(s[3].token_source, Some(tpscope_model::TokenSource::Chunks));
    assert!(warned(&imported, "2 GenAI spans lie under another"));
    assert!(warned(&imported, "1 streamed spans carry no usage"));
}
