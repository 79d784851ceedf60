//! One request's life in a run: admission under the lock, its attempts and retries
//! holding the slot, its release (handing the slot to the next at once), and its
//! finished request, handed to the run's [`Session`] (which assembles its span).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tpscope_model::{Cause, RunClock, SampleRecord};
use tpscope_record::{Admission, Finished, LiveStats, Session};
use tpscope_tokens::mix;

use super::plan::RunPlan;
use crate::sender::Sender;
use crate::workload::Request;

#[derive(Debug)]
pub(super) struct Ticket {
    pub(super) seq: u64,
    pub(super) ready: Instant,
    /// A turn of a session: its request (built from the history) and where its
    /// reply goes (`None` for independent requests).
    pub(super) turn: Option<Box<TurnTicket>>,
}

/// A session's turn waiting for a slot.
#[derive(Debug)]
pub(super) struct TurnTicket {
    pub(super) request: Request,
    pub(super) session: u64,
    /// From 1.
    pub(super) turn: u32,
    /// The reply text, sent once the turn ends ok; dropped (the session ends) when
    /// it fails or is cancelled.
    pub(super) reply: tokio::sync::oneshot::Sender<String>,
}

impl Ticket {
    pub(super) fn plain(seq: u64, ready: Instant) -> Ticket {
        Ticket {
            seq,
            ready,
            turn: None,
        }
    }

    fn session(&self) -> Option<(u64, u32)> {
        self.turn.as_ref().map(|t| (t.session, t.turn))
    }
}

pub(super) struct State {
    pub(super) adm: Admission<Ticket>,
    /// No more admissions (deadline, Ctrl-C).
    pub(super) stopping: bool,
    /// An endless closed-loop backlog: each admission creates one more request.
    pub(super) topup: bool,
    pub(super) next_seq: u64,
    /// Requests that took a slot (the summary's `admitted`).
    pub(super) admitted: u64,
}

pub(super) struct Shared<S> {
    pub(super) st: Mutex<State>,
    pub(super) sender: Arc<S>,
    pub(super) plan: RunPlan,
    pub(super) clock: RunClock,
    /// The run's spans (one path to the writer, numbered by `seq`) and samples.
    pub(super) session: Arc<Session>,
    pub(super) live: Arc<LiveStats>,
    pub(super) cancel: CancellationToken,
    pub(super) stop: CancellationToken,
    pub(super) tracker: TaskTracker,
}

impl<S: Sender> Shared<S> {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Admits what the controller lets through, stamping `now`; returns the tickets
/// to start (after the lock is dropped).
pub(super) fn admit_locked<S: Sender>(
    sh: &Shared<S>,
    st: &mut State,
    now: Instant,
    out: &mut Vec<Ticket>,
) {
    // Checked here too: a request released by a cancellation must not admit the
    // next one before the run has processed the stop.
    if st.stopping || sh.stop.is_cancelled() || sh.cancel.is_cancelled() {
        return;
    }
    let before = out.len();
    match sh
        .plan
        .schedule
        .cap_ramp()
        .filter(|r| r.request_progress(0.0).is_some())
    {
        // A cap ramped over requests follows the admitted count: raise, admit,
        // until the cap of the count reached is the cap in force.
        Some(ramp) => loop {
            let p = ramp.request_progress(st.admitted as f64);
            let cap = ramp.ramp.cap_at(p.unwrap_or(1.0));
            if st.adm.cap() != Some(cap) {
                set_cap(sh, st, cap, now);
            }
            let mut k = 0;
            st.adm.admit(|t| {
                out.push(t);
                k += 1;
            });
            st.admitted += k;
            if k == 0
                || ramp
                    .ramp
                    .cap_at(ramp.request_progress(st.admitted as f64).unwrap_or(1.0))
                    == cap
            {
                break;
            }
        },
        None => {
            st.adm.admit(|t| out.push(t));
            st.admitted += (out.len() - before) as u64;
        }
    }
    let n = (out.len() - before) as u64;
    if st.topup {
        for _ in 0..n {
            let seq = st.next_seq;
            st.next_seq += 1;
            st.adm.push(Ticket::plain(seq, now));
        }
    }
}

/// Changes the cap (a ramp) and writes a sample stating it at once, so the
/// analysis uses the new cap from that instant (as `Recorder::set_cap` does).
pub(super) fn set_cap<S: Sender>(sh: &Shared<S>, st: &mut State, cap: u32, now: Instant) {
    st.adm.set_cap(Some(cap));
    sh.live.cap.store(cap, std::sync::atomic::Ordering::Relaxed);
    if sh.plan.sample_interval.is_some() {
        sh.session.writer().sample(SampleRecord {
            run_id: sh.plan.run_id.clone(),
            at: sh.clock.at(now),
            in_flight: st.adm.in_flight(),
            queue_depth: st.adm.queue_depth(),
            cap: Some(cap),
        });
    }
}

pub(super) fn start_all<S: Sender>(sh: &Arc<Shared<S>>, tickets: Vec<Ticket>, admitted: Instant) {
    for t in tickets {
        sh.tracker.spawn(request_task(sh.clone(), t, admitted));
    }
}

/// Stops admitting; writes what was still queued as cancelled spans that never
/// took a slot (released_at = when they left the queue).
pub(super) fn stop_admitting<S: Sender>(sh: &Arc<Shared<S>>, why: &str) {
    let (drained, now) = {
        let mut st = sh.lock();
        st.stopping = true;
        st.topup = false;
        (st.adm.drain_queue(), Instant::now())
    };
    for t in drained {
        let session = t.session();
        finish(
            sh,
            session,
            Finished {
                seq: t.seq,
                queued_at: sh.clock.at(t.ready),
                admitted_at: None,
                released_at: sh.clock.at(now.max(t.ready)),
                outcomes: Vec::new(),
                planned_input_tokens: None,
                cancelled: Some(why.to_string()),
                session_id: None,
                turn: None,
            },
        );
    }
}

/// Runs one request: attempts and retries holding the slot, then releases it
/// (admitting the next at once) and hands the span to the writer.
async fn request_task<S: Sender>(sh: Arc<Shared<S>>, t: Ticket, admitted: Instant) {
    let plan = &sh.plan;
    let session = t.session();
    let (req, reply) = match t.turn {
        Some(tt) => (tt.request, Some(tt.reply)),
        None => (
            plan.workload.request(
                t.seq,
                plan.seed,
                plan.prompt_salt,
                plan.tokenizer,
                plan.context,
            ),
            None,
        ),
    };
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
    // A session's next turn carries this reply, as the server returned it.
    if let (Some(tx), Some(last)) = (reply, outcomes.last())
        && cancelled.is_none()
        && last.attempt.cause.is_none()
    {
        let _ = tx.send(last.text.clone());
    }
    finish(
        &sh,
        session,
        Finished {
            seq: t.seq,
            queued_at: sh.clock.at(t.ready),
            admitted_at: Some(sh.clock.at(admitted)),
            released_at: sh.clock.at(released),
            outcomes,
            planned_input_tokens: req.input_tokens,
            cancelled,
            session_id: None,
            turn: None,
        },
    );
}

/// Hands a finished request to the run's session, as a turn of its multi-turn
/// session when it is one; the writer assembles, validates and writes its span,
/// which the run's hook counts into the summary.
pub(super) fn finish<S: Sender>(sh: &Arc<Shared<S>>, session: Option<(u64, u32)>, f: Finished) {
    let (session_id, turn) = match session {
        Some((id, turn)) => (Some(id.to_string()), Some(turn)),
        None => (None, None),
    };
    sh.session.finished(
        None,
        Finished {
            session_id,
            turn,
            ..f
        },
    );
}
