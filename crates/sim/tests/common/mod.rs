//! Test helpers: start a simulator on 127.0.0.1:0 and talk to it over real sockets
//! with hyper (one connection per request, every wait bounded).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header::HeaderMap;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tpscope_sim::{SimConfig, SimHandle, Speed};

/// Every request in the tests finishes within this.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// A simulator at full speed with the default model, for functional tests.
pub fn fast_config() -> SimConfig {
    SimConfig {
        speed: Speed::Max,
        ..SimConfig::default()
    }
}

pub async fn start(cfg: SimConfig) -> SimHandle {
    tpscope_sim::start(cfg, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("simulator starts")
}

/// A response read to its end (or to a body error).
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    /// Body frames with the instant each arrived.
    pub frames: Vec<(Instant, Bytes)>,
    /// The body ended cleanly (no connection error mid-body).
    pub complete: bool,
    /// When the request was sent.
    pub sent_at: Instant,
}

impl Resp {
    pub fn body(&self) -> Vec<u8> {
        self.frames
            .iter()
            .flat_map(|(_, b)| b.iter().copied())
            .collect()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body()).expect("body is JSON")
    }

    /// SSE `data:` payloads in order, with the arrival instant of their frame.
    pub fn events(&self) -> Vec<(Instant, String)> {
        let mut out = Vec::new();
        let mut pending = String::new();
        for (t, b) in &self.frames {
            pending.push_str(std::str::from_utf8(b).expect("utf-8"));
            while let Some(i) = pending.find("\n\n") {
                let ev: String = pending[..i].to_string();
                pending.drain(..i + 2);
                for line in ev.lines() {
                    if let Some(d) = line.strip_prefix("data: ") {
                        out.push((*t, d.to_string()));
                    }
                }
            }
        }
        out
    }
}

/// Sends one request on a fresh connection and reads the whole response.
pub async fn send(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Resp {
    tokio::time::timeout(TIMEOUT, send_inner(addr, method, path, body))
        .await
        .expect("request finished in time")
}

async fn send_inner(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Resp {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(bytes)))
        .unwrap();
    let sent_at = Instant::now();
    let resp = sender.send_request(req).await.expect("response head");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let mut body = resp.into_body();
    let mut frames = Vec::new();
    let mut complete = true;
    loop {
        match body.frame().await {
            None => break,
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    frames.push((Instant::now(), d));
                }
            }
            Some(Err(_)) => {
                complete = false;
                break;
            }
        }
    }
    Resp {
        status,
        headers,
        frames,
        complete,
        sent_at,
    }
}

pub async fn post(addr: SocketAddr, path: &str, body: &Value) -> Resp {
    send(addr, "POST", path, Some(body)).await
}

pub async fn get(addr: SocketAddr, path: &str) -> Resp {
    send(addr, "GET", path, None).await
}
