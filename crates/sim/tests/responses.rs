//! The OpenAI Responses surface (`POST /v1/responses`) over real sockets: the
//! streamed typed events decode through tpscope-stream's Responses decoder to the
//! same tokens, usage and text as the non-streamed answer; the token limit ends as
//! vLLM ends it (`response.completed` with status `incomplete`); sequence numbers
//! run 0, 1, 2, … without a gap.

mod common;

use std::time::Instant;

use common::{fast_config, post, start};
use serde_json::{Value, json};
use tpscope_stream::{Dialect, SseParser, StreamEnd};

fn request(model: &str, stream: bool, max: u32, ignore_eos: bool) -> Value {
    json!({
        "model": model,
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Tell me about rivers and stones."}]}],
        "stream": stream,
        "max_output_tokens": max,
        "ignore_eos": ignore_eos,
    })
}

#[tokio::test]
async fn responses_stream_decodes_with_the_responses_decoder() {
    let sim = start(fast_config()).await;
    let model = sim.model_name().to_string();
    let r = post(sim.addr(), "/v1/responses", &request(&model, true, 9, true)).await;
    assert_eq!(r.status, 200);
    assert!(r.complete);
    let body = String::from_utf8(r.body()).unwrap();
    assert!(body.starts_with("event: response.created\n"), "{body}");

    // Every event's data names its own type, and the sequence numbers count up.
    let mut seq = Vec::new();
    for block in body.split("\n\n").filter(|b| !b.is_empty()) {
        let (name, data) = block.split_once("\ndata: ").unwrap();
        let v: Value = serde_json::from_str(data).unwrap();
        assert_eq!(
            Some(v["type"].as_str().unwrap()),
            name.strip_prefix("event: ")
        );
        seq.push(v["sequence_number"].as_u64().unwrap());
    }
    assert_eq!(seq, (0..seq.len() as u64).collect::<Vec<_>>());

    let mut account = Dialect::Responses.account(true, false);
    let mut parser = SseParser::new();
    let now = Instant::now();
    for (_, frame) in &r.frames {
        account.push(&mut parser, frame, now);
    }
    account.end_of_body(&mut parser, now);
    assert_eq!(account.end, Some(StreamEnd::Done(now)));
    assert_eq!(account.content_chunks, 9);
    assert_eq!(account.tokens(), 9);
    // ignore_eos: all 9 tokens; at the limit the status is incomplete.
    assert!(body.contains("\"status\":\"incomplete\""), "{body}");
    assert_eq!(account.finish_reason.as_deref(), Some("length"));
    assert!(account.usage.unwrap().prompt_tokens.unwrap() > 10);
    assert!(account.response_id.as_deref().unwrap().starts_with("resp_"));

    // The non-streamed answer: the same words and counts.
    let whole = post(
        sim.addr(),
        "/v1/responses",
        &request(&model, false, 9, true),
    )
    .await;
    assert_eq!(whole.status, 200);
    let v = whole.json();
    assert_eq!(v["object"], "response");
    assert_eq!(v["incomplete_details"]["reason"], "max_output_tokens");
    assert_eq!(v["usage"]["output_tokens"], 9);
    assert_eq!(
        v["usage"]["input_tokens"].as_u64(),
        account.usage.unwrap().prompt_tokens
    );
    let mut w = Dialect::Responses.account(true, false);
    Dialect::Responses
        .absorb_answer(&mut w, &whole.body(), now)
        .unwrap();
    assert_eq!(w.tokens(), 9);
    assert_eq!(w.text.split_whitespace().count(), 9);
    // The streamed deltas and the completed response's text are the same words.
    assert_eq!(account.text.split_whitespace().count(), 9);
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn responses_that_stop_before_the_limit_complete_and_bad_input_names_input() {
    let sim = start(fast_config()).await;
    let model = sim.model_name().to_string();
    let r = post(
        sim.addr(),
        "/v1/responses",
        &request(&model, true, 4000, false),
    )
    .await;
    assert_eq!(r.status, 200);
    let body = String::from_utf8(r.body()).unwrap();
    let mut account = Dialect::Responses.account(false, false);
    let mut parser = SseParser::new();
    let now = Instant::now();
    account.push(&mut parser, body.as_bytes(), now);
    account.end_of_body(&mut parser, now);
    assert!(account.is_done());
    // The simulator's drawn length ends well before 4,000 tokens.
    assert!(account.tokens() < 4000, "{}", account.tokens());
    assert!(body.contains("event: response.completed\n"));
    assert_eq!(account.finish_reason.as_deref(), Some("stop"));

    let bad = post(
        sim.addr(),
        "/v1/responses",
        &json!({"model": model, "input": [{"role": "user", "content": 7}], "stream": true}),
    )
    .await;
    assert_eq!(bad.status, 400);
    let e = bad.json();
    assert_eq!(e["error"]["param"], "input");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`input[0].content`")
    );
    sim.shutdown().await.unwrap();
}
