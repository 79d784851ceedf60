//! tpscope's sans-I/O response-stream layer (docs/design.md §9): bytes in,
//! events out. [`sse`] frames a byte stream into events; one decoder per API
//! dialect ([`openai`] for chat/completions, [`anthropic`] for Messages, [`responses`] for the Responses API, each a
//! [`Decoder`]; [`Dialect`] picks one at run time) turns events into
//! facts for the neutral [`StreamAccount`] (first/last token, tokens, usage, finish, error).
//! No clock, no I/O, no async: the caller passes the instant of each read.
#![warn(missing_docs)]

pub mod account;
pub mod anthropic;
mod dialect;
pub mod openai;
mod outcome;
mod repeat;
pub mod responses;
pub mod sse;
mod status;

pub use account::{Decoder, StreamAccount, StreamEnd};
pub use dialect::{AnyStream, Dialect};
pub use openai::StreamState;
pub use outcome::stream_end;
pub use sse::{Event, SseError, SseParser};
pub use status::{error_status, parse_retry_after, retry_after};
/// The server's token counts, owned by the model (each decoder maps its wire fields onto it).
pub use tpscope_model::Usage;

/// Asks the CPU to bring the `len` bytes at `at` into its caches without
/// waiting for them: a relay calls it for a stream's state before the system
/// calls of a read, so that the lines the parse will need arrive while the
/// kernel works instead of stalling the parse one after another (a proxy
/// serving a thousand streams finds each stream's state cold). A hint: it
/// reads nothing, cannot fault and changes no result.
#[inline]
pub fn prefetch<T>(at: *const T, len: usize) {
    #[cfg(target_arch = "x86_64")]
    for off in (0..len).step_by(64) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: `prefetcht0` needs SSE, which every x86_64 CPU has; it is
        // a hint on an address, never a load, so any address is sound.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>().wrapping_add(off)) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (at, len);
}

/// [`prefetch`] of the memory of `value` itself.
#[inline]
pub fn prefetch_of<T>(value: &T) {
    prefetch(value, std::mem::size_of::<T>());
}
