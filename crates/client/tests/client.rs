//! The client against a scripted server on 127.0.0.1:0: every way an attempt can
//! end, what it stamps, and connection reuse.

mod support;

use std::time::Duration;

use support::{BodyEnd, Part, Reply, ScriptServer, events};
use tokio_util::sync::CancellationToken;
use tpscope_client::{
    Api, AttemptOutcome, Client, ClientConfig, Endpoint, Message, Prompt, RequestSpec, Timeouts,
    Usage,
};
use tpscope_model::{Cause, RunClock};

const ROLE: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#;

fn content(text: &str) -> String {
    format!(
        r#"{{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"content":"{text}"}},"logprobs":null,"finish_reason":null}}]}}"#
    )
}

const FINISH: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}"#;
const USAGE: &str = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}"#;

fn ok_stream(with_usage: bool) -> Vec<u8> {
    let mut datas = vec![
        ROLE.to_string(),
        content("Hello"),
        content(" wor"),
        content("ld"),
        FINISH.to_string(),
    ];
    if with_usage {
        datas.push(USAGE.to_string());
    }
    datas.push("[DONE]".into());
    let refs: Vec<&str> = datas.iter().map(String::as_str).collect();
    events(&refs)
}

fn spec() -> RequestSpec {
    RequestSpec {
        prompt: Prompt::Text("say hello".into()),
        max_tokens: Some(5),
    }
}

fn client_for(server: &ScriptServer, config: ClientConfig) -> Client {
    let mut ep = Endpoint::new(server.base_url(), Api::Chat, "m");
    ep.api_key = Some("sk-test".into());
    ep.headers.push(("x-extra".into(), "1".into()));
    ep.extra_body
        .insert("ignore_eos".into(), serde_json::Value::Bool(true));
    Client::new(ep, config).unwrap()
}

fn timeouts(f: impl FnOnce(&mut Timeouts)) -> ClientConfig {
    let mut c = ClientConfig {
        record_chunks: true,
        ..ClientConfig::default()
    };
    f(&mut c.timeouts);
    c
}

async fn run(client: &Client) -> AttemptOutcome {
    client
        .attempt(&spec(), &RunClock::start(), &CancellationToken::new())
        .await
}

fn assert_ordered(o: &AttemptOutcome) {
    let a = &o.attempt;
    assert!(a.started_at <= a.ended_at, "{o:?}");
    if let Some(fb) = a.first_byte_at {
        assert!(a.started_at <= fb && fb <= a.ended_at, "{o:?}");
        if let Some(ft) = a.first_token_at {
            assert!(fb <= ft, "{o:?}");
        }
    }
    if let (Some(ft), Some(lt)) = (a.first_token_at, o.last_token_at) {
        assert!(ft <= lt && lt <= a.ended_at, "{o:?}");
    }
}

#[tokio::test]
async fn ok_stream_with_usage_records_times_tokens_and_text() {
    // The reply arrives in three reads, split inside an event.
    let bytes = ok_stream(true);
    let cut = bytes.len() / 2;
    let server = ScriptServer::start(vec![Reply::sse(vec![
        Part::Bytes(bytes[..40].to_vec()),
        Part::Delay(Duration::from_millis(30)),
        Part::Bytes(bytes[40..cut].to_vec()),
        Part::Delay(Duration::from_millis(30)),
        Part::Bytes(bytes[cut..].to_vec()),
    ])])
    .await;
    let client = client_for(&server, timeouts(|_| {}));
    let o = run(&client).await;
    assert!(o.is_ok(), "{o:?}");
    assert_ordered(&o);
    assert_eq!(o.attempt.http_status, Some(200));
    assert_eq!(o.attempt.tokens, 5, "usage wins over chunks");
    assert_eq!(o.content_chunks, 3);
    assert_eq!(o.text, "Hello world");
    assert_eq!(
        o.usage,
        Some(Usage {
            prompt_tokens: Some(7),
            completion_tokens: Some(5),
            reasoning_tokens: None,
            cached_tokens: None
        })
    );
    assert_eq!(o.response_id.as_deref(), Some("chatcmpl-1"));
    assert_eq!(o.finish_reason.as_deref(), Some("length"));
    assert_eq!(o.events, 7);
    assert!(o.bytes_received >= bytes.len() as u64);
    assert_eq!(o.error_message, None);
    assert_eq!(o.attempt.connection_reused, Some(false));
    assert!(o.attempt.connect_time.is_some());
    // The first token's event was completed by the second read, 30 ms in.
    let ft = o.attempt.first_token_at.unwrap();
    assert!(
        ft.since(o.attempt.started_at).unwrap() >= Duration::from_millis(25),
        "{o:?}"
    );
    let marks = o.chunks.as_ref().unwrap();
    assert_eq!(marks.len(), 3);
    assert_eq!(marks[0].offset, Duration::ZERO);
    assert!(marks.windows(2).all(|w| w[0].offset <= w[1].offset));
    assert_eq!(o.last_token_at.unwrap().since(ft).unwrap(), marks[2].offset);
    assert_eq!(o.first_content_at, o.attempt.first_token_at);

    // What was sent.
    let got = server.received();
    assert_eq!(got.len(), 1);
    let r = &got[0];
    assert!(
        r.head.starts_with("POST /v1/chat/completions HTTP/1.1"),
        "{}",
        r.head
    );
    assert_eq!(r.header("authorization").as_deref(), Some("Bearer sk-test"));
    assert_eq!(r.header("x-extra").as_deref(), Some("1"));
    assert_eq!(r.header("accept-encoding"), None, "no compression");
    let body = r.json();
    assert_eq!(body["model"], "m");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["max_tokens"], 5);
    assert_eq!(body["ignore_eos"], true);
    assert_eq!(body["messages"][0]["content"], "say hello");
    server.shutdown().await;
}

#[tokio::test]
async fn stream_without_usage_counts_content_chunks() {
    let server = ScriptServer::start(vec![Reply::sse(vec![Part::Bytes(ok_stream(false))])]).await;
    let client = client_for(&server, ClientConfig::default());
    let o = run(&client).await;
    assert!(o.is_ok(), "{o:?}");
    assert_eq!(o.usage, None);
    assert_eq!(o.attempt.tokens, 3);
    assert_eq!(o.content_chunks, 3);
    assert_eq!(o.chunks, None, "not asked for");
    // One read carried everything: all events share its instant.
    assert_eq!(o.attempt.first_token_at, o.last_token_at);
    server.shutdown().await;
}

#[tokio::test]
async fn http_429_carries_retry_after_and_the_server_message() {
    let server = ScriptServer::start(vec![
        Reply::body(
            429,
            "application/json",
            br#"{"error":{"message":"slow down","type":"rate_limit","code":429}}"#,
        )
        .header("retry-after", "3"),
    ])
    .await;
    let client = client_for(&server, ClientConfig::default());
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::Http429));
    assert_eq!(o.attempt.http_status, Some(429));
    assert_eq!(o.retry_after, Some(Duration::from_secs(3)));
    let msg = o.error_message.unwrap();
    assert!(msg.contains("slow down") && msg.contains("429"), "{msg}");
    assert!(!msg.contains("sk-test"));
    assert_eq!(o.attempt.tokens, 0);
    assert_eq!(o.attempt.first_token_at, None);
    server.shutdown().await;
}

#[tokio::test]
async fn http_500_and_404_map_to_their_causes() {
    let server = ScriptServer::start(vec![
        Reply::body(500, "text/plain", b"engine crashed"),
        Reply::body(404, "application/json", br#"{"detail":"Not Found"}"#),
    ])
    .await;
    let client = client_for(&server, ClientConfig::default());
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::Http5xx));
    assert!(
        o.error_message
            .as_deref()
            .unwrap()
            .contains("engine crashed")
    );
    assert_eq!(o.retry_after, None);
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::Http4xx));
    assert!(o.error_message.as_deref().unwrap().contains("Not Found"));
    server.shutdown().await;
}

#[tokio::test]
async fn connection_refused_is_a_connect_failure() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let client = Client::new(
        Endpoint::new(format!("http://127.0.0.1:{port}/v1"), Api::Chat, "m"),
        ClientConfig::default(),
    )
    .unwrap();
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::Connect), "{o:?}");
    assert_eq!(o.attempt.http_status, None);
    assert_eq!(o.attempt.first_byte_at, None);
    assert_eq!(o.attempt.connection_reused, Some(false));
    assert!(o.error_message.unwrap().contains("127.0.0.1"));
    assert!(client.list_models().await.is_err());
}

#[tokio::test]
async fn connect_timeout_when_the_accept_queue_is_full() {
    // A listener that never accepts, with its queue filled: further SYNs are dropped
    // and the connect hangs until the client gives up.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(1).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        if let Ok(Ok(s)) = tokio::time::timeout(
            Duration::from_millis(200),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            fillers.push(s);
        }
    }
    let config = timeouts(|t| t.connect = Some(Duration::from_millis(200)));
    let client = Client::new(
        Endpoint::new(format!("http://{addr}/v1"), Api::Chat, "m"),
        config,
    )
    .unwrap();
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::TimeoutConnect), "{o:?}");
    assert_eq!(o.attempt.connection_reused, Some(false));
    drop(fillers);
    drop(listener);
}

#[tokio::test]
async fn first_token_timeout_after_an_empty_role_chunk() {
    let server = ScriptServer::start(vec![
        Reply::sse(vec![Part::Bytes(events(&[ROLE]))])
            .ending(BodyEnd::Hang(Duration::from_secs(3))),
    ])
    .await;
    let client = client_for(
        &server,
        timeouts(|t| t.first_token = Some(Duration::from_millis(200))),
    );
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::TimeoutFirstToken), "{o:?}");
    assert!(o.attempt.first_byte_at.is_some());
    assert_eq!(
        o.attempt.first_token_at, None,
        "the role-only chunk is not a token"
    );
    assert_eq!(o.attempt.tokens, 0);
    let took = o.attempt.ended_at.since(o.attempt.started_at).unwrap();
    assert!(took >= Duration::from_millis(200), "{took:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn first_token_timeout_also_bounds_the_response_head() {
    let server = ScriptServer::start(vec![Reply::sse(vec![])]).await;
    // A head that never comes: a listener that accepts and reads but never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let silent = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        use tokio::io::AsyncReadExt;
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    });
    let config = timeouts(|t| t.first_token = Some(Duration::from_millis(150)));
    let client = Client::new(
        Endpoint::new(format!("http://{addr}/v1"), Api::Chat, "m"),
        config,
    )
    .unwrap();
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::TimeoutFirstToken), "{o:?}");
    assert_eq!(o.attempt.first_byte_at, None);
    silent.abort();
    server.shutdown().await;
}

#[tokio::test]
async fn stall_timeout_between_chunks_keeps_tokens_so_far() {
    let two = events(&[ROLE, &content("a"), &content("b")]);
    let server = ScriptServer::start(vec![
        Reply::sse(vec![
            Part::Bytes(two),
            // A comment is not a chunk: it does not reset the stall clock.
            Part::Delay(Duration::from_millis(100)),
            Part::Bytes(b": ping\n\n".to_vec()),
        ])
        .ending(BodyEnd::Hang(Duration::from_secs(3))),
    ])
    .await;
    let client = client_for(
        &server,
        timeouts(|t| {
            t.first_token = Some(Duration::from_secs(2));
            t.stall = Some(Duration::from_millis(250));
        }),
    );
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::TimeoutStall), "{o:?}");
    assert_eq!(o.attempt.tokens, 2);
    assert_eq!(o.text, "ab");
    let gap = o.attempt.ended_at.since(o.last_token_at.unwrap()).unwrap();
    assert!(
        gap >= Duration::from_millis(250) && gap < Duration::from_secs(2),
        "{gap:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn total_timeout_ends_a_slow_but_steady_stream() {
    let mut parts = vec![Part::Bytes(events(&[ROLE]))];
    for i in 0..40 {
        parts.push(Part::Delay(Duration::from_millis(25)));
        parts.push(Part::Bytes(events(&[&content(&format!("t{i}"))])));
    }
    parts.push(Part::Bytes(events(&["[DONE]"])));
    let server = ScriptServer::start(vec![Reply::sse(parts)]).await;
    let client = client_for(
        &server,
        timeouts(|t| {
            t.stall = Some(Duration::from_millis(500));
            t.total = Some(Duration::from_millis(300));
        }),
    );
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::TimeoutTotal), "{o:?}");
    assert!(o.attempt.tokens >= 2 && o.attempt.tokens < 40, "{o:?}");
    let took = o.attempt.ended_at.since(o.attempt.started_at).unwrap();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_millis(900),
        "{took:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn cut_stream_is_a_disconnect() {
    let server = ScriptServer::start(vec![
        Reply::sse(vec![Part::Bytes(events(&[ROLE, &content("a")]))]).ending(BodyEnd::Cut),
        // Cleanly ended body, but no [DONE]: also a disconnect.
        Reply::sse(vec![Part::Bytes(events(&[
            ROLE,
            &content("a"),
            &content("b"),
        ]))]),
    ])
    .await;
    let client = client_for(&server, ClientConfig::default());
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::Disconnect), "{o:?}");
    assert_eq!(o.attempt.tokens, 1);
    assert!(o.attempt.first_token_at.is_some());
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::Disconnect), "{o:?}");
    assert_eq!(o.attempt.tokens, 2);
    assert!(o.error_message.unwrap().contains("[DONE]"));
    server.shutdown().await;
}

#[tokio::test]
async fn malformed_chunk_and_mid_stream_error() {
    let server = ScriptServer::start(vec![
        Reply::sse(vec![Part::Bytes(events(&[ROLE, &content("a"), "{\"choices\": [", "[DONE]"]))]),
        Reply::sse(vec![Part::Bytes(events(&[
            ROLE,
            &content("a"),
            r#"{"error":{"object":"error","message":"CUDA out of memory","type":"InternalServerError","code":500}}"#,
            "[DONE]",
        ]))]),
    ])
    .await;
    let client = client_for(&server, ClientConfig::default());
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::Malformed), "{o:?}");
    assert_eq!(o.attempt.tokens, 1);
    assert!(o.error_message.unwrap().contains("event 3"));
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::Http5xx), "{o:?}");
    assert!(o.error_message.unwrap().contains("CUDA out of memory"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_200_that_is_not_a_completion_is_malformed_not_ok() {
    // What broke: both counted as ok with 0 tokens and 100 % success.
    let server = ScriptServer::start(vec![
        Reply::body(
            200,
            "application/json",
            br#"{"status":"ok","result":[1,2]}"#,
        ),
        Reply::sse(vec![Part::Bytes(events(&["[DONE]"]))]),
    ])
    .await;
    let client = client_for(&server, ClientConfig::default());
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::Malformed), "{o:?}");
    let msg = o.error_message.unwrap();
    assert!(
        msg.contains("not a completion") && msg.contains("\"status\""),
        "{msg}"
    );
    let o = run(&client).await;
    assert_eq!(o.cause(), Some(Cause::Malformed), "{o:?}");
    assert!(
        o.error_message
            .unwrap()
            .contains("before any completion chunk")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn live_tokens_count_while_the_stream_runs() {
    // What broke: the progress line counted finished requests' tokens only.
    let mut parts = vec![Part::Bytes(events(&[ROLE, &content("a"), &content("b")]))];
    parts.push(Part::Delay(Duration::from_millis(300)));
    parts.push(Part::Bytes(ok_stream(true)));
    let server = ScriptServer::start(vec![Reply::sse(parts)]).await;
    let live = std::sync::Arc::new(tpscope_client::LiveTokens::default());
    live.reset();
    let mut ep = Endpoint::new(server.base_url(), Api::Chat, "m");
    ep.include_usage = true;
    let client = Client::with_live(ep, ClientConfig::default(), Some(live.clone())).unwrap();
    let watcher = {
        let live = live.clone();
        tokio::spawn(async move {
            // Before the stream ends, its first tokens are already counted.
            while live.tokens() == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            live.tokens()
        })
    };
    let o = run(&client).await;
    let seen_early = watcher.await.unwrap();
    assert!(seen_early >= 1, "{seen_early}");
    assert_eq!(live.tokens(), o.attempt.tokens, "{o:?}");
    server.shutdown().await;
}

#[tokio::test]
async fn cancellation_ends_the_attempt_at_once_and_keeps_tokens() {
    let mut parts = vec![Part::Bytes(events(&[ROLE, &content("a"), &content("b")]))];
    for _ in 0..50 {
        parts.push(Part::Delay(Duration::from_millis(100)));
        parts.push(Part::Bytes(events(&[&content("c")])));
    }
    let server = ScriptServer::start(vec![Reply::sse(parts)]).await;
    let client = client_for(&server, ClientConfig::default());
    let cancel = CancellationToken::new();
    let trigger = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(150)).await;
            cancel.cancel();
        })
    };
    let o = client.attempt(&spec(), &RunClock::start(), &cancel).await;
    assert_eq!(o.cause(), Some(Cause::Cancelled), "{o:?}");
    assert!(o.attempt.tokens >= 2, "{o:?}");
    let took = o.attempt.ended_at.since(o.attempt.started_at).unwrap();
    assert!(
        took >= Duration::from_millis(150) && took < Duration::from_secs(2),
        "{took:?}"
    );
    trigger.await.unwrap();
    // Already cancelled: nothing is sent.
    let o = client.attempt(&spec(), &RunClock::start(), &cancel).await;
    assert_eq!(o.cause(), Some(Cause::Cancelled));
    assert_eq!(o.attempt.http_status, None);
    assert_eq!(server.received().len(), 1);
    server.shutdown().await;
}

#[tokio::test]
async fn second_sequential_attempt_reuses_the_connection() {
    let server = ScriptServer::start(vec![Reply::sse(vec![Part::Bytes(ok_stream(true))])]).await;
    let client = client_for(&server, ClientConfig::default());
    let first = run(&client).await;
    let second = run(&client).await;
    assert!(first.is_ok() && second.is_ok(), "{first:?} {second:?}");
    assert_eq!(first.attempt.connection_reused, Some(false));
    assert!(first.attempt.connect_time.is_some());
    assert_eq!(second.attempt.connection_reused, Some(true));
    assert_eq!(second.attempt.connect_time, None);
    assert_eq!(first.connection_id, second.connection_id);
    assert_eq!(server.connections(), 1);
    server.shutdown().await;
}

#[tokio::test]
async fn concurrent_attempts_each_open_their_own_connection() {
    let mut parts = vec![Part::Delay(Duration::from_millis(100))];
    parts.push(Part::Bytes(ok_stream(true)));
    let server = ScriptServer::start(vec![Reply::sse(parts)]).await;
    let client = client_for(&server, ClientConfig::default());
    let (a, b) = tokio::join!(run(&client), run(&client));
    assert!(a.is_ok() && b.is_ok());
    assert_eq!(a.attempt.connection_reused, Some(false));
    assert_eq!(b.attempt.connection_reused, Some(false));
    assert_ne!(a.connection_id, b.connection_id);
    assert_eq!(server.connections(), 2);
    server.shutdown().await;
}

#[tokio::test]
async fn completions_api_reasoning_and_non_streaming_answers() {
    let legacy = events(&[
        r#"{"id":"cmpl-9","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"Once","logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"cmpl-9","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" upon","logprobs":null,"finish_reason":"length"}],"usage":null}"#,
        r#"{"id":"cmpl-9","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
        "[DONE]",
    ]);
    let server = ScriptServer::start(vec![
        Reply::sse(vec![Part::Bytes(legacy)]),
        Reply::body(
            200,
            "application/json",
            br#"{"id":"chatcmpl-x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi there","reasoning_content":"think"},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7}}"#,
        ),
    ])
    .await;
    let mut ep = Endpoint::new(server.base_url(), Api::Completions, "m");
    ep.include_usage = false;
    let client = Client::new(ep, ClientConfig::default()).unwrap();
    let spec = RequestSpec {
        prompt: Prompt::Messages(vec![Message {
            role: "user".into(),
            content: "Tell a story".into(),
        }]),
        max_tokens: Some(2),
    };
    let o = client
        .attempt(&spec, &RunClock::start(), &CancellationToken::new())
        .await;
    assert!(o.is_ok(), "{o:?}");
    assert_eq!(o.text, "Once upon");
    assert_eq!(o.attempt.tokens, 2);
    assert_eq!(o.finish_reason.as_deref(), Some("length"));
    let sent = &server.received()[0];
    assert!(sent.head.starts_with("POST /v1/completions "));
    assert_eq!(sent.json()["prompt"], "Tell a story");
    assert!(sent.json().get("stream_options").is_none());

    let o = client
        .attempt(&spec, &RunClock::start(), &CancellationToken::new())
        .await;
    assert!(o.is_ok(), "{o:?}");
    assert_eq!(o.text, "thinkHi there");
    assert_eq!(o.attempt.tokens, 3);
    assert_eq!(o.content_chunks, 1);
    assert_eq!(o.attempt.first_token_at, Some(o.attempt.ended_at));
    server.shutdown().await;
}

#[tokio::test]
async fn list_models_reads_the_openai_model_list() {
    let server = ScriptServer::start(vec![
        Reply::body(200, "application/json", br#"{"object":"list","data":[{"id":"llama-8b","object":"model","max_model_len":4096},{"id":"qwen","object":"model","max_model_len":null}]}"#),
        Reply::body(200, "application/json", br#"{"object":"list","data":[{"id":"llama-8b","object":"model","max_model_len":4096},{"id":"qwen","object":"model","max_model_len":null}]}"#),
        Reply::body(401, "application/json", br#"{"error":{"message":"bad key"}}"#),
    ])
    .await;
    let client = client_for(&server, ClientConfig::default());
    // vLLM's max_model_len per model (what broke: the default workload ignored it).
    let models = client.models().await.unwrap();
    assert_eq!(models[0].max_model_len, Some(4096));
    assert_eq!(models[1].max_model_len, None);
    assert_eq!(client.list_models().await.unwrap(), ["llama-8b", "qwen"]);
    let e = client.list_models().await.unwrap_err().to_string();
    assert!(
        e.contains("bad key") && e.contains("401") && e.contains("http_4xx"),
        "{e}"
    );
    let got = server.received();
    assert!(got[1].head.starts_with("GET /v1/models "));
    assert_eq!(
        got[0].header("authorization").as_deref(),
        Some("Bearer sk-test")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_200_with_an_html_page_was_called_a_stream_without_done() {
    let server = ScriptServer::start(vec![
        Reply::body(
            200,
            "text/html; charset=utf-8",
            b"<!DOCTYPE html><html><body>Sign in</body></html>",
        ),
        Reply::body(200, "text/plain", b"hello there"),
        Reply::body(200, "application/octet-stream", &[0xff, 0xfe, 0x00, 0x01]),
    ])
    .await;
    let client = client_for(&server, ClientConfig::default());
    for (ct, start) in [
        ("text/html; charset=utf-8", "<!DOCTYPE html><html>"),
        ("text/plain", "hello there"),
        ("application/octet-stream", "\u{fffd}"),
    ] {
        let o = run(&client).await;
        assert_eq!(o.cause(), Some(Cause::Malformed), "{o:?}");
        let msg = o.error_message.unwrap();
        assert!(
            msg.contains(&format!("HTTP 200 with content type {ct} ")),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("the body starts: \"{start}")),
            "{msg}"
        );
        assert!(!msg.contains("[DONE]"), "{msg}");
    }
    server.shutdown().await;
}
