//! The Anthropic Messages surface (`POST /v1/messages`) over real sockets: the
//! streamed events decode through tpscope-stream's Anthropic decoder to the same
//! tokens, usage and text as the non-streamed answer.

mod common;

use std::time::Instant;

use common::{fast_config, post, start};
use serde_json::{Value, json};
use tpscope_stream::{Dialect, SseParser, StreamEnd};

fn messages(model: &str, stream: bool, max_tokens: u32) -> Value {
    json!({
        "model": model,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Tell me about rivers and stones."}],
        "stream": stream,
        "max_tokens": max_tokens,
        "ignore_eos": true,
    })
}

#[tokio::test]
async fn messages_stream_decodes_with_the_anthropic_decoder() {
    let sim = start(fast_config()).await;
    let model = sim.model_name().to_string();
    let r = post(sim.addr(), "/v1/messages", &messages(&model, true, 9)).await;
    assert_eq!(r.status, 200);
    assert!(r.complete);
    let body = String::from_utf8(r.body()).unwrap();
    assert!(body.starts_with("event: message_start\n"), "{body}");
    assert!(body.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));

    let mut account = Dialect::Anthropic.account(true, false);
    let mut parser = SseParser::new();
    let now = Instant::now();
    for (_, frame) in &r.frames {
        account.push(&mut parser, frame, now);
    }
    account.end_of_body(&mut parser, now);
    assert_eq!(account.end, Some(StreamEnd::Done(now)));
    assert_eq!(account.content_chunks, 9);
    assert_eq!(account.tokens(), 9);
    assert_eq!(account.finish_reason.as_deref(), Some("max_tokens"));
    assert!(account.usage.unwrap().prompt_tokens.unwrap() > 10);
    assert!(account.response_id.as_deref().unwrap().starts_with("msg_"));

    // The non-streamed answer: the same words and counts.
    let whole = post(sim.addr(), "/v1/messages", &messages(&model, false, 9)).await;
    assert_eq!(whole.status, 200);
    let v = whole.json();
    assert_eq!(v["type"], "message");
    assert_eq!(v["usage"]["output_tokens"], 9);
    assert_eq!(
        v["usage"]["input_tokens"].as_u64(),
        account.usage.unwrap().prompt_tokens
    );
    let mut w = Dialect::Anthropic.account(true, false);
    Dialect::Anthropic
        .absorb_answer(&mut w, &whole.body(), now)
        .unwrap();
    assert_eq!(w.tokens(), 9);
    assert_eq!(w.text.split_whitespace().count(), 9);
    assert_eq!(account.text.split_whitespace().count(), 9);
    sim.shutdown().await.unwrap();
}
