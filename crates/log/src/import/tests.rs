//! Importer behaviour on small hand-made inputs: errors that name the file, record
//! and field; `skip_invalid`; unknown fields ignored; sniffing; absent queues.

use std::path::Path;

use super::*;
use tpscope_model::{Cause, Status};

fn run(format: Option<Format>, text: &str, skip: bool) -> Result<Imported, ImportError> {
    import(
        format,
        Path::new("results/x.json"),
        text.as_bytes(),
        &ImportOptions {
            skip_invalid: skip,
            ..ImportOptions::default()
        },
    )
}

const VLLM: &str = r#"{"date":"20261123-104432","backend":"openai","model_id":"m","max_concurrency":2,
 "ttfts":[0.1,0.0],"itls":[[0.01,0.02],[]],"latencies":[0.2,0.05],"input_lens":[5,6],
 "output_lens":[3,0],"errors":["","Internal Server Error"],"start_times":[100.0,100.5],
 "queue_times":[0.0,0.25],"a_field_from_a_newer_vllm":{"x":1}}"#;

#[test]
fn vllm_columns_become_spans_with_the_queue_and_errors() {
    let i = run(Some(Format::Vllm), VLLM, false).unwrap();
    assert_eq!(i.spans.len(), 2);
    let (a, b) = (&i.spans[0], &i.spans[1]);
    assert_eq!(a.status, Status::Ok);
    assert_eq!(a.output_tokens, 3);
    assert_eq!(a.input_tokens, Some(5));
    let ms = |x: tpscope_model::Timestamp, y| x.since(y).unwrap().as_secs_f64() * 1e3;
    assert!((ms(a.first_token_at.unwrap(), a.admitted_at.unwrap()) - 100.0).abs() < 1e-6);
    assert!((ms(a.last_token_at.unwrap(), a.first_token_at.unwrap()) - 30.0).abs() < 1e-6);
    assert_eq!(a.chunks.as_ref().unwrap().len(), 3);
    assert_eq!(b.status, Status::Error);
    assert_eq!(b.error.as_ref().unwrap().cause, Cause::Http5xx);
    assert!((ms(b.admitted_at.unwrap(), b.queued_at) - 250.0).abs() < 1e-6);
    assert_eq!(i.run.cap, Some(2));
    assert_eq!(i.run.queue_times, tpscope_model::QueueTimes::Measured);
}

#[test]
fn a_column_of_the_wrong_length_names_it() {
    let text = VLLM.replace(r#""latencies":[0.2,0.05]"#, r#""latencies":[0.2]"#);
    let e = run(Some(Format::Vllm), &text, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("results/x.json") && e.contains("`latencies` has 1 entries"),
        "{e}"
    );
}

#[test]
fn a_bad_value_names_the_file_record_and_field() {
    let text = VLLM.replace(r#""ttfts":[0.1,0.0]"#, r#""ttfts":[0.1,-1]"#);
    let e = run(Some(Format::Vllm), &text, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("results/x.json: request 1: field `ttfts`"),
        "{e}"
    );
    let skipped = run(Some(Format::Vllm), &text, true).unwrap();
    assert_eq!(skipped.spans.len(), 1);
    assert_eq!(skipped.skipped.values().sum::<u64>(), 1);
}

#[test]
fn the_wrong_format_says_what_was_expected() {
    let e = run(Some(Format::Vllm), "[1,2]", false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not vllm output") && e.contains("--save-result"),
        "{e}"
    );
    let e = run(Some(Format::Llmperf), r#"{"ttfts":[]}"#, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not llmperf output") && e.contains("individual_responses"),
        "{e}"
    );
    let e = run(None, "hello", false).unwrap_err().to_string();
    assert!(e.contains("cannot tell which tool"), "{e}");
}

const LLMPERF: &str = r#"[
 {"error_code":null,"error_msg":"","inter_token_latency_s":0.05,"ttft_s":0.2,"end_to_end_latency_s":1.1,
  "request_output_throughput_token_per_s":18.0,"number_total_tokens":70,"number_output_tokens":20,"number_input_tokens":50,"new":1},
 {"error_code":429,"error_msg":"slow down","inter_token_latency_s":0,"ttft_s":0,"end_to_end_latency_s":0.01,
  "request_output_throughput_token_per_s":0,"number_total_tokens":50,"number_output_tokens":0,"number_input_tokens":50}
]"#;

#[test]
fn llmperf_durations_are_placed_and_the_queue_is_absent() {
    let i = import(
        Some(Format::Llmperf),
        Path::new("r_individual_responses.json"),
        LLMPERF.as_bytes(),
        &ImportOptions {
            clients: Some(2),
            ..ImportOptions::default()
        },
    )
    .unwrap();
    assert_eq!(i.spans.len(), 2);
    let a = &i.spans[0];
    let secs = |x: tpscope_model::Timestamp, y| x.since(y).unwrap().as_secs_f64();
    // inter_token_latency_s × tokens is the time to the last chunk.
    assert!((secs(a.last_token_at.unwrap(), a.admitted_at.unwrap()) - 1.0).abs() < 1e-9);
    assert_eq!(
        i.run.token_source,
        Some(tpscope_model::TokenSource::Tokenizer("llmperf".into()))
    );
    assert_eq!(i.spans[1].error.as_ref().unwrap().cause, Cause::Http429);
    // Two clients: both start at the anchor.
    assert_eq!(i.spans[0].admitted_at, i.spans[1].admitted_at);
    assert_eq!(i.run.queue_times, tpscope_model::QueueTimes::Unmeasured);
    assert!(
        !i.run.labels.contains_key("queue_times"),
        "{:?}",
        i.run.labels
    );
    let input = tpscope_analysis::RunInput::from_records(i.run.clone(), &i.spans, &[]);
    let r = tpscope_analysis::analyze(&input, &Default::default());
    assert_eq!(r.gap_fraction, None);
    assert_eq!(r.distributions.t_queue.count, 0);
    assert!(r.warnings.iter().any(|w| w.contains("no queue")));
}

#[test]
fn aiperf_lines_name_their_line_number() {
    let good = r#"{"metadata":{"session_num":0,"credit_issued_ns":1795431533325561945,"request_start_ns":1795431533334569429,"request_end_ns":1795431533567385207,"benchmark_phase":"profiling"},"metrics":{"time_to_first_token":{"value":29.4,"unit":"ms"},"request_latency":{"value":232.8,"unit":"ms"},"output_token_count":{"value":32,"unit":"tokens"},"inter_chunk_latency":{"value":[1.0,2.0],"unit":"ms"}},"error":null}"#;
    let bad = good.replace(r#""request_start_ns":1795431533334569429,"#, "");
    let text = format!("{good}\n{bad}\n");
    let e = run(Some(Format::Aiperf), &text, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 2: field `metadata.request_start_ns`"),
        "{e}"
    );
    let i = run(Some(Format::Aiperf), &text, true).unwrap();
    assert_eq!(i.spans.len(), 1);
    let s = &i.spans[0];
    assert!(s.queued_at < s.admitted_at.unwrap());
    assert_eq!(
        s.token_source,
        Some(tpscope_model::TokenSource::Tokenizer("aiperf".into()))
    );
    assert_eq!(Format::sniff(text.as_bytes()), Some(Format::Aiperf));
}

#[test]
fn otlp_spans_without_genai_attributes_are_not_requests() {
    let doc = r#"{"resourceSpans":[{"scopeSpans":[{"spans":[
      {"spanId":"a1","startTimeUnixNano":"1795430025034550083","endTimeUnixNano":"1795430025441979412",
       "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},
                     {"key":"gen_ai.usage.output_tokens","value":{"intValue":"24"}},
                     {"key":"gen_ai.usage.input_tokens","value":{"intValue":15}},
                     {"key":"gen_ai.response.time_to_first_chunk","value":{"doubleValue":0.05}}]},
      {"spanId":"b2","startTimeUnixNano":"1795430025034550083","endTimeUnixNano":"1795430025441979412",
       "attributes":[{"key":"http.method","value":{"stringValue":"GET"}}]},
      {"spanId":"c3","startTimeUnixNano":1795430025034550083,"endTimeUnixNano":1795430025041979412,
       "status":{"code":2,"message":"boom"},
       "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},
                     {"key":"error.type","value":{"stringValue":"RateLimitError"}}]}
    ]}]}]}"#;
    let i = run(Some(Format::Otlp), doc, false).unwrap();
    assert_eq!(i.spans.len(), 2);
    let a = i
        .spans
        .iter()
        .find(|s| s.request_id.as_deref() == Some("a1"))
        .unwrap();
    assert_eq!((a.output_tokens, a.input_tokens), (24, Some(15)));
    let ttft = a
        .first_token_at
        .unwrap()
        .since(a.admitted_at.unwrap())
        .unwrap();
    assert_eq!(ttft.as_millis(), 50);
    let c = i
        .spans
        .iter()
        .find(|s| s.request_id.as_deref() == Some("c3"))
        .unwrap();
    assert_eq!(c.error.as_ref().unwrap().cause, Cause::Http429);
    let none = r#"{"resourceSpans":[]}"#;
    let e = run(Some(Format::Otlp), none, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("gen_ai.operation.name"), "{e}");
}

#[test]
fn format_names_round_trip_and_unknown_ones_are_refused() {
    for f in Format::ALL {
        assert_eq!(f.name().parse::<Format>().unwrap(), f);
    }
    assert!(
        "locust"
            .parse::<Format>()
            .unwrap_err()
            .to_string()
            .contains("unknown format `locust`")
    );
}
