//! tpscope's HTTP client ([`Client`]): sends one streaming request attempt to an
//! OpenAI-compatible server over pooled connections, with timeouts and kernel
//! receive timestamps, and accounts the response through the sans-I/O
//! `tpscope-stream` crate (docs/design.md §2, §4, §7, §9).
#![warn(missing_docs)]

mod attempt;
mod body_head;
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
pub use forward::{ForwardBody, Forwarder, RxStamp, UpstreamConn, UpstreamRx};
pub use live::LiveTokens;
pub use request::request_body;
/// What one attempt produced, and the server's token counts: owned by the model.
pub use tpscope_model::{AttemptOutcome, Usage};
/// The `Retry-After` header's grammar, owned by the stream layer.
pub use tpscope_stream::parse_retry_after;
