//! The official `openai` Python SDK (a client nobody here wrote) against the
//! simulator: a streamed chat completion with usage, a plain one, the model list,
//! and the SDK's own error class for an unknown model; the Responses API streamed
//! (`responses.create(stream=True)` and the `responses.stream()` helper) and plain.
//! Run `scripts/sdk-venv.sh` first; the interpreter is `TPSCOPE_OPENAI_PYTHON` or
//! `<workspace>/.venv-sdk/bin/python`.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{fast_config, start};
use serde_json::Value;
use tpscope_tokens::Tokenizer;

const SCRIPT: &str = r#"
import json, sys
import openai

base, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base, api_key="sim", max_retries=0, timeout=30)
stream = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "Say something about rivers."}],
    max_tokens=16,
    stream=True,
    stream_options={"include_usage": True},
    extra_body={"ignore_eos": True},
)
text, usage, finish, chunks = "", None, None, 0
for chunk in stream:
    chunks += 1
    if chunk.usage is not None:
        usage = chunk.usage.model_dump()
    for c in chunk.choices:
        if c.delta.content:
            text += c.delta.content
        if c.finish_reason:
            finish = c.finish_reason
plain = client.chat.completions.create(
    model=model,
    messages=[{"role": "user", "content": "hi"}],
    max_completion_tokens=5,
    extra_body={"ignore_eos": True},
)
models = [m.id for m in client.models.list()]
try:
    client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    not_found = None
except openai.NotFoundError as e:
    not_found = e.status_code
print(json.dumps({
    "text": text, "usage": usage, "finish": finish, "chunks": chunks,
    "plain_text": plain.choices[0].message.content,
    "plain_usage": plain.usage.model_dump(),
    "models": models, "not_found": not_found,
}))
"#;

const RESPONSES_SCRIPT: &str = r#"
import json, sys
import openai

base, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base, api_key="sim", max_retries=0, timeout=30)
events, text, usage, status = [], "", None, None
for ev in client.responses.create(
    model=model, input="Say something about rivers.", max_output_tokens=16,
    stream=True, extra_body={"ignore_eos": True},
):
    events.append(ev.type)
    if ev.type == "response.output_text.delta":
        text += ev.delta
    if ev.type == "response.completed":
        usage = ev.response.usage.model_dump()
        status = ev.response.status
with client.responses.stream(
    model=model, input=[{"role": "user", "content": "hi"}], max_output_tokens=7,
    extra_body={"ignore_eos": True},
) as stream:
    helper_deltas = sum(1 for ev in stream if ev.type == "response.output_text.delta")
    final = stream.get_final_response()
plain = client.responses.create(
    model=model, input="hi", max_output_tokens=5, extra_body={"ignore_eos": True},
)
print(json.dumps({
    "events": events, "text": text, "usage": usage, "status": status,
    "helper_deltas": helper_deltas, "helper_text": final.output_text,
    "helper_usage": final.usage.model_dump(),
    "plain_text": plain.output_text, "plain_usage": plain.usage.model_dump(),
}))
"#;

fn python() -> PathBuf {
    match std::env::var_os("TPSCOPE_OPENAI_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv-sdk/bin/python"),
    }
}

/// Runs the script, killing it if it takes longer than `limit`.
fn run_script(
    script: &str,
    base_url: &str,
    model: &str,
    limit: Duration,
) -> (bool, String, String) {
    let py = python();
    let mut child = Command::new(&py)
        .arg("-c")
        .arg(script)
        .arg(base_url)
        .arg(model)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e} (run scripts/sdk-venv.sh)", py.display()));
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the openai Python SDK: run scripts/sdk-venv.sh"]
async fn official_openai_sdk_streams_a_chat_completion_with_usage() {
    let sim = start(fast_config()).await;
    let (base, model) = (sim.base_url(), sim.model_name().to_string());
    let m = model.clone();
    let (ok, stdout, stderr) = tokio::task::spawn_blocking(move || {
        run_script(SCRIPT, &base, &m, Duration::from_secs(120))
    })
    .await
    .unwrap();
    sim.shutdown().await.unwrap();
    assert!(ok, "the SDK script failed:\n{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).expect("script prints JSON");
    let tok = Tokenizer::O200kBase;
    let text = v["text"].as_str().unwrap();
    assert_eq!(tok.count(text), 16, "{text:?}");
    assert_eq!(v["usage"]["completion_tokens"], 16);
    assert_eq!(
        v["usage"]["total_tokens"].as_u64().unwrap(),
        v["usage"]["prompt_tokens"].as_u64().unwrap() + 16
    );
    assert_eq!(v["finish"], "length");
    // role chunk + 16 tokens + finish chunk + usage chunk
    assert_eq!(v["chunks"], 19);
    assert_eq!(tok.count(v["plain_text"].as_str().unwrap()), 5);
    assert_eq!(v["plain_usage"]["completion_tokens"], 5);
    assert_eq!(v["models"], serde_json::json!([model]));
    assert_eq!(v["not_found"], 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the openai Python SDK: run scripts/sdk-venv.sh"]
async fn official_openai_sdk_streams_the_responses_api() {
    let sim = start(fast_config()).await;
    let (base, model) = (sim.base_url(), sim.model_name().to_string());
    let (ok, stdout, stderr) = tokio::task::spawn_blocking(move || {
        run_script(RESPONSES_SCRIPT, &base, &model, Duration::from_secs(120))
    })
    .await
    .unwrap();
    sim.shutdown().await.unwrap();
    assert!(ok, "the SDK script failed:\n{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).expect("script prints JSON");
    let tok = Tokenizer::O200kBase;
    let events: Vec<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(events.first(), Some(&"response.created"));
    assert_eq!(events.last(), Some(&"response.completed"));
    let deltas = events
        .iter()
        .filter(|e| **e == "response.output_text.delta")
        .count();
    assert_eq!(deltas, 16);
    assert_eq!(tok.count(v["text"].as_str().unwrap()), 16);
    assert_eq!(v["usage"]["output_tokens"], 16);
    assert_eq!(v["status"], "incomplete");
    assert_eq!(v["helper_deltas"], 7);
    assert_eq!(tok.count(v["helper_text"].as_str().unwrap()), 7);
    assert_eq!(v["helper_usage"]["output_tokens"], 7);
    assert_eq!(tok.count(v["plain_text"].as_str().unwrap()), 5);
    assert_eq!(v["plain_usage"]["output_tokens"], 5);
}
