//! Nothing lost on stop: streams still open when the drain ends are
//! written as cancelled spans with the tokens relayed so far, and the `end`
//! record counts them; cutting at once (a second signal) writes them too. The
//! simulator runs slowly so the streams are open at the stop.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use http_body_util::BodyExt;
use tpscope_model::{Record, Status};
use tpscope_proxy::ProxyHandle;
use tpscope_sim::{SimConfig, SimHandle, Speed};

/// Opens a long stream through `addr` (over HTTP/2 with `h2`) and reads its
/// first data frames; the body is returned still open.
async fn open_stream_over(
    addr: SocketAddr,
    h2: bool,
) -> (hyper::body::Incoming, tokio::task::JoinHandle<()>) {
    let req = long_chat(addr, "sim-llama-3.1-8b", h2);
    let (resp, _, conn) = send_new(addr, req, h2).await;
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    // The role chunk, then content.
    for _ in 0..3 {
        tokio::time::timeout(TIMEOUT, body.frame())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
    (body, conn)
}

async fn open_stream(addr: SocketAddr) -> (hyper::body::Incoming, tokio::task::JoinHandle<()>) {
    open_stream_over(addr, false).await
}

/// A proxy on two serving threads (a new connection goes to the thread with
/// the fewest open) in front of a slow simulator, its span log `out`.
async fn two_thread_proxy(drain: Duration, out: &Path) -> (SimHandle, ProxyHandle) {
    let sim = sim_with(SimConfig {
        speed: Speed::Scaled(0.2),
        ..SimConfig::default()
    })
    .await;
    let mut cfg = config(sim.addr(), out);
    cfg.drain_timeout = drain;
    cfg.threads = Some(2);
    let p = proxy(cfg).await;
    (sim, p)
}

async fn stopped_with_open_streams(drain: Duration, cut_now: bool) -> (Vec<Record>, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    // The two streams are served by one thread each, so the drain and the cut
    // must reach both.
    let (sim, p) = two_thread_proxy(drain, &out).await;
    let a = open_stream(p.addr()).await;
    let b = open_stream(p.addr()).await;
    let t0 = Instant::now();
    let cut = p.cutter();
    let stopping = tokio::spawn(p.shutdown());
    if cut_now {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cut.cut();
    }
    let counts = tokio::time::timeout(TIMEOUT, stopping)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let took = t0.elapsed();
    assert_eq!(
        (counts.spans, counts.status.cancelled),
        (2, 2),
        "{counts:?}"
    );
    drop((a, b));
    sim.shutdown().await.unwrap();
    (records(&out), took)
}

fn check(records: &[Record]) {
    let spans = spans_of(records);
    assert_eq!(spans.len(), 2);
    for s in spans {
        assert_eq!(s.status, Status::Cancelled);
        let a = s.attempts.last().expect("an attempt");
        assert!(a.tokens > 0, "the tokens relayed so far: {s:?}");
        let msg = &s.error.as_ref().unwrap().message;
        assert!(msg.contains("the proxy stopped"), "{msg}");
    }
    let Some(Record::End(end)) = records.last() else {
        panic!("no end record last: {records:?}")
    };
    assert_eq!(end.cut_at_stop, Some(2));
    assert_eq!(end.queued_at_stated, Some(0));
    // The proxy does not parse requests: the model comes from the responses.
    assert_eq!(end.model.as_deref(), Some("sim-llama-3.1-8b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_open_when_the_drain_ends_are_written_as_cancelled_and_counted() {
    let (records, _) = stopped_with_open_streams(Duration::from_millis(300), false).await;
    check(&records);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cutting_at_once_ends_a_long_drain_and_still_writes_the_open_streams() {
    let (records, took) = stopped_with_open_streams(Duration::from_secs(60), true).await;
    check(&records);
    assert!(took < Duration::from_secs(20), "{took:?}");
}

/// With several serving threads, one that has nothing open is drained at once;
/// a client that leaves while another thread is still draining left on its own
/// (it is not a stream the stop cut), and the `end` record counts no cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_during_another_threads_drain_is_not_counted_as_cut() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let (sim, p) = two_thread_proxy(Duration::from_secs(30), &out).await;
    let (body, conn) = open_stream(p.addr()).await;
    let stopping = tokio::spawn(p.shutdown());
    // The idle thread's drain is over by now; the stream's is not.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !stopping.is_finished(),
        "the drain waits for the open stream"
    );
    drop(body);
    conn.abort();
    let counts = tokio::time::timeout(TIMEOUT, stopping)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        (counts.spans, counts.status.cancelled),
        (1, 1),
        "{counts:?}"
    );
    sim.shutdown().await.unwrap();
    let records = records(&out);
    let span = records
        .iter()
        .find_map(|r| match r {
            Record::Span(s) => Some(s),
            _ => None,
        })
        .expect("a span");
    let msg = &span.error.as_ref().unwrap().message;
    assert!(msg.contains("the client went away"), "{msg}");
    let Some(Record::End(end)) = records.last() else {
        panic!("no end record last: {records:?}")
    };
    assert_eq!(end.cut_at_stop, Some(0));
}

/// An HTTP/2 stream is a task of its own on its serving thread, not its
/// connection's: open when the drain ends, it is cut with its thread and its
/// span written before the `end` record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_stream_open_when_the_drain_ends_is_written_before_the_end_record() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.jsonl");
    let (sim, p) = two_thread_proxy(Duration::from_millis(300), &out).await;
    let (body, conn) = open_stream_over(p.addr(), true).await;
    let counts = tokio::time::timeout(TIMEOUT, p.shutdown())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (counts.spans, counts.status.cancelled),
        (1, 1),
        "{counts:?}"
    );
    drop(body);
    conn.abort();
    sim.shutdown().await.unwrap();
    let records = records(&out);
    let spans = spans_of(&records);
    assert_eq!(spans.len(), 1);
    let msg = &spans[0].error.as_ref().unwrap().message;
    assert!(msg.contains("the proxy stopped"), "{msg}");
    let Some(Record::End(end)) = records.last() else {
        panic!("no end record last: {records:?}")
    };
    assert_eq!(end.cut_at_stop, Some(1));
}
