//! The proxy's upstream connections (plain HTTP): a connection serves the
//! next request once a stream ended whole, one the upstream closed while idle is
//! replaced, and one whose client went away mid-stream is closed (the upstream
//! sees it). The upstream is a minimal HTTP/1.1 server that counts connections.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tpscope_model::Status;

/// An OpenAI stream of `n` content chunks with usage, chunked.
fn stream_body(n: usize) -> Vec<u8> {
    let mut events = vec![r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#.to_string()];
    for i in 0..n {
        events.push(format!(r#"{{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"content":"w{i} "}},"finish_reason":null}}]}}"#));
    }
    events.push(r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#.to_string());
    events.push(format!(r#"{{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{{"prompt_tokens":3,"completion_tokens":{n},"total_tokens":{}}}}}"#, n + 3));
    events.push("[DONE]".into());
    let mut out = Vec::new();
    for e in events {
        let ev = format!("data: {e}\n\n");
        out.extend_from_slice(format!("{:x}\r\n{ev}\r\n", ev.len()).as_bytes());
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// Reads one request (head and `content-length` body); false at EOF.
async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                buf.drain(..end + 4 + len);
                return true;
            }
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A keep-alive upstream answering every request with a stream of 5 tokens;
/// with `close`, it closes each connection after its first response (without
/// saying so). Counts the connections it accepted and those its peer closed.
async fn upstream(close: bool) -> (SocketAddr, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (accepted, closed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (a, c) = (accepted.clone(), closed.clone());
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            a.fetch_add(1, Ordering::SeqCst);
            let c = c.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while read_request(&mut s, &mut buf).await {
                    let body = stream_body(5);
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                                transfer-encoding: chunked\r\n\r\n";
                    if s.write_all(head.as_bytes()).await.is_err()
                        || s.write_all(&body).await.is_err()
                    {
                        break;
                    }
                    if close {
                        return;
                    }
                }
                c.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    (addr, accepted, closed)
}

#[tokio::test]
async fn sequential_streams_reuse_one_upstream_connection() {
    let (up, accepted, _) = upstream(false).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    // Each serving thread pools its own upstream connections: one thread, one.
    let mut cfg = config(up, &out);
    cfg.threads = Some(1);
    let p = proxy(cfg).await;
    for _ in 0..3 {
        let r = post(p.addr(), "/v1/chat/completions", &chat("m", true, 5)).await;
        assert_eq!(r.status, 200);
        assert!(r.complete && r.text().contains("[DONE]"), "{}", r.text());
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one upstream connection"
    );
    p.shutdown().await.unwrap();
    let spans = spans(&out);
    assert_eq!(spans.len(), 3);
    for s in &spans {
        s.validate().unwrap();
        assert_eq!(s.status, Status::Ok, "{s:?}");
        assert_eq!(s.output_tokens, 5);
    }
}

#[tokio::test]
async fn an_idle_upstream_connection_the_upstream_closed_is_replaced() {
    let (up, accepted, _) = upstream(true).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let p = proxy(config(up, &out)).await;
    for _ in 0..3 {
        let r = post(p.addr(), "/v1/chat/completions", &chat("m", true, 5)).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(r.complete && r.text().contains("[DONE]"), "{}", r.text());
        // The upstream's close reaches the proxy before the next request.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
    p.shutdown().await.unwrap();
    let spans = spans(&out);
    assert_eq!(spans.len(), 3);
    assert!(
        spans
            .iter()
            .all(|s| s.status == Status::Ok && s.output_tokens == 5)
    );
}

#[tokio::test]
async fn a_client_leaving_mid_stream_closes_its_upstream_connection() {
    // An upstream that sends the head and one event, then holds the stream open.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = l.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut buf = Vec::new();
        assert!(read_request(&mut s, &mut buf).await);
        let ev = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n";
        let msg = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{ev}\r\n",
            ev.len()
        );
        s.write_all(msg.as_bytes()).await.unwrap();
        // The proxy closes its side once the client has gone.
        let mut rest = [0u8; 64];
        let n = tokio::time::timeout(TIMEOUT, s.read(&mut rest)).await;
        let _ = tx.send(matches!(n, Ok(Ok(0)) | Ok(Err(_))));
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let p = proxy(config(up, &out)).await;
    let mut c = TcpStream::connect(p.addr()).await.unwrap();
    let body = chat("m", true, 5).to_string();
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    c.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("\"a\"") {
        let n = tokio::time::timeout(TIMEOUT, c.read(&mut chunk))
            .await
            .expect("the first event in time")
            .unwrap();
        assert!(n > 0, "the proxy closed early");
        got.extend_from_slice(&chunk[..n]);
    }
    drop(c);
    assert!(rx.await.unwrap(), "the upstream connection was closed");
    p.shutdown().await.unwrap();
    let s = &spans(&out)[0];
    assert_eq!(s.status, Status::Cancelled, "{s:?}");
    assert_eq!(s.output_tokens, 1);
}

/// Each serving thread keeps its own pool (so a stream's two connections are
/// served by one thread): sequential requests on new client connections open
/// at most one upstream connection per thread, not one per request.
#[tokio::test]
async fn each_serving_thread_reuses_its_own_upstream_connection() {
    let (up, accepted, _) = upstream(false).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let mut cfg = config(up, &out);
    cfg.threads = Some(3);
    let p = proxy(cfg).await;
    for _ in 0..9 {
        let r = post(p.addr(), "/v1/chat/completions", &chat("m", true, 5)).await;
        assert_eq!(r.status, 200);
        assert!(r.complete && r.text().contains("[DONE]"), "{}", r.text());
    }
    let n = accepted.load(Ordering::SeqCst);
    assert!(
        (1..=3).contains(&n),
        "{n} upstream connections for 3 threads"
    );
    p.shutdown().await.unwrap();
    let spans = spans(&out);
    assert_eq!(spans.len(), 9);
    assert!(
        spans
            .iter()
            .all(|s| s.status == Status::Ok && s.output_tokens == 5)
    );
}

#[tokio::test]
async fn a_proxy_without_serving_threads_is_refused_before_it_binds() {
    let (up, _, _) = upstream(false).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(up, &dir.path().join("p.jsonl"));
    cfg.threads = Some(0);
    let err = tpscope_proxy::start(cfg).await.err().expect("refused");
    assert!(
        err.to_string().contains("at least one serving thread"),
        "{err}"
    );
    assert!(!dir.path().join("p.jsonl").exists(), "no run was started");
}
