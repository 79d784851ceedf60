//! The one executor every mode uses: it takes ready times from a pure
//! [`Schedule`](crate::schedule::Schedule), lets requests through the [`Admission`]
//! controller, runs their attempts and retries through a [`Sender`], and hands each
//! finished request to the run's [`Session`], whose writer makes it a span. Closed loop, open loop, trace replay,
//! warm-up and every sweep level are this same code with different plans.
//!
//! The files: `plan.rs` (what a run is told, how it ended), `request.rs` (one
//! request's life, admission under the lock), `arrivals.rs` (feeding the queue).
//!
//! Instants: `queued_at` is the scheduled ready time (so a late timer shows up as
//! queue time, never hidden); `admitted_at` and `released_at` are stamped under the
//! admission lock, so a freed slot handed to the next request gives
//! `released_at(a) == admitted_at(b)` and samples agree with spans.

mod arrivals;
mod plan;
mod request;
mod sessions;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tokio_util::task::TaskTracker;
use tpscope_model::{RunClock, Span};
use tpscope_record::{Admission, LiveStats, Sampler, Session, Writer, WriterTx};

use crate::ramp::RampOver;
use crate::sender::Sender;
use arrivals::dispatch;
pub use plan::{Control, RunPlan, RunSummary};
use request::{Shared, State, stop_admitting};

/// Runs one plan to the end in a session of its own on `rec` (the plan's run id
/// and cap, on `clock`, counted in `live`), writing no `run` or `end` record:
/// [`execute_in`] for a warm-up (`rec` `None`: nothing is written), a benchmark or
/// a test that drives the executor alone.
pub async fn execute<S: Sender>(
    plan: RunPlan,
    clock: RunClock,
    sender: Arc<S>,
    rec: Option<WriterTx>,
    live: Arc<LiveStats>,
    control: &Control,
) -> RunSummary {
    // A warm-up's spans take the same path, to a writer of nothing.
    let (tx, unwritten) = match rec {
        Some(tx) => (tx, None),
        None => {
            let w = Writer::to_writer(std::io::sink(), plan.tokenizer, None);
            (w.sender(), Some(w))
        }
    };
    let session = Session::shared(tx, live, &plan.run_id, clock, plan.cap);
    let summary = execute_in(plan, Arc::new(session), sender, control).await;
    if let Some(w) = unwritten {
        let _ = w.finish();
    }
    summary
}

/// Runs one plan to the end in `session` (a [`Session::open`] or
/// [`Session::shared`] one, of the plan's run id and cap, on whose clock and live
/// counters it runs) and returns its counts; the caller ends the session (its
/// `end` record). Every span takes the [`Session`] path (assembled and validated
/// on the writer thread, its id the request's arrival number), as do samples, and
/// the summary counts what the writer assembled.
pub async fn execute_in<S: Sender>(
    plan: RunPlan,
    session: Arc<Session>,
    sender: Arc<S>,
    control: &Control,
) -> RunSummary {
    // Load the tokenizer before the clock starts, so the first prompt does not pay
    // for it inside the measurement.
    let tk = plan.tokenizer;
    let _ = tokio::task::spawn_blocking(move || tk.warm()).await;
    let cancel = control.cancel.child_token();
    let stop = control.stop.child_token();
    let (clock, live) = (session.clock(), session.live().clone());
    let tally = Arc::new(Mutex::new(RunSummary::default()));
    {
        let (tally, live) = (tally.clone(), live.clone());
        let _ = session.on_span(Arc::new(move |s: &Span| {
            tally
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .count(s);
            live.lag.span(s);
        }));
    }
    let sh = Arc::new(Shared {
        st: Mutex::new(State {
            // A ramped cap starts at its first value.
            adm: Admission::new(
                plan.schedule
                    .cap_ramp()
                    .map(|r| r.ramp.cap_at(0.0))
                    .or(plan.cap),
                plan.dispatch,
            ),
            stopping: false,
            topup: false,
            next_seq: 0,
            admitted: 0,
        }),
        sender,
        clock,
        session: session.clone(),
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
            // The bench writes every tick: its run record states no heartbeat.
            None,
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
            Some(sh.session.writer().clone()),
            live,
        )
    });

    // A `Sleep` (not an async block) so that both phases below may wait on it: a
    // deadline that ended phase 1 must end phase 2 at once, and an async block
    // polled again after completing panics ("`async fn` resumed after
    // completion": a ramped `--duration` run hit it when the deadline came first).
    let mut deadline = sh
        .plan
        .duration
        .map(|d| Box::pin(tokio::time::sleep_until((start + d).into())));

    // A cap ramped over time steps on its own clock.
    let ramp_task = sh.plan.schedule.cap_ramp().and_then(|r| match r.over {
        RampOver::Duration(d) => Some(tokio::spawn(arrivals::ramp_cap(
            sh.clone(),
            r.ramp.cap_steps(d),
            start,
        ))),
        RampOver::Requests(_) => None,
    });

    // Phase 1: feed the schedule until it is exhausted, the deadline, or Ctrl-C.
    let mut interrupted = false;
    tokio::select! {
        _ = dispatch(&sh, start, &stop) => {}
        _ = until(&mut deadline) => {}
        _ = stop.cancelled() => {}
    }
    sh.tracker.close();
    // Phase 2: the queue drains through the cap; stop at the deadline or Ctrl-C.
    let stop_reason = tokio::select! {
        _ = sh.tracker.wait() => None,
        _ = until(&mut deadline) => Some("not admitted before --duration ended"),
        _ = stop.cancelled() => Some("interrupted before admission"),
    };
    if stop.is_cancelled() {
        interrupted = true;
    }
    // A Ctrl-C that also cancels the in-flight requests can end the tracker's wait
    // while requests still queue: those are written too, as cancelled.
    let stop_reason = stop_reason.or_else(|| {
        stop.is_cancelled()
            .then_some("interrupted before admission")
    });
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
    if let Some(t) = ramp_task {
        t.abort();
    }
    if let Some(s) = sampler {
        s.stop();
    }
    // Every span handed over is counted once the writer has assembled it.
    session.sync();
    let mut summary = std::mem::take(&mut *tally.lock().unwrap_or_else(PoisonError::into_inner));
    summary.admitted = sh.lock().admitted;
    summary.interrupted = interrupted || control.cancel.is_cancelled();
    summary.cancelled_in_flight = cancel.is_cancelled();
    summary
}

/// Waits for the deadline, if any (forever without one); returns at once when it
/// has already passed, however often it is awaited.
async fn until(deadline: &mut Option<std::pin::Pin<Box<tokio::time::Sleep>>>) {
    match deadline {
        Some(s) => s.as_mut().await,
        None => std::future::pending().await,
    }
}
