//! Helpers of the proxy tests: a simulator and a proxy on 127.0.0.1:0, one
//! request per fresh connection (HTTP/1.1, or HTTP/2 prior knowledge), and the
//! span log read back. Every wait is bounded.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header::HeaderMap;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tpscope_model::{Record, Span};
use tpscope_proxy::{ProxyConfig, ProxyHandle};
use tpscope_sim::{SimConfig, SimHandle, Speed};

pub const TIMEOUT: Duration = Duration::from_secs(30);

pub async fn sim(speed: Speed) -> SimHandle {
    let cfg = SimConfig {
        speed,
        ..SimConfig::default()
    };
    sim_with(cfg).await
}

pub async fn sim_with(cfg: SimConfig) -> SimHandle {
    tpscope_sim::start(cfg, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("simulator starts")
}

pub fn config(upstream: SocketAddr, out: &Path) -> ProxyConfig {
    let mut c = ProxyConfig::new(format!("http://{upstream}"));
    c.listen = "127.0.0.1:0".parse().unwrap();
    c.out = Some(out.to_path_buf());
    c.sample_interval = Duration::from_millis(5);
    c
}

pub async fn proxy(cfg: ProxyConfig) -> ProxyHandle {
    tpscope_proxy::start(cfg).await.expect("proxy starts")
}

pub fn chat(model: &str, stream: bool, max_tokens: u32) -> Value {
    json!({
        "model": model,
        "messages": [{"role": "user", "content": "Tell me about rivers."}],
        "stream": stream,
        "stream_options": if stream { json!({"include_usage": true}) } else { Value::Null },
        "max_tokens": max_tokens,
        "ignore_eos": true,
    })
}

/// A response read to its end.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    pub frames: usize,
    pub complete: bool,
}

impl Resp {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Vec<u8>,
    headers: &[(&str, &str)],
    h2: bool,
) -> Resp {
    let req = request(addr, method, path, body, headers, h2);
    let read = async move {
        let (resp, _, _) = send_new(addr, req, h2).await;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let mut body = resp.into_body();
        let mut out = Vec::new();
        let mut frames = 0;
        let mut complete = true;
        loop {
            match body.frame().await {
                None => break,
                Some(Ok(f)) => {
                    if let Ok(d) = f.into_data() {
                        frames += 1;
                        out.extend_from_slice(&d);
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
            body: out,
            frames,
            complete,
        }
    };
    tokio::time::timeout(TIMEOUT, read)
        .await
        .expect("request finished in time")
}

/// A request to `addr` as the tests send one: a JSON `body`, `headers`, and
/// `Host` over HTTP/1.1.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Vec<u8>,
    headers: &[(&str, &str)],
    h2: bool,
) -> Request<Full<Bytes>> {
    let mut b = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("content-type", "application/json");
    if !h2 {
        b = b.header("host", addr.to_string());
    }
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(Full::new(Bytes::from(body))).unwrap()
}

/// An HTTP/2 connection's sender: kept by a test that resets one stream and
/// keeps the connection.
pub type H2Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// Sends `req` on a new connection to `addr` (HTTP/1.1, or HTTP/2 prior
/// knowledge); the response head (within [`TIMEOUT`]), the HTTP/2 sender, and
/// the connection's task (aborting it closes an HTTP/1.1 connection).
pub async fn send_new(
    addr: SocketAddr,
    req: Request<Full<Bytes>>,
    h2: bool,
) -> (
    hyper::Response<hyper::body::Incoming>,
    Option<H2Sender>,
    tokio::task::JoinHandle<()>,
) {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (sent, sender, conn) = if h2 {
        let (mut s, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .expect("h2 handshake");
        let conn = tokio::spawn(async move {
            let _ = conn.await;
        });
        let sent = tokio::time::timeout(TIMEOUT, s.send_request(req)).await;
        (sent, Some(s), conn)
    } else {
        let (mut s, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        let conn = tokio::spawn(async move {
            let _ = conn.await;
        });
        (
            tokio::time::timeout(TIMEOUT, s.send_request(req)).await,
            None,
            conn,
        )
    };
    let resp = sent.expect("response head in time").expect("response head");
    (resp, sender, conn)
}

pub async fn post(addr: SocketAddr, path: &str, v: &Value) -> Resp {
    send(addr, "POST", path, v.to_string().into_bytes(), &[], false).await
}

pub fn records(path: &Path) -> Vec<Record> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

pub fn spans(path: &Path) -> Vec<Span> {
    spans_of(&records(path)).into_iter().cloned().collect()
}

/// The spans among `records`.
pub fn spans_of(records: &[Record]) -> Vec<&Span> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Span(s) => Some(s),
            _ => None,
        })
        .collect()
}

/// A long streamed chat completion of `model` to `addr` (2,000 tokens).
pub fn long_chat(addr: SocketAddr, model: &str, h2: bool) -> Request<Full<Bytes>> {
    let body = chat(model, true, 2000).to_string().into_bytes();
    request(addr, "POST", "/v1/chat/completions", body, &[], h2)
}

/// Makes room for `need` open files (each connection is one, and a test that
/// holds both ends of ten thousand connections needs twice that): the soft
/// limit up to the hard one, and the hard one too where the process may (root).
/// `Err` says why there is no room, for a test to skip with.
pub fn fd_room(need: u64) -> Result<u64, String> {
    // SAFETY: getrlimit/setrlimit only read/write the struct passed.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return Err(format!(
                "getrlimit(RLIMIT_NOFILE): {}",
                std::io::Error::last_os_error()
            ));
        }
        #[allow(clippy::unnecessary_cast)]
        let (cur, max) = (r.rlim_cur as u64, r.rlim_max as u64);
        if cur >= need {
            return Ok(cur);
        }
        let want = libc::rlimit {
            rlim_cur: need.max(cur) as libc::rlim_t,
            rlim_max: need.max(max) as libc::rlim_t,
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
            return Err(format!(
                "needs {need} open files; the limit is {cur} (hard {max}) and cannot be raised: {} \
                 (raise it with `ulimit -n {need}`)",
                std::io::Error::last_os_error()
            ));
        }
        Ok(need)
    }
}

/// Whether the other end closed or answered (`recv` with `MSG_PEEK`, without
/// waiting and without Tokio's readiness cache): `false` means the connection
/// is open and silent.
pub fn peer_acted(s: &impl std::os::fd::AsRawFd) -> bool {
    let mut b = [0u8; 1];
    // SAFETY: a one-byte buffer we own, a descriptor the stream owns.
    let n = unsafe {
        libc::recv(
            s.as_raw_fd(),
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    !(n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::WouldBlock)
}

/// A value of Prometheus text: the first sample named `name` whose labels
/// hold `label` (`""` for any).
pub fn metric(text: &str, name: &str, label: &str) -> Option<f64> {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(['{', ' ']))
                && l.contains(label)
        })
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The Python with the official SDKs (`scripts/sdk-venv.sh`):
/// `TPSCOPE_OPENAI_PYTHON`, else the workspace's `.venv-sdk`.
pub fn sdk_python() -> std::path::PathBuf {
    match std::env::var_os("TPSCOPE_OPENAI_PYTHON") {
        Some(p) => p.into(),
        None => {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv-sdk/bin/python")
        }
    }
}

/// Runs a Python `script` with `args` under [`sdk_python`] (off the runtime's
/// threads) and returns the JSON it printed; a failing script fails the test.
pub async fn run_sdk_script(script: &'static str, args: Vec<String>) -> Value {
    let output = tokio::task::spawn_blocking(move || {
        let py = sdk_python();
        std::process::Command::new(&py)
            .arg("-c")
            .arg(script)
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run {}: {e} (run scripts/sdk-venv.sh)", py.display())
            })
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the SDK script failed (run scripts/sdk-venv.sh):\n{stderr}"
    );
    serde_json::from_slice(&output.stdout).expect("script prints JSON")
}
