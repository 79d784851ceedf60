//! The optional cap, asynchronously: `tpscope_record`'s [`Admission`] (the one
//! cap + FIFO) behind a lock, each queued request waiting on a oneshot. A ticket
//! dropped while queued leaves the queue (never sent); a permit dropped gives its
//! slot to the next in line.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use tpscope_record::{Admission, Dispatch};

struct Waiter {
    id: u64,
    tx: oneshot::Sender<()>,
}

struct State {
    admission: Admission<Waiter>,
    next_id: u64,
}

/// The cap and its bounded queue.
pub struct Gate {
    state: Mutex<State>,
    queue_limit: usize,
}

/// The queue was full.
#[derive(Debug)]
pub struct Full;

/// A place in the queue.
pub struct Ticket {
    gate: Arc<Gate>,
    id: u64,
    rx: Option<oneshot::Receiver<()>>,
}

/// A slot, given back when dropped.
pub struct Permit {
    gate: Arc<Gate>,
}

impl Gate {
    /// A gate admitting `cap` at once (filling a freed slot at once, or in
    /// waves), with at most `queue_limit` waiting.
    pub fn new(cap: u32, queue_limit: usize, dispatch: Dispatch) -> Arc<Gate> {
        Arc::new(Gate {
            state: Mutex::new(State {
                admission: Admission::new(Some(cap), dispatch),
                next_id: 0,
            }),
            queue_limit,
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
        admit(&mut s);
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
}

fn admit(s: &mut State) {
    // A waiter whose ticket is gone is never in the queue (its drop removed it),
    // so every send here reaches a live ticket or one being dropped, which then
    // gives the slot back.
    s.admission.admit(|w| {
        let _ = w.tx.send(());
    });
}

impl Ticket {
    /// Waits for a slot.
    pub async fn admitted(mut self) -> Permit {
        if let Some(rx) = self.rx.as_mut() {
            // The sender lives in the queue until it is admitted; the gate never
            // drops a queued waiter.
            let _ = rx.await;
        }
        self.rx = None;
        Permit {
            gate: self.gate.clone(),
        }
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
            s.admission.release();
            admit(&mut s);
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

impl Drop for Permit {
    fn drop(&mut self) {
        let mut s = self.gate.lock();
        s.admission.release();
        admit(&mut s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fifo_under_the_cap_and_a_full_queue_is_refused() {
        let g = Gate::new(1, 1, Dispatch::WorkConserving);
        let a = g.enqueue().unwrap().admitted().await;
        let b = g.enqueue().unwrap();
        assert_eq!(g.queue_depth(), 1);
        assert!(g.enqueue().is_err(), "queue limit 1");
        drop(a);
        assert_eq!(g.queue_depth(), 0);
        let b = b.admitted().await;
        drop(b);
        let c = g.enqueue().unwrap().admitted().await;
        drop(c);
    }

    #[tokio::test]
    async fn a_ticket_dropped_in_the_queue_is_never_admitted_and_frees_its_place() {
        let g = Gate::new(1, 10, Dispatch::WorkConserving);
        let a = g.enqueue().unwrap().admitted().await;
        let gone = g.enqueue().unwrap();
        let next = g.enqueue().unwrap();
        drop(gone);
        assert_eq!(g.queue_depth(), 1);
        drop(a);
        let n = next.admitted().await;
        drop(n);
        // A ticket admitted but dropped before use gives the slot back.
        let a = g.enqueue().unwrap().admitted().await;
        let unused = g.enqueue().unwrap();
        drop(a);
        drop(unused);
        let again = g.enqueue().unwrap().admitted().await;
        drop(again);
    }
}
