//! tpscope's HTTP client ([`Client`]): sends one streaming request attempt to an
//! OpenAI-compatible server over pooled connections, with timeouts and kernel
//! receive timestamps, and accounts the response through the sans-I/O
//! `tpscope-stream` crate (docs/design.md §2, §4, §7, §9).
#![warn(missing_docs)]

mod attempt;
mod client;
pub mod config;
mod connector;
mod forward;
mod live;
mod outcome;
mod request;
mod rx;

pub use client::{Client, ClientError, ModelInfo};
pub use config::{
    Api, BadApi, BadRxTimestamps, ClientConfig, Endpoint, Message, Prompt, RequestSpec,
    RxTimestamps, Timeouts,
};
pub use forward::{ForwardBody, Forwarder};
pub use live::LiveTokens;
pub use outcome::AttemptOutcome;
pub use request::{parse_retry_after, request_body};
/// In [`AttemptOutcome::usage`]; owned by `tpscope-stream`.
pub use tpscope_stream::Usage;
