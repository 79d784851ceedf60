//! Fault injection seen from the client: every fault appears at its probability
//! (within binomial tolerance), is well-formed for a client (a cut stream has no
//! `[DONE]`, a malformed event is a `data:` line that is not JSON, a 429 carries
//! `Retry-After`), and agrees with the simulator's own truth log.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::{Resp, fast_config, post, start};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tpscope_sim::{Faults, SimConfig};

const N: usize = 400;
const P: f64 = 0.1;
const DELAY: Duration = Duration::from_millis(250);
/// A delay as the client sees it: the simulator's timer starts when the frame
/// before it is handed to the writer, a little before the client reads it.
const SEEN: Duration = Duration::from_millis(200);
const OUT: u32 = 12;

/// What the client saw.
fn classify(r: &Resp, stream: bool) -> &'static str {
    match r.status {
        429 => {
            assert_eq!(r.headers["retry-after"], "1");
            assert_eq!(r.json()["error"]["code"], "rate_limit_exceeded");
            return "429";
        }
        500 | 503 => {
            assert!(r.json()["error"]["message"].is_string());
            return if r.status == 500 { "500" } else { "503" };
        }
        200 => {}
        s => panic!("unexpected status {s}"),
    }
    if !stream {
        if !r.complete {
            return "cut";
        }
        return match serde_json::from_slice::<Value>(&r.body()) {
            Err(_) => "malformed",
            Ok(v) => {
                assert_eq!(v["usage"]["completion_tokens"], OUT);
                if r.frames[0].0 - r.sent_at >= SEEN {
                    "delayed"
                } else {
                    "none"
                }
            }
        };
    }
    let evs = r.events();
    let done = evs.last().is_some_and(|(_, d)| d == "[DONE]");
    if !r.complete {
        assert!(!done, "a cut stream has no [DONE]");
        let tokens = evs
            .iter()
            .filter(|(_, d)| d.contains("\"content\":\" "))
            .count();
        assert_eq!(tokens, 3, "cut after --cut-after tokens");
        return "cut";
    }
    assert!(done, "a complete stream ends with [DONE]");
    let bad = evs
        .iter()
        .filter(|(_, d)| d != "[DONE]" && serde_json::from_str::<Value>(d).is_err())
        .count();
    if bad > 0 {
        assert_eq!(bad, 1, "one malformed event");
        return "malformed";
    }
    let token_times: Vec<_> = evs
        .iter()
        .filter(|(_, d)| d.contains("\"content\":\" "))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(token_times.len(), OUT as usize);
    if token_times[0] - r.sent_at >= SEEN {
        return "slow_first_token";
    }
    let max_gap = token_times.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    if max_gap >= SEEN {
        return "stall";
    }
    "none"
}

async fn run(stream: bool) {
    let dir = tempfile::tempdir().unwrap();
    let truth = dir.path().join("truth.jsonl");
    let sim = start(SimConfig {
        seed: 11,
        truth_log: Some(truth.clone()),
        faults: Faults {
            p429: P,
            p500: P,
            p503: P,
            cut: P,
            cut_after: 3,
            stall: P,
            stall_for: DELAY,
            stall_after: 4,
            malformed: P,
            malformed_after: 2,
            slow_first_token: P,
            slow_first_token_delay: DELAY,
            ..Faults::default()
        },
        ..fast_config()
    })
    .await;
    let body = Arc::new(json!({
        "model": sim.model_name(),
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": OUT,
        "ignore_eos": true,
        "stream": stream,
    }));
    let limit = Arc::new(Semaphore::new(32));
    let mut tasks = Vec::new();
    for _ in 0..N {
        let (addr, body, limit) = (sim.addr(), body.clone(), limit.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = limit.acquire().await.unwrap();
            let r = post(addr, "/v1/chat/completions", &body).await;
            let id = r.headers["x-request-id"].to_str().unwrap().to_string();
            (id, classify(&r, stream))
        }));
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut by_id: HashMap<String, &str> = HashMap::new();
    for t in tasks {
        let (id, class) = t.await.unwrap();
        *seen.entry(class).or_default() += 1;
        by_id.insert(id, class);
    }
    sim.shutdown().await.unwrap();

    // Binomial tolerance: 4.5 standard deviations of N·P.
    let sd = (N as f64 * P * (1.0 - P)).sqrt();
    let expect = N as f64 * P;
    let get = |k: &str| seen.get(k).copied().unwrap_or(0);
    // Rates as the client saw them; the timing faults' rates are checked against
    // the truth log below.
    let kinds: &[&str] = &["429", "500", "503", "cut", "malformed"];
    for k in kinds {
        let n = get(k) as f64;
        assert!(
            (n - expect).abs() <= 4.5 * sd,
            "{k}: {n} of {N}, expected {expect} ± {}",
            4.5 * sd
        );
    }
    if !stream {
        // Stall and slow first token both delay a non-streamed answer.
        let n = get("delayed") as f64;
        assert!((n - 2.0 * expect).abs() <= 4.5 * (N as f64 * 2.0 * P * (1.0 - 2.0 * P)).sqrt());
    }

    // The truth log names the same faults, one line per request.
    let text = std::fs::read_to_string(&truth).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), N);
    let mut logged: HashMap<String, usize> = HashMap::new();
    for l in &lines {
        let f = l["fault"].as_str().unwrap_or("none").to_string();
        if stream {
            // Per request: the client saw exactly the fault the simulator injected,
            // except that a starved client (a loaded CI box) may see a delay of its
            // own on a request without one; a delay injected is never missed.
            let id = l["request_id"].as_str().unwrap();
            let starved = f == "none" && matches!(by_id[id], "stall" | "slow_first_token");
            assert!(
                by_id[id] == f.as_str() || starved,
                "request {id}: {} vs {f}",
                by_id[id]
            );
        }
        *logged.entry(f).or_default() += 1;
    }
    for k in ["429", "500", "503", "cut", "malformed"] {
        assert_eq!(
            logged.get(k).copied().unwrap_or(0),
            get(k),
            "{k}: client vs truth log"
        );
    }
    if stream {
        // The timing faults' rates, from what was injected (the client's own
        // classification may add a starved request or two, see above).
        for k in ["stall", "slow_first_token"] {
            let n = logged.get(k).copied().unwrap_or(0) as f64;
            assert!(
                (n - expect).abs() <= 4.5 * sd,
                "{k}: {n} of {N} injected, expected {expect} ± {}",
                4.5 * sd
            );
        }
    }
    for l in lines.iter().filter(|l| l["fault"] == "cut") {
        assert!(l["finish_reason"].is_null());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_streaming_fault_appears_at_its_rate_and_is_well_formed() {
    run(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_non_streaming_fault_appears_at_its_rate() {
    run(false).await;
}
