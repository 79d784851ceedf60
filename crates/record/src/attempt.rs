//! The outcome of one attempt of one request, as any producer stamps it (the
//! bench's HTTP client, a proxy, the recording API): the input of span assembly.

use std::time::Duration;

use tpscope_model::{Attempt, ChunkMark, Timestamp};

/// The server's own token counts (`usage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// `prompt_tokens`, when reported.
    pub prompt_tokens: Option<u64>,
    /// `completion_tokens` (reasoning included).
    pub completion_tokens: u64,
}

/// The result of one HTTP attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The attempt's times, status and cause (`cause` is `None` iff it ended ok).
    pub attempt: Attempt,
    /// When the last chunk carrying output arrived.
    pub last_token_at: Option<Timestamp>,
    /// The server's usage, when it sent one.
    pub usage: Option<Usage>,
    /// Chunks that carried output text (content or reasoning).
    pub content_chunks: u64,
    /// The received output text, kept so it can be counted by a tokenizer when the
    /// server sent no usage (`None` when not kept).
    pub text: Option<String>,
    /// Per-chunk arrivals relative to this attempt's first token, when recorded.
    pub chunks: Option<Vec<ChunkMark>>,
    /// The server's `Retry-After`, when it sent one.
    pub retry_after: Option<Duration>,
    /// A message for failed attempts (no prompt text, no credentials).
    pub error_message: Option<String>,
    /// The server's response id, when it sent one.
    pub response_id: Option<String>,
}
