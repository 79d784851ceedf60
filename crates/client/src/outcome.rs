//! What one attempt produced ([`AttemptOutcome`]) and the record kept while it
//! runs: the attempt's stamps, the stream account, and the HTTP facts around it.

use std::time::{Duration, Instant};

use hyper::StatusCode;
use tpscope_model::{Attempt, Cause, ChunkMark, RunClock, Timestamp};
use tpscope_stream::{AnyStream, Dialect, StreamEnd, Usage};

use crate::config::ClientConfig;
use crate::connector::ConnInfo;
use crate::rx::FrameStamp;

/// Everything one attempt produced. `attempt.cause` is `None` iff the attempt ended
/// ok (the stream's `[DONE]` arrived, or a complete non-streaming answer).
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptOutcome {
    /// The attempt record: `started_at` (the request was handed to the pool),
    /// `first_byte_at` (the response head had arrived and was parsed),
    /// `first_token_at` (the read that completed the first event carrying non-empty
    /// output or reasoning text), `ended_at` (the read that completed `[DONE]`, or
    /// when the failure was seen), `http_status`, `cause`, `tokens` (usage's
    /// `completion_tokens` when the server sent usage, else `content_chunks`),
    /// `connection_reused`, `connect_time` (only when this attempt waited for the
    /// connection to be opened). `backoff` is left `None`.
    pub attempt: Attempt,
    /// The read that completed the last event carrying output.
    pub last_token_at: Option<Timestamp>,
    /// The read that completed the first event carrying non-empty answer text
    /// (content, refusal, tool call; not reasoning). Equals `first_token_at` for
    /// models that do not stream reasoning.
    pub first_content_at: Option<Timestamp>,
    /// The server's token counts (the last value of each field it sent).
    pub usage: Option<Usage>,
    /// Events that carried non-empty output or reasoning text.
    pub content_chunks: u64,
    /// Output and reasoning text received, unescaped, in arrival order (empty when
    /// `ClientConfig::keep_text` is off); for counting tokens after the stream.
    pub text: String,
    /// One mark per content chunk when `record_chunks`: offset from
    /// `first_token_at` (events completed by one read share its instant), and
    /// tokens (the growth of `usage.completion_tokens` when the server sends usage
    /// on every chunk, else 1).
    pub chunks: Option<Vec<ChunkMark>>,
    /// The server's `Retry-After` on a 429 or 503 (seconds or an HTTP date).
    pub retry_after: Option<Duration>,
    /// What went wrong, for failed attempts (server message or transport error;
    /// never prompt text or credentials).
    pub error_message: Option<String>,
    /// The response `id`.
    pub response_id: Option<String>,
    /// The first `finish_reason` the server sent (`stop`, `length`, …).
    pub finish_reason: Option<String>,
    /// Response body bytes received (after HTTP framing).
    pub bytes_received: u64,
    /// SSE data events received (`[DONE]` included).
    pub events: u64,
    /// The id of the connection the response came on (numbered from 1 per
    /// client, in the order connections were opened); `None` when no response
    /// head arrived.
    pub connection_id: Option<u64>,
    /// How long after the first token's bytes arrived (as stamped in
    /// `first_token_at`) the attempt's task received them from the connection:
    /// the client's own delay that kernel receive timestamps keep out of
    /// `first_token_at`. Zero with user-side stamps (with kernel stamps, a read
    /// the kernel did not stamp counts from when hyper's connection task read
    /// it); `None` without a first token, or for a non-streaming answer.
    pub first_token_lag: Option<Duration>,
}

impl AttemptOutcome {
    /// Whether the attempt ended ok.
    pub fn is_ok(&self) -> bool {
        self.attempt.cause.is_none()
    }

    /// The failure cause, if any.
    pub fn cause(&self) -> Option<Cause> {
        self.attempt.cause
    }
}

/// The attempt being recorded.
pub(crate) struct Recorder<'c> {
    clock: &'c RunClock,
    pub attempt: Attempt,
    pub stream: AnyStream,
    dialect: Dialect,
    pub retry_after: Option<Duration>,
    pub bytes_received: u64,
    pub connection_id: Option<u64>,
    pub first_token_lag: Option<Duration>,
    /// How the reads of this attempt were stamped (kernel stamps only).
    pub rx: RxTally,
    /// The body's content type and first bytes (named when it is no event stream).
    pub body: crate::body_head::BodyHead,
}

/// The attempt's account of its own stamps: what `attempt_fields!` calls
/// `end_at`, `client_lag`, `reads`, `traced_chunks`, `inexact_chunks` and
/// `first_token_exact`.
#[derive(Default)]
pub(crate) struct RxTally {
    pub end_at: Option<Instant>,
    pub lag: Option<Duration>,
    pub last_read: Option<u64>,
    pub reads: u64,
    pub traced: u64,
    pub inexact: u64,
    pub first_token_exact: Option<bool>,
}

impl RxTally {
    /// One body frame stamped `fs` that brought `chunks` content chunks (and the
    /// first token, when `first`).
    pub fn frame(&mut self, fs: &FrameStamp, chunks: u64, first: bool) {
        // A frame is one HTTP chunk, one server write: its events arrived
        // together, so the stamp of the event that ended the read is theirs too
        // (for a body without chunking, an approximation).
        let lag = fs.received.saturating_duration_since(fs.at);
        self.lag = Some(self.lag.map_or(lag, |l| l.max(lag)));
        let Some(read) = fs.read else { return };
        if self.last_read != Some(read) {
            self.last_read = Some(read);
            self.reads += 1;
        }
        self.traced += chunks;
        if !fs.exact {
            self.inexact += chunks;
        }
        if first {
            self.first_token_exact = Some(fs.exact);
        }
    }
}

impl<'c> Recorder<'c> {
    pub fn new(clock: &'c RunClock, start: Instant, cfg: &ClientConfig, dialect: Dialect) -> Self {
        let t = clock.at(start);
        Recorder {
            clock,
            attempt: Attempt {
                started_at: t,
                first_byte_at: None,
                first_token_at: None,
                ended_at: t,
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
            },
            stream: dialect.account(cfg.keep_text, cfg.record_chunks),
            dialect,
            retry_after: None,
            bytes_received: 0,
            connection_id: None,
            first_token_lag: None,
            rx: RxTally::default(),
            body: Default::default(),
        }
    }

    /// The response head arrived at `head_at` with `status`, on `conn` (`start`:
    /// when the attempt started).
    pub fn head(
        &mut self,
        head_at: Instant,
        status: StatusCode,
        conn: Option<&ConnInfo>,
        start: Instant,
    ) {
        self.attempt.first_byte_at = Some(self.clock.at(head_at));
        self.attempt.http_status = Some(status.as_u16());
        if let Some(info) = conn {
            let reused = info.claim();
            self.connection_id = Some(info.id);
            self.attempt.connection_reused = Some(reused);
            // A fresh connection opened before this attempt started was opened for
            // another request (which then got a pooled one): this attempt did not
            // wait for it.
            if !reused && info.opened_at >= start {
                self.attempt.connect_time = Some(info.connect_time);
            }
        }
    }

    /// A complete non-streaming answer.
    pub fn whole_answer(mut self, body: &[u8], now: Instant) -> AttemptOutcome {
        match self.dialect.absorb_answer(&mut self.stream, body, now) {
            Err((cause, message)) => self.finish(Some(cause), now, Some(message)),
            Ok(()) => self.finish(None, now, None),
        }
    }

    /// Ends the attempt as the stream's end says (`ended` is when the failure was
    /// seen; a `[DONE]` carries its own instant).
    pub fn finish_stream(mut self, ended: Instant) -> AttemptOutcome {
        // Bytes but not one event: the body is something else (an HTML page, text).
        let wrong_body = match &self.stream.end {
            None | Some(StreamEnd::Failed { .. }) if self.stream.events == 0 => {
                let status = self.attempt.http_status.unwrap_or(200);
                self.body.not_a_stream(status)
            }
            _ => None,
        };
        if let Some(message) = wrong_body {
            return self.finish(Some(Cause::Malformed), ended, Some(message));
        }
        match self.stream.end.take() {
            Some(StreamEnd::Done(at)) => self.finish(None, at, None),
            Some(StreamEnd::Failed { cause, message }) => {
                self.finish(Some(cause), ended, Some(message))
            }
            None => self.finish(
                Some(Cause::Disconnect),
                ended,
                Some("the stream ended without data: [DONE]".into()),
            ),
        }
    }

    pub fn finish(
        self,
        cause: Option<Cause>,
        ended: Instant,
        message: Option<String>,
    ) -> AttemptOutcome {
        let clock = self.clock;
        let st = self.stream;
        let mut attempt = self.attempt;
        attempt.ended_at = clock.at(ended);
        attempt.cause = cause;
        attempt.first_token_at = st.first_token.map(|t| clock.at(t));
        // The head precedes the first token on the wire: a head stamped with the
        // connection's latest arrival (hyper may have read ahead) is bounded by it.
        if let (Some(fb), Some(ft)) = (attempt.first_byte_at, attempt.first_token_at) {
            attempt.first_byte_at = Some(fb.min(ft));
        }
        attempt.tokens = st.tokens();
        let rx = self.rx;
        attempt.end_at = rx.end_at.map(|t| clock.at(t));
        attempt.client_lag = rx.lag;
        if rx.reads > 0 {
            attempt.reads = Some(rx.reads);
            attempt.traced_chunks = Some(rx.traced);
            attempt.inexact_chunks = Some(rx.inexact);
        }
        attempt.first_token_exact = rx.first_token_exact;
        AttemptOutcome {
            attempt,
            last_token_at: st.last_token.map(|t| clock.at(t)),
            first_content_at: st.first_content.map(|t| clock.at(t)),
            usage: st.usage,
            content_chunks: st.content_chunks,
            text: st.text,
            chunks: st.chunks,
            retry_after: self.retry_after,
            error_message: if cause.is_some() { message } else { None },
            response_id: st.response_id,
            finish_reason: st.finish_reason,
            bytes_received: self.bytes_received,
            events: st.events,
            connection_id: self.connection_id,
            first_token_lag: self.first_token_lag,
        }
    }
}
