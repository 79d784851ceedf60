//! The official `openai` Python SDK through the proxy to the simulator: a streamed
//! chat completion with usage, a plain one, the model list and the SDK's own
//! error for an unknown model all behave as they do directly, and the proxy
//! writes one span per completion (the model list is not one).
//! Run `scripts/sdk-venv.sh` first; the interpreter is `TPSCOPE_OPENAI_PYTHON` or
//! `<workspace>/.venv-sdk/bin/python`.

mod common;

use common::*;
use tpscope_model::{Cause, Status, TokenSource};
use tpscope_sim::Speed;

const SCRIPT: &str = r#"
import json, sys
import openai

base, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base, api_key="sk-secret-key", max_retries=0, timeout=30)
stream = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Say something about rivers."}],
    max_tokens=16,
    stream=True,
    stream_options={"include_usage": True},
    extra_body={"ignore_eos": True},
)
text, usage, chunks = "", None, 0
for chunk in stream:
    chunks += 1
    if chunk.usage is not None:
        usage = chunk.usage.model_dump()
    for c in chunk.choices:
        if c.delta.content:
            text += c.delta.content
plain = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": "hi"}],
    max_completion_tokens=5, extra_body={"ignore_eos": True},
)
models = [m.id for m in client.models.list()]
try:
    client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    not_found = None
except openai.NotFoundError as e:
    not_found = e.status_code
print(json.dumps({"usage": usage, "chunks": chunks, "words": len(text.split()),
                  "plain_usage": plain.usage.model_dump(), "models": models,
                  "not_found": not_found}))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the openai Python SDK: run scripts/sdk-venv.sh"]
async fn official_openai_sdk_works_through_the_proxy() {
    let sim = sim(Speed::Max).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sdk.jsonl");
    let p = proxy(config(sim.addr(), &out)).await;
    let base = format!("http://{}/v1", p.addr());
    let model = sim.model_name().to_string();
    let v = run_sdk_script(SCRIPT, vec![base, model.clone()]).await;
    p.shutdown().await.unwrap();
    sim.shutdown().await.unwrap();
    assert_eq!(v["usage"]["completion_tokens"], 16);
    assert_eq!(v["words"], 16);
    // role chunk + 16 tokens + finish chunk + usage chunk
    assert_eq!(v["chunks"], 19);
    assert_eq!(v["plain_usage"]["completion_tokens"], 5);
    assert_eq!(v["models"], serde_json::json!([model]));
    assert_eq!(v["not_found"], 404);

    let log = std::fs::read_to_string(&out).unwrap();
    assert!(
        !log.contains("sk-secret-key"),
        "the key never reaches the log"
    );
    assert!(!log.contains("rivers"), "prompt text never reaches the log");
    let spans = spans(&out);
    assert_eq!(spans.len(), 3, "{spans:?}");
    let mut tokens: Vec<u64> = spans
        .iter()
        .filter(|s| s.status == Status::Ok)
        .map(|s| s.output_tokens)
        .collect();
    tokens.sort_unstable();
    assert_eq!(tokens, [5, 16]);
    assert!(
        spans
            .iter()
            .filter(|s| s.status == Status::Ok)
            .all(|s| s.token_source == Some(TokenSource::Usage))
    );
    let nf = spans.iter().find(|s| s.status == Status::Error).unwrap();
    assert_eq!(nf.error.as_ref().unwrap().cause, Cause::Http4xx);
}
