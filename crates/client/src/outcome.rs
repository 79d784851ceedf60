//! The record kept while one attempt runs ([`AttemptRecord`]): the attempt's
//! stamps, the stream account, and the HTTP facts around it; closed into the one
//! [`AttemptOutcome`] of the model by the stream layer.

use std::time::{Duration, Instant};

use hyper::StatusCode;
use tpscope_model::{Attempt, AttemptOutcome, Cause, RunClock};
use tpscope_stream::{AnyStream, Dialect, StreamEnd, stream_end};

use crate::config::ClientConfig;
use crate::connector::ConnInfo;
use crate::rx::FrameStamp;

/// The attempt being recorded.
pub(crate) struct AttemptRecord<'c> {
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

impl<'c> AttemptRecord<'c> {
    pub fn new(clock: &'c RunClock, start: Instant, cfg: &ClientConfig, dialect: Dialect) -> Self {
        AttemptRecord {
            clock,
            attempt: Attempt::started(clock.at(start)),
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
        match stream_end(&mut self.stream, "the stream ended without data: [DONE]") {
            Ok(at) => self.finish(None, at, None),
            Err((cause, message)) => self.finish(Some(cause), ended, Some(message)),
        }
    }

    pub fn finish(
        self,
        cause: Option<Cause>,
        ended: Instant,
        message: Option<String>,
    ) -> AttemptOutcome {
        let clock = self.clock;
        let mut attempt = self.attempt;
        let rx = self.rx;
        attempt.end_at = rx.end_at.map(|t| clock.at(t));
        attempt.client_lag = rx.lag;
        if rx.reads > 0 {
            attempt.reads = Some(rx.reads);
            attempt.traced_chunks = Some(rx.traced);
            attempt.inexact_chunks = Some(rx.inexact);
        }
        attempt.first_token_exact = rx.first_token_exact;
        let mut out = AttemptOutcome::started(attempt.started_at);
        out.attempt = attempt;
        out.retry_after = self.retry_after;
        out.bytes_received = self.bytes_received;
        out.connection_id = self.connection_id;
        out.first_token_lag = self.first_token_lag;
        self.stream.close(clock, out, ended, cause, message)
    }
}
