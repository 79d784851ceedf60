//! The executor against a server double: closed and open loops, waves, retries,
//! stopping and cancelling, an endless backlog.

use super::*;
// The in-memory span-log writer the crate's integration tests share.
#[path = "../../tests/support/mod.rs"]
mod support;
use crate::dist::LengthDist;
use crate::retry::RetryPolicy;
use crate::schedule::{Arrival, Schedule};
use crate::workload::{Prompt, Request, Workload};
use std::collections::HashMap;
use std::time::Duration;
use support::Buf;
use tokio_util::sync::CancellationToken;
use tpscope_model::{AttemptOutcome, Cause, Record, Span, Usage};
use tpscope_record::{Dispatch, Writer};
use tpscope_tokens::Tokenizer;

/// A server double: each attempt takes `delay`; the first `fail_first` attempts
/// of every request fail with 429 and a 10 ms Retry-After.
struct Fake {
    delay: Duration,
    fail_first: u32,
    seen: Mutex<HashMap<String, u32>>,
}

impl Fake {
    fn new(delay_ms: u64, fail_first: u32) -> Arc<Fake> {
        Arc::new(Fake {
            delay: Duration::from_millis(delay_ms),
            fail_first,
            seen: Mutex::new(HashMap::new()),
        })
    }
}

impl Sender for Fake {
    async fn attempt(
        &self,
        request: &Request,
        clock: &RunClock,
        cancel: &CancellationToken,
    ) -> AttemptOutcome {
        let Prompt::Text(key) = &request.spec.prompt else {
            unreachable!()
        };
        let n = {
            let mut seen = self.seen.lock().unwrap();
            let n = seen.entry(key.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let started = clock.now();
        let failing = n <= self.fail_first;
        let done = tokio::select! {
            _ = tokio::time::sleep(if failing { Duration::from_millis(1) } else { self.delay }) => true,
            _ = cancel.cancelled() => false,
        };
        let ended = clock.now();
        let cause = if !done {
            Some(Cause::Cancelled)
        } else if failing {
            Some(Cause::Http429)
        } else {
            None
        };
        let ok = cause.is_none();
        let mut o = AttemptOutcome::started(started);
        o.attempt.first_byte_at = Some(started);
        o.attempt.first_token_at = ok.then_some(started);
        o.attempt.ended_at = ended;
        o.attempt.http_status = done.then_some(if failing { 429 } else { 200 });
        o.attempt.cause = cause;
        o.attempt.connection_reused = Some(true);
        o.last_token_at = ok.then_some(ended);
        o.usage = ok.then_some(Usage::new(u64::from(request.max_tokens()), None));
        o.content_chunks = 3;
        o.retry_after = failing.then_some(Duration::from_millis(10));
        o
    }
}

fn plan(
    schedule: Schedule,
    requests: Option<u64>,
    cap: Option<u32>,
    dispatch: Dispatch,
) -> RunPlan {
    RunPlan {
        run_id: "run-t".into(),
        schedule,
        requests,
        duration: None,
        cap,
        dispatch,
        workload: Arc::new(Workload::Synthetic {
            input: LengthDist::Fixed(8),
            output: LengthDist::Fixed(5),
        }),
        sessions: None,
        tokenizer: Tokenizer::O200kBase,
        seed: 1,
        prompt_salt: 0,
        context: None,
        retry: RetryPolicy::default(),
        sample_interval: Some(Duration::from_millis(5)),
        drain_timeout: Duration::from_secs(5),
    }
}

async fn run(p: RunPlan, fake: Arc<Fake>, control: Control) -> (RunSummary, Vec<Span>) {
    let buf = Buf::default();
    let rec = Writer::to_writer(buf.clone(), Tokenizer::O200kBase, None);
    let clock = RunClock::start();
    let summary = execute(
        p,
        clock,
        fake,
        Some(rec.sender()),
        Arc::new(LiveStats::default()),
        &control,
    )
    .await;
    rec.finish().unwrap();
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let mut spans: Vec<Span> = text
        .lines()
        .filter_map(|l| match serde_json::from_str::<Record>(l).unwrap() {
            Record::Span(s) => Some(s),
            _ => None,
        })
        .collect();
    for s in &spans {
        s.validate().unwrap();
    }
    spans.sort_by_key(|s| s.span_id.parse::<u64>().unwrap());
    (summary, spans)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_loop_backlog_hands_each_freed_slot_to_the_next_request_at_once() {
    let (sum, spans) = run(
        plan(
            Schedule::Backlog,
            Some(24),
            Some(4),
            Dispatch::WorkConserving,
        ),
        Fake::new(15, 0),
        Control::default(),
    )
    .await;
    assert_eq!((sum.spans, sum.status.ok, sum.admitted), (24, 24, 24));
    assert_eq!(spans.len(), 24);
    let releases: std::collections::HashSet<_> = spans.iter().map(|s| s.released_at).collect();
    // Everyone was ready at the start; after the first cap, each admission is
    // exactly some other request's release.
    let start = spans[0].queued_at;
    assert!(spans.iter().all(|s| s.queued_at == start));
    for s in &spans[4..] {
        assert!(
            releases.contains(&s.admitted_at.unwrap()),
            "span {} admitted at no release",
            s.span_id
        );
    }
    assert!(spans.iter().all(|s| s.output_tokens == 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waves_admit_the_next_batch_only_after_the_whole_batch_is_released() {
    let (sum, spans) = run(
        plan(Schedule::Backlog, Some(12), Some(4), Dispatch::Waves),
        Fake::new(10, 0),
        Control::default(),
    )
    .await;
    assert_eq!(sum.status.ok, 12);
    for wave in spans.chunks(4).collect::<Vec<_>>().windows(2) {
        let last_release = wave[0].iter().map(|s| s.released_at).max().unwrap();
        let admitted: Vec<_> = wave[1].iter().map(|s| s.admitted_at.unwrap()).collect();
        assert!(
            admitted.iter().all(|a| *a == admitted[0]),
            "a wave is admitted at one instant"
        );
        assert_eq!(admitted[0], last_release);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_back_off_holding_the_slot_and_are_recorded() {
    let mut p = plan(
        Schedule::Backlog,
        Some(3),
        Some(1),
        Dispatch::WorkConserving,
    );
    p.retry = RetryPolicy {
        max_retries: 3,
        base: Duration::from_millis(2),
    };
    let (sum, spans) = run(p, Fake::new(5, 2), Control::default()).await;
    assert_eq!(sum.status.ok, 3);
    for w in spans.windows(2) {
        assert_eq!(
            w[1].admitted_at,
            Some(w[0].released_at),
            "the slot is held through the retries"
        );
    }
    let s = &spans[0];
    assert_eq!(
        (s.retry_count, s.retry_causes.clone()),
        (2, vec![Cause::Http429, Cause::Http429])
    );
    assert_eq!(s.attempts.len(), 3);
    assert!(
        s.attempts[..2]
            .iter()
            .all(|a| a.backoff.unwrap() >= Duration::from_millis(10)),
        "Retry-After honoured"
    );
    assert!(s.attempts[2].backoff.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_retries_a_429_is_an_error_span() {
    let (sum, spans) = run(
        plan(
            Schedule::Backlog,
            Some(2),
            Some(2),
            Dispatch::WorkConserving,
        ),
        Fake::new(5, 1),
        Control::default(),
    )
    .await;
    assert_eq!((sum.status.ok, sum.status.error), (0, 2));
    assert!(
        spans
            .iter()
            .all(|s| s.error.as_ref().unwrap().cause == Cause::Http429)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_requests_are_queued_when_the_client_got_to_them_in_schedule_order() {
    let p = plan(
        Schedule::Rate {
            rate: 200.0,
            arrival: Arrival::Constant,
        },
        Some(10),
        Some(1),
        Dispatch::WorkConserving,
    );
    let (sum, spans) = run(p, Fake::new(20, 0), Control::default()).await;
    assert_eq!(sum.status.ok, 10);
    // Queued when the pacer got to each (never before its schedule, 5 ms apart):
    // a late pacer's own lateness must not show as work waiting, so
    // the instants follow the schedule's order but not necessarily its times.
    let mut queued: Vec<_> = spans.iter().map(|s| s.queued_at).collect();
    queued.sort();
    assert!(queued.windows(2).all(|w| w[0] < w[1]), "{queued:?}");
    // Arrivals every 5 ms, service 20 ms, cap 1: the queue wait is recorded.
    assert!(
        spans[9]
            .admitted_at
            .unwrap()
            .since(spans[9].queued_at)
            .unwrap()
            > Duration::from_millis(100)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_cancels_the_queue_and_lets_in_flight_requests_finish() {
    Tokenizer::O200kBase.warm();
    let control = Control::default();
    let stop = control.stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        stop.cancel();
    });
    let (sum, spans) = run(
        plan(
            Schedule::Backlog,
            Some(50),
            Some(2),
            Dispatch::WorkConserving,
        ),
        Fake::new(50, 0),
        control,
    )
    .await;
    assert!(sum.interrupted);
    assert_eq!(sum.spans, 50, "every ready request becomes a span");
    assert_eq!(sum.status.ok, 2, "the two in flight finish");
    assert_eq!(sum.status.cancelled, 48);
    let never = spans.iter().filter(|s| s.admitted_at.is_none()).count();
    assert_eq!(never, 48);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_ends_in_flight_requests_as_cancelled() {
    Tokenizer::O200kBase.warm();
    let control = Control::default();
    let c = control.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(30)).await;
        c.stop.cancel();
        c.cancel.cancel();
    });
    let (sum, spans) = run(
        plan(
            Schedule::Backlog,
            Some(5),
            Some(2),
            Dispatch::WorkConserving,
        ),
        Fake::new(5_000, 0),
        control,
    )
    .await;
    assert_eq!((sum.spans, sum.status.ok, sum.status.cancelled), (5, 0, 5));
    assert!(sum.cancelled_in_flight);
    assert_eq!(spans.iter().filter(|s| s.admitted_at.is_some()).count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_backlog_runs_for_the_duration_and_keeps_a_cap_waiting() {
    let mut p = plan(Schedule::Backlog, None, Some(3), Dispatch::WorkConserving);
    p.duration = Some(Duration::from_millis(120));
    let (sum, spans) = run(p, Fake::new(10, 0), Control::default()).await;
    assert!(sum.status.ok >= 15, "{sum:?}");
    assert_eq!(
        sum.status.cancelled, 3,
        "the one cap's worth still waiting at the end"
    );
    assert_eq!(sum.spans, sum.status.ok + sum.status.cancelled);
    assert_eq!(spans.len() as u64, sum.spans);
}

#[tokio::test]
async fn a_deadline_that_ended_the_dispatch_can_be_awaited_again_by_the_drain() {
    // What broke: when the deadline won the dispatch phase's race (a pacer
    // running late on a loaded machine, in a ramped `--duration` bench), the
    // drain phase awaited the same finished async block again and the run
    // panicked ("`async fn` resumed after completion").
    let mut deadline = Some(Box::pin(tokio::time::sleep(Duration::from_millis(1))));
    super::until(&mut deadline).await;
    tokio::time::timeout(Duration::from_secs(1), super::until(&mut deadline))
        .await
        .expect("a passed deadline is ready again at once");
    // Without a deadline it never comes.
    let mut none = None;
    assert!(
        tokio::time::timeout(Duration::from_millis(20), super::until(&mut none))
            .await
            .is_err()
    );
}

/// A server double whose reply to one request (by its prompt) is slow.
struct SlowOne {
    key: String,
    inner: Arc<Fake>,
}

impl Sender for SlowOne {
    async fn attempt(
        &self,
        request: &Request,
        clock: &RunClock,
        cancel: &CancellationToken,
    ) -> AttemptOutcome {
        if matches!(&request.spec.prompt, Prompt::Text(k) if *k == self.key) {
            tokio::time::sleep(Duration::from_millis(80)).await;
        }
        self.inner.attempt(request, clock, cancel).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn span_ids_follow_arrival_not_release_through_the_session() {
    // The session's writer numbers spans in release order for a recorder; the
    // bench's span ids are its requests' arrival numbers, kept on that path.
    let p = plan(
        Schedule::Backlog,
        Some(3),
        Some(3),
        Dispatch::WorkConserving,
    );
    let first = p
        .workload
        .request(0, p.seed, p.prompt_salt, p.tokenizer, None);
    let Prompt::Text(key) = first.spec.prompt else {
        unreachable!()
    };
    let sender = Arc::new(SlowOne {
        key,
        inner: Fake::new(5, 0),
    });
    let buf = Buf::default();
    let rec = Writer::to_writer(buf.clone(), Tokenizer::O200kBase, None);
    let live = Arc::new(LiveStats::default());
    let sum = execute(
        p,
        RunClock::start(),
        sender,
        Some(rec.sender()),
        live.clone(),
        &Control::default(),
    )
    .await;
    rec.finish().unwrap();
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let ids: Vec<String> = text
        .lines()
        .filter_map(|l| match serde_json::from_str::<Record>(l).unwrap() {
            Record::Span(s) => Some(s.span_id),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), 3);
    assert_eq!(
        ids[2], "1",
        "the slow first request is released last: {ids:?}"
    );
    assert_eq!((sum.spans, sum.status.ok, sum.admitted), (3, 3, 3));
    assert_eq!(live.done.load(std::sync::atomic::Ordering::Relaxed), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_without_a_log_still_counts_every_span_in_its_summary() {
    // A warm-up writes nothing; its spans take the session's path to no file,
    // and the summary and live counters still see each of them.
    let live = Arc::new(LiveStats::default());
    let sum = execute(
        plan(
            Schedule::Backlog,
            Some(6),
            Some(2),
            Dispatch::WorkConserving,
        ),
        RunClock::start(),
        Fake::new(2, 1),
        None,
        live.clone(),
        &Control::default(),
    )
    .await;
    // Without retries, every request's first (429) attempt ends it.
    assert_eq!(
        (sum.spans, sum.status.ok, sum.status.error, sum.admitted),
        (6, 0, 6, 6)
    );
    assert!(
        !sum.errors.is_empty(),
        "the 429s' messages reach the summary"
    );
    assert_eq!(live.done.load(std::sync::atomic::Ordering::Relaxed), 6);
}
