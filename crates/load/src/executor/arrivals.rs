//! Arrivals: ready requests fed into the queue at their times — a backlog all at
//! the start, timed arrivals by a pacer thread with a fine timer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::request::{Shared, Ticket, admit_locked, set_cap, start_all};
use crate::sender::Sender;

/// Feeds ready requests into the queue at their times. Returns when the schedule
/// is exhausted or the run stops admitting.
pub(super) async fn dispatch<S: Sender>(
    sh: &Arc<Shared<S>>,
    start: Instant,
    stop: &CancellationToken,
) {
    let plan = &sh.plan;
    let limit = plan.requests.unwrap_or(u64::MAX);
    if let Some(sessions) = &plan.sessions {
        super::sessions::start_sessions(sh, sessions.clone());
        return;
    }
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
                st.adm.push(Ticket::plain(seq, start));
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

/// Raises a ramped cap at each step's time, admitting what the new slots let
/// through at once. Ends after the last step or when the run stops admitting.
pub(super) async fn ramp_cap<S: Sender>(
    sh: Arc<Shared<S>>,
    steps: Vec<(Duration, u32)>,
    start: Instant,
) {
    for (at, cap) in steps {
        tokio::time::sleep_until((start + at).into()).await;
        let mut next = Vec::new();
        let now = {
            let mut st = sh.lock();
            if st.stopping {
                return;
            }
            let now = Instant::now();
            set_cap(&sh, &mut st, cap, now);
            admit_locked(&sh, &mut st, now, &mut next);
            now
        };
        start_all(&sh, next, now);
    }
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
        let scheduled = start + off;
        if !sleep_precisely(scheduled, stop) {
            return;
        }
        let mut next = Vec::new();
        let now = {
            let mut st = sh.lock();
            if st.stopping {
                return;
            }
            // Queued when the client got to it, not when it was scheduled: a
            // pacer that ran late (a starved client) must not show its own
            // lateness as work waiting, i.e. as the pipeline's gap. The lateness
            // is reported apart (the run's `end` record, the live line).
            let ready = Instant::now().max(scheduled);
            sh.live.lag.schedule_late(ready - scheduled);
            st.adm.push(Ticket::plain(seq, ready));
            let now = Instant::now();
            admit_locked(sh, &mut st, now, &mut next);
            now
        };
        start_all(sh, next, now);
        seq += 1;
    }
}
