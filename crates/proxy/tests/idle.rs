//! `--idle-timeout` inside a relayed body: an upstream that goes silent is cut
//! (`timeout_stall`), while a stream longer than the timeout whose chunks keep
//! coming is not (the timer is re-armed from the last chunk, lazily).

mod common;

use std::time::Duration;

use common::*;
use tpscope_model::{Cause, Status};
use tpscope_sim::{Faults, SimConfig, Speed};

#[tokio::test]
async fn a_silent_upstream_is_cut_and_a_long_lively_stream_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_with(SimConfig {
        speed: Speed::Max,
        faults: Faults {
            stall: 1.0,
            stall_after: 3,
            stall_for: Duration::from_secs(3),
            ..Faults::default()
        },
        ..SimConfig::default()
    })
    .await;
    let out = dir.path().join("stall.jsonl");
    let mut cfg = config(sim.addr(), &out);
    cfg.idle_timeout = Duration::from_millis(300);
    let p = proxy(cfg).await;
    let r = post(
        p.addr(),
        "/v1/chat/completions",
        &chat(sim.model_name(), true, 20),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(!r.complete, "the relayed body ends with an error");
    p.shutdown().await.unwrap();
    let s = &spans(&out)[0];
    assert_eq!(s.status, Status::Error);
    assert_eq!(s.error.as_ref().map(|e| e.cause), Some(Cause::TimeoutStall));
    assert_eq!(s.output_tokens, 3, "{s:?}");
    sim.shutdown().await.unwrap();

    // Real time: 120 tokens take several times the 300 ms timeout, with
    // gaps between chunks far below it.
    let sim = common::sim(Speed::Realtime).await;
    let out = dir.path().join("lively.jsonl");
    let mut cfg = config(sim.addr(), &out);
    cfg.idle_timeout = Duration::from_millis(300);
    let p = proxy(cfg).await;
    let started = std::time::Instant::now();
    let r = post(
        p.addr(),
        "/v1/chat/completions",
        &chat(sim.model_name(), true, 120),
    )
    .await;
    let took = started.elapsed();
    assert!(r.complete && r.status == 200);
    p.shutdown().await.unwrap();
    let s = &spans(&out)[0];
    assert_eq!((s.status, s.output_tokens), (Status::Ok, 120), "{s:?}");
    assert!(
        took > Duration::from_millis(300),
        "the stream must outlast the timeout for this test to mean anything ({took:?})"
    );
    sim.shutdown().await.unwrap();
}
