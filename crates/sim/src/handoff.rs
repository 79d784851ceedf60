//! The hand-off of one sequence between the engine thread and its connection
//! ([`SeqShared`]): tokens produced so far and how it ended, written by the engine
//! and awaited by the response body, which it wakes once per burst.

use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use crate::sync::lock;

/// How a sequence left the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Done {
    /// All its tokens were generated.
    Finished,
    /// The engine stopped (shutdown) before it finished.
    Aborted,
}

/// Progress of one sequence, written by the engine thread and read by the
/// connection task.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    pub produced: u32,
    pub done: Option<Done>,
    pub waker: Option<Waker>,
}

/// The engine-to-connection hand-off of one sequence.
#[derive(Debug, Default)]
pub(crate) struct SeqShared {
    pub progress: Mutex<Progress>,
}

impl SeqShared {
    /// Records the `count`-th token (and completion) and wakes the reader if it
    /// is waiting. The waker is taken, so a burst of tokens wakes it once.
    pub(crate) fn token(&self, count: u32, finished: bool) {
        let waker = {
            let mut p = lock(&self.progress);
            p.produced = count;
            if finished {
                p.done = Some(Done::Finished);
            }
            p.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Marks the sequence aborted and wakes the reader.
    pub(crate) fn abort(&self) {
        let waker = {
            let mut p = lock(&self.progress);
            p.done.get_or_insert(Done::Aborted);
            p.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The progress now, registering `cx`'s waker when nothing new is there.
    pub(crate) fn poll_progress(
        &self,
        seen: u32,
        cx: &mut Context<'_>,
    ) -> Poll<(u32, Option<Done>)> {
        let mut p = lock(&self.progress);
        if p.produced == seen && p.done.is_none() {
            match &p.waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => p.waker = Some(cx.waker().clone()),
            }
            return Poll::Pending;
        }
        Poll::Ready((p.produced, p.done))
    }
}

/// Waits until the sequence is done; yields (tokens produced, how it ended).
pub(crate) struct WaitDone<'a>(pub &'a SeqShared);

impl Future for WaitDone<'_> {
    type Output = (u32, Done);
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut p = lock(&self.0.progress);
        match p.done {
            Some(d) => Poll::Ready((p.produced, d)),
            None => {
                match &p.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => p.waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}
