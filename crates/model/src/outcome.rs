//! One attempt's outcome, as every producer stamps it (the bench's HTTP client, the
//! proxy, the recording API): the [`Attempt`] record and what span assembly and the
//! retry policy read beside it; and the server's token counts ([`Usage`]), in one
//! dialect-neutral shape. Built from [`AttemptOutcome::started`], never spelled out.

use std::time::Duration;

use crate::cause::Cause;
use crate::span::{Attempt, ChunkMark};
use crate::time::Timestamp;

/// The server's token counts. Each is `None` when the server omitted it; each
/// stream decoder maps its wire fields onto this shape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub prompt_tokens: Option<u64>,
    /// Completion (output) tokens, reasoning tokens included.
    pub completion_tokens: Option<u64>,
    /// Reasoning tokens (part of `completion_tokens`).
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens served from a prefix cache (part of `prompt_tokens`).
    pub cached_tokens: Option<u64>,
}

impl Usage {
    /// A count of `completion_tokens` output tokens (and `prompt_tokens`, when known).
    pub fn new(completion_tokens: u64, prompt_tokens: Option<u64>) -> Usage {
        Usage {
            prompt_tokens,
            completion_tokens: Some(completion_tokens),
            ..Usage::default()
        }
    }

    /// `self` with the fields `newer` has replaced by newer values (a server that
    /// sends usage several times: the last value of each field wins).
    pub fn merged(self, newer: Usage) -> Usage {
        Usage {
            prompt_tokens: newer.prompt_tokens.or(self.prompt_tokens),
            completion_tokens: newer.completion_tokens.or(self.completion_tokens),
            reasoning_tokens: newer.reasoning_tokens.or(self.reasoning_tokens),
            cached_tokens: newer.cached_tokens.or(self.cached_tokens),
        }
    }

    /// The output count, when the server gave one: only then does `usage` count a
    /// span's tokens (docs/design.md §4).
    pub fn counted(self) -> Option<Usage> {
        self.completion_tokens.is_some().then_some(self)
    }
}

impl Attempt {
    /// An attempt that started at `at` and has stamped nothing else yet (it ends
    /// there until said otherwise).
    pub fn started(at: Timestamp) -> Attempt {
        Attempt {
            started_at: at,
            first_byte_at: None,
            first_token_at: None,
            ended_at: at,
            end_at: None,
            http_status: None,
            cause: None,
            tokens: 0,
            connection_reused: None,
            connect_time: None,
            backoff: None,
            client_lag: None,
            reads: None,
            traced_chunks: None,
            inexact_chunks: None,
            first_token_exact: None,
            resends: 0,
        }
    }
}

/// Everything one attempt produced. `attempt.cause` is `None` iff the attempt ended
/// ok (the stream's end marker arrived, or a complete non-streaming answer).
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptOutcome {
    /// The attempt record: `started_at`, `first_byte_at` (the response head had
    /// arrived), `first_token_at` (the first event carrying non-empty output or
    /// reasoning text), `ended_at` (the end marker, or when the failure was seen),
    /// `http_status`, `cause`, `tokens`, and the producer's transport facts.
    pub attempt: Attempt,
    /// When the last event carrying output arrived.
    pub last_token_at: Option<Timestamp>,
    /// When the first event carrying non-empty answer text (content, refusal, tool
    /// call; not reasoning) arrived. Equals `first_token_at` for models that do not
    /// stream reasoning.
    pub first_content_at: Option<Timestamp>,
    /// The server's token counts (the last value of each field it sent).
    pub usage: Option<Usage>,
    /// Events that carried non-empty output or reasoning text.
    pub content_chunks: u64,
    /// Output and reasoning text received, unescaped, in arrival order (empty when
    /// not kept): counted by a tokenizer when the server sent no usage.
    pub text: String,
    /// One mark per content chunk, when recorded: offset from `first_token_at`, and
    /// tokens (the growth of `usage.completion_tokens` when the server sends usage on
    /// every chunk, else 1).
    pub chunks: Option<Vec<ChunkMark>>,
    /// The server's `Retry-After` on a 429 or 503 (seconds or an HTTP date).
    pub retry_after: Option<Duration>,
    /// What went wrong, for failed attempts (server message or transport error;
    /// never prompt text or credentials).
    pub error_message: Option<String>,
    /// The server's response `id`.
    pub response_id: Option<String>,
    /// The first `finish_reason` the server sent (`stop`, `length`, …).
    pub finish_reason: Option<String>,
    /// Response body bytes received (after HTTP framing).
    pub bytes_received: u64,
    /// Data events received (the end marker included).
    pub events: u64,
    /// The id of the connection the response came on (numbered from 1 per client,
    /// in the order connections were opened); `None` when unknown.
    pub connection_id: Option<u64>,
    /// How long after the first token's bytes arrived (as stamped in
    /// `first_token_at`) the producer's task received them: its own delay that
    /// kernel receive timestamps keep out of `first_token_at`; `None` when not
    /// measured.
    pub first_token_lag: Option<Duration>,
}

impl AttemptOutcome {
    /// An attempt that started at `at` with nothing received yet.
    pub fn started(at: Timestamp) -> AttemptOutcome {
        AttemptOutcome {
            attempt: Attempt::started(at),
            last_token_at: None,
            first_content_at: None,
            usage: None,
            content_chunks: 0,
            text: String::new(),
            chunks: None,
            retry_after: None,
            error_message: None,
            response_id: None,
            finish_reason: None,
            bytes_received: 0,
            events: 0,
            connection_id: None,
            first_token_lag: None,
        }
    }

    /// Whether the attempt ended ok.
    pub fn is_ok(&self) -> bool {
        self.attempt.cause.is_none()
    }

    /// The failure cause, if any.
    pub fn cause(&self) -> Option<Cause> {
        self.attempt.cause
    }
}
