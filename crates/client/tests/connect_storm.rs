//! Connection storms at the start of a run: 256 streams against a
//! server whose accept queue holds 128. Opened all at once, the kernel drops the
//! overflow and those requests wait a second for a SYN retransmit; paced, no
//! connect waits that long. Judged on the recorded connect times.

mod support;

use std::time::Duration;

use support::{Part, Reply, ScriptServer, events};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tpscope_client::{Api, Client, ClientConfig, Endpoint, Prompt, RequestSpec};
use tpscope_model::RunClock;

const CHUNK: &str = r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"t"},"finish_reason":null}]}"#;

/// Ten tokens, 10 ms apart.
fn ten_tokens() -> Reply {
    let mut parts = Vec::new();
    for _ in 0..10 {
        parts.push(Part::Delay(Duration::from_millis(10)));
        parts.push(Part::Bytes(events(&[CHUNK])));
    }
    parts.push(Part::Bytes(events(&["[DONE]"])));
    Reply::sse(parts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c256_against_a_128_accept_queue_waits_no_second_to_connect() {
    let server = ScriptServer::start_with_backlog(vec![ten_tokens()], 128).await;
    let client = Client::new(
        Endpoint::new(server.base_url(), Api::Chat, "m"),
        ClientConfig::default(),
    )
    .unwrap();
    let clock = RunClock::start();
    let mut set = JoinSet::new();
    for _ in 0..256 {
        let (client, clock) = (client.clone(), clock);
        set.spawn(async move {
            let spec = RequestSpec {
                prompt: Prompt::Text("x".into()),
                max_tokens: Some(10),
            };
            client
                .attempt(&spec, &clock, &CancellationToken::new())
                .await
        });
    }
    let mut connects = Vec::new();
    while let Some(o) = set.join_next().await {
        let o = o.unwrap();
        assert!(o.is_ok(), "{:?}", o.error_message);
        assert_eq!(o.content_chunks, 10);
        connects.extend(o.attempt.connect_time);
    }
    // Each connect time (the wait for a place among those opening included)
    // stayed clear of the 1 s SYN retransmit an overflowing accept queue causes.
    // (An attempt that got a connection another request opened records none.)
    let worst = connects.iter().max().expect("connect times recorded");
    assert!(*worst < Duration::from_secs(1), "worst connect {worst:?}");
    server.shutdown().await;
}
