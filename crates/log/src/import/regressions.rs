//! Regressions found importing real published files, each on a small
//! hand-made input of the layout that showed it.

use std::path::Path;
use std::time::Duration;

use super::build::{unix_seconds, unix_seconds_text};
use super::*;
use tpscope_model::Timestamp;

fn run(format: Option<Format>, name: &str, text: &str) -> Result<Imported, ImportError> {
    import(
        format,
        Path::new(name),
        text.as_bytes(),
        &ImportOptions::default(),
    )
}

#[test]
fn vllm_last_token_a_rounding_after_the_release_is_not_rejected() {
    // latency = ttft + Σitls in f64 (as vLLM sums them); rounding ttft and Σitls to
    // nanoseconds apart put the last token 1 ns after the release.
    let text = r#"{"date":"20250301-101500","backend":"vllm","ttfts":[0.11883397466960141],
     "itls":[[0.022757293779659495,0.0343943148674003,0.007097748884638964]],
     "latencies":[0.18308333220130016],"output_lens":[4],"start_times":[12.5]}"#;
    let i = run(Some(Format::Vllm), "r.json", text).unwrap();
    let s = &i.spans[0];
    assert_eq!(s.last_token_at, Some(s.released_at));
    assert_eq!(
        s.released_at.since(s.admitted_at.unwrap()),
        Some(Duration::from_nanos(183_083_332))
    );
}

#[test]
fn vllm_results_without_latencies_end_at_the_last_token_and_say_so() {
    let text = r#"{"date":"20250301-101500","backend":"vllm","ttfts":[0.1,0.2],
     "itls":[[0.01,0.02],[0.03]],"output_lens":[3,2],"errors":["",""]}"#;
    let i = run(Some(Format::Vllm), "r.json", text).unwrap();
    assert_eq!(i.spans.len(), 2);
    for s in &i.spans {
        assert_eq!(s.last_token_at, Some(s.released_at));
    }
    let e2e = |k: usize| {
        i.spans[k]
            .released_at
            .since(i.spans[k].admitted_at.unwrap())
    };
    assert_eq!(e2e(0), Some(Duration::from_millis(130)));
    assert_eq!(e2e(1), Some(Duration::from_millis(230)));
    assert!(
        i.warnings
            .iter()
            .any(|w| w.contains("TTFT plus the sum of its ITLs"))
    );
}

#[test]
fn vllm_peak_throughput_and_concurrency_are_kept() {
    let text = r#"{"ttfts":[0.1],"itls":[[0.01]],"output_lens":[2],
     "max_output_tokens_per_s":812.0,"max_concurrent_requests":7.0}"#;
    let i = run(Some(Format::Vllm), "r.json", text).unwrap();
    assert_eq!(i.run.load["peak_output_tokens_per_s"], 812.0);
    assert_eq!(i.run.load["peak_concurrent_requests"], 7.0);
    assert!(i.warnings.iter().any(|w| w.contains("812 output tokens/s")));
}

const AIPERF: &str = r#"{"metadata":{"x_request_id":"a","credit_issued_ns":1759522419000000000,"request_start_ns":1759522419000000000,"request_end_ns":1759522419500000000},"metrics":{"time_to_first_token":{"value":100.0,"unit":"ms"},"request_latency":{"value":490.0,"unit":"ms"},"output_sequence_length":{"value":10,"unit":"tokens"}},"error":null}
{"metadata":{"x_request_id":"b","credit_issued_ns":1759522419100000000,"request_start_ns":1759522419100000000,"request_end_ns":1759522419700000000},"metrics":{"time_to_first_token":{"value":120.0,"unit":"ms"},"request_latency":{"value":590.0,"unit":"ms"},"output_sequence_length":{"value":12,"unit":"tokens"}},"error":null}
"#;

#[test]
fn aiperf_jsonl_with_a_cut_last_line_imports_with_a_warning() {
    let cut = format!("{AIPERF}{}", &AIPERF[..120]);
    let i = run(Some(Format::Aiperf), "profile_export.jsonl", &cut).unwrap();
    assert_eq!(i.spans.len(), 2);
    assert!(
        i.warnings
            .iter()
            .any(|w| w.contains(":3: the last line is cut off")),
        "{:?}",
        i.warnings
    );
    // A broken line that is not the last one is still an error.
    let broken = format!("{}\n{AIPERF}", &AIPERF[..120]);
    let more = format!("{AIPERF}{}\n{AIPERF}", &AIPERF[..120]);
    assert!(run(Some(Format::Aiperf), "p.jsonl", &more).is_err());
    assert!(run(Some(Format::Aiperf), "p.jsonl", &broken).is_err());
}

#[test]
fn aiperf_output_counts_include_reasoning_tokens() {
    // `output_sequence_length` (with reasoning) is what AIPerf's throughput counts.
    let text = AIPERF.replace(
        r#""output_sequence_length":{"value":10,"unit":"tokens"}"#,
        r#""output_token_count":{"value":4,"unit":"tokens"},"output_sequence_length":{"value":10,"unit":"tokens"}"#,
    );
    let i = run(Some(Format::Aiperf), "p.jsonl", &text).unwrap();
    assert_eq!(i.spans[0].output_tokens, 10);
}

#[test]
fn the_run_id_comes_from_the_content_not_the_file_name() {
    let a = run(Some(Format::Aiperf), "x/profile_export.jsonl", AIPERF).unwrap();
    let other = AIPERF.replace("\"x_request_id\":\"a\"", "\"x_request_id\":\"c\"");
    let b = run(Some(Format::Aiperf), "y/profile_export.jsonl", &other).unwrap();
    assert_ne!(a.run.run_id, b.run.run_id);
    assert!(a.run.run_id.starts_with("aiperf:"));
    let same = run(Some(Format::Aiperf), "renamed.jsonl", AIPERF).unwrap();
    assert_eq!(a.run.run_id, same.run.run_id);
}

#[test]
fn unix_seconds_are_read_exactly_from_their_decimal_text() {
    // An f64 holds 1772473397.7375433 only to 2^-22 s (0.24 µs).
    let t = unix_seconds_text("1772473397.7375433").unwrap();
    assert_eq!(t, Timestamp::from_unix_nanos(1_772_473_397_737_543_300));
    assert_eq!(
        unix_seconds_text("1.5000000005"),
        Some(Timestamp::from_unix_nanos(1_500_000_001))
    );
    assert_eq!(unix_seconds_text("1e9"), None);
    assert_eq!(unix_seconds_text("-1"), None);
    assert_eq!(unix_seconds_text("null"), None);
    // From an f64, its shortest decimal form (what Python wrote).
    assert_eq!(
        unix_seconds(1745000000.125),
        Some(Timestamp::from_unix_nanos(1_745_000_000_125_000_000))
    );
}

#[test]
fn guidellm_ttft_is_the_difference_of_the_decimal_texts() {
    let text = r#"{"metadata":{"version":1,"guidellm_version":"0.5.0"},"benchmarks":[{
      "config":{"strategy":{"type_":"synchronous"}},
      "requests":{"successful":[{"info":{"timings":{"request_start":1772473397.7375433,
        "first_token_iteration":1772473397.8074563,"last_token_iteration":1772473398.0,
        "request_end":1772473398.0000001}},"output_metrics":{"text_tokens":5}}],
        "errored":[],"incomplete":[]}}]}"#;
    let i = run(Some(Format::Guidellm), "b.json", text).unwrap();
    let s = &i.spans[0];
    assert_eq!(
        s.first_token_at.unwrap().since(s.admitted_at.unwrap()),
        Some(Duration::from_nanos(69_913_000))
    );
}

#[test]
fn otlp_array_of_trace_documents_is_read_and_a_bad_one_named_as_an_array() {
    let doc = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"t","spanId":"s",
      "startTimeUnixNano":"1782160417000000000","endTimeUnixNano":"1782160417500000000",
      "attributes":[{"key":"gen_ai.usage.completion_tokens","value":{"intValue":"3"}},
      {"key":"gen_ai.latency.time_to_first_token","value":{"doubleValue":0.125}}]}]}]}]}"#;
    let i = run(None, "t.json", &format!("[{doc},{doc}]")).unwrap();
    assert_eq!(i.spans.len(), 2);
    let s = &i.spans[0];
    assert_eq!(
        s.first_token_at.unwrap().since(s.admitted_at.unwrap()),
        Some(Duration::from_millis(125))
    );
    let e = run(
        Some(Format::Otlp),
        "t.json",
        &format!("[{doc},{{\"resourceSpans\":7}}]"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("a JSON array") && !e.contains("line 1"), "{e}");
}

#[test]
fn otlp_ok_span_without_usage_has_unknown_tokens_with_a_warning() {
    let text = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"t","spanId":"s",
      "startTimeUnixNano":"1782160417000000000","endTimeUnixNano":"1782160417500000000",
      "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}}]}]}]}]}"#;
    let i = run(None, "t.json", text).unwrap();
    assert_eq!(i.spans[0].output_tokens, 0);
    assert_eq!(i.run.labels["tokens_unknown_spans"], "1");
    assert!(i.warnings.iter().any(|w| w.contains("tokens are unknown")));
}

#[test]
fn vllm_rfc3339_date_anchors_the_run() {
    let text = r#"{"date":"2026-09-04T20:33:17Z","ttfts":[0.1],"itls":[[0.01]],"output_lens":[2]}"#;
    let i = run(Some(Format::Vllm), "r.json", text).unwrap();
    assert_eq!(
        i.run.started_at,
        Timestamp::parse_rfc3339("2026-09-04T20:33:17Z").unwrap()
    );
}

#[test]
fn vllm_result_without_date_says_its_calendar_date_is_not_known() {
    // maty0609/vllm-benchmarks (2026): a script calls vLLM's `benchmark()` and saves
    // what it returns, which has no `date` (the CLI adds it): the run sat at
    // 2001-01-01 silently. Its start times still place each request exactly.
    let text = r#"{"backend":"openai","model_id":"m","model_name":"m","num_prompts":2,
     "request_rate":"inf","duration":0.5,"completed":2,"failed":0,"input_lens":[5,6],
     "output_lens":[2,1],"ttfts":[0.1,0.2],"itls":[[0.01],[]],"start_times":[58683.0,58683.25],
     "generated_texts":["a b",""],"errors":["",""],"max_output_tokens_per_s":3.0,
     "max_concurrent_requests":2,"rtfx":0.0,"p80_ttft_ms":180.0,"server_config":{"gpu_type":"x"}}"#;
    let i = run(Some(Format::Vllm), "r.json", text).unwrap();
    assert_eq!(i.run.started_at, lanes::DEFAULT_ANCHOR);
    assert_eq!(
        i.spans[1].admitted_at.unwrap().since(i.run.started_at),
        Some(Duration::from_millis(250))
    );
    let said = |i: &Imported, what: &str| {
        i.warnings
            .iter()
            .any(|w| w.contains(what) && w.contains("calendar date is not known"))
    };
    assert!(said(&i, "has no `date`"), "{:?}", i.warnings);
    // A date in neither of vLLM's forms is named, not silently replaced.
    let odd = text.replace(r#"{"backend""#, r#"{"date":"2026/03/16 15:33","backend""#);
    let i = run(Some(Format::Vllm), "r.json", &odd).unwrap();
    assert_eq!(i.run.started_at, lanes::DEFAULT_ANCHOR);
    assert!(said(&i, r#"("2026/03/16 15:33")"#), "{:?}", i.warnings);
    let dated = text.replace(r#"{"backend""#, r#"{"date":"20260316-153300","backend""#);
    let i = run(Some(Format::Vllm), "r.json", &dated).unwrap();
    assert!(!i.warnings.iter().any(|w| w.contains("`date`")));
}

#[test]
fn vllm_summary_without_per_request_columns_is_refused_naming_the_flag() {
    // What `--save-result` alone writes (vLLM 0.25.1): figures, no columns.
    let text = r#"{"date":"20260816-160853","backend":"vllm","completed":8,
     "duration":1.544,"max_concurrent_requests":6,"max_output_tokens_per_s":85.0,
     "mean_ttft_ms":215.5,"output_throughput":82.9}"#;
    let e = run(Some(Format::Vllm), "bench.json", text)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "bench.json: not vllm output: no `ttfts`: save it with --save-result --save-detailed"
        ),
        "{e}"
    );
}

#[test]
fn vllm_summary_without_from_is_recognised_and_refused_naming_the_flag() {
    // A published vLLM result saved without --save-detailed (its `latencies` and
    // `queue_times`, no `ttfts`) was "cannot tell which tool wrote this file".
    let text = r#"{"date":"20260916-040732","endpoint_type":"vllm","backend":"vllm",
     "request_rate":"inf","max_concurrency":2,"completed":2,"latencies":[0.65,0.65],
     "queue_times":[0.0002,0.0003],"mean_ttft_ms":122.1,"median_ttft_ms":84.6,
     "p99_ttft_ms":293.7}"#;
    let e = run(None, "bench.json", text).unwrap_err().to_string();
    assert!(
        e.contains("not vllm output: no `ttfts`: save it with"),
        "{e}"
    );
}

#[test]
fn a_last_token_within_a_rounding_error_after_the_release_is_the_release() {
    let doc = |last: &str| {
        format!(
            r#"{{"metadata":{{"version":1}},"benchmarks":[{{"config":{{"strategy":{{}}}},
          "requests":{{"successful":[{{"info":{{"timings":{{"request_start":1772473397.5,
            "first_token_iteration":1772473397.6,"last_token_iteration":{last},
            "request_end":1772473398.0}}}},"output_metrics":{{"text_tokens":5}}}}],
            "errored":[],"incomplete":[]}}}}]}}"#
        )
    };
    // 0.5 µs past: a rounding error of the tool's own arithmetic, clamped.
    let i = run(Some(Format::Guidellm), "b.json", &doc("1772473398.0000005")).unwrap();
    assert_eq!(i.spans[0].last_token_at, Some(i.spans[0].released_at));
    // 2 µs past is not rounding: still refused, naming the field.
    let e = run(Some(Format::Guidellm), "b.json", &doc("1772473398.000002"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("b.json: benchmarks[0].requests.successful[0]"),
        "{e}"
    );
}

#[test]
fn genai_bench_failed_request_without_latency_is_imported_not_refused() {
    // genai-bench writes a failed request's latencies as `null` (an HTTP 500 in a
    // published run): the whole file was refused ("e2e_latency: missing").
    let text = r#"{"aggregated_metrics":{"scenario":"D(8000,700)","num_concurrency":2,
     "run_duration":3.0,"num_completed_requests":1,"num_error_requests":1},
     "individual_request_metrics":[
      {"ttft":0.25,"tpot":0.01,"e2e_latency":1.5,"num_input_tokens":8,"num_output_tokens":4,
       "error_code":null,"error_message":null},
      {"ttft":null,"tpot":null,"e2e_latency":null,"num_input_tokens":null,
       "num_output_tokens":null,"error_code":500,"error_message":"Internal server error"}],
     "_time_unit":"s"}"#;
    let i = run(Some(Format::GenaiBench), "g.json", text).unwrap();
    assert_eq!(i.spans.len(), 2);
    let failed = &i.spans[1];
    assert_eq!(failed.status, tpscope_model::Status::Error);
    assert_eq!(
        failed.error.as_ref().map(|e| e.cause),
        Some(tpscope_model::Cause::Http5xx)
    );
    assert_eq!(failed.released_at, failed.admitted_at.unwrap());
    assert!(
        i.warnings
            .iter()
            .any(|w| w.contains("1 failed requests record no latency"))
    );
    // A request that did not fail still needs its latency.
    let bad = text.replace(r#""e2e_latency":1.5"#, r#""e2e_latency":null"#);
    let e = run(Some(Format::GenaiBench), "g.json", &bad).unwrap_err();
    assert!(e.to_string().contains("e2e_latency"), "{e}");
}

#[test]
fn genai_bench_placement_longer_than_its_run_is_said() {
    // A published run at concurrency 16: back to back in the file's order its
    // requests took 15.371 s of a 15.095 s run, so a window of the run's length
    // missed the last tokens (843.89 against genai-bench's 845.10 tok/s), silently.
    let doc = |run: f64| {
        format!(
            r#"{{"aggregated_metrics":{{"num_concurrency":1,"run_duration":{run}}},
             "individual_request_metrics":[
              {{"ttft":0.1,"e2e_latency":1.0,"num_output_tokens":5,"error_code":null}},
              {{"ttft":0.1,"e2e_latency":1.0,"num_output_tokens":5,"error_code":null}}]}}"#
        )
    };
    let said = |i: &Imported| i.warnings.iter().any(|w| w.contains("is longer than"));
    let long = run(Some(Format::GenaiBench), "g.json", &doc(1.5)).unwrap();
    assert!(said(&long), "{:?}", long.warnings);
    let fits = run(Some(Format::GenaiBench), "g.json", &doc(2.5)).unwrap();
    assert!(!said(&fits), "{:?}", fits.warnings);
}

/// A vLLM result without `start_times` or `latencies`: three requests of 1 s.
fn vllm_placed(rate: &str, cap: &str) -> Imported {
    let text = format!(
        r#"{{"date":"20240907-082900","backend":"vllm","request_rate":{rate}{cap},
         "ttfts":[0.1,0.1,0.1],"itls":[[0.9],[0.9],[0.9]],"output_lens":[2,2,2],
         "errors":["","",""],"mean_latency_ms":1000.0}}"#
    );
    run(Some(Format::Vllm), "v.json", &text).unwrap()
}

fn starts(i: &Imported) -> Vec<Duration> {
    let first = i.spans[0].admitted_at.unwrap();
    i.spans
        .iter()
        .map(|s| s.admitted_at.unwrap().since(first).unwrap())
        .collect()
}

#[test]
fn vllm_rate_inf_without_start_times_sends_every_request_at_once() {
    // A published vLLM 0.6 run (10 requests at rate inf, no max_concurrency) was
    // placed on one client: a 23.95 s window and 81 tok/s for vLLM's 8.57 s and
    // 227 tok/s.
    let at_once = vllm_placed(r#""inf""#, "");
    assert_eq!(starts(&at_once), [Duration::ZERO; 3]);
    let s = Duration::from_secs;
    // `--max-concurrency 1`: one at a time.
    let one = vllm_placed(r#""inf""#, r#","max_concurrency":1"#);
    assert_eq!(starts(&one), [s(0), s(1), s(2)]);
    // A rate of 4/s: the i-th arrival at i/4 s.
    let rated = vllm_placed("4.0", "");
    assert_eq!(
        starts(&rated),
        [s(0), Duration::from_millis(250), Duration::from_millis(500)]
    );
}

#[test]
fn vllm_mean_latency_above_ttft_plus_itls_is_said() {
    // vLLM's latency runs to the stream's close: on a published 0.6 file its mean
    // was 11.73 ms above TTFT + ΣITL, which the import called "vLLM's own
    // definition".
    let said = |i: &Imported| i.warnings.iter().any(|w| w.contains("above the mean"));
    assert!(!said(&vllm_placed(r#""inf""#, "")));
    let text = r#"{"date":"20240907-082900","backend":"vllm","request_rate":"inf",
     "ttfts":[0.1],"itls":[[0.9]],"output_lens":[2],"errors":[""],"mean_e2el_ms":1011.732}"#;
    let i = run(Some(Format::Vllm), "v.json", text).unwrap();
    assert!(
        i.warnings
            .iter()
            .any(|w| w.contains("(1011.732 ms) is 11.732 ms above the mean")),
        "{:?}",
        i.warnings
    );
}

#[test]
fn vllm_append_result_lines_are_runs_not_a_refused_file() {
    // `--append-result` appends each run's object as a line: a published file of 11
    // runs was refused ("trailing characters at line 2 column 1").
    let line = |date: &str, ttft: f64| {
        format!(
            r#"{{"date":"{date}","backend":"vllm","request_rate":"inf","max_concurrency":1,"ttfts":[{ttft}],"itls":[[]],"output_lens":[1],"errors":[""]}}"#
        )
    };
    let text = format!(
        "{}\n{}\n",
        line("20250912-004111", 0.05),
        line("20250912-004200", 0.5)
    );
    let runs = import_runs(
        Some(Format::Vllm),
        Path::new("r.json"),
        text.as_bytes(),
        &ImportOptions::default(),
    )
    .unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs[0].run.run_id.ends_with("#1") && runs[1].run.run_id.ends_with("#2"));
    let ttft = |i: &Imported| {
        i.spans[0]
            .first_token_at
            .unwrap()
            .since(i.spans[0].admitted_at.unwrap())
    };
    assert_eq!(ttft(&runs[1]), Some(Duration::from_millis(500)));
    // `import` reads the first and says there are more.
    let one = run(Some(Format::Vllm), "r.json", &text).unwrap();
    assert!(one.warnings.iter().any(|w| w.contains("holds 2 results")));
    // A broken line is still an error, not a silently shorter file.
    let broken = format!("{}\n{{\"ttfts\": [\n", line("20250912-004111", 0.05));
    assert!(
        import_runs(
            Some(Format::Vllm),
            Path::new("r.json"),
            broken.as_bytes(),
            &ImportOptions::default()
        )
        .is_err()
    );
}

#[test]
fn aiperf_run_ending_in_timeouts_names_the_window_of_its_throughputs() {
    // A published AIPerf 0.8 run whose last request timed out with no response:
    // AIPerf's benchmark_duration stops at the last response, tpscope's full window
    // at the timeout's end (0.52 tok/s for AIPerf's 0.575). The import names the
    // window that reproduces AIPerf's figure.
    let timeout = r#"{"metadata":{"x_request_id":"c","credit_issued_ns":1759522419700000000,"request_start_ns":1759522419700000000,"request_end_ns":1759522439700000000},"metrics":{"error_isl":{"value":9,"unit":"tokens"}},"error":{"type":"TimeoutError","message":"TimeoutError()"}}"#;
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("profile_export.jsonl");
    std::fs::write(&records, format!("{AIPERF}{timeout}\n")).unwrap();
    // 22 tokens over 0.69 s: the first request sent to the last response.
    std::fs::write(
        dir.path().join("profile_export_aiperf.json"),
        r#"{"benchmark_duration":{"unit":"sec","avg":0.69},
            "output_token_throughput":{"unit":"tokens/sec","avg":31.88405797101449}}"#,
    )
    .unwrap();
    let runs = files::import_files(None, &[records], false, false).unwrap();
    let imported = &runs[0].1;
    let note = imported
        .warnings
        .iter()
        .find(|w| w.contains("benchmark_duration"))
        .expect("a note naming AIPerf's duration");
    let window = note
        .split("`--window ")
        .nth(1)
        .and_then(|w| w.split('`').next())
        .unwrap();
    assert_eq!(window, "0.000000..0.690000");
    let tps = |window: tpscope_analysis::WindowSpec| {
        let input =
            tpscope_analysis::RunInput::from_records(imported.run.clone(), &imported.spans, &[]);
        let options = tpscope_analysis::Options {
            window,
            ..Default::default()
        };
        tpscope_analysis::analyze(&input, &options)
            .system_tps
            .unwrap()
            .0
    };
    // The failed request keeps its input length (`error_isl`), unread before.
    assert_eq!(imported.spans[2].input_tokens, Some(9));
    assert!((tps(window.parse().unwrap()) - 22.0 / 0.69).abs() < 1e-9);
    assert!((tps(tpscope_analysis::WindowSpec::Full) - 22.0 / 20.7).abs() < 1e-9);
}

#[test]
fn aiperf_parser_refusal_is_malformed_and_a_server_disconnect_not_a_connect() {
    // Published AIPerf runs against a failing vLLM: `ValueError('Unsupported OpenAI
    // object type: None')` was imported as a disconnect (the stream ended early).
    let text = AIPERF.replacen(
        r#""error":null"#,
        r#""error":{"type":"ValueError","message":"ValueError('Unsupported OpenAI object type: None')"}"#,
        1,
    );
    let i = run(Some(Format::Aiperf), "p.jsonl", &text).unwrap();
    let e = i.spans[0].error.as_ref().expect("a failed request");
    assert_eq!(e.cause, tpscope_model::Cause::Malformed);
    // aiohttp's `ServerDisconnectedError` (a stream cut short) was a connect failure
    // (its name holds "connect"); a refused connection stays one.
    for (kind, cause) in [
        ("ClientConnectorError", tpscope_model::Cause::Connect),
        ("ServerDisconnectedError", tpscope_model::Cause::Disconnect),
    ] {
        let text = AIPERF.replacen(
            r#""error":null"#,
            &format!(r#""error":{{"type":"{kind}","message":"m"}}"#),
            1,
        );
        let i = run(Some(Format::Aiperf), "p.jsonl", &text).unwrap();
        assert_eq!(i.spans[0].error.as_ref().unwrap().cause, cause, "{kind}");
    }
}

#[test]
fn guidellm_0_3_yaml_is_recognised_without_from() {
    // GuideLLM's own published test asset (vllm-project/guidellm, 2025): its YAML
    // names no `guidellm` before 0.4, and `import` said "cannot tell which tool".
    let text = "---
benchmarks:
- type_: generative_benchmark
  args:
    strategy:
      type_: synchronous
  start_time: 1749157168.1827004
  end_time: 1749157198.1799018
  requests:
    successful:
    - type_: generative_text_response
      request_id: 73054dd1
      request_type: text_completions
      scheduler_info:
        targeted_start_time: 1749157168.179883
        queued_time: 1749157168.1811602
      prompt_tokens: 257
      output_tokens: 128
      start_time: 1749157168.1827004
      end_time: 1749157168.871885
      first_token_time: 1749157168.2039824
      last_token_time: 1749157168.8717923
    errored: []
    incomplete: []
";
    let i = run(None, "benchmarks.yaml", text).unwrap();
    assert_eq!(i.format, Format::Guidellm);
    let s = &i.spans[0];
    // GuideLLM's own figure for this request: 21.281957626342773 ms.
    let ttft = s
        .first_token_at
        .unwrap()
        .since(s.admitted_at.unwrap())
        .unwrap();
    assert_eq!(ttft, Duration::from_nanos(21_282_000));
    assert_eq!(s.output_tokens, 128);
}

#[test]
fn aiperf_concurrency_the_records_exceed_is_not_the_cap() {
    // Published AIPerf runs replaying agentic traces: `--concurrency` counts
    // sessions, their sub-agents' requests run beside them (4 in flight at
    // concurrency 2). Taken as the cap, slot-time ran above it and the what-if was
    // slower than the run itself.
    let with = |clients: u32| {
        let opts = ImportOptions {
            clients: Some(clients),
            ..ImportOptions::default()
        };
        import(None, Path::new("p.jsonl"), AIPERF.as_bytes(), &opts).unwrap()
    };
    // The two requests overlap: at concurrency 1 the records go past it.
    let over = with(1);
    assert_eq!(over.run.cap, None);
    assert!(
        over.warnings
            .iter()
            .any(|w| w.contains("up to 2 requests were in flight at once")),
        "{:?}",
        over.warnings
    );
    assert_eq!(over.run.load["concurrency"], 1);
    // At concurrency 2 it holds: the cap stays.
    assert_eq!(with(2).run.cap, Some(2));
}
