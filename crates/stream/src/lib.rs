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
