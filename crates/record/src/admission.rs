//! The admission controller (pure): the in-flight cap and the FIFO queue, with
//! work-conserving dispatch (a freed slot is filled at once while work waits) or
//! waves (send a batch, wait for all of it, send the next).

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

/// How queued work is let through the cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Dispatch {
    /// A slot that frees is filled at once while work waits. Never idles a slot
    /// while the queue is not empty.
    #[default]
    WorkConserving,
    /// The common pipeline pattern: admit up to `cap` requests at once, then admit
    /// nothing until every one of them has been released.
    Waves,
}

/// A `--dispatch` value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a dispatch mode (expected work-conserving or waves)")]
pub struct BadDispatch(pub String);

impl FromStr for Dispatch {
    type Err = BadDispatch;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "work-conserving" => Ok(Dispatch::WorkConserving),
            "waves" => Ok(Dispatch::Waves),
            _ => Err(BadDispatch(s.to_string())),
        }
    }
}

impl fmt::Display for Dispatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dispatch::WorkConserving => "work-conserving",
            Dispatch::Waves => "waves",
        })
    }
}

/// The cap and the queue. `T` is whatever identifies a queued request.
#[derive(Debug)]
pub struct Admission<T> {
    cap: Option<u32>,
    dispatch: Dispatch,
    in_flight: u32,
    queue: VecDeque<T>,
}

impl<T> Admission<T> {
    /// A controller with this cap (`None`: no cap) and dispatch mode.
    pub fn new(cap: Option<u32>, dispatch: Dispatch) -> Self {
        Admission {
            cap,
            dispatch,
            in_flight: 0,
            queue: VecDeque::new(),
        }
    }

    /// The cap (`None`: none).
    pub fn cap(&self) -> Option<u32> {
        self.cap
    }

    /// Changes the cap from now on (a ramp). Requests above a lowered cap keep
    /// their slots. Call [`Admission::admit`] next.
    pub fn set_cap(&mut self, cap: Option<u32>) {
        self.cap = cap;
    }

    /// Requests holding a slot.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Requests waiting for a slot.
    pub fn queue_depth(&self) -> u32 {
        self.queue.len().min(u32::MAX as usize) as u32
    }

    /// Puts a ready request at the back of the queue. Call [`Admission::admit`] next.
    pub fn push(&mut self, item: T) {
        self.queue.push_back(item);
    }

    /// Gives a slot back. Call [`Admission::admit`] next.
    pub fn release(&mut self) {
        debug_assert!(self.in_flight > 0, "release without a slot");
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    fn free_slots(&self) -> u32 {
        match self.cap {
            Some(c) => c.saturating_sub(self.in_flight),
            None => u32::MAX,
        }
    }

    /// Moves every request the dispatch mode lets through from the queue to a slot,
    /// in FIFO order, calling `admitted` for each.
    pub fn admit(&mut self, mut admitted: impl FnMut(T)) {
        let n = match self.dispatch {
            Dispatch::WorkConserving => self.free_slots(),
            Dispatch::Waves if self.in_flight == 0 => self.free_slots(),
            Dispatch::Waves => 0,
        };
        for _ in 0..n {
            let Some(item) = self.queue.pop_front() else {
                break;
            };
            self.in_flight += 1;
            admitted(item);
        }
    }

    /// Empties the queue (the run stopped admitting), returning what was waiting, in order.
    pub fn drain_queue(&mut self) -> Vec<T> {
        self.queue.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn admitted(a: &mut Admission<u32>) -> Vec<u32> {
        let mut v = Vec::new();
        a.admit(|t| v.push(t));
        v
    }

    #[test]
    fn work_conserving_fills_a_freed_slot_at_once_in_fifo_order() {
        let mut a = Admission::new(Some(2), Dispatch::WorkConserving);
        for i in 0..5 {
            a.push(i);
        }
        assert_eq!(admitted(&mut a), vec![0, 1]);
        assert_eq!((a.in_flight(), a.queue_depth()), (2, 3));
        a.release();
        assert_eq!(admitted(&mut a), vec![2]);
        assert_eq!(a.in_flight(), 2);
    }

    #[test]
    fn waves_wait_for_the_whole_batch() {
        let mut a = Admission::new(Some(3), Dispatch::Waves);
        for i in 0..7 {
            a.push(i);
        }
        assert_eq!(admitted(&mut a), vec![0, 1, 2]);
        a.release();
        assert!(
            admitted(&mut a).is_empty(),
            "a slot is free but the wave is not done"
        );
        a.release();
        assert!(admitted(&mut a).is_empty());
        a.release();
        assert_eq!(admitted(&mut a), vec![3, 4, 5]);
        for _ in 0..3 {
            a.release();
        }
        assert_eq!(admitted(&mut a), vec![6], "a short last wave");
    }

    #[test]
    fn no_cap_admits_everything_and_drain_returns_the_queue() {
        let mut a = Admission::new(None, Dispatch::WorkConserving);
        for i in 0..100 {
            a.push(i);
        }
        assert_eq!(admitted(&mut a).len(), 100);
        let mut b = Admission::new(Some(1), Dispatch::WorkConserving);
        for i in 0..4 {
            b.push(i);
        }
        admitted(&mut b);
        assert_eq!(b.drain_queue(), vec![1, 2, 3]);
        assert_eq!(b.queue_depth(), 0);
    }

    #[test]
    fn a_raised_cap_admits_the_waiting_at_once() {
        let mut a = Admission::new(Some(1), Dispatch::WorkConserving);
        for i in 0..4 {
            a.push(i);
        }
        assert_eq!(admitted(&mut a), vec![0]);
        a.set_cap(Some(3));
        assert_eq!(a.cap(), Some(3));
        assert_eq!(admitted(&mut a), vec![1, 2]);
        assert_eq!((a.in_flight(), a.queue_depth()), (3, 1));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push,
        Release,
    }

    proptest! {
        /// Work-conserving never idles a slot while work waits: after every step,
        /// the queue is empty or every slot is taken.
        #[test]
        fn work_conserving_never_idles_a_slot_while_work_waits(
            cap in 1u32..8,
            ops in proptest::collection::vec(prop_oneof![Just(Op::Push), Just(Op::Release)], 0..200),
        ) {
            let mut a = Admission::new(Some(cap), Dispatch::WorkConserving);
            let mut next = 0u32;
            for op in ops {
                match op {
                    Op::Push => { a.push(next); next += 1; }
                    Op::Release if a.in_flight() > 0 => a.release(),
                    Op::Release => {}
                }
                a.admit(|_| {});
                prop_assert!(a.queue_depth() == 0 || a.in_flight() == cap);
                prop_assert!(a.in_flight() <= cap);
            }
        }

        /// Waves never admit while a wave is in flight and never exceed the cap.
        #[test]
        fn waves_admit_only_into_an_empty_system(
            cap in 1u32..8,
            ops in proptest::collection::vec(prop_oneof![Just(Op::Push), Just(Op::Release)], 0..200),
        ) {
            let mut a = Admission::new(Some(cap), Dispatch::Waves);
            for op in ops {
                match op {
                    Op::Push => a.push(0),
                    Op::Release if a.in_flight() > 0 => a.release(),
                    Op::Release => {}
                }
                let before = a.in_flight();
                let mut n = 0;
                a.admit(|_| n += 1);
                prop_assert!(n == 0 || before == 0);
                prop_assert!(a.in_flight() <= cap);
            }
        }
    }
}
