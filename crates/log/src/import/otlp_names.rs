//! The OTLP names tpscope reads and writes: the GenAI semantic-convention
//! attributes, tpscope's own `tpscope.*` attributes, and tpscope's instants as
//! span events. One table for both directions: the encoder
//! ([`super::otlp_encode`]) writes these names and the importer ([`super::otlp`])
//! reads them, so a span exported by tpscope imports back to the same span.

use tpscope_model::{Api, Span, TargetApi, Timestamp};

use super::build::Raw;

/// What the call was (`chat`, `text_completion`).
pub const OPERATION: &str = "gen_ai.operation.name";
/// The model the request named.
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
/// Prompt tokens (GenAI conventions 1.26 and later).
pub const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// Output tokens (GenAI conventions 1.26 and later).
pub const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// Prompt tokens under OpenLLMetry's older name (read only).
pub const PROMPT_TOKENS_OLD: &str = "gen_ai.usage.prompt_tokens";
/// Output tokens under OpenLLMetry's older name (read only).
pub const COMPLETION_TOKENS_OLD: &str = "gen_ai.usage.completion_tokens";
/// Why the output ended, per choice (a string array).
pub const FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// The server's response id (read only: tpscope writes [`REQUEST_ID`]).
pub const RESPONSE_ID: &str = "gen_ai.response.id";
/// The server's host.
pub const SERVER_ADDRESS: &str = "server.address";
/// The server's port.
pub const SERVER_PORT: &str = "server.port";
/// The failure's class: tpscope writes its cause's name (`http_5xx`, `timeout_total`).
pub const ERROR_TYPE: &str = "error.type";

/// The span's run (`run_id` of the span log).
pub const RUN_ID: &str = "tpscope.run_id";
/// The span's id within its run.
pub const SPAN_ID: &str = "tpscope.span_id";
/// The server's response id or the caller's request id (the span's `request_id`).
pub const REQUEST_ID: &str = "tpscope.request_id";
/// How the request ended (`ok`, `error`, `cancelled`).
pub const STATUS: &str = "tpscope.status";
/// Why it did not end ok: a cause of the closed list (docs/design.md §7).
pub const CAUSE: &str = "tpscope.cause";
/// Attempts after the first.
pub const RETRY_COUNT: &str = "tpscope.retry_count";
/// Where the output-token count came from (`usage`, `chunks`, a tokenizer).
pub const TOKEN_SOURCE: &str = "tpscope.token_source";
/// The conversation a turn belongs to.
pub const SESSION_ID: &str = "tpscope.session_id";
/// The turn within its conversation.
pub const TURN: &str = "tpscope.turn";
/// The count check: the output counted by the run's tokenizer.
pub const TOKENIZER_OUTPUT_TOKENS: &str = "tpscope.tokenizer_output_tokens";
/// The in-flight cap of the span's run (its run record's), so the gap fraction of an
/// import equals the log's.
pub const CAP: &str = "tpscope.cap";

/// One of tpscope's instants as a span event: its name, where the span keeps it,
/// and where an import puts it (`None`: written for the reader, not read back).
pub(crate) struct Instant {
    /// The event's name.
    pub name: &'static str,
    /// The instant of a span, when it has one.
    pub of: fn(&Span) -> Option<Timestamp>,
    /// Where the importer keeps it.
    pub import: Option<fn(&mut Raw, Timestamp)>,
}

/// tpscope's instants, in the order of a request's life. The span itself starts
/// at `queued_at` and ends at `released_at`; the import reads the admission as
/// the send (imported spans are admitted when sent).
pub(crate) const INSTANTS: [Instant; 6] = [
    Instant {
        name: "tpscope.queued",
        of: |s| Some(s.queued_at),
        import: Some(|r, t| r.queued_at = Some(t)),
    },
    Instant {
        name: "tpscope.admitted",
        of: |s| s.admitted_at,
        import: Some(|r, t| r.sent_at = Some(t)),
    },
    Instant {
        name: "tpscope.sent",
        of: |s| s.attempts.first().map(|a| a.started_at),
        import: None,
    },
    Instant {
        name: "tpscope.first_token",
        of: |s| s.first_token_at,
        import: Some(|r, t| r.first_token_at = Some(t)),
    },
    Instant {
        name: "tpscope.last_token",
        of: |s| s.last_token_at,
        import: Some(|r, t| r.last_token_at = Some(t)),
    },
    Instant {
        name: "tpscope.released",
        of: |s| Some(s.released_at),
        import: Some(|r, t| r.ended_at = Some(t)),
    },
];

/// The GenAI operation of a run record's `target.api`.
pub fn operation_of(api: Option<&TargetApi>) -> &'static str {
    match api {
        Some(TargetApi::Known(Api::Completions)) => "text_completion",
        _ => "chat",
    }
}
