//! The official `anthropic` Python SDK through the proxy to the simulator's
//! `/v1/messages`: a raw event stream, the SDK's stream helper, a plain answer
//! and the SDK's own error for an unknown model behave exactly as they do
//! directly, and the proxy writes one span per request with the input tokens of
//! `message_start` and the output tokens of `message_delta`.
//! Run `scripts/sdk-venv.sh` first; the interpreter is `TPSCOPE_OPENAI_PYTHON` or
//! `<workspace>/.venv-sdk/bin/python` (the one venv holds both SDKs).

mod common;

use common::*;
use serde_json::{Value, json};
use tpscope_model::{Cause, Status, TokenSource};
use tpscope_sim::Speed;

const SCRIPT: &str = r#"
import json, sys
import anthropic

base, model = sys.argv[1], sys.argv[2]
client = anthropic.Anthropic(base_url=base, api_key="sk-ant-secret-key", max_retries=0, timeout=30)
ask = [{"role": "user", "content": "Say something about rivers."}]

events, text, input_tokens, output_tokens, stop = {}, "", None, None, None
for ev in client.messages.create(model=model, max_tokens=16, messages=ask, stream=True,
                                 extra_body={"ignore_eos": True}):
    events[ev.type] = events.get(ev.type, 0) + 1
    if ev.type == "message_start":
        input_tokens = ev.message.usage.input_tokens
    elif ev.type == "content_block_delta":
        text += ev.delta.text
    elif ev.type == "message_delta":
        output_tokens = ev.usage.output_tokens
        stop = ev.delta.stop_reason

with client.messages.stream(model=model, max_tokens=8, messages=ask,
                            extra_body={"ignore_eos": True}) as s:
    helper_words = len("".join(s.text_stream).split())
    final = s.get_final_message()

plain = client.messages.create(model=model, max_tokens=5, messages=ask,
                               extra_body={"ignore_eos": True})
try:
    client.messages.create(model="no-such-model", max_tokens=5, messages=ask)
    not_found = None
except anthropic.NotFoundError as e:
    not_found = e.status_code
print(json.dumps({
    "events": events, "words": len(text.split()), "input_tokens": input_tokens,
    "output_tokens": output_tokens, "stop_reason": stop,
    "helper_words": helper_words, "helper_usage": final.usage.model_dump(include={"input_tokens", "output_tokens"}),
    "plain_usage": plain.usage.model_dump(include={"input_tokens", "output_tokens"}),
    "plain_words": len(plain.content[0].text.split()), "not_found": not_found,
}))
"#;

/// Runs the script against `base` and returns what it printed.
async fn run_script(base: String, model: String) -> Value {
    run_sdk_script(SCRIPT, vec![base, model]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the anthropic Python SDK: run scripts/sdk-venv.sh"]
async fn official_anthropic_sdk_streams_through_the_proxy_unchanged() {
    let sim = sim(Speed::Max).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sdk.jsonl");
    let p = proxy(config(sim.addr(), &out)).await;
    let model = sim.model_name().to_string();
    let direct = run_script(format!("http://{}", sim.addr()), model.clone()).await;
    let via = run_script(format!("http://{}", p.addr()), model).await;
    p.shutdown().await.unwrap();
    sim.shutdown().await.unwrap();

    assert_eq!(via, direct, "the same through the proxy as directly");
    assert_eq!(
        via["events"],
        json!({"message_start": 1, "content_block_start": 1, "content_block_delta": 16,
               "content_block_stop": 1, "message_delta": 1, "message_stop": 1})
    );
    assert_eq!(
        (&via["words"], &via["output_tokens"]),
        (&json!(16), &json!(16))
    );
    assert_eq!(via["stop_reason"], "max_tokens");
    let input = via["input_tokens"]
        .as_u64()
        .expect("message_start has input tokens");
    assert!(input > 0);
    assert_eq!(via["helper_words"], 8);
    assert_eq!(
        via["helper_usage"],
        json!({"input_tokens": input, "output_tokens": 8})
    );
    assert_eq!(via["plain_usage"]["output_tokens"], 5);
    assert_eq!(via["plain_words"], 5);
    assert_eq!(via["not_found"], 404);

    let log = std::fs::read_to_string(&out).unwrap();
    assert!(
        !log.contains("sk-ant-secret-key"),
        "the key never reaches the log"
    );
    assert!(!log.contains("rivers"), "prompt text never reaches the log");
    let spans = spans(&out);
    assert_eq!(spans.len(), 4, "{spans:?}");
    let mut ok: Vec<(u64, Option<u64>)> = spans
        .iter()
        .filter(|s| s.status == Status::Ok)
        .map(|s| (s.output_tokens, s.input_tokens))
        .collect();
    ok.sort_unstable();
    assert_eq!(
        ok,
        [(5, Some(input)), (8, Some(input)), (16, Some(input))],
        "output tokens from message_delta, input tokens from message_start"
    );
    for s in spans.iter().filter(|s| s.status == Status::Ok) {
        assert_eq!(s.token_source, Some(TokenSource::Usage));
        assert!(s.first_token_at.is_some() && s.last_token_at.is_some());
    }
    let nf = spans.iter().find(|s| s.status == Status::Error).unwrap();
    assert_eq!(nf.error.as_ref().unwrap().cause, Cause::Http4xx);
}
