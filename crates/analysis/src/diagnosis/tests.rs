//! The diagnosis on hand-made runs: each state, the precedence, the client-only
//! reading and the client-lag intervals.

use super::*;
use crate::test_support::{capped_run, ts};
use tpscope_model::{ServerSampleRecord, Status};

use crate::input::SpanFacts;

fn span(q: i64, a: i64, r: i64) -> SpanFacts {
    SpanFacts {
        status: Status::Ok,
        error_cause: None,
        queued_at: ts(q),
        admitted_at: Some(ts(a)),
        first_token_at: Some(ts(a + 1)),
        last_token_at: Some(ts(r - 1)),
        released_at: ts(r),
        output_tokens: 10,
        input_tokens: None,
        retry_count: 0,
        retry_causes: Box::default(),
        wasted_tokens: 0,
        chunks: None,
        client: Default::default(),
        session: None,
    }
}

fn server(at: i64, waiting: f64, kv: f64, preemptions: f64) -> ServerSampleRecord {
    ServerSampleRecord {
        run_id: "r".into(),
        at: ts(at),
        waiting: Some(waiting),
        running: Some(1.0),
        kv_cache_usage: Some(kv),
        preemptions_total: Some(preemptions),
        ..ServerSampleRecord::default()
    }
}

fn run(spans: Vec<SpanFacts>, servers: Vec<ServerSampleRecord>) -> RunInput {
    let mut i = capped_run(1);
    for s in spans {
        i.push_span(s, None);
    }
    i.server_samples = servers;
    i
}

fn shares(d: &Diagnosis) -> Vec<(State, u128)> {
    d.states
        .iter()
        .map(|s| (s.state, s.time.as_millis()))
        .collect()
}

fn diag(i: &RunInput, lag: Vec<(Timestamp, Timestamp)>) -> Diagnosis {
    diagnose(i, &Steps::new(i), (ts(0), ts(1000)), lag)
}

/// cap 1: A holds the slot 0..600, B waits 0..600 (at cap) and runs 600..800, then
/// nothing until 1000 (demand-bound tail).
fn two_spans() -> Vec<SpanFacts> {
    vec![span(0, 0, 600), span(0, 600, 800)]
}

#[test]
fn the_server_splits_time_at_the_cap_into_server_queue_kv_and_client_cap() {
    // Server: waiting 0..200, KV full 200..400, preempting 400..500 (the counter
    // rose by the next scrape), room from 500 on.
    let i = run(
        two_spans(),
        vec![
            server(0, 3.0, 0.79, 0.0),
            server(200, 0.0, 0.97, 0.0),
            server(400, 0.0, 0.5, 0.0),
            server(500, 0.0, 0.5, 1.0),
        ],
    );
    let d = diag(&i, vec![]);
    assert!(d.with_server);
    assert_eq!(
        shares(&d),
        [
            (State::KvBound, 300),
            (State::ServerQueue, 200),
            (State::DemandBound, 400),
            (State::ClientCap, 100),
        ]
    );
    assert_eq!(d.limit, Some(State::DemandBound));
    assert!(
        d.sentence.starts_with("Demand was the limit"),
        "{}",
        d.sentence
    );
}

#[test]
fn work_waiting_beside_a_mostly_full_cache_is_kv_bound() {
    let i = run(two_spans(), vec![server(0, 3.0, 0.8, 0.0)]);
    let d = diag(&i, vec![]);
    // 800..1000 holds no request at all: demand-bound whatever the server says.
    assert_eq!(
        shares(&d),
        [(State::KvBound, 800), (State::DemandBound, 200)]
    );
}

#[test]
fn without_server_samples_time_at_the_cap_is_at_cap_and_said_so() {
    let i = run(two_spans(), vec![]);
    let d = diag(&i, vec![]);
    assert!(!d.with_server);
    assert_eq!(shares(&d), [(State::DemandBound, 400), (State::AtCap, 600)]);
    assert_eq!(d.limit, Some(State::AtCap));
    assert!(d.notes[0].contains("client side alone"));
}

#[test]
fn a_free_slot_with_work_waiting_is_a_pipeline_gap_and_lag_comes_first() {
    // A 0..300; B waits 0..500 (gap 300..500), runs 500..900.
    let i = run(vec![span(0, 0, 300), span(0, 500, 900)], vec![]);
    let d = diag(&i, vec![(ts(350), ts(450)), (ts(400), ts(420))]);
    assert_eq!(
        shares(&d),
        [
            (State::ClientBound, 100),
            (State::DemandBound, 500),
            (State::PipelineGap, 100),
            (State::AtCap, 300),
        ]
    );
    let total: f64 = d.states.iter().map(|s| s.share).sum();
    assert!((total - 1.0).abs() < 1e-9);
}

#[test]
fn client_lag_is_read_from_late_samples() {
    let at = |ms: i64| SampleFacts {
        at: ts(ms),
        in_flight: 0,
        queue_depth: 0,
        cap: None,
    };
    let samples = [at(0), at(10), at(20), at(200), at(210)];
    let lag = client_lag_from_samples(&samples, Some(Duration::from_millis(10)), None);
    assert_eq!(lag, [(ts(30), ts(200))]);
    assert!(client_lag_from_samples(&samples, None, None).is_empty());
}

#[test]
fn a_heartbeat_gap_is_not_client_lag() {
    let at = |ms: i64| SampleFacts {
        at: ts(ms),
        in_flight: 0,
        queue_depth: 0,
        cap: None,
    };
    let tick = Some(Duration::from_millis(10));
    let beat = Some(Duration::from_secs(10));
    // An idle stretch: one sample per heartbeat (a tick late), then a change.
    let samples = [at(0), at(10_010), at(10_500), at(30_000)];
    let lag = client_lag_from_samples(&samples, tick, beat);
    // Only the 19.5 s gap exceeds heartbeat + limit: late from a heartbeat on.
    assert_eq!(lag, [(ts(20_500), ts(30_000))]);
}

#[test]
fn the_states_table_is_in_precedence_order() {
    for (i, w) in STATES.iter().enumerate() {
        assert_eq!(w.state as usize, i, "{}", w.name);
        assert!(w.limit.contains("{p} %"), "{}", w.name);
    }
}

/// Real vLLM at --concurrency 16 = --max-num-seqs 16: during a long prefill step
/// its gauges said running 1, waiting 0 while the client held 16 in flight; the
/// report said "raise the client's cap". Those requests were the server's.
#[test]
fn stale_server_gauges_at_the_cap_are_server_busy_not_client_cap() {
    let mut i = capped_run(4);
    for k in 0..4 {
        i.push_span(span(0, 0, 600 + k), None);
    }
    i.push_span(span(0, 600, 900), None);
    let mut stale = server(0, 0.0, 0.1, 0.0);
    stale.running = Some(1.0);
    i.server_samples = vec![stale];
    let d = diag(&i, vec![]);
    assert_eq!(d.limit, Some(State::ServerBusy), "{:?}", d.states);
    assert!(
        !d.sentence.contains("raise the client's cap"),
        "{}",
        d.sentence
    );
    // The gauges agree with the client: the server had room.
    let mut i2 = i.clone();
    i2.server_samples[0].running = Some(4.0);
    let d = diag(&i2, vec![]);
    assert!(
        d.states.iter().any(|s| s.state == State::ClientCap),
        "{:?}",
        d.states
    );
}

/// The generation counter did not move between two scrapes while the client
/// was at its cap: the server was busy (a long prefill step), not idle.
#[test]
fn a_stalled_generation_counter_at_the_cap_is_server_busy() {
    let mut a = server(0, 0.0, 0.1, 0.0);
    a.generation_tokens_total = Some(100.0);
    let mut b = server(500, 0.0, 0.1, 0.0);
    b.generation_tokens_total = Some(100.0);
    let mut c = server(700, 0.0, 0.1, 0.0);
    c.generation_tokens_total = Some(900.0);
    let i = run(two_spans(), vec![a, b, c]);
    let d = diag(&i, vec![]);
    assert!(
        shares(&d).contains(&(State::ServerBusy, 500)),
        "{:?}",
        shares(&d)
    );
    assert!(
        shares(&d).contains(&(State::ClientCap, 100)),
        "{:?}",
        shares(&d)
    );
}

/// A sweep's knee overrides: above it, "raise the cap" is never said.
#[test]
fn above_a_sweeps_knee_the_client_cap_is_the_servers() {
    let mut a = server(0, 0.0, 0.1, 0.0);
    a.running = Some(1.0);
    let i = run(vec![span(0, 0, 900), span(0, 900, 1000)], vec![a]);
    let mut d = diag(&i, vec![]);
    assert_eq!(d.limit, Some(State::ClientCap));
    above_knee(&mut d, 32.0, 16.0);
    assert_eq!(d.limit, Some(State::ServerBusy));
    assert!(
        d.sentence.contains("above the sweep's knee (16)"),
        "{}",
        d.sentence
    );
    assert!(
        !d.sentence.contains("raise the client's cap"),
        "{}",
        d.sentence
    );
    assert!(d.states.iter().all(|s| s.state != State::ClientCap));
}

proptest::proptest! {
    /// Without server samples or lag, the diagnosis read from the steps'
    /// integrals is the one walked segment by segment, windows cutting
    /// segments and caps of 1 to 3 included.
    #[test]
    fn the_integrals_give_the_walked_diagnosis(
        spans in proptest::collection::vec((0i64..900, 0i64..300, 1i64..300), 0..25),
        cap in 1u32..4,
        from in -100i64..500,
        len in 1i64..1200,
    ) {
        let mut i = capped_run(cap);
        for (q, wait, hold) in spans {
            i.push_span(span(q, q + wait, q + wait + hold + 1), None);
        }
        let steps = Steps::new(&i);
        let window = (ts(from), ts(from + len));
        let integrals = steps.integrate(window.0, window.1);
        proptest::prop_assert_eq!(
            diagnose_with(&i, &steps, window, Vec::new(), Some(&integrals)),
            diagnose(&i, &steps, window, Vec::new())
        );
    }
}
