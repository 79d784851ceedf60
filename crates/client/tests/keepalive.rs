//! Connection reuse against a server that closes after every streamed response
//! while announcing keep-alive (llama.cpp's `llama-server` does): requests lost
//! to that race are resent at once on a new connection, counted apart, and never
//! fail.

mod support;

use std::sync::Arc;

use support::{BodyEnd, Reply, ScriptServer, events};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tpscope_client::{Api, Client, ClientConfig, Endpoint, Prompt, RequestSpec};
use tpscope_model::RunClock;

const CHUNK: &str = r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}"#;

fn closing_server_reply() -> Reply {
    Reply::sse(vec![support::Part::Bytes(events(&[
        CHUNK, CHUNK, "[DONE]",
    ]))])
    .header("connection", "keep-alive")
    .ending(BodyEnd::CloseAfter)
}

/// 4 waves of 64 concurrent requests: every request after the first wave finds
/// a pooled connection the server will close.
async fn waves(client: &Client) -> (u64, u64, u64) {
    let clock = RunClock::start();
    let (mut failed, mut resends, mut ok) = (0, 0, 0);
    for _ in 0..4 {
        let mut set = JoinSet::new();
        for _ in 0..64 {
            let client = client.clone();
            set.spawn(async move {
                let spec = RequestSpec {
                    prompt: Prompt::Text("x".into()),
                    max_tokens: Some(2),
                };
                client
                    .attempt(&spec, &clock, &CancellationToken::new())
                    .await
            });
        }
        while let Some(o) = set.join_next().await {
            let o = o.unwrap();
            resends += u64::from(o.attempt.resends);
            if o.is_ok() {
                ok += 1;
            } else {
                failed += 1;
            }
        }
    }
    (ok, failed, resends)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalive_close_after_each_stream_loses_no_request_at_concurrency_64() {
    let server = ScriptServer::start(vec![closing_server_reply()]).await;
    let client = Client::new(
        Endpoint::new(server.base_url(), Api::Chat, "m"),
        ClientConfig::default(),
    )
    .unwrap();
    let (ok, failed, resends) = waves(&client).await;
    assert_eq!((ok, failed), (256, 0), "resends {resends}");
    // Waves 2–4 ran on pooled connections the server closed: each was resent.
    assert!(resends >= 64, "resends {resends}");
    // The server saw every request once, plus the resent ones it dropped.
    assert_eq!(server.received().len() as u64, 256 + resends);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_keepalive_opens_a_connection_per_request_and_asks_to_close() {
    let server = ScriptServer::start(vec![closing_server_reply()]).await;
    let config = ClientConfig {
        keepalive: false,
        ..ClientConfig::default()
    };
    let client = Client::new(Endpoint::new(server.base_url(), Api::Chat, "m"), config).unwrap();
    let (ok, failed, resends) = waves(&client).await;
    assert_eq!((ok, failed, resends), (256, 0, 0));
    assert_eq!(server.connections(), 256);
    let received = Arc::new(server.received());
    assert!(
        received
            .iter()
            .all(|r| r.header("connection").as_deref() == Some("close")),
        "a request without Connection: close"
    );
    server.shutdown().await;
}
