//! tpscope's client layer: a sans-I/O SSE parser ([`sse`]) and OpenAI chunk parser
//! ([`chunk`]) shared with the proxy, and the HTTP client ([`Client`]) that sends
//! one streaming request attempt to an OpenAI-compatible server and stamps its
//! times (DESIGN.md §2, §4, §7).

pub mod chunk;
mod client;
pub mod config;
mod connector;
mod rx;
mod scan;
pub mod sse;
pub mod stream;

pub use chunk::Usage;
pub use client::{AttemptOutcome, Client, ClientError, parse_retry_after, request_body};
pub use config::{
    Api, ClientConfig, Endpoint, Message, Prompt, RequestSpec, RxTimestamps, Timeouts,
};
pub use sse::{Event, SseParser};
pub use stream::{StreamEnd, StreamState};
