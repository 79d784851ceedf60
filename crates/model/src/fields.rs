//! The fields of the span and of its attempts, each list written once with the
//! fields' docs, types and serde layout, in the order tpscope writes them: the
//! structs ([`crate::Span`], [`crate::Attempt`]) are declared from these lists,
//! and the log reader's key tables and fast path take their keys from them, so a
//! new field is one entry here (the compiler and the readers' tests then point at
//! each place that must read it).
//!
//! `span_fields!(callback [args])` expands to
//! `callback! { [args] $( $(#[attr])* name $(as "key")?: Type, )* }`; a field
//! written under another name than its own has `as "key"` ([`field_key!`]). The
//! types are resolved where the callback expands.

/// The span record's fields in the order tpscope writes them (after `kind`), with
/// their docs, types and serde layout: [`crate::Span`] is declared from this list,
/// and the log reader takes its keys from it. `span_fields!(callback [args])`
/// expands to `callback! { [args] $( $(#[attr])* name $(as "key")?: Type, )* }`.
#[macro_export]
macro_rules! span_fields {
    ($callback:ident $([$($args:tt)*])?) => {
        $callback! {
            [$($($args)*)?]
            /// The run this span belongs to.
            run_id: String,
            /// Unique within the run.
            span_id: String,
            /// The server's response id or a client-chosen request id, when known.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            request_id: Option<String>,
            /// How the request ended.
            status: Status,
            /// The request became ready to send (entered the admission queue).
            queued_at: Timestamp,
            /// It took an in-flight slot; `None` if it never did (e.g. cancelled in the queue).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            admitted_at: Option<Timestamp>,
            /// The first chunk carrying output (or reasoning) text arrived.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            first_token_at: Option<Timestamp>,
            /// The last chunk carrying output arrived.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            last_token_at: Option<Timestamp>,
            /// The request gave its slot back (or left the queue, if never admitted).
            released_at: Timestamp,
            /// Output tokens of the final attempt (reasoning tokens included).
            output_tokens: u64,
            /// Prompt tokens, when known.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            input_tokens: Option<u64>,
            /// Where `output_tokens` came from; `None` means "as the run record says".
            #[serde(default, skip_serializing_if = "Option::is_none")]
            token_source: Option<TokenSource>,
            /// Attempts after the first.
            #[serde(default)]
            retry_count: u32,
            /// The cause of each retried attempt, in order (`retry_count` entries).
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            retry_causes: Vec<Cause>,
            /// One entry per HTTP attempt, in order.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            attempts: Vec<Attempt>,
            /// Why the span did not end ok (required for `error` and `cancelled`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            error: Option<SpanError>,
            /// Per-chunk arrivals, when recording them was asked for.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            chunks: Option<Vec<ChunkMark>>,
            /// The conversation this request is a turn of (multi-turn workloads).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            session_id: Option<String>,
            /// Its turn in the conversation, from 1.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            turn: Option<u32>,
            /// The count check: the final attempt's text counted by the run's
            /// tokenizer, beside `output_tokens` from `usage` (on a sample of spans).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            tokenizer_output_tokens: Option<u64>,
            /// Why the final attempt's output ended, as the server said it
            /// (`stop`, `length`, …): its first `finish_reason`, when it sent one.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            finish_reason: Option<String>,
        }
    };
}

/// The key a field of [`span_fields!`] or [`crate::attempt_fields!`] is written under:
/// its `as "key"` when it has one, else its name.
#[macro_export]
macro_rules! field_key {
    ($name:ident as $key:literal) => {
        $key
    };
    ($name:ident) => {
        stringify!($name)
    };
}

/// An attempt's fields in the order tpscope writes them, as [`span_fields!`] gives
/// the span's: [`crate::Attempt`] is declared from this list.
#[macro_export]
macro_rules! attempt_fields {
    ($callback:ident $([$($args:tt)*])?) => {
        $callback! {
            [$($($args)*)?]
            /// When the attempt started (the request was handed to the connection).
            started_at: Timestamp,
            /// When the first byte of the response head arrived.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            first_byte_at: Option<Timestamp>,
            /// When the first chunk carrying output arrived in this attempt.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            first_token_at: Option<Timestamp>,
            /// When the attempt ended for the client (it finished reading the end
            /// marker, saw the error, or timed out).
            ended_at: Timestamp,
            /// When the bytes that ended the stream (`[DONE]`, or the body's end)
            /// arrived at the host, by the kernel's receive stamp; `None` without
            /// kernel stamps or when no end arrived. `ended_at − end_at` is the
            /// client's own lateness, not the server's.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            end_at: Option<Timestamp>,
            /// The HTTP status, when a response head arrived.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            http_status: Option<u16>,
            /// Why the attempt failed; `None` when it ended ok.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            cause: Option<Cause>,
            /// Output tokens received in this attempt (by the span's token source).
            #[serde(default)]
            tokens: u64,
            /// Whether the attempt ran on a pooled connection; `None` when unknown.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            connection_reused: Option<bool>,
            /// Time spent opening a new connection (TCP, and TLS when used), when one was opened.
            #[serde(
                default,
                with = "duration_secs::option",
                skip_serializing_if = "Option::is_none"
            )]
            connect_time as "connect_s": Option<Duration>,
            /// Time waited after this attempt before the next one (retry back-off).
            #[serde(
                default,
                with = "duration_secs::option",
                skip_serializing_if = "Option::is_none"
            )]
            backoff as "backoff_s": Option<Duration>,
            /// The client's worst lag in this attempt: the longest time from a read's
            /// kernel arrival to the attempt's task getting its bytes (kernel stamps only).
            #[serde(
                default,
                with = "duration_secs::option",
                skip_serializing_if = "Option::is_none"
            )]
            client_lag as "client_lag_s": Option<Duration>,
            /// Socket reads that brought this attempt's body (traced reads only);
            /// events per read is the client's batching under load.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            reads: Option<u64>,
            /// Content chunks received in this attempt whose reads were traced (the
            /// denominator of `inexact_chunks`, the numerator of events per read).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            traced_chunks: Option<u64>,
            /// Content chunks whose stamp is only an upper bound of their arrival (a
            /// read that drained several events at once); `None` when the reads could
            /// not be traced (user stamps, TLS, HTTP/2).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            inexact_chunks: Option<u64>,
            /// Whether the first token's stamp is the arrival of its own bytes (see
            /// `inexact_chunks`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            first_token_exact: Option<bool>,
            /// Times the request was sent again at once on a new connection because a
            /// reused one closed before any response byte (not retries).
            #[serde(default, skip_serializing_if = "crate::span::is_zero")]
            resends: u32,
        }
    };
}
