//! The distributions a report gives of the window's ok spans: the derived metrics
//! ([`Distributions`]), the forms other tools print ([`Conventional`]) and stream
//! TPS by output length ([`LengthBucket`]); collected by `collect` from
//! the rows of [`crate::METRICS`].

use std::time::Duration;

use serde::Serialize;

use crate::stats::{Summary, TokensPerSecond};

/// The derived-metric distributions (docs/design.md §3), over ok spans released in the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Distributions {
    /// admitted_at − queued_at.
    pub t_queue: Summary<Duration>,
    /// first_token_at − admitted_at (TTFT after admission).
    pub t_first_token: Summary<Duration>,
    /// first_token_at − queued_at (what the user waited, queue included).
    pub ttft_user: Summary<Duration>,
    /// last_token_at − first_token_at.
    pub t_stream: Summary<Duration>,
    /// released_at − admitted_at.
    pub t_in_flight: Summary<Duration>,
    /// released_at − last_token_at.
    pub t_post: Summary<Duration>,
    /// output_tokens / t_stream.
    pub stream_tps: Summary<TokensPerSecond>,
    /// output_tokens / t_in_flight.
    pub end_to_end_tps: Summary<TokensPerSecond>,
}

/// Metrics in the forms other tools print, for comparison with them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Conventional {
    /// t_stream / (output_tokens − 1) (time per output token, as vLLM prints it).
    pub tpot: Summary<Duration>,
    /// (output_tokens − 1) / t_stream.
    pub decode_tps: Summary<TokensPerSecond>,
    /// Inter-token latency from recorded chunk arrivals; a chunk of k tokens counts
    /// as k gaps of (gap / k).
    pub inter_token_latency: Summary<Duration>,
}

/// Stream TPS of the ok spans whose output length falls in `[min_tokens, max_tokens]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LengthBucket {
    /// Smallest output length in the bucket.
    pub min_tokens: u64,
    /// Largest output length in the bucket (`None`: no upper bound).
    pub max_tokens: Option<u64>,
    /// Stream TPS of those spans.
    pub stream_tps: Summary<TokensPerSecond>,
}
