//! The writer thread's receiving end: takes records as they come, but once records
//! arrive fast it lets them gather for [`BATCH_PAUSE`] between batches instead of
//! sleeping on the channel after each one.
//!
//! Why: a writer that blocks on an empty channel is woken by the next send, a
//! futex call on the sender's thread and a wake-up and a sleep on the writer's, for
//! every record. At thousands of spans per second (a bench at full speed) that was
//! a fifth of the writer thread's time and part of every producer thread's. While
//! the writer sleeps outside the channel no one waits on it, and a send is a push.
//! A record waits at most [`BATCH_PAUSE`] longer, far within the flush cadence.

use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

/// How long records gather between batches while they arrive fast.
pub(crate) const BATCH_PAUSE: Duration = Duration::from_millis(2);
/// A wait on the empty channel shorter than this means records arrive fast.
const FAST_WAIT: Duration = Duration::from_millis(20);

/// What the next receive gave.
#[derive(Debug)]
pub(crate) enum Next<T> {
    /// A message.
    Msg(T),
    /// Nothing within the wait: time to flush what is buffered.
    Idle,
    /// Every sender is gone.
    Closed,
}

/// A receiver that batches while records arrive fast.
pub(crate) struct Inbox<T> {
    rx: Receiver<T>,
    /// Records arrived fast: pause once the channel is empty.
    fast: bool,
}

impl<T> Inbox<T> {
    /// Receives from `rx`.
    pub(crate) fn new(rx: Receiver<T>) -> Self {
        Inbox { rx, fast: false }
    }

    /// The next message, waiting at most `idle` for one (after a pause, when
    /// records were arriving fast).
    pub(crate) fn next(&mut self, idle: Duration) -> Next<T> {
        match self.rx.try_recv() {
            Ok(m) => return Next::Msg(m),
            Err(TryRecvError::Disconnected) => return Next::Closed,
            Err(TryRecvError::Empty) => {}
        }
        if std::mem::take(&mut self.fast) {
            std::thread::sleep(BATCH_PAUSE);
            match self.rx.try_recv() {
                Ok(m) => {
                    // Records came during the pause: still fast.
                    self.fast = true;
                    return Next::Msg(m);
                }
                Err(TryRecvError::Disconnected) => return Next::Closed,
                Err(TryRecvError::Empty) => {}
            }
        }
        let waited = Instant::now();
        match self.rx.recv_timeout(idle) {
            Ok(m) => {
                self.fast = waited.elapsed() < FAST_WAIT;
                Next::Msg(m)
            }
            Err(RecvTimeoutError::Timeout) => Next::Idle,
            Err(RecvTimeoutError::Disconnected) => Next::Closed,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    #[test]
    fn a_record_sent_after_a_fast_burst_is_taken_within_the_pause() {
        let (tx, rx) = mpsc::channel();
        let mut inbox = Inbox::new(rx);
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        assert!(matches!(inbox.next(Duration::from_secs(1)), Next::Msg(1)));
        assert!(matches!(inbox.next(Duration::from_secs(1)), Next::Msg(2)));
        // The channel is empty and the last record came at once: the inbox
        // pauses, then takes what came meanwhile.
        inbox.fast = true;
        let sender = std::thread::spawn(move || {
            tx.send(3).unwrap();
            std::thread::sleep(Duration::from_millis(50));
            tx.send(4).unwrap();
            tx
        });
        let started = Instant::now();
        assert!(matches!(inbox.next(Duration::from_secs(5)), Next::Msg(3)));
        assert!(matches!(inbox.next(Duration::from_secs(5)), Next::Msg(4)));
        assert!(started.elapsed() < Duration::from_secs(5));
        drop(sender.join().unwrap());
        assert!(matches!(inbox.next(Duration::from_secs(1)), Next::Closed));
    }

    #[test]
    fn an_empty_channel_times_out_idle_and_a_dropped_sender_closes_it() {
        let (tx, rx) = mpsc::channel::<u8>();
        let mut inbox = Inbox::new(rx);
        assert!(matches!(inbox.next(Duration::from_millis(5)), Next::Idle));
        drop(tx);
        assert!(matches!(inbox.next(Duration::from_millis(5)), Next::Closed));
    }

    #[test]
    fn a_slow_trickle_is_not_paused_for() {
        let (tx, rx) = mpsc::channel();
        let mut inbox = Inbox::new(rx);
        let sender = std::thread::spawn(move || {
            std::thread::sleep(FAST_WAIT * 3);
            tx.send(1).unwrap();
            tx
        });
        assert!(matches!(inbox.next(Duration::from_secs(5)), Next::Msg(1)));
        assert!(!inbox.fast, "a record after a long wait is no burst");
        drop(sender.join().unwrap());
    }
}
