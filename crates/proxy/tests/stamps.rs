//! Exact stamps on the proxy's upstream side: the upstream's reads
//! carry kernel receive timestamps, as the client's do, so a span's first and
//! last token are the arrival of their bytes, not the moment the proxy's task
//! got to them. Checked against the simulator's truth log (when each token's
//! chunk was handed to its socket writer; on loopback the kernel stamps the
//! bytes in that write), and the proxy's own lag is in the measurement-quality
//! section.

mod common;

use std::collections::HashMap;

use common::*;
use serde_json::Value;
use tpscope_model::{Status, Timestamp};
use tpscope_sim::{SimConfig, Speed};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_and_last_tokens_are_the_kernel_arrival_of_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let sim = sim_with(SimConfig {
        speed: Speed::Scaled(4.0),
        truth_log: Some(dir.path().join("truth.jsonl")),
        ..SimConfig::default()
    })
    .await;
    let out = dir.path().join("p.jsonl");
    let p = proxy(config(sim.addr(), &out)).await;
    let addr = p.addr();
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            tokio::spawn(async move {
                let r = post(
                    addr,
                    "/v1/chat/completions",
                    &chat("sim-llama-3.1-8b", true, 16 + i * 4),
                )
                .await;
                assert_eq!(r.status, 200, "{}", r.text());
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    p.shutdown().await.unwrap();
    sim.shutdown().await.unwrap();
    let truth: HashMap<String, Value> = std::fs::read_to_string(dir.path().join("truth.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| (v["request_id"].as_str().unwrap().to_string(), v))
        .collect();
    let at = |v: &Value| Timestamp::parse_rfc3339(v.as_str().unwrap()).unwrap();
    let ms = |a: Timestamp, b: Timestamp| a.signed_nanos_since(b).abs() as f64 / 1e6;
    let (mut first, mut last) = (Vec::new(), Vec::new());
    for s in spans(&out) {
        assert_eq!(s.status, Status::Ok);
        let t = &truth[s.request_id.as_deref().expect("the response id")];
        first.push(ms(s.first_token_at.unwrap(), at(&t["first_token_at"])));
        last.push(ms(s.last_token_at.unwrap(), at(&t["last_token_at"])));
        let a = s.attempts.last().unwrap();
        if a.reads.is_some() {
            assert!(a.client_lag.is_some(), "the proxy's lag: {a:?}");
        }
    }
    let (first, last) = (median(first), median(last));
    eprintln!("median |proxy − truth|: first token {first:.3} ms, last token {last:.3} ms");
    let set = tpscope_log::read_paths(
        std::slice::from_ref(&out),
        tpscope_log::ReadOptions::default(),
    )
    .unwrap();
    let r = tpscope_analysis::analyze(&set.runs[0].input, &tpscope_analysis::Options::default());
    let q = &r.measurement_quality;
    eprintln!("quality: {q:?}");
    if q.first_tokens > 0 {
        // Kernel stamps on this system: exact within 1 ms at the median.
        assert!(
            first < 1.0 && last < 1.0,
            "first {first} ms, last {last} ms"
        );
        assert!(q.client_lag_max_s.is_some(), "{q:?}");
    }
}
