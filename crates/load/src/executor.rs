//! The one executor every mode uses: it takes ready times from a pure
//! [`Schedule`], lets requests through the [`Admission`] controller, runs their
//! attempts and retries through a [`Sender`], and hands each finished request to
//! the recorder as a span. Closed loop, open loop, trace replay, warm-up and every
//! sweep level are this same code with different plans.
//!
//! Instants: `queued_at` is the scheduled ready time (so a late timer shows up as
//! queue time, never hidden); `admitted_at` and `released_at` are stamped under the
//! admission lock, so a freed slot handed to the next request gives
//! `released_at(a) == admitted_at(b)` and samples agree with spans.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tpscope_model::{Cause, RunClock, Status};
use tpscope_tokens::{Tokenizer, mix};

use crate::admission::{Admission, Dispatch};
use crate::assemble::{Finished, assemble};
use crate::live::LiveStats;
use crate::recorder::RecorderTx;
use crate::retry::RetryPolicy;
use crate::sampler::Sampler;
use crate::schedule::Schedule;
use crate::sender::Sender;
use crate::workload::Workload;

/// Everything one run needs to know.
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// The run's id (every record carries it).
    pub run_id: String,
    /// When requests become ready.
    pub schedule: Schedule,
    /// Stop creating requests after this many (`None`: no limit).
    pub requests: Option<u64>,
    /// Stop admitting this long after the start (`None`: no limit).
    pub duration: Option<Duration>,
    /// The in-flight cap (`None`: none; a closed loop needs one).
    pub cap: Option<u32>,
    /// How the queue is let through the cap.
    pub dispatch: Dispatch,
    /// What requests ask for.
    pub workload: Arc<Workload>,
    /// The tokenizer of synthetic prompts and of counting replies without usage.
    pub tokenizer: Tokenizer,
    /// Seed of the schedule, the workload and the retry jitter.
    pub seed: u64,
    /// Retries.
    pub retry: RetryPolicy,
    /// Sample cadence (`None`: no samples).
    pub sample_interval: Option<Duration>,
    /// After the run stops admitting (end of `--duration`, Ctrl-C), how long
    /// in-flight requests may take before they are cancelled.
    pub drain_timeout: Duration,
}

/// Signals from outside a run (Ctrl-C).
#[derive(Clone, Debug, Default)]
pub struct Control {
    /// Stop admitting, let in-flight requests finish (bounded), end the run.
    pub stop: CancellationToken,
    /// Cancel in-flight requests too.
    pub cancel: CancellationToken,
}

/// How a run ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Requests that took a slot (whose first attempt was sent).
    pub admitted: u64,
    /// Spans produced (= ok + error + cancelled).
    pub spans: u64,
    /// Ok spans.
    pub ok: u64,
    /// Error spans.
    pub error: u64,
    /// Cancelled spans (including those that never left the queue).
    pub cancelled: u64,
    /// Whether the run was interrupted (Ctrl-C) rather than ending by itself.
    pub interrupted: bool,
    /// Whether in-flight requests were cancelled (second Ctrl-C or drain timeout).
    pub cancelled_in_flight: bool,
}

#[derive(Clone, Copy, Debug)]
struct Ticket {
    seq: u64,
    ready: Instant,
}

struct State {
    adm: Admission<Ticket>,
    /// No more admissions (deadline, Ctrl-C).
    stopping: bool,
    /// An endless closed-loop backlog: each admission creates one more request.
    topup: bool,
    next_seq: u64,
    summary: RunSummary,
}

struct Shared<S> {
    st: Mutex<State>,
    sender: Arc<S>,
    plan: RunPlan,
    clock: RunClock,
    rec: Option<RecorderTx>,
    live: Arc<LiveStats>,
    cancel: CancellationToken,
    stop: CancellationToken,
    tracker: TaskTracker,
}

impl<S: Sender> Shared<S> {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Admits what the controller lets through, stamping `now`; returns the tickets
/// to start (after the lock is dropped).
fn admit_locked<S: Sender>(sh: &Shared<S>, st: &mut State, now: Instant, out: &mut Vec<Ticket>) {
    // Checked here too: a request released by a cancellation must not admit the
    // next one before the run has processed the stop.
    if st.stopping || sh.stop.is_cancelled() || sh.cancel.is_cancelled() {
        return;
    }
    let before = out.len();
    st.adm.admit(|t| out.push(t));
    let n = (out.len() - before) as u64;
    st.summary.admitted += n;
    if st.topup {
        for _ in 0..n {
            let seq = st.next_seq;
            st.next_seq += 1;
            st.adm.push(Ticket { seq, ready: now });
        }
    }
}

fn start_all<S: Sender>(sh: &Arc<Shared<S>>, tickets: Vec<Ticket>, admitted: Instant) {
    for t in tickets {
        sh.tracker.spawn(request_task(sh.clone(), t, admitted));
    }
}

/// Stops admitting; writes what was still queued as cancelled spans that never
/// took a slot (released_at = when they left the queue).
fn stop_admitting<S: Sender>(sh: &Arc<Shared<S>>, why: &str) {
    let (drained, now) = {
        let mut st = sh.lock();
        st.stopping = true;
        st.topup = false;
        (st.adm.drain_queue(), Instant::now())
    };
    for t in drained {
        finish(
            sh,
            Finished {
                seq: t.seq,
                queued_at: sh.clock.at(t.ready),
                admitted_at: None,
                released_at: sh.clock.at(now.max(t.ready)),
                outcomes: Vec::new(),
                planned_input_tokens: None,
                cancelled: Some(why.to_string()),
            },
        );
    }
}

/// Runs one request: attempts and retries holding the slot, then releases it
/// (admitting the next at once) and hands the span to the recorder.
async fn request_task<S: Sender>(sh: Arc<Shared<S>>, t: Ticket, admitted: Instant) {
    let plan = &sh.plan;
    let req = plan.workload.request(t.seq, plan.seed, plan.tokenizer);
    let mut rng = StdRng::seed_from_u64(mix(plan.seed ^ mix(t.seq) ^ 0xB4C0FF));
    let mut outcomes = Vec::with_capacity(1);
    let mut cancelled = None;
    loop {
        let mut o = sh.sender.attempt(&req, &sh.clock, &sh.cancel).await;
        let Some(cause) = o.attempt.cause else {
            outcomes.push(o);
            break;
        };
        if cause == Cause::Cancelled || sh.cancel.is_cancelled() {
            outcomes.push(o);
            break;
        }
        let retries_done = outcomes.len() as u32;
        let Some(wait) = plan
            .retry
            .decide(cause, retries_done, o.retry_after, &mut rng)
        else {
            outcomes.push(o);
            break;
        };
        let began = Instant::now();
        let interrupted = tokio::select! {
            _ = tokio::time::sleep(wait) => false,
            _ = sh.cancel.cancelled() => true,
        };
        o.attempt.backoff = Some(if interrupted { began.elapsed() } else { wait });
        outcomes.push(o);
        if interrupted {
            cancelled = Some(format!("cancelled while backing off after {cause}"));
            break;
        }
    }
    let mut next = Vec::new();
    let released = {
        let mut st = sh.lock();
        st.adm.release();
        let now = Instant::now();
        admit_locked(&sh, &mut st, now, &mut next);
        now
    };
    start_all(&sh, next, released);
    finish(
        &sh,
        Finished {
            seq: t.seq,
            queued_at: sh.clock.at(t.ready),
            admitted_at: Some(sh.clock.at(admitted)),
            released_at: sh.clock.at(released),
            outcomes,
            planned_input_tokens: req.input_tokens,
            cancelled,
        },
    );
}

fn finish<S: Sender>(sh: &Arc<Shared<S>>, f: Finished) {
    use std::sync::atomic::Ordering::Relaxed;
    let (span, to_count) = assemble(&sh.plan.run_id, sh.plan.tokenizer.name(), f);
    {
        let mut st = sh.lock();
        st.summary.spans += 1;
        match span.status {
            Status::Ok => st.summary.ok += 1,
            Status::Error => st.summary.error += 1,
            Status::Cancelled => st.summary.cancelled += 1,
        }
    }
    sh.live.done.fetch_add(1, Relaxed);
    match span.status {
        Status::Ok => {
            sh.live.ok.fetch_add(1, Relaxed);
            sh.live.tokens.fetch_add(span.output_tokens, Relaxed);
        }
        Status::Error => {
            sh.live.error.fetch_add(1, Relaxed);
        }
        Status::Cancelled => {
            sh.live.cancelled.fetch_add(1, Relaxed);
        }
    }
    if let Some(rec) = &sh.rec {
        rec.span(span, to_count);
    }
}

/// Feeds ready requests into the queue at their times. Returns when the schedule
/// is exhausted or the run stops admitting.
async fn dispatch<S: Sender>(sh: &Arc<Shared<S>>, start: Instant, stop: &CancellationToken) {
    let plan = &sh.plan;
    let limit = plan.requests.unwrap_or(u64::MAX);
    if plan.schedule.is_backlog() {
        let mut next = Vec::new();
        {
            let mut st = sh.lock();
            let initial = match plan.requests {
                Some(n) => n,
                None => {
                    // Endless backlog: one cap's worth to fill the slots; each
                    // admission then creates one more, so a cap's worth waits.
                    st.topup = true;
                    u64::from(plan.cap.unwrap_or(1).max(1))
                }
            };
            for seq in 0..initial {
                st.adm.push(Ticket { seq, ready: start });
            }
            st.next_seq = initial;
            admit_locked(sh, &mut st, start, &mut next);
        }
        start_all(sh, next, start);
        return;
    }
    // Timed arrivals are paced by a thread of their own with a fine timer (tokio's
    // timers tick in whole milliseconds, which would show up as queue time).
    let pacer_sh = sh.clone();
    let pacer_stop = stop.clone();
    let pacer = tokio::task::spawn_blocking(move || pace(&pacer_sh, start, &pacer_stop, limit));
    let _ = pacer.await;
}

/// Sleeps until `until` with sub-millisecond precision (the thread's timer slack is
/// set to 1 ns on Linux), waking at least every 20 ms to notice `stop`. Returns
/// whether it reached `until`.
fn sleep_precisely(until: Instant, stop: &CancellationToken) -> bool {
    loop {
        let now = Instant::now();
        if now >= until {
            return true;
        }
        if stop.is_cancelled() {
            return false;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(20)));
    }
}

/// The pacer: pushes each timed arrival into the queue at its ready time.
fn pace<S: Sender>(sh: &Arc<Shared<S>>, start: Instant, stop: &CancellationToken, limit: u64) {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    let plan = &sh.plan;
    let mut offsets = plan.schedule.offsets(plan.seed);
    let mut seq = 0u64;
    while seq < limit {
        let Some(off) = offsets.next() else { break };
        if plan.duration.is_some_and(|d| off >= d) {
            break;
        }
        let ready = start + off;
        if !sleep_precisely(ready, stop) {
            return;
        }
        let mut next = Vec::new();
        let now = {
            let mut st = sh.lock();
            if st.stopping {
                return;
            }
            st.adm.push(Ticket { seq, ready });
            let now = Instant::now();
            admit_locked(sh, &mut st, now, &mut next);
            now
        };
        start_all(sh, next, now);
        seq += 1;
    }
}

/// Runs one plan to the end and returns its counts. Spans and samples go to `rec`
/// (nothing is written when it is `None`, as for a warm-up); the caller writes the
/// `run` record before and the `end` record after.
pub async fn execute<S: Sender>(
    plan: RunPlan,
    clock: RunClock,
    sender: Arc<S>,
    rec: Option<RecorderTx>,
    live: Arc<LiveStats>,
    control: &Control,
) -> RunSummary {
    // Load the tokenizer before the clock starts, so the first prompt does not pay
    // for it inside the measurement.
    let tk = plan.tokenizer;
    let _ = tokio::task::spawn_blocking(move || tk.warm()).await;
    let cancel = control.cancel.child_token();
    let stop = control.stop.child_token();
    let sh = Arc::new(Shared {
        st: Mutex::new(State {
            adm: Admission::new(plan.cap, plan.dispatch),
            stopping: false,
            topup: false,
            next_seq: 0,
            summary: RunSummary::default(),
        }),
        sender,
        clock,
        rec: rec.clone(),
        live: live.clone(),
        cancel: cancel.clone(),
        stop: stop.clone(),
        tracker: TaskTracker::new(),
        plan,
    });
    let start = Instant::now();
    let sampler = sh.plan.sample_interval.map(|every| {
        let probe_sh = sh.clone();
        Sampler::start(
            sh.plan.run_id.clone(),
            every,
            clock,
            Box::new(move || {
                let st = probe_sh.lock();
                (
                    Instant::now(),
                    st.adm.in_flight(),
                    st.adm.queue_depth(),
                    st.adm.cap(),
                )
            }),
            rec,
            live,
        )
    });

    let deadline = sh.plan.duration.map(|d| start + d);
    let until_deadline = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d.into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(until_deadline);

    // Phase 1: feed the schedule until it is exhausted, the deadline, or Ctrl-C.
    let mut interrupted = false;
    tokio::select! {
        _ = dispatch(&sh, start, &stop) => {}
        _ = &mut until_deadline => {}
        _ = stop.cancelled() => {}
    }
    sh.tracker.close();
    // Phase 2: the queue drains through the cap; stop at the deadline or Ctrl-C.
    let stop_reason = tokio::select! {
        _ = sh.tracker.wait() => None,
        _ = &mut until_deadline => Some("not admitted before --duration ended"),
        _ = stop.cancelled() => Some("interrupted before admission"),
    };
    if stop.is_cancelled() {
        interrupted = true;
    }
    if let Some(why) = stop_reason {
        stop_admitting(&sh, why);
        // Phase 3: in-flight requests finish, bounded; then they are cancelled.
        tokio::select! {
            _ = sh.tracker.wait() => {}
            _ = tokio::time::sleep(sh.plan.drain_timeout) => cancel.cancel(),
            _ = cancel.cancelled() => {}
        }
        sh.tracker.wait().await;
    }
    if let Some(s) = sampler {
        s.stop();
    }
    let mut summary = sh.lock().summary.clone();
    summary.interrupted = interrupted || control.cancel.is_cancelled();
    summary.cancelled_in_flight = cancel.is_cancelled();
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dist::LengthDist;
    use crate::recorder::Recorder;
    use crate::schedule::Arrival;
    use crate::sender::{Outcome, Usage};
    use crate::workload::{Prompt, Request};
    use std::collections::HashMap;
    use std::io::Write;
    use tpscope_model::{Attempt, Record, Span};

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
        ) -> Outcome {
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
            Outcome {
                attempt: Attempt {
                    started_at: started,
                    first_byte_at: Some(started),
                    first_token_at: ok.then_some(started),
                    ended_at: ended,
                    http_status: done.then_some(if failing { 429 } else { 200 }),
                    cause,
                    tokens: 0,
                    connection_reused: Some(true),
                    connect_time: None,
                    backoff: None,
                },
                last_token_at: ok.then_some(ended),
                usage: ok.then_some(Usage {
                    prompt_tokens: None,
                    completion_tokens: u64::from(request.max_tokens()),
                }),
                content_chunks: 3,
                text: None,
                chunks: None,
                retry_after: failing.then_some(Duration::from_millis(10)),
                error_message: None,
                response_id: None,
            }
        }
    }

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
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
            tokenizer: Tokenizer::O200kBase,
            seed: 1,
            retry: RetryPolicy::default(),
            sample_interval: Some(Duration::from_millis(5)),
            drain_timeout: Duration::from_secs(5),
        }
    }

    async fn run(p: RunPlan, fake: Arc<Fake>, control: Control) -> (RunSummary, Vec<Span>) {
        let buf = Buf::default();
        let rec = Recorder::to_writer(buf.clone(), Tokenizer::O200kBase, None);
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
        assert_eq!((sum.spans, sum.ok, sum.admitted), (24, 24, 24));
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
        assert_eq!(sum.ok, 12);
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
        assert_eq!(sum.ok, 3);
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
        assert_eq!((sum.ok, sum.error), (0, 2));
        assert!(
            spans
                .iter()
                .all(|s| s.error.as_ref().unwrap().cause == Cause::Http429)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn open_loop_requests_are_queued_at_their_scheduled_time() {
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
        assert_eq!(sum.ok, 10);
        let t0 = spans[0].queued_at;
        for (i, s) in spans.iter().enumerate() {
            assert_eq!(
                s.queued_at.signed_nanos_since(t0),
                i as i64 * 5_000_000,
                "span {i}"
            );
        }
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
        assert_eq!(sum.ok, 2, "the two in flight finish");
        assert_eq!(sum.cancelled, 48);
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
        assert_eq!((sum.spans, sum.ok, sum.cancelled), (5, 0, 5));
        assert!(sum.cancelled_in_flight);
        assert_eq!(spans.iter().filter(|s| s.admitted_at.is_some()).count(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_endless_backlog_runs_for_the_duration_and_keeps_a_cap_waiting() {
        let mut p = plan(Schedule::Backlog, None, Some(3), Dispatch::WorkConserving);
        p.duration = Some(Duration::from_millis(120));
        let (sum, spans) = run(p, Fake::new(10, 0), Control::default()).await;
        assert!(sum.ok >= 15, "{sum:?}");
        assert_eq!(
            sum.cancelled, 3,
            "the one cap's worth still waiting at the end"
        );
        assert_eq!(sum.spans, sum.ok + sum.cancelled);
        assert_eq!(spans.len() as u64, sum.spans);
    }
}
