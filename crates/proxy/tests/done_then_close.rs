//! A client that closes its connection as soon as it has read the stream's end
//! marker (the openai Python SDK does, after `data: [DONE]`) did not cancel a
//! response that was whole: the span is ok, with its tokens. Seen as 1 request
//! in 48 of an SDK pipeline through the proxy, recorded `cancelled` ("the client
//! went away after 64 output tokens") when the client's close beat the end of
//! the upstream's body by a hair. Here the upstream holds its body open after
//! the marker, so the close always comes first.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tpscope_model::Status;

const EVENTS: &str = concat!(
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",",
    "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":null}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",",
    "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[],",
    "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_closes_after_the_end_marker_did_not_cancel() {
    // An upstream that sends the whole stream, then keeps its body open a
    // while before the chunked body's end.
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_addr = upstream.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut s, _) = upstream.accept().await.unwrap();
        let mut req = Vec::new();
        let mut buf = [0u8; 4096];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0, "the request");
            req.extend_from_slice(&buf[..n]);
        }
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                    transfer-encoding: chunked\r\n\r\n";
        let chunk = format!("{:X}\r\n{EVENTS}\r\n", EVENTS.len());
        s.write_all(format!("{head}{chunk}").as_bytes())
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let _ = s.write_all(b"0\r\n\r\n").await;
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let p = proxy(config(up_addr, &out)).await;
    let addr = p.addr();
    // The client reads up to the marker and closes at once.
    tokio::task::spawn_blocking(move || {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(TIMEOUT)).unwrap();
        let body = chat("m", true, 1).to_string();
        write!(
            c,
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
        while !got.windows(6).any(|w| w == b"[DONE]") {
            let n = c.read(&mut buf).unwrap();
            assert!(n > 0, "{}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .unwrap();
    server.await.unwrap();
    p.shutdown().await.unwrap();
    let spans = spans(&out);
    assert_eq!(spans.len(), 1, "{spans:?}");
    let s = &spans[0];
    assert_eq!(s.status, Status::Ok, "{s:?}");
    assert_eq!((s.output_tokens, s.input_tokens), (1, Some(3)));
    assert_eq!(s.finish_reason.as_deref(), Some("stop"));
}
