//! A scripted HTTP/1.1 server on 127.0.0.1:0 for client tests: each request gets
//! the next scripted reply (the last one repeats), written as chosen bytes with
//! chosen delays, chunked, so a test controls exactly where reads split, when the
//! stream stalls, and whether it ends cleanly or is cut.

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// One piece of a reply body.
#[derive(Clone, Debug)]
pub enum Part {
    /// Bytes written (and flushed) as one HTTP chunk.
    Bytes(Vec<u8>),
    /// A pause.
    Delay(Duration),
}

/// How the reply body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyEnd {
    /// The terminating zero chunk; the connection stays open for the next request.
    Complete,
    /// The connection is closed without the terminating chunk (a cut stream).
    Cut,
    /// Nothing more is written for this long, then the connection is closed.
    Hang(Duration),
    /// The terminating chunk, keep-alive announced, then the connection is
    /// closed when the next request arrives on it, without a reply: the outcome
    /// of llama.cpp's close just after every streamed response, made certain.
    CloseAfter,
}

/// One scripted reply.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub parts: Vec<Part>,
    pub end: BodyEnd,
}

impl Reply {
    /// A 200 `text/event-stream` reply with these parts, ended cleanly.
    pub fn sse(parts: Vec<Part>) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            parts,
            end: BodyEnd::Complete,
        }
    }

    /// A reply with one body and a content type.
    pub fn body(status: u16, content_type: &str, body: &[u8]) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            parts: vec![Part::Bytes(body.to_vec())],
            end: BodyEnd::Complete,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn ending(mut self, end: BodyEnd) -> Reply {
        self.end = end;
        self
    }
}

/// The bytes of SSE `data:` events, one string each.
pub fn events(datas: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for d in datas {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(d.as_bytes());
        out.extend_from_slice(b"\n\n");
    }
    out
}

/// A request the server received.
#[derive(Clone, Debug)]
pub struct Received {
    /// The request line and headers, as text.
    pub head: String,
    pub body: Vec<u8>,
}

impl Received {
    /// The value of a header (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

pub struct ScriptServer {
    pub addr: std::net::SocketAddr,
    connections: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<Received>>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl ScriptServer {
    pub async fn start(replies: Vec<Reply>) -> ScriptServer {
        Self::start_with_backlog(replies, 1024).await
    }

    /// As [`ScriptServer::start`], with a listen backlog of `backlog` (the accept
    /// queue: connections the kernel completed and the server has not accepted).
    pub async fn start_with_backlog(replies: Vec<Reply>, backlog: u32) -> ScriptServer {
        assert!(!replies.is_empty());
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener: TcpListener = socket.listen(backlog).unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let received = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let next = Arc::new(AtomicUsize::new(0));
        let replies = Arc::new(replies);
        let task = {
            let (connections, received, stop) =
                (connections.clone(), received.clone(), stop.clone());
            tokio::spawn(async move {
                let mut conns = JoinSet::new();
                loop {
                    tokio::select! {
                        _ = stop.cancelled() => break,
                        a = listener.accept() => {
                            let Ok((sock, _)) = a else { continue };
                            connections.fetch_add(1, Ordering::SeqCst);
                            conns.spawn(serve(sock, replies.clone(), next.clone(), received.clone()));
                        }
                    }
                }
                conns.abort_all();
                while conns.join_next().await.is_some() {}
            })
        };
        ScriptServer {
            addr,
            connections,
            received,
            stop,
            task,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

async fn serve(
    mut sock: TcpStream,
    replies: Arc<Vec<Reply>>,
    next: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<Received>>>,
) {
    let _ = sock.set_nodelay(true);
    let mut buf = Vec::new();
    let mut served = 0u32;
    let mut closes_after = false;
    loop {
        // Read one request head and its Content-Length body.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut tmp = [0u8; 4096];
            match sock.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
        let len = head
            .lines()
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.trim()
                    .eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let mut tmp = [0u8; 4096];
            match sock.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        }
        let body = buf[head_end..head_end + len].to_vec();
        buf.drain(..head_end + len);
        received.lock().unwrap().push(Received { head, body });

        if served > 0 && closes_after {
            return;
        }
        served += 1;
        let i = next.fetch_add(1, Ordering::SeqCst);
        let reply = &replies[i.min(replies.len() - 1)];
        closes_after = reply.end == BodyEnd::CloseAfter;
        let mut out = format!(
            "HTTP/1.1 {} X\r\ntransfer-encoding: chunked\r\n",
            reply.status
        );
        for (n, v) in &reply.headers {
            out.push_str(&format!("{n}: {v}\r\n"));
        }
        out.push_str("\r\n");
        if sock.write_all(out.as_bytes()).await.is_err() {
            return;
        }
        for part in &reply.parts {
            match part {
                Part::Delay(d) => tokio::time::sleep(*d).await,
                Part::Bytes(b) if b.is_empty() => {}
                Part::Bytes(b) => {
                    let mut chunk = format!("{:x}\r\n", b.len()).into_bytes();
                    chunk.extend_from_slice(b);
                    chunk.extend_from_slice(b"\r\n");
                    if sock.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
            }
        }
        match reply.end {
            BodyEnd::Complete | BodyEnd::CloseAfter => {
                if sock.write_all(b"0\r\n\r\n").await.is_err() {
                    return;
                }
            }
            BodyEnd::Cut => return,
            BodyEnd::Hang(d) => {
                tokio::time::sleep(d).await;
                return;
            }
        }
    }
}
