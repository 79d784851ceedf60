//! The client against `tpscope sim` (in-process, as fast as possible): tokens agree
//! with the server's usage, and every fault the simulator injects ends the attempt
//! with the right cause.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tpscope_client::{Api, AttemptOutcome, Client, ClientConfig, Endpoint, Prompt, RequestSpec};
use tpscope_model::{Cause, RunClock};
use tpscope_sim::{Faults, SimConfig, SimHandle, Speed};

async fn sim(faults: Faults, connection_close: bool) -> SimHandle {
    let config = SimConfig {
        speed: Speed::Max,
        faults,
        connection_close,
        ..SimConfig::default()
    };
    tpscope_sim::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Stops the simulator, bounded: after a cut fault its engine thread can miss the
/// shutdown command (`Driver::step` consumes `Shutdown` in its no-plan wait, then
/// `Driver::run` blocks on the idle queue again; reported to the lead), and a test
/// must not hang on that.
async fn stop(s: SimHandle) {
    match tokio::time::timeout(Duration::from_secs(5), s.shutdown()).await {
        Ok(r) => r.unwrap(),
        Err(_) => eprintln!("warning: tpscope-sim did not shut down within 5 s"),
    }
}

fn client(sim: &SimHandle, api: Api, config: ClientConfig) -> Client {
    let mut ep = Endpoint::new(sim.base_url(), api, sim.model_name());
    ep.extra_body
        .insert("ignore_eos".into(), serde_json::Value::Bool(true));
    Client::new(ep, config).unwrap()
}

async fn run(c: &Client, max_tokens: u32) -> AttemptOutcome {
    let spec = RequestSpec {
        prompt: Prompt::Text("Write a long story about a lighthouse keeper.".into()),
        max_tokens: Some(max_tokens),
    };
    c.attempt(&spec, &RunClock::start(), &CancellationToken::new())
        .await
}

#[tokio::test]
async fn tokens_agree_with_usage_and_connections_are_reused() {
    let s = sim(Faults::default(), false).await;
    for api in [Api::Chat, Api::Completions] {
        let c = client(
            &s,
            api,
            ClientConfig {
                record_chunks: true,
                ..ClientConfig::default()
            },
        );
        assert_eq!(c.list_models().await.unwrap(), [s.model_name().to_string()]);
        let first = run(&c, 40).await;
        assert!(first.is_ok(), "{api}: {first:?}");
        assert_eq!(first.attempt.tokens, 40);
        assert_eq!(first.usage.unwrap().completion_tokens, Some(40));
        assert!(first.usage.unwrap().prompt_tokens.unwrap() > 0);
        assert!(first.content_chunks >= 1 && first.content_chunks <= 40);
        assert!(!first.text.is_empty());
        assert_eq!(first.finish_reason.as_deref(), Some("length"));
        let marks = first.chunks.as_ref().unwrap();
        assert_eq!(marks.len() as u64, first.content_chunks);
        let second = run(&c, 5).await;
        assert!(second.is_ok(), "{second:?}");
        assert_eq!(second.attempt.tokens, 5);
        assert_eq!(second.attempt.connection_reused, Some(true));
        assert_eq!(second.attempt.connect_time, None);
    }
    stop(s).await;
}

#[tokio::test]
async fn sim_faults_map_to_causes() {
    let cases: Vec<(Faults, Cause)> = vec![
        (
            Faults {
                p429: 1.0,
                retry_after: Duration::from_secs(2),
                ..Faults::default()
            },
            Cause::Http429,
        ),
        (
            Faults {
                p500: 1.0,
                ..Faults::default()
            },
            Cause::Http5xx,
        ),
        (
            Faults {
                p503: 1.0,
                ..Faults::default()
            },
            Cause::Http5xx,
        ),
        (
            Faults {
                cut: 1.0,
                cut_after: 3,
                ..Faults::default()
            },
            Cause::Disconnect,
        ),
        (
            Faults {
                malformed: 1.0,
                malformed_after: 2,
                ..Faults::default()
            },
            Cause::Malformed,
        ),
        (
            Faults {
                stall: 1.0,
                stall_after: 2,
                stall_for: Duration::from_secs(3),
                ..Faults::default()
            },
            Cause::TimeoutStall,
        ),
        (
            Faults {
                slow_first_token: 1.0,
                slow_first_token_delay: Duration::from_secs(3),
                ..Faults::default()
            },
            Cause::TimeoutFirstToken,
        ),
    ];
    for (faults, cause) in cases {
        let s = sim(faults, false).await;
        let mut config = ClientConfig::default();
        config.timeouts.first_token = Some(Duration::from_millis(500));
        config.timeouts.stall = Some(Duration::from_millis(300));
        let c = client(&s, Api::Chat, config);
        let o = run(&c, 20).await;
        assert_eq!(o.cause(), Some(cause), "{o:?}");
        assert!(o.attempt.ended_at >= o.attempt.started_at);
        match cause {
            Cause::Http429 => assert_eq!(o.retry_after, Some(Duration::from_secs(2))),
            Cause::Disconnect => assert_eq!(o.attempt.tokens, 3),
            Cause::TimeoutStall => assert_eq!(o.attempt.tokens, 2),
            Cause::Malformed => assert!(o.attempt.first_token_at.is_some()),
            _ => {}
        }
        drop(c);
        stop(s).await;
    }
}

#[tokio::test]
async fn connection_close_makes_every_attempt_connect() {
    let s = sim(Faults::default(), true).await;
    let c = client(&s, Api::Chat, ClientConfig::default());
    for _ in 0..3 {
        let o = run(&c, 3).await;
        assert!(o.is_ok(), "{o:?}");
        assert_eq!(o.attempt.connection_reused, Some(false));
        assert!(o.attempt.connect_time.is_some());
    }
    stop(s).await;
}
