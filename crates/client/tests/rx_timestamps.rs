//! Where first-token times come from, against `tpscope sim` in real time with its
//! truth log: with kernel receive timestamps (the default) the stamp is no later
//! than the attempt task's own clock and agrees with the simulator's record; with
//! them switched off the client stamps on its own clock, as before.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tpscope_client::{
    Api, AttemptOutcome, Client, ClientConfig, Endpoint, Prompt, RequestSpec, RxTimestamps,
};
use tpscope_model::{RunClock, Timestamp};
use tpscope_sim::{SimConfig, Speed};

#[derive(serde::Deserialize)]
struct Truth {
    request_id: String,
    first_token_at: Option<Timestamp>,
}

/// A truth-log path of its own for each test (removed at the end).
fn truth_path() -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    std::env::temp_dir().join(format!(
        "tpscope-client-rx-{}-{}.jsonl",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Runs `streams` concurrent 8-token streams against a real-time simulator with
/// `rx`, and returns each outcome with the simulator's first-token time.
async fn streams_with_truth(rx: RxTimestamps, streams: usize) -> Vec<(AttemptOutcome, Timestamp)> {
    let path = truth_path();
    let config = SimConfig {
        speed: Speed::Realtime,
        truth_log: Some(path.clone()),
        ..SimConfig::default()
    };
    let sim = tpscope_sim::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let mut ep = Endpoint::new(sim.base_url(), Api::Chat, sim.model_name());
    ep.extra_body
        .insert("ignore_eos".into(), serde_json::Value::Bool(true));
    let client = Client::new(
        ep,
        ClientConfig {
            rx_timestamps: rx,
            ..ClientConfig::default()
        },
    )
    .unwrap();
    let clock = RunClock::start();
    let mut set = JoinSet::new();
    for _ in 0..streams {
        let client = client.clone();
        set.spawn(async move {
            let spec = RequestSpec {
                prompt: Prompt::Text("Tell me about lighthouses.".into()),
                max_tokens: Some(8),
            };
            client
                .attempt(&spec, &clock, &CancellationToken::new())
                .await
        });
    }
    let mut outcomes = Vec::new();
    while let Some(o) = set.join_next().await {
        outcomes.push(o.unwrap());
    }
    drop(client);
    // Shutdown flushes the truth log; bounded so a test cannot hang on it.
    tokio::time::timeout(Duration::from_secs(10), sim.shutdown())
        .await
        .expect("the simulator shuts down")
        .unwrap();
    let truth: HashMap<String, Timestamp> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Truth>(l).unwrap())
        .filter_map(|t| Some((t.request_id, t.first_token_at?)))
        .collect();
    let _ = std::fs::remove_file(&path);
    outcomes
        .into_iter()
        .map(|o| {
            assert!(o.is_ok(), "{o:?}");
            let id = o.response_id.clone().expect("the response has an id");
            let theirs = *truth
                .get(&id)
                .unwrap_or_else(|| panic!("{id} not in the truth log"));
            (o, theirs)
        })
        .collect()
}

/// The stamps are in order, and the first token is neither before the simulator
/// handed it over (1 ms of slack for the two clocks' anchors) nor absurdly late
/// (50 ms: a debug build on a loaded 2-core machine).
fn assert_sane(o: &AttemptOutcome, theirs: Timestamp) {
    let a = &o.attempt;
    let (fb, ft) = (a.first_byte_at.unwrap(), a.first_token_at.unwrap());
    assert!(a.started_at <= fb && fb <= ft && ft <= a.ended_at, "{o:?}");
    assert!(ft <= o.last_token_at.unwrap(), "{o:?}");
    let err = ft.signed_nanos_since(theirs);
    assert!(
        err > -1_000_000,
        "first token {err} ns before the simulator sent it"
    );
    // A sanity bound (the stamp belongs to this token), not a speed claim: on a
    // loaded 2-core CI box a user-space stamp lagged past the old 50 ms bound.
    assert!(
        err < 5_000_000_000,
        "first token {err} ns after the simulator sent it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_stamps_are_no_later_than_the_tasks_clock_and_agree_with_the_truth_log() {
    let results = streams_with_truth(RxTimestamps::Kernel, 16).await;
    assert_eq!(results.len(), 16);
    for (o, theirs) in &results {
        assert_sane(o, *theirs);
        let lag = o.first_token_lag.expect("a first token has a lag");
        if cfg!(target_os = "linux") {
            // The frame went from hyper's connection task to the attempt's task
            // after the read that stamped it, so the task's own clock is later.
            assert!(lag > Duration::ZERO, "{o:?}");
        } else {
            assert_eq!(lag, Duration::ZERO);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_stamps_still_stream_and_agree_with_the_truth_log() {
    let results = streams_with_truth(RxTimestamps::User, 16).await;
    assert_eq!(results.len(), 16);
    for (o, theirs) in &results {
        assert_sane(o, *theirs);
        assert_eq!(o.first_token_lag, Some(Duration::ZERO), "{o:?}");
    }
}

#[test]
fn rx_timestamp_sources_parse_by_name_and_reject_others_by_name() {
    assert_eq!("kernel".parse::<RxTimestamps>(), Ok(RxTimestamps::Kernel));
    assert_eq!("user".parse::<RxTimestamps>(), Ok(RxTimestamps::User));
    assert_eq!(RxTimestamps::default(), RxTimestamps::Kernel);
    let e = "hardware".parse::<RxTimestamps>().unwrap_err().to_string();
    assert!(
        e.contains("`hardware`") && e.contains("kernel or user"),
        "{e}"
    );
    for s in [RxTimestamps::Kernel, RxTimestamps::User] {
        assert_eq!(s.to_string().parse::<RxTimestamps>(), Ok(s));
    }
}
