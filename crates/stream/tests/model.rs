//! The stream account keeps the model the server named (the proxy's run takes
//! its model from there, as it does not parse requests).

use std::time::Instant;

use tpscope_stream::{Dialect, SseParser};

fn model_of(dialect: Dialect, sse: &str) -> Option<String> {
    let mut account = dialect.account(true, false);
    let mut parser = SseParser::with_limit(1 << 20);
    account.push(&mut parser, sse.as_bytes(), Instant::now());
    account.model.clone()
}

#[test]
fn the_first_model_named_by_an_openai_stream_is_kept() {
    let sse = concat!(
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"llama-8b\",",
        "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"other\",",
        "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"!\"}}]}\n\n",
        "data: [DONE]\n\n",
    );
    assert_eq!(model_of(Dialect::OpenAi, sse).as_deref(), Some("llama-8b"));
}

#[test]
fn an_anthropic_stream_names_its_model_in_message_start() {
    let sse = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"model\":\"claude-x\",",
        "\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
    );
    assert_eq!(
        model_of(Dialect::Anthropic, sse).as_deref(),
        Some("claude-x")
    );
}
