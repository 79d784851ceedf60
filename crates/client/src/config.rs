//! What to call and how: the endpoint, one request's content, timeouts and client
//! settings. Validated once by `Client::new`; nothing here does I/O.

use std::fmt;
use std::time::Duration;

/// The API kind, owned by the model (its path, its name in run records).
pub use tpscope_model::{Api, BadApi};

/// The server and model to call, and what every request carries besides its prompt.
#[derive(Clone, PartialEq)]
pub struct Endpoint {
    /// Base URL up to and including the API version, e.g. `http://127.0.0.1:8000/v1`
    /// (`http` or `https`; a trailing `/` is ignored; no user:password part).
    pub base_url: String,
    /// Chat completions or legacy completions.
    pub api: Api,
    /// The `model` field of every request.
    pub model: String,
    /// Sent as `Authorization: Bearer <key>`; never logged or shown by `Debug`.
    pub api_key: Option<String>,
    /// Extra request headers (name, value), added after the defaults; a header of the
    /// same name as a default one (e.g. `authorization`) replaces it. Values are not
    /// shown by `Debug` (they may hold credentials).
    pub headers: Vec<(String, String)>,
    /// Extra top-level JSON fields merged into every request body (`ignore_eos`,
    /// `temperature`, …). A field named like one tpscope sets (`max_tokens`,
    /// `stream_options`, …) replaces tpscope's value.
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Ask for `stream_options: {"include_usage": true}` so the server reports its
    /// own token counts in the last chunk.
    pub include_usage: bool,
}

impl Endpoint {
    /// An endpoint with no key, no extra headers or body fields, asking for usage.
    pub fn new(base_url: impl Into<String>, api: Api, model: impl Into<String>) -> Self {
        Endpoint {
            base_url: base_url.into(),
            api,
            model: model.into(),
            api_key: None,
            headers: Vec::new(),
            extra_body: serde_json::Map::new(),
            include_usage: true,
        }
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url)
            .field("api", &self.api)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("headers", &header_names)
            .field("extra_body", &self.extra_body)
            .field("include_usage", &self.include_usage)
            .finish()
    }
}

/// One chat message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user`, `assistant`, …
    pub role: String,
    /// The message text.
    pub content: String,
}

/// What the model is asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prompt {
    /// Plain text: sent as `prompt` to completions, or as one `user` message to chat.
    Text(String),
    /// Chat messages: sent as `messages` to chat; for completions their contents are
    /// joined with blank lines into one `prompt`.
    Messages(Vec<Message>),
}

/// One request's content (the endpoint supplies the rest).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestSpec {
    /// The prompt.
    pub prompt: Prompt,
    /// Sent as `max_tokens` for both APIs (chat servers accept it; vLLM, SGLang,
    /// llama.cpp and OpenAI do). Use `extra_body` for `max_completion_tokens`.
    pub max_tokens: Option<u32>,
}

/// Per-attempt time limits; `None` means no limit. Each one ends the attempt with
/// its own cause (`timeout_connect`, `timeout_first_token`, `timeout_stall`,
/// `timeout_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Opening a new connection: DNS, TCP and TLS. Default: 10 s.
    pub connect: Option<Duration>,
    /// From the attempt's start to the first event carrying output (or reasoning)
    /// text; also bounds waiting for the response head.
    pub first_token: Option<Duration>,
    /// Once the first token arrived: the longest gap between two data events
    /// (SSE comments such as `: ping` do not count as chunks).
    pub stall: Option<Duration>,
    /// From the attempt's start to its end.
    pub total: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Some(Duration::from_secs(10)),
            first_token: None,
            stall: None,
            total: None,
        }
    }
}

/// Client settings (connection pool, protocols, what to record).
#[derive(Clone, Debug, PartialEq)]
pub struct ClientConfig {
    /// Per-attempt time limits.
    pub timeouts: Timeouts,
    /// Record one [`tpscope_model::ChunkMark`] per content chunk (for inter-token
    /// latency). Costs one vector push per content chunk.
    pub record_chunks: bool,
    /// Keep the received output and reasoning text in [`crate::AttemptOutcome::text`]
    /// (needed to count tokens offline when the server sends no usage).
    pub keep_text: bool,
    /// Idle connections kept per host (HTTP/1.1 keep-alive pool).
    pub pool_max_idle_per_host: usize,
    /// How long an idle pooled connection is kept; `None` keeps it until the server
    /// closes it.
    pub pool_idle_timeout: Option<Duration>,
    /// Offer HTTP/2 by ALPN on `https` (HTTP/1.1 otherwise, or when the server
    /// declines).
    pub http2: bool,
    /// Speak HTTP/2 without negotiation (h2c) on `http` URLs too.
    pub http2_prior_knowledge: bool,
    /// Set `TCP_NODELAY` on new connections.
    pub tcp_nodelay: bool,
    /// Largest SSE event (or non-streaming or error body) accepted, in bytes; a
    /// larger one fails the attempt as `malformed` instead of growing memory.
    pub max_event_bytes: usize,
    /// Extra trusted root certificates (DER) besides the bundled Web PKI roots, for
    /// servers with a private CA.
    pub extra_root_certs_der: Vec<Vec<u8>>,
    /// Where the arrival time of response bytes comes from (first byte, first and
    /// last token, chunk marks).
    pub rx_timestamps: RxTimestamps,
    /// Reuse connections (HTTP/1.1 keep-alive). Off: every request opens its own
    /// connection and asks the server to close it (`Connection: close`).
    pub keepalive: bool,
    /// New connections being opened at once, at most: each holds its place until
    /// the server answers on it (proof that it was accepted) or
    /// [`CONNECT_SPACING`] passes, so a run's start never overflows a server's
    /// accept queue (128 is common) with a storm of opens. 0: no pacing.
    pub connect_burst: usize,
}

/// How long a new connection the server has not answered on yet holds its place
/// in [`ClientConfig::connect_burst`]: ample for an accept loop to take it off
/// its queue, short enough for a server that answers only when it schedules a
/// request (64 places: 1,280 connections a second at worst).
pub const CONNECT_SPACING: Duration = Duration::from_millis(50);

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            timeouts: Timeouts::default(),
            record_chunks: false,
            keep_text: true,
            pool_max_idle_per_host: usize::MAX,
            pool_idle_timeout: Some(Duration::from_secs(90)),
            http2: true,
            http2_prior_knowledge: false,
            tcp_nodelay: true,
            max_event_bytes: 16 << 20,
            extra_root_certs_der: Vec::new(),
            rx_timestamps: RxTimestamps::default(),
            keepalive: true,
            connect_burst: 64,
        }
    }
}

/// Where the client takes the arrival time of response bytes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RxTimestamps {
    /// The kernel's receive timestamp of the bytes (Linux `SO_TIMESTAMPNS`): when
    /// they reached the host, not when the client's task got round to them. A
    /// stamp is never later than [`RxTimestamps::User`] would give. Elsewhere, or
    /// on a socket that refuses the option, the same as `User`.
    #[default]
    Kernel,
    /// `Instant::now()` when the attempt's task receives the bytes from the
    /// connection (after the connection task read them and handed them over).
    User,
}

impl RxTimestamps {
    /// The name used in flags and run records (`kernel` or `user`).
    pub fn as_str(self) -> &'static str {
        match self {
            RxTimestamps::Kernel => "kernel",
            RxTimestamps::User => "user",
        }
    }

    /// The source this build actually uses for a setting: `Kernel` only on Linux.
    pub fn effective(self) -> RxTimestamps {
        if cfg!(target_os = "linux") {
            self
        } else {
            RxTimestamps::User
        }
    }
}

impl fmt::Display for RxTimestamps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--rx-timestamps` value that is neither `kernel` nor `user`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a receive-timestamp source (expected kernel or user)")]
pub struct BadRxTimestamps(pub String);

impl std::str::FromStr for RxTimestamps {
    type Err = BadRxTimestamps;

    fn from_str(s: &str) -> Result<Self, BadRxTimestamps> {
        match s.trim() {
            "kernel" => Ok(RxTimestamps::Kernel),
            "user" => Ok(RxTimestamps::User),
            _ => Err(BadRxTimestamps(s.to_string())),
        }
    }
}
