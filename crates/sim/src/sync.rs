//! The lock every piece of shared state is taken with, poison-tolerant: a panic
//! while holding one leaves plain counters and hand-off state behind, still usable.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, recovering the guard of a poisoned mutex.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
