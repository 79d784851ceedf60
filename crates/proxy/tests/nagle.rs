//! An upstream that leaves Nagle's algorithm on (no `TCP_NODELAY`: cpp-httplib's
//! default, and the kernel's for any server that does not set it; llama.cpp's
//! server sets it) holds each small write until the previous one is acknowledged. A relay that delays its ACKs to the upstream (`TCP_QUICKACK`
//! off after each read, tried to save the ACK each read sends) then stalls such
//! a stream by the delayed-ACK timer, ~40 ms, on every other event: measured on
//! loopback at one event per 5 ms, 47 of 200 events came more than 30 ms late
//! and the median delay was 17.7 ms. This test relays such a stream and counts
//! the late events: a relay that stalls it fails by a wide margin, a loaded
//! machine's scheduling noise does not.

mod common;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use tpscope_model::Status;

/// Content events, one every [`PERIOD`].
const EVENTS: usize = 200;
const PERIOD: Duration = Duration::from_millis(5);
/// An event later than this after its write was stalled (a delayed ACK waits
/// 40 ms; the relay itself adds well under a millisecond).
const LATE: Duration = Duration::from_millis(30);

const CONTENT: &str = "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\
    \"choices\":[{\"index\":0,\"delta\":{\"content\":\" w\"},\"finish_reason\":null}]}\n\n";
const TAIL: &str = concat!(
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",",
    "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[],",
    "\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":200,\"total_tokens\":203}}\n\n",
    "data: [DONE]\n\n",
);

/// One HTTP chunk in one `write` (one small segment, which Nagle may hold).
fn chunk(s: &mut std::net::TcpStream, data: &str) {
    s.write_all(format!("{:X}\r\n{data}\r\n", data.len()).as_bytes())
        .unwrap();
}

/// The upstream: Nagle left on, the head, then [`EVENTS`] content events one
/// per [`PERIOD`], each in its own write whose instant goes to `sent`.
fn serve(listener: std::net::TcpListener, sent: Arc<Mutex<Vec<Instant>>>) {
    let (mut s, _) = listener.accept().unwrap();
    assert!(!s.nodelay().unwrap(), "the upstream keeps Nagle on");
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    let (mut req, mut buf) = (Vec::new(), [0u8; 4096]);
    while !req.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "the request");
        req.extend_from_slice(&buf[..n]);
    }
    s.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
    )
    .unwrap();
    for _ in 0..EVENTS {
        sent.lock().unwrap().push(Instant::now());
        chunk(&mut s, CONTENT);
        std::thread::sleep(PERIOD);
    }
    chunk(&mut s, TAIL);
    s.write_all(b"0\r\n\r\n").unwrap();
}

/// The client: the request, then the arrival instant of every event (an
/// event ends with a blank line; the chunked framing has none).
fn read_events(addr: std::net::SocketAddr) -> Vec<Instant> {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    c.set_read_timeout(Some(TIMEOUT)).unwrap();
    let body = chat("m", true, EVENTS as u32).to_string();
    write!(
        c,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let (mut got, mut buf, mut scanned) = (Vec::new(), [0u8; 65536], 0);
    let mut arrivals = Vec::new();
    loop {
        let n = c.read(&mut buf).unwrap();
        if n == 0 {
            return arrivals;
        }
        let now = Instant::now();
        got.extend_from_slice(&buf[..n]);
        while let Some(i) = got[scanned..].windows(2).position(|w| w == b"\n\n") {
            arrivals.push(now);
            scanned += i + 2;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_with_nagle_on_is_relayed_without_delayed_ack_stalls() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let up_addr = listener.local_addr().unwrap();
    let sent = Arc::new(Mutex::new(Vec::new()));
    let server = std::thread::spawn({
        let sent = sent.clone();
        move || serve(listener, sent)
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let p = proxy(config(up_addr, &out)).await;
    let addr = p.addr();
    let arrivals = tokio::task::spawn_blocking(move || read_events(addr))
        .await
        .unwrap();
    server.join().unwrap();
    p.shutdown().await.unwrap();

    let sent = sent.lock().unwrap().clone();
    // The content events, then the finish, the usage and the end marker.
    assert_eq!(arrivals.len(), EVENTS + 3);
    let mut delays: Vec<Duration> = sent
        .iter()
        .zip(&arrivals)
        .map(|(s, a)| a.saturating_duration_since(*s))
        .collect();
    let late = delays.iter().filter(|d| **d > LATE).count();
    delays.sort();
    let median = delays[delays.len() / 2];
    // A stalling relay: ~a quarter late and a median of ~18 ms. A few late
    // events are allowed for a loaded machine's scheduling.
    assert!(
        late <= EVENTS / 50 && median < Duration::from_millis(5),
        "{late} of {EVENTS} events more than {LATE:?} late, median {median:?}"
    );
    let spans = spans(&out);
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert_eq!(spans[0].status, Status::Ok, "{:?}", spans[0]);
    assert_eq!(spans[0].output_tokens, EVENTS as u64);
}
