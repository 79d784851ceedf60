//! A client that goes away mid-stream is cancelled upstream within one chunk:
//! the client reads a few tokens through the proxy and leaves; the
//! proxy's server notices the closed socket at once (hyper watches for EOF while
//! it writes a response), drops the relayed body, which closes the upstream
//! connection; the simulator's server notices that the same way and drops its
//! body, whose `Delivery` aborts the sequence in the engine. The simulator's
//! `/metrics` then count one `abort` and the tokens it generated. The same read
//! straight from the simulator is the control.
//!
//! The simulator runs at 1/25 of real time, so one decode step (one token of
//! the one sequence) takes about 160 ms of wall time: the abort crosses both
//! loopback hops well within a step, and the bound below holds without timing
//! the abort itself.

mod common;

use std::net::SocketAddr;
use std::time::Instant;

use common::*;
use http_body_util::BodyExt;
use tpscope_model::Status;
use tpscope_sim::{SimConfig, SimHandle, Speed};
use tpscope_stream::{Dialect, SseParser};

/// Tokens the client reads before it leaves.
const READ: u64 = 4;

async fn slow_sim(dir: &std::path::Path) -> SimHandle {
    sim_with(SimConfig {
        speed: Speed::Scaled(0.04),
        truth_log: Some(dir.join("truth.jsonl")),
        ..SimConfig::default()
    })
    .await
}

/// How a client left, and what it keeps until the end of the test.
enum Left {
    /// HTTP/1.1: the connection closed.
    Closed,
    /// HTTP/2: the stream reset, the connection kept open (held here).
    Reset(H2Sender, tokio::task::JoinHandle<()>),
}

/// Streams a long completion from `addr`, reads until at least [`READ`] tokens
/// arrived, then goes away: HTTP/1.1 closes its connection, HTTP/2 resets the
/// stream (dropping the body) and keeps the connection. Returns the tokens read.
async fn read_then_leave(addr: SocketAddr, model: &str, h2: bool) -> (u64, Left) {
    let req = long_chat(addr, model, h2);
    let (resp, h2_sender, conn) = send_new(addr, req, h2).await;
    assert_eq!(resp.status(), 200);
    let mut b = resp.into_body();
    let mut account = Dialect::OpenAi.account(true, false);
    let mut parser = SseParser::new();
    while account.tokens() < READ {
        let f = tokio::time::timeout(TIMEOUT, b.frame())
            .await
            .unwrap()
            .expect("the stream goes on")
            .unwrap();
        if let Some(d) = f.data_ref() {
            account.push(&mut parser, d, Instant::now());
        }
    }
    drop(b);
    let left = match h2_sender {
        Some(s) => Left::Reset(s, conn),
        None => {
            // The connection's task owns the socket: ending it closes the socket.
            conn.abort();
            let _ = conn.await;
            Left::Closed
        }
    };
    (account.tokens(), left)
}

/// Waits for the simulator to count the abort, then returns the output tokens
/// its engine generated (all of them this one sequence's).
async fn generated_once_aborted(sim: &SimHandle) -> u64 {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let m = send(sim.addr(), "GET", "/metrics", vec![], &[], false)
            .await
            .text();
        let aborted = metric(
            &m,
            "vllm:request_success_total",
            "finished_reason=\"abort\"",
        );
        if aborted == Some(1.0) {
            return metric(&m, "vllm:generation_tokens_total", "").unwrap() as u64;
        }
        assert!(
            Instant::now() < deadline,
            "the simulator never aborted the sequence:\n{m}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The bound: the client read `read` tokens when it left; the engine may
/// already have been in the step of the next one (a token in flight), and the
/// abort lands between two steps, so one more at most if it crossed a step
/// boundary on a loaded machine. Without the abort (a body kept alive, drained
/// to nowhere) the sequence would run to its 2000 tokens.
fn assert_within_one_chunk(read: u64, generated: u64, via: &str) {
    eprintln!("{via}: the client read {read} tokens, the simulator generated {generated}");
    assert!(
        read <= generated && generated <= read + 2,
        "{via}: the client read {read} tokens, the simulator generated {generated}"
    );
}

/// The truth log's one line: the tokens handed to the socket writer and no
/// finish reason (the sequence did not complete).
fn truth(dir: &std::path::Path) -> (u64, bool) {
    let t = std::fs::read_to_string(dir.join("truth.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = t
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{t}");
    (
        lines[0]["tokens"].as_u64().unwrap(),
        lines[0]["finish_reason"].is_null(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_directly_aborts_the_sequence_within_one_chunk_control() {
    let dir = tempfile::tempdir().unwrap();
    let sim = slow_sim(dir.path()).await;
    let model = sim.model_name().to_string();
    let (read, _left) = read_then_leave(sim.addr(), &model, false).await;
    let generated = generated_once_aborted(&sim).await;
    sim.shutdown().await.unwrap();
    assert_within_one_chunk(read, generated, "direct");
    let (handed, unfinished) = truth(dir.path());
    assert!(unfinished);
    assert!(
        read <= handed && handed <= generated,
        "{read} {handed} {generated}"
    );
}

async fn through_the_proxy(h2: bool) {
    let dir = tempfile::tempdir().unwrap();
    let sim = slow_sim(dir.path()).await;
    let model = sim.model_name().to_string();
    let out = dir.path().join("p.jsonl");
    let p = proxy(config(sim.addr(), &out)).await;
    let (read, left) = read_then_leave(p.addr(), &model, h2).await;
    let generated = generated_once_aborted(&sim).await;
    if let Left::Reset(s, conn) = left {
        assert!(!conn.is_finished(), "the HTTP/2 connection stays open");
        drop(s);
        conn.abort();
    }
    p.shutdown().await.unwrap();
    sim.shutdown().await.unwrap();
    let via = if h2 {
        "proxy, HTTP/2"
    } else {
        "proxy, HTTP/1.1"
    };
    assert_within_one_chunk(read, generated, via);
    let (handed, unfinished) = truth(dir.path());
    assert!(unfinished);
    assert!(
        read <= handed && handed <= generated,
        "{read} {handed} {generated}"
    );
    // The proxy's span: cancelled, with the tokens it relayed (those the client
    // read, and at most the one in flight).
    let spans = spans(&out);
    assert_eq!(spans.len(), 1);
    let s = &spans[0];
    assert_eq!(s.status, Status::Cancelled);
    assert!(
        read <= s.output_tokens && s.output_tokens <= handed,
        "span {} tokens, read {read}, handed {handed}",
        s.output_tokens
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_closing_its_connection_through_the_proxy_aborts_the_sequence_within_one_chunk() {
    through_the_proxy(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_resetting_its_stream_through_the_proxy_aborts_the_sequence_within_one_chunk()
 {
    through_the_proxy(true).await;
}
