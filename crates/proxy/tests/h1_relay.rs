//! The proxy's own HTTP/1.1 relay (plain-HTTP upstreams) as a client sees it:
//! every response framing reaches the client whole, pipelined requests are
//! answered in order, a request the relay leaves to hyper (a chunked body,
//! HTTP/1.0) is served on the same connection, a malformed upstream body fails
//! the span and ends the client's connection, a silent upstream is a 504, and
//! `Connection: close` is honoured. The upstream is scripted by request path.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tpscope_model::{Cause, Status};

const SSE: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n";

/// The raw response the upstream gives to `path`, and whether it then closes.
fn script(path: &str) -> (Vec<u8>, bool) {
    let head = |extra: &str| format!("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n{extra}\r\n");
    match path {
        "/length" => (
            format!("{}twelve bytes", head("content-length: 12\r\n")).into(),
            false,
        ),
        "/until-close" => (format!("{}all until the close", head("")).into(), true),
        "/trailers" => (
            format!(
                "{}5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nx-checksum: 1\r\n\r\n",
                head("transfer-encoding: chunked\r\n")
            )
            .into(),
            false,
        ),
        "/empty" => ("HTTP/1.1 204 No Content\r\n\r\n".into(), false),
        "/informational" => (
            format!(
                "HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n{}ok",
                head("content-length: 2\r\n")
            )
            .into(),
            false,
        ),
        "/v1/chat/completions" => {
            let mut b = head("transfer-encoding: chunked\r\n").into_bytes();
            b.extend_from_slice(format!("{:x}\r\n{SSE}\r\n", SSE.len()).as_bytes());
            b.extend_from_slice(b"zz\r\n");
            (b, true)
        }
        "/silent" => (Vec::new(), false),
        other => (
            format!(
                "{}{other}",
                head(&format!("content-length: {}\r\n", other.len()))
            )
            .into(),
            false,
        ),
    }
}

/// Reads one request (head, and a `content-length` or chunked body); its head
/// and body, or `None` at EOF.
async fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let lower = head.to_ascii_lowercase();
            let body = if lower.contains("transfer-encoding: chunked") {
                dechunk(&buf[end + 4..])
            } else {
                let len: usize = lower
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:").map(str::to_string))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                (buf.len() >= end + 4 + len).then(|| (buf[end + 4..end + 4 + len].to_vec(), len))
            };
            if let Some((body, used)) = body {
                buf.drain(..end + 4 + used);
                return Some((head, body));
            }
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A whole chunked body at the start of `b` (no extensions, no trailers): its
/// data and its length on the wire; `None` while incomplete.
fn dechunk(b: &[u8]) -> Option<(Vec<u8>, usize)> {
    let (mut data, mut at) = (Vec::new(), 0);
    loop {
        let line = b[at..].windows(2).position(|w| w == b"\r\n")?;
        let n = usize::from_str_radix(std::str::from_utf8(&b[at..at + line]).ok()?, 16).ok()?;
        at += line + 2;
        if b.len() < at + n + 2 {
            return None;
        }
        data.extend_from_slice(&b[at..at + n]);
        at += n + 2;
        if n == 0 {
            return Some((data, at));
        }
    }
}

/// A keep-alive upstream answering each request by its path ([`script`]);
/// every request it read (head, body) goes to the receiver.
async fn upstream() -> (SocketAddr, mpsc::UnboundedReceiver<(String, Vec<u8>)>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while let Some((head, body)) = read_request(&mut s, &mut buf).await {
                    let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                    let _ = tx.send((head, body));
                    if path == "/silent" {
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        return;
                    }
                    let (bytes, close) = script(&path);
                    if s.write_all(&bytes).await.is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    (addr, rx)
}

/// Sends `req` on an open hyper connection; status, headers and body.
async fn on(
    s: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    method: &str,
    path: &str,
) -> (u16, hyper::HeaderMap, Vec<u8>) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "proxy")
        .body(Full::new(Bytes::from_static(b"{}")))
        .unwrap();
    let res = tokio::time::timeout(TIMEOUT, s.send_request(req))
        .await
        .expect("in time")
        .expect("response head");
    let (status, headers) = (res.status().as_u16(), res.headers().clone());
    let body = tokio::time::timeout(TIMEOUT, res.into_body().collect())
        .await
        .expect("in time")
        .expect("whole body")
        .to_bytes();
    (status, headers, body.to_vec())
}

/// What a test holds: the span log's directory, the proxy, the upstream's
/// address and what it read.
type Proxied = (
    tempfile::TempDir,
    tpscope_proxy::ProxyHandle,
    SocketAddr,
    mpsc::UnboundedReceiver<(String, Vec<u8>)>,
);

async fn proxied() -> Proxied {
    let (up, seen) = upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(up, &dir.path().join("spans.jsonl"));
    cfg.upstream_timeout = Duration::from_millis(500);
    (dir, proxy(cfg).await, up, seen)
}

/// Writes `raw` on a new connection to `addr` and reads until the proxy closes
/// it (`why` says why it should).
async fn raw_exchange(addr: SocketAddr, raw: &[u8], why: &str) -> String {
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(raw).await.unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(TIMEOUT, c.read_to_end(&mut all))
        .await
        .expect(why)
        .unwrap();
    String::from_utf8_lossy(&all).into_owned()
}

#[tokio::test]
async fn every_response_framing_reaches_the_client_whole_on_one_connection() {
    let (_dir, p, up, mut seen) = proxied().await;
    let tcp = TcpStream::connect(p.addr()).await.unwrap();
    let (mut s, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let (st, h, b) = on(&mut s, "POST", "/length").await;
    assert_eq!((st, b.as_slice()), (200, &b"twelve bytes"[..]));
    assert_eq!(h["content-length"], "12", "a sized body keeps its length");
    let (st, h, b) = on(&mut s, "GET", "/until-close").await;
    assert_eq!((st, b.as_slice()), (200, &b"all until the close"[..]));
    assert_eq!(
        h["transfer-encoding"], "chunked",
        "an unframed body is chunked"
    );
    let (st, _, b) = on(&mut s, "POST", "/trailers").await;
    assert_eq!((st, b.as_slice()), (200, &b"hello world"[..]));
    let (st, _, b) = on(&mut s, "POST", "/empty").await;
    assert_eq!((st, b.len()), (204, 0));
    let (st, _, b) = on(&mut s, "POST", "/informational").await;
    assert_eq!(
        (st, b.as_slice()),
        (200, &b"ok"[..]),
        "a 1xx head is not the response"
    );
    // What the upstream read: the upstream's Host, the body with its length.
    let (head, body) = seen.recv().await.unwrap();
    let lower = head.to_ascii_lowercase();
    assert!(lower.starts_with("post /length http/1.1\r\n"), "{head}");
    assert!(
        lower.contains(&format!("host: {up}")),
        "the upstream's own: {head}"
    );
    assert!(lower.contains("content-length: 2"), "{head}");
    assert_eq!(body, b"{}");
    p.shutdown().await.unwrap();
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_and_connection_close_is_honoured() {
    let (_dir, p, _, _seen) = proxied().await;
    let text = raw_exchange(
        p.addr(),
        b"GET /first HTTP/1.1\r\nhost: p\r\n\r\nGET /second HTTP/1.1\r\nhost: p\r\n\
          connection: close\r\n\r\n",
        "the proxy closes after the second",
    )
    .await;
    let (first, second) = (text.find("/first").unwrap(), text.find("/second").unwrap());
    assert!(first < second, "{text}");
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 2, "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    p.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_request_the_relay_leaves_to_hyper_is_served_on_the_same_connection() {
    let (_dir, p, _, mut seen) = proxied().await;
    // The relay's, then a chunked request body (hyper's), then the relay can
    // no longer take the connection back: HTTP/1.0 is hyper's too.
    let text = raw_exchange(
        p.addr(),
        b"POST /one HTTP/1.1\r\nhost: p\r\ncontent-length: 1\r\n\r\nx\
          POST /two HTTP/1.1\r\nhost: p\r\ntransfer-encoding: chunked\r\n\r\n\
          5\r\nhello\r\n0\r\n\r\n\
          GET /three HTTP/1.0\r\n\r\n",
        "HTTP/1.0 closes",
    )
    .await;
    let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} in {text}"));
    assert!(
        at("/one") < at("/two") && at("/two") < at("/three"),
        "{text}"
    );
    let bodies: Vec<Vec<u8>> = (0..3).map(|_| seen.try_recv().unwrap().1).collect();
    assert_eq!(bodies, [b"x".to_vec(), b"hello".to_vec(), vec![]]);
    p.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_malformed_upstream_body_fails_the_span_and_ends_the_clients_connection() {
    let (dir, p, _, _seen) = proxied().await;
    let body = chat("m", true, 5).to_string();
    let raw = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: p\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let text = raw_exchange(p.addr(), raw.as_bytes(), "the proxy closes the connection").await;
    assert!(
        text.contains("\"hi\""),
        "the data before the break is relayed: {text}"
    );
    assert!(
        !text.ends_with("0\r\n\r\n"),
        "no last chunk after a break: {text}"
    );
    p.shutdown().await.unwrap();
    let spans = spans(&dir.path().join("spans.jsonl"));
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].status, Status::Error);
    assert_eq!(
        spans[0].error.as_ref().map(|e| e.cause),
        Some(Cause::Disconnect)
    );
    let error = spans[0].error.as_ref().unwrap();
    assert!(
        error.message.contains("chunked body is malformed"),
        "{}",
        error.message
    );
}

#[tokio::test]
async fn an_upstream_silent_past_the_upstream_timeout_is_a_504() {
    let (_dir, p, _, _seen) = proxied().await;
    let r = send(p.addr(), "POST", "/silent", b"{}".to_vec(), &[], false).await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert!(
        r.text().contains("sent no response within 500ms"),
        "{}",
        r.text()
    );
    p.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_head_that_arrives_in_pieces_is_served_when_it_is_whole() {
    let (_dir, p, _, mut seen) = proxied().await;
    let mut c = TcpStream::connect(p.addr()).await.unwrap();
    // Pieces that end no line, one that ends a line, then the head's end.
    for piece in [
        &b"GET /pie"[..],
        b"ces HT",
        b"TP/1.1\r\nhost: p\r\n",
        b"\r\n",
    ] {
        c.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut got = vec![0u8; 4096];
    let n = tokio::time::timeout(TIMEOUT, c.read(&mut got))
        .await
        .expect("answered")
        .unwrap();
    let text = String::from_utf8_lossy(&got[..n]);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.ends_with("/pieces"), "{text}");
    assert!(
        seen.recv()
            .await
            .unwrap()
            .0
            .starts_with("GET /pieces HTTP/1.1")
    );
    p.shutdown().await.unwrap();
}

/// Broke (in the relay's first form): a request's span began only once its body
/// had arrived, so a slow upload was outside the span; hyper's path starts it at
/// the head and counts the upload in the time to first token.
#[tokio::test]
async fn a_slow_upload_is_inside_the_span_and_not_queue_time() {
    let sim = sim(tpscope_sim::Speed::Max).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("spans.jsonl");
    let p = proxy(config(sim.addr(), &out)).await;
    let body = chat(sim.model_name(), true, 3).to_string();
    let mut c = TcpStream::connect(p.addr()).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: p\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.write_all(body.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(TIMEOUT, c.read_to_end(&mut all))
        .await
        .expect("answered")
        .unwrap();
    let text = String::from_utf8_lossy(&all);
    assert!(text.contains("[DONE]"), "{text}");
    p.shutdown().await.unwrap();
    let spans = spans(&out);
    assert_eq!(spans.len(), 1);
    let s = &spans[0];
    let queued = s.admitted_at.unwrap().since(s.queued_at).unwrap();
    assert!(queued < Duration::from_millis(100), "queued {queued:?}");
    let ttft = s
        .first_token_at
        .unwrap()
        .since(s.admitted_at.unwrap())
        .unwrap();
    assert!(
        ttft >= Duration::from_millis(250),
        "the upload is in TTFT: {ttft:?}"
    );
}
