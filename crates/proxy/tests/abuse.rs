//! Abuse of the proxy ("stays safe" in docs/proxy.md): ten thousand idle connections
//! while a stream is served, and a short header timeout closing all of them;
//! slowloris clients trickling HTTP/1 headers or the HTTP/2 preface, cut at the
//! header timeout while others are served; invalid JSON forwarded unparsed, the
//! upstream's 400 relayed byte for byte and recorded as an `http_4xx` span.
//! The 100 MB body is in proxy.rs; the proxy's memory under the same load is
//! measured by scripts/proxy-abuse.sh (a test process holds both ends of every
//! connection, so its own RSS says nothing about the proxy's).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tpscope_model::{Cause, Status};
use tpscope_sim::Speed;
use tpscope_stream::{Dialect, SseParser};

const IDLE: usize = 10_000;

/// Output tokens of an OpenAI stream, and whether it ended with `[DONE]`.
fn stream_tokens(body: &[u8]) -> (u64, bool) {
    let mut a = Dialect::OpenAi.account(true, false);
    let mut p = SseParser::new();
    let now = Instant::now();
    a.push(&mut p, body, now);
    a.end_of_body(&mut p, now);
    (a.tokens(), a.is_done())
}

/// One streamed completion of `n` tokens through `addr`, checked whole.
async fn served(addr: SocketAddr, model: &str, n: u32) {
    let r = post(addr, "/v1/chat/completions", &chat(model, true, n)).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.complete);
    assert_eq!(stream_tokens(&r.body), (u64::from(n), true), "{}", r.text());
}

/// Ten thousand connections held by a child process (this test binary run
/// again as [`idle_connection_holder`]): one process holding both ends of
/// every connection would need twice the descriptors, past many hard limits.
struct Holder {
    child: Child,
    out: BufReader<ChildStdout>,
}

const HOLD_ENV: &str = "TPSCOPE_TEST_HOLD_IDLE";

impl Holder {
    fn open(addr: SocketAddr, n: usize) -> Holder {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "idle_connection_holder", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(HOLD_ENV, format!("{addr} {n}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the holder starts");
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut h = Holder { child, out };
        assert_eq!(h.answer("open"), n, "the holder opened every connection");
        h
    }

    /// The number after the holder's next `HOLDER <what> <n>` line.
    fn answer(&mut self, what: &str) -> usize {
        let prefix = format!("HOLDER {what} ");
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.out.read_line(&mut line).unwrap();
            assert!(n > 0, "the holder ended early");
            // libtest may put its own `test … ` before the first line.
            if let Some(at) = line.find(&prefix) {
                return line[at + prefix.len()..].trim_end().parse().unwrap();
            }
        }
    }

    /// How many of its connections are still open and silent.
    fn still_open(&mut self) -> usize {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(b"count\n").unwrap();
        stdin.flush().unwrap();
        self.answer("silent")
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        // Its stdin closes: it drops its connections and exits.
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The child side of [`Holder`] (does nothing in a normal test run): opens the
/// connections, says so, then answers `count` lines on stdin until it closes.
#[test]
fn idle_connection_holder() {
    let Ok(spec) = std::env::var(HOLD_ENV) else {
        return;
    };
    let (addr, n) = spec.split_once(' ').unwrap();
    let addr: SocketAddr = addr.parse().unwrap();
    let n: usize = n.parse().unwrap();
    fd_room(n as u64 + 100).unwrap();
    let conns: Vec<std::net::TcpStream> = (0..n)
        .map(|_| std::net::TcpStream::connect_timeout(&addr, TIMEOUT).expect("connect"))
        .collect();
    println!("HOLDER open {}", conns.len());
    for line in std::io::stdin().lines() {
        if line.unwrap().trim() == "count" {
            let silent = conns.iter().filter(|c| !peer_acted(*c)).count();
            println!("HOLDER silent {silent}");
        }
    }
}

/// Runs blocking holder work on this multi-threaded test runtime.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_idle_connections_leave_streams_served_and_the_header_timeout_closes_them() {
    // This process holds the proxy's ends, the holder the clients'.
    if let Err(why) = fd_room(IDLE as u64 + 1000) {
        eprintln!("SKIPPED: {IDLE} idle connections: {why}");
        return;
    }
    let sim = sim(Speed::Max).await;
    let model = sim.model_name().to_string();
    let dir = tempfile::tempdir().unwrap();

    // A long header timeout: the idle connections stay while streams are served.
    let mut cfg = config(sim.addr(), &dir.path().join("a.jsonl"));
    cfg.header_timeout = Duration::from_secs(600);
    let p = proxy(cfg).await;
    let mut idle = blocking(|| Holder::open(p.addr(), IDLE));
    served(p.addr(), &model, 200).await;
    assert_eq!(blocking(|| idle.still_open()), IDLE, "none was shed");
    served(p.addr(), &model, 50).await;
    // A stop does not wait for clients that never spoke; the proxy closing
    // first also leaves the TIME_WAIT states on its side, not on 10,000 of
    // the machine's ephemeral ports.
    let counts = p.shutdown().await.unwrap();
    assert_eq!((counts.spans, counts.status.ok), (2, 2));
    blocking(|| drop(idle));

    // A short one: the proxy closes every idle connection, none of which ever
    // sent a byte (before the fix they waited in HTTP/1-or-2 detection, which
    // had no timeout, forever).
    let mut cfg = config(sim.addr(), &dir.path().join("b.jsonl"));
    cfg.header_timeout = Duration::from_millis(500);
    let p = proxy(cfg).await;
    let mut idle = blocking(|| Holder::open(p.addr(), IDLE));
    served(p.addr(), &model, 20).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let open = blocking(|| idle.still_open());
        if open == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{open} of {IDLE} idle connections still open 2 minutes after a 500 ms header timeout"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    served(p.addr(), &model, 20).await;
    blocking(|| drop(idle));
    p.shutdown().await.unwrap();
    sim.shutdown().await.unwrap();
}

/// Sends `bytes` one at a time, `every` apart, until the proxy closes or
/// answers; returns how many were sent by then (all of them: never cut).
async fn trickle(addr: SocketAddr, bytes: Vec<u8>, every: Duration) -> usize {
    let mut s = TcpStream::connect(addr).await.unwrap();
    for (i, b) in bytes.iter().enumerate() {
        if peer_acted(&s) || s.write_all(&[*b]).await.is_err() {
            return i;
        }
        tokio::time::sleep(every).await;
    }
    bytes.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_headers_and_a_trickled_http2_preface_are_cut_while_others_are_served() {
    let sim = sim(Speed::Max).await;
    let model = sim.model_name().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.jsonl");
    let mut cfg = config(sim.addr(), &out);
    cfg.header_timeout = Duration::from_secs(1);
    let p = proxy(cfg).await;
    let addr = p.addr();

    // 250 header bytes at 10 a second would take 25 s; the HTTP/2 preface at 4
    // a second 6 s: both far past the 1 s header timeout.
    let mut h1 = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-pad: ".to_vec();
    h1.extend(std::iter::repeat_n(b'a', 200));
    h1.extend_from_slice(b"\r\n\r\n");
    let h1_len = h1.len();
    let h2 = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    let h2_len = h2.len();
    let slow1 = tokio::spawn(trickle(addr, h1, Duration::from_millis(100)));
    let slow2 = tokio::spawn(trickle(addr, h2, Duration::from_millis(250)));

    let mut n = 0;
    loop {
        served(addr, &model, 10).await;
        n += 1;
        if slow1.is_finished() && slow2.is_finished() {
            break;
        }
    }
    let (sent1, sent2) = (slow1.await.unwrap(), slow2.await.unwrap());
    assert!(sent1 < h1_len, "the HTTP/1 slowloris was never cut");
    assert!(sent2 < h2_len, "the trickled HTTP/2 preface was never cut");
    served(addr, &model, 10).await;
    n += 1;
    let counts = p.shutdown().await.unwrap();
    // The trickled requests never became requests, so never spans.
    assert_eq!((counts.spans, counts.status.ok), (n, n));
    sim.shutdown().await.unwrap();
}

#[tokio::test]
async fn invalid_json_is_forwarded_unparsed_and_the_upstreams_400_is_relayed_and_recorded() {
    let sim = sim(Speed::Max).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.jsonl");
    let p = proxy(config(sim.addr(), &out)).await;
    let bad = b"{\"model\": \"x\", \"messages\": [".to_vec();

    let direct = send(
        sim.addr(),
        "POST",
        "/v1/chat/completions",
        bad.clone(),
        &[],
        false,
    )
    .await;
    let via = send(
        p.addr(),
        "POST",
        "/v1/chat/completions",
        bad.clone(),
        &[],
        false,
    )
    .await;
    assert_eq!(via.status, 400);
    assert_eq!(
        (via.status, via.text()),
        (direct.status, direct.text()),
        "relayed unchanged"
    );
    assert_eq!(via.headers["content-type"], direct.headers["content-type"]);
    // Not a completion path: relayed too, and no span.
    let other = send(p.addr(), "POST", "/v1/embeddings", bad, &[], false).await;
    let other_direct = send(
        sim.addr(),
        "POST",
        "/v1/embeddings",
        b"{".to_vec(),
        &[],
        false,
    )
    .await;
    assert_eq!(other.status, other_direct.status);
    served(p.addr(), sim.model_name(), 5).await;

    let counts = p.shutdown().await.unwrap();
    assert_eq!(
        (counts.spans, counts.status.ok, counts.status.error),
        (2, 1, 1)
    );
    let spans = spans(&out);
    let s = spans.iter().find(|s| s.status == Status::Error).unwrap();
    let e = s.error.as_ref().unwrap();
    assert_eq!(e.cause, Cause::Http4xx);
    assert!(
        e.message
            .starts_with("HTTP 400: the request body is not valid JSON"),
        "{}",
        e.message
    );
    assert_eq!((s.output_tokens, s.input_tokens), (0, None));
    assert_eq!(s.attempts.len(), 1);
    assert_eq!(s.attempts[0].http_status, Some(400));
    sim.shutdown().await.unwrap();
}
