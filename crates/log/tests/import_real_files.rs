//! The importers against result files people published (crates/log/tests/data/import/
//! real/, sources in its README): each import reproduces the figures the file, or
//! its companion summary, states about itself. Where a file's licence keeps it out
//! of the repository, a minimal fixture of the same layout stands in for it and
//! holds the defect it showed.

mod real_support;

use std::path::Path;
use std::time::Duration;

use real_support::*;
use tpscope_analysis::WindowSpec;
use tpscope_log::import::{Format, ImportOptions, import};

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

#[test]
fn llmperf_leaderboard_groq_figures_are_reproduced() {
    llmperf_leaderboard("groq_70b");
}

#[test]
fn llmperf_leaderboard_anyscale_figures_are_reproduced() {
    llmperf_leaderboard("anyscale_70b");
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

#[test]
fn otlp_console_output_of_an_agent_framework_counts_its_chat_calls_once() {
    // The layout of the Microsoft Agent Framework's published console-exporter output
    // (by hand, synthetic values): spans printed at their start and again when they
    // ended, one printed twice, a workflow span never ended, chat calls beside an
    // `invoke_agent` span summing their usage, a tool span under it.
    let (imported, r) = load(None, "otlp-console-agent-framework/traces.jsonl");
    assert_eq!(imported.format, Format::Otlp);
    let out: Vec<u64> = imported.spans.iter().map(|s| s.output_tokens).collect();
    assert_eq!(out, [20, 10]);
    assert_eq!(r.counts.input_tokens, 90);
    close("latency", ms(r.distributions.t_in_flight.mean), 400.0, 1e-9);
    assert!(warned(&imported, "3 printouts repeat a span"));
    assert!(warned(&imported, "1 spans never ended"));
    assert!(warned(&imported, "2 agent and tool spans"));
}
