//! The optional cap, asynchronously: `tpscope_record`'s [`Admission`] (the one
//! cap + FIFO) behind a lock, each queued request waiting on a oneshot. A ticket
//! dropped while queued leaves the queue (never sent); a permit dropped gives its
//! slot to the next in line. Admission is stamped by the gate's `on_admit` at the
//! moment the slot is handed over (not when the waiting task next runs), so a
//! hand-over is not counted as idle time.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use tpscope_model::Timestamp;
use tpscope_record::{Admission, Dispatch};

struct Waiter {
    id: u64,
    tx: oneshot::Sender<Timestamp>,
}

/// Called under the gate's lock when a request takes a slot: moves it from
/// queued to in flight and returns the instant of admission (the instant the
/// slot was given back, when given: the slot changed hands then).
pub type OnAdmit = Box<dyn Fn(Option<Timestamp>) -> Timestamp + Send + Sync>;

/// Called when a request admitted but never used gives its slot back at once:
/// moves it back to queued.
pub type OnUnused = Box<dyn Fn() + Send + Sync>;

struct State {
    admission: Admission<Waiter>,
    next_id: u64,
}

/// The cap and its bounded queue.
pub struct Gate {
    state: Mutex<State>,
    queue_limit: usize,
    on_admit: OnAdmit,
    on_unused: OnUnused,
}

/// The queue was full.
#[derive(Debug)]
pub struct Full;

/// A place in the queue.
pub struct Ticket {
    gate: Arc<Gate>,
    id: u64,
    rx: Option<oneshot::Receiver<Timestamp>>,
}

/// A slot, given back when dropped.
pub struct Permit {
    gate: Arc<Gate>,
    given_back: bool,
}

impl Gate {
    /// A gate admitting `cap` at once (filling a freed slot at once, or in
    /// waves), with at most `queue_limit` waiting.
    pub fn new(
        cap: u32,
        queue_limit: usize,
        dispatch: Dispatch,
        on_admit: OnAdmit,
        on_unused: OnUnused,
    ) -> Arc<Gate> {
        Arc::new(Gate {
            state: Mutex::new(State {
                admission: Admission::new(Some(cap), dispatch),
                next_id: 0,
            }),
            queue_limit,
            on_admit,
            on_unused,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Joins the queue (and is let through at once when a slot is free).
    pub fn enqueue(self: &Arc<Self>) -> Result<Ticket, Full> {
        let mut s = self.lock();
        if s.admission.queue_depth() as usize >= self.queue_limit {
            return Err(Full);
        }
        let id = s.next_id;
        s.next_id += 1;
        let (tx, rx) = oneshot::channel();
        s.admission.push(Waiter { id, tx });
        self.admit(&mut s, None);
        Ok(Ticket {
            gate: self.clone(),
            id,
            rx: Some(rx),
        })
    }

    /// Requests waiting.
    #[cfg(test)]
    pub fn queue_depth(&self) -> u32 {
        self.lock().admission.queue_depth()
    }
    fn admit(&self, s: &mut State, freed_at: Option<Timestamp>) {
        // A waiter whose ticket is gone is never in the queue (its drop removed
        // it), so every send here reaches a live ticket or one being dropped,
        // which then gives the slot back.
        s.admission.admit(|w| {
            let _ = w.tx.send((self.on_admit)(freed_at));
        });
    }
}

impl Ticket {
    /// Waits for a slot; the permit and when it was handed over.
    pub async fn admitted(mut self) -> (Permit, Option<Timestamp>) {
        // The sender lives in the queue until it is admitted; the gate never
        // drops a queued waiter.
        let at = match self.rx.as_mut() {
            Some(rx) => rx.await.ok(),
            None => None,
        };
        self.rx = None;
        (
            Permit {
                gate: self.gate.clone(),
                given_back: false,
            },
            at,
        )
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        let mut s = self.gate.lock();
        if rx.try_recv().is_ok() {
            // Admitted just now, never used: the slot goes to the next.
            (self.gate.on_unused)();
            s.admission.release();
            self.gate.admit(&mut s, None);
            return;
        }
        let id = self.id;
        let rest: Vec<Waiter> = s
            .admission
            .drain_queue()
            .into_iter()
            .filter(|w| w.id != id)
            .collect();
        for w in rest {
            s.admission.push(w);
        }
    }
}

impl Permit {
    /// Gives the slot back as of `at` (the request's release): the next in line
    /// is admitted at that same instant.
    pub fn release_at(mut self, at: Timestamp) {
        self.give_back(Some(at));
        self.given_back = true;
    }

    fn give_back(&mut self, at: Option<Timestamp>) {
        let mut s = self.gate.lock();
        s.admission.release();
        self.gate.admit(&mut s, at);
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.given_back {
            self.give_back(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(cap: u32, limit: usize) -> Arc<Gate> {
        Gate::new(
            cap,
            limit,
            Dispatch::WorkConserving,
            Box::new(|at| at.unwrap_or_else(Timestamp::now_wall)),
            Box::new(|| {}),
        )
    }

    #[tokio::test]
    async fn fifo_under_the_cap_and_a_full_queue_is_refused() {
        let g = gate(1, 1);
        let a = g.enqueue().unwrap().admitted().await.0;
        let b = g.enqueue().unwrap();
        assert_eq!(g.queue_depth(), 1);
        assert!(g.enqueue().is_err(), "queue limit 1");
        drop(a);
        assert_eq!(g.queue_depth(), 0);
        let b = b.admitted().await.0;
        drop(b);
        let c = g.enqueue().unwrap().admitted().await.0;
        drop(c);
    }

    #[tokio::test]
    async fn a_ticket_dropped_in_the_queue_is_never_admitted_and_frees_its_place() {
        let g = gate(1, 10);
        let a = g.enqueue().unwrap().admitted().await.0;
        let gone = g.enqueue().unwrap();
        let next = g.enqueue().unwrap();
        drop(gone);
        assert_eq!(g.queue_depth(), 1);
        drop(a);
        let n = next.admitted().await.0;
        drop(n);
        // A ticket admitted but dropped before use gives the slot back.
        let a = g.enqueue().unwrap().admitted().await.0;
        let unused = g.enqueue().unwrap();
        drop(a);
        drop(unused);
        let again = g.enqueue().unwrap().admitted().await.0;
        drop(again);
    }
}
