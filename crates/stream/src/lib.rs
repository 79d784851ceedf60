//! tpscope's sans-I/O response-stream layer (docs/design.md §9): bytes in,
//! events out. [`sse`] frames a byte stream into events; one decoder per API
//! dialect ([`openai`] for chat/completions, [`anthropic`] for Messages, each a
//! [`Decoder`]; [`Dialect`] picks one at run time) turns events into
//! facts for the neutral [`StreamAccount`] (first/last token, tokens, usage, finish, error).
//! No clock, no I/O, no async: the caller passes the instant of each read.
#![warn(missing_docs)]

pub mod account;
pub mod anthropic;
mod dialect;
pub mod openai;
pub mod sse;
mod usage;

pub use account::{Decoder, StreamAccount, StreamEnd};
pub use dialect::{AnyStream, Dialect};
pub use openai::StreamState;
pub use sse::{Event, SseError, SseParser};
pub use usage::Usage;
