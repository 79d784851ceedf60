//! End-to-end tests over real sockets (127.0.0.1:0): the OpenAI surface, streaming
//! with and without usage, errors, metrics, the truth log and connection churn.

mod common;

use common::{fast_config, get, post, start};
use serde_json::{Value, json};
use tpscope_sim::{OutputLen, SimConfig};
use tpscope_tokens::Tokenizer;

fn chat(model: &str, stream: bool, usage: Option<bool>, max_tokens: u32) -> Value {
    let mut v = json!({
        "model": model,
        "messages": [{"role": "user", "content": "Tell me about rivers and stones."}],
        "stream": stream,
        "max_tokens": max_tokens,
        "ignore_eos": true,
    });
    if let Some(u) = usage {
        v["stream_options"] = json!({"include_usage": u});
    }
    v
}

fn parse_events(r: &common::Resp) -> (Vec<Value>, bool) {
    let evs = r.events();
    let done = evs.last().is_some_and(|(_, d)| d == "[DONE]");
    let chunks = evs
        .iter()
        .filter(|(_, d)| d != "[DONE]")
        .map(|(_, d)| serde_json::from_str::<Value>(d).expect("chunk is JSON"))
        .collect();
    (chunks, done)
}

#[tokio::test]
async fn models_health_and_unknown_routes() {
    let sim = start(fast_config()).await;
    assert_eq!(sim.model_name(), "sim-llama-3.1-8b");
    assert!(sim.base_url().starts_with("http://127.0.0.1:"));
    assert!(sim.base_url().ends_with("/v1"));
    let m = get(sim.addr(), "/v1/models").await;
    assert_eq!(m.status, 200);
    let v = m.json();
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"].as_array().unwrap().len(), 1);
    assert_eq!(v["data"][0]["id"], "sim-llama-3.1-8b");
    assert_eq!(get(sim.addr(), "/health").await.status, 200);
    let nf = get(sim.addr(), "/v2/nothing").await;
    assert_eq!(nf.status, 404);
    assert!(
        nf.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/v2/nothing")
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn chat_stream_with_usage_has_one_token_per_chunk_and_a_usage_chunk() {
    let sim = start(fast_config()).await;
    let model = sim.model_name().to_string();
    let r = post(
        sim.addr(),
        "/v1/chat/completions",
        &chat(&model, true, Some(true), 37),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["content-type"], "text/event-stream");
    assert!(r.complete);
    let (chunks, done) = parse_events(&r);
    assert!(done, "stream ends with [DONE]");
    // role chunk, 37 token chunks, finish chunk, usage chunk
    assert_eq!(chunks.len(), 1 + 37 + 1 + 1);
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(chunks[0]["choices"][0]["delta"]["content"], "");
    let tok = Tokenizer::O200kBase;
    let mut text = String::new();
    for c in &chunks[1..38] {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], model.as_str());
        assert!(
            c["usage"].is_null() && c.get("usage").is_some(),
            "usage: null on every chunk"
        );
        let piece = c["choices"][0]["delta"]["content"].as_str().unwrap();
        assert_eq!(tok.count(piece), 1, "one token per chunk: {piece:?}");
        assert!(c["choices"][0]["finish_reason"].is_null());
        text.push_str(piece);
    }
    let fin = &chunks[38];
    assert_eq!(fin["choices"][0]["finish_reason"], "length");
    let usage = &chunks[39];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 37);
    assert_eq!(tok.count(&text), 37);
    let prompt = usage["usage"]["prompt_tokens"].as_u64().unwrap();
    // 3 priming + 3 per message + "user" + the content.
    let expected = 3 + 3 + tok.count("user") + tok.count("Tell me about rivers and stones.");
    assert_eq!(prompt, expected as u64);
    assert_eq!(
        usage["usage"]["total_tokens"].as_u64().unwrap(),
        prompt + 37
    );
    let ids: std::collections::HashSet<&str> =
        chunks.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 1, "one id per stream");
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn chat_stream_without_usage_sends_no_usage_at_all() {
    let sim = start(fast_config()).await;
    let model = sim.model_name().to_string();
    for usage in [None, Some(false)] {
        let r = post(
            sim.addr(),
            "/v1/chat/completions",
            &chat(&model, true, usage, 5),
        )
        .await;
        let (chunks, done) = parse_events(&r);
        assert!(done);
        assert_eq!(chunks.len(), 1 + 5 + 1);
        assert!(chunks.iter().all(|c| c.get("usage").is_none()));
        assert!(
            chunks
                .iter()
                .all(|c| !c["choices"].as_array().unwrap().is_empty())
        );
    }
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn non_streaming_answers_carry_usage_and_matching_text() {
    let sim = start(fast_config()).await;
    let model = sim.model_name().to_string();
    let tok = Tokenizer::O200kBase;
    let r = post(
        sim.addr(),
        "/v1/chat/completions",
        &chat(&model, false, None, 12),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.headers.contains_key("content-length"));
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    let text = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(tok.count(text), 12);
    assert_eq!(v["usage"]["completion_tokens"], 12);
    assert_eq!(v["choices"][0]["finish_reason"], "length");

    // Legacy completions with max_completion_tokens, streaming and not.
    let body = json!({"model": model, "prompt": "Once upon a time", "max_completion_tokens": 9,
                      "ignore_eos": true});
    let v = post(sim.addr(), "/v1/completions", &body).await.json();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(tok.count(v["choices"][0]["text"].as_str().unwrap()), 9);
    assert_eq!(
        v["usage"]["prompt_tokens"],
        tok.count("Once upon a time") as u64
    );
    let mut sbody = body.clone();
    sbody["stream"] = json!(true);
    sbody["stream_options"] = json!({"include_usage": true});
    let r = post(sim.addr(), "/v1/completions", &sbody).await;
    let (chunks, done) = parse_events(&r);
    assert!(done);
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["text"].as_str())
        .collect();
    assert_eq!(tok.count(&text), 9);
    assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 9);
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn output_length_is_drawn_and_capped_by_max_tokens() {
    let sim = start(SimConfig {
        output_len: OutputLen::Fixed(6),
        ..fast_config()
    })
    .await;
    let model = sim.model_name().to_string();
    let mut body = json!({"model": model, "messages": [{"role": "user", "content": "hi"}]});
    let v = post(sim.addr(), "/v1/chat/completions", &body).await.json();
    assert_eq!(v["usage"]["completion_tokens"], 6);
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    body["max_tokens"] = json!(4);
    let v = post(sim.addr(), "/v1/chat/completions", &body).await.json();
    assert_eq!(v["usage"]["completion_tokens"], 4);
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    body["max_tokens"] = json!(20);
    body["ignore_eos"] = json!(true);
    let v = post(sim.addr(), "/v1/chat/completions", &body).await.json();
    assert_eq!(v["usage"]["completion_tokens"], 20);
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn errors_have_openai_shape() {
    let sim = start(fast_config()).await;
    let addr = sim.addr();
    let model = sim.model_name().to_string();
    let r = post(
        addr,
        "/v1/chat/completions",
        &chat("gpt-4o", false, None, 5),
    )
    .await;
    assert_eq!(r.status, 404);
    let e = r.json();
    assert_eq!(e["error"]["code"], "model_not_found");
    assert_eq!(e["error"]["type"], "invalid_request_error");
    assert!(e["error"]["message"].as_str().unwrap().contains("gpt-4o"));

    let mut n2 = chat(&model, false, None, 5);
    n2["n"] = json!(2);
    let r = post(addr, "/v1/chat/completions", &n2).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["param"], "n");

    let too_long = chat(&model, false, None, 200_000);
    let r = post(addr, "/v1/chat/completions", &too_long).await;
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maximum context length")
    );

    let r = common::send(addr, "POST", "/v1/chat/completions", None).await;
    assert_eq!(r.status, 400);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("JSON")
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn same_seed_gives_same_text_and_lengths() {
    let mut texts = Vec::new();
    for _ in 0..2 {
        let sim = start(SimConfig {
            seed: 7,
            ..fast_config()
        })
        .await;
        let body = json!({"model": sim.model_name(), "prompt": "x", "max_tokens": 64});
        let mut run = Vec::new();
        for _ in 0..3 {
            let v = post(sim.addr(), "/v1/completions", &body).await.json();
            run.push(v["choices"][0]["text"].as_str().unwrap().to_string());
        }
        texts.push(run);
        sim.shutdown().await.unwrap();
    }
    assert_eq!(texts[0], texts[1]);
    assert_ne!(texts[0][0], texts[0][1], "requests differ from each other");
}

#[tokio::test]
async fn metrics_use_vllm_names_and_count_tokens() {
    let sim = start(fast_config()).await;
    let model = sim.model_name().to_string();
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let addr = sim.addr();
        let body = chat(&model, true, Some(true), 25);
        tasks.push(tokio::spawn(async move {
            post(addr, "/v1/chat/completions", &body).await
        }));
    }
    for t in tasks {
        assert!(t.await.unwrap().complete);
    }
    let text = String::from_utf8(get(sim.addr(), "/metrics").await.body()).unwrap();
    let value = |name: &str| -> f64 {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{name}{{")))
            .unwrap_or_else(|| panic!("{name} missing"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(value("vllm:generation_tokens_total"), 250.0);
    assert_eq!(value("vllm:num_requests_running"), 0.0);
    assert_eq!(value("vllm:num_requests_waiting"), 0.0);
    assert_eq!(value("vllm:kv_cache_usage_perc"), 0.0);
    assert_eq!(value("vllm:time_to_first_token_seconds_count"), 10.0);
    assert_eq!(value("vllm:inter_token_latency_seconds_count"), 240.0);
    assert_eq!(value("vllm:e2e_request_latency_seconds_count"), 10.0);
    assert_eq!(value("vllm:request_queue_time_seconds_count"), 10.0);
    assert!(value("vllm:prompt_tokens_total") > 0.0);
    assert_eq!(value("vllm:num_preemptions_total"), 0.0);
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn truth_log_records_every_request_when_shut_down() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("truth.jsonl");
    let sim = start(SimConfig {
        truth_log: Some(path.clone()),
        ..fast_config()
    })
    .await;
    let model = sim.model_name().to_string();
    for stream in [true, false] {
        let r = post(
            sim.addr(),
            "/v1/chat/completions",
            &chat(&model, stream, None, 8),
        )
        .await;
        assert_eq!(r.status, 200);
    }
    sim.shutdown().await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for l in &lines {
        assert_eq!(l["tokens"], 8);
        assert_eq!(l["finish_reason"], "length");
        assert!(l["fault"].is_null());
        let t = |k: &str| tpscope_model::Timestamp::parse_rfc3339(l[k].as_str().unwrap()).unwrap();
        assert!(t("received_at") <= t("first_token_at"));
        assert!(t("first_token_at") <= t("last_token_at"));
    }
    let streams: Vec<bool> = lines
        .iter()
        .map(|l| l["stream"].as_bool().unwrap())
        .collect();
    assert!(streams.contains(&true) && streams.contains(&false));
}

#[tokio::test]
async fn connection_close_is_sent_on_every_response() {
    let sim = start(SimConfig {
        connection_close: true,
        ..fast_config()
    })
    .await;
    let model = sim.model_name().to_string();
    let r = post(
        sim.addr(),
        "/v1/chat/completions",
        &chat(&model, true, None, 3),
    )
    .await;
    assert_eq!(r.headers["connection"], "close");
    assert_eq!(
        get(sim.addr(), "/v1/models").await.headers["connection"],
        "close"
    );
    assert_eq!(
        post(
            sim.addr(),
            "/v1/chat/completions",
            &chat("x", false, None, 3)
        )
        .await
        .headers["connection"],
        "close"
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_ends_open_streams() {
    // Real time, a long output: the stream is still open when the simulator stops.
    let sim = start(SimConfig::default()).await;
    let addr = sim.addr();
    let body = chat(sim.model_name(), true, None, 100_000);
    let t = tokio::spawn(async move { post(addr, "/v1/chat/completions", &body).await });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    sim.shutdown().await.unwrap();
    let r = t.await.unwrap();
    assert!(!r.complete, "the open stream was ended");
    assert!(r.events().iter().all(|(_, d)| d != "[DONE]"));
}

#[tokio::test]
async fn realtime_pacing_follows_the_roofline() {
    // One sequence decoding alone: inter-token time ≈ decode step at batch 1.
    let sim = start(SimConfig::default()).await;
    let body = chat(sim.model_name(), true, None, 40);
    let r = post(sim.addr(), "/v1/chat/completions", &body).await;
    let evs = r.events();
    let first = evs[1].0;
    let last = evs[40].0;
    let per_token = (last - first).as_secs_f64() / 39.0;
    let step = tpscope_sim::Roofline::new(sim.config())
        .decode_step(1, 60)
        .as_secs_f64();
    // Generous bounds: this runs on a shared machine.
    assert!(
        per_token > 0.8 * step && per_token < 3.0 * step,
        "{per_token} vs {step}"
    );
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn preempted_requests_finish_with_every_token_exactly_once() {
    // 20 blocks of 16 = 320 tokens of KV; 8 requests that grow to ~110 tokens each
    // cannot all stay resident, so the engine preempts and recomputes. Real-time
    // pacing keeps the requests overlapping: at `--speed max` one request could
    // finish before the next arrived on a busy machine, and nothing was preempted.
    let sim = start(SimConfig {
        speed: tpscope_sim::Speed::Realtime,
        num_kv_blocks: Some(20),
        model: tpscope_sim::ModelSpec {
            max_model_len: 256,
            ..SimConfig::default().model
        },
        ..SimConfig::default()
    })
    .await;
    let model = sim.model_name().to_string();
    let tok = Tokenizer::O200kBase;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (addr, body) = (sim.addr(), chat(&model, true, Some(true), 100));
        tasks.push(tokio::spawn(async move {
            post(addr, "/v1/chat/completions", &body).await
        }));
    }
    for t in tasks {
        let r = t.await.unwrap();
        let (chunks, done) = parse_events(&r);
        assert!(done);
        let text: String = chunks
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(tok.count(&text), 100);
        assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 100);
    }
    let text = String::from_utf8(get(sim.addr(), "/metrics").await.body()).unwrap();
    let preemptions: f64 = text
        .lines()
        .find(|l| l.starts_with("vllm:num_preemptions_total{"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(preemptions > 0.0, "the cache was too small not to preempt");
    sim.shutdown().await.unwrap();
}
