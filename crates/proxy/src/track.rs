//! One completion request's record while it passes through: the queue and slot
//! instants, the upstream response's head, the relayed body fed to the dialect's
//! stream account (SSE), kept for parsing (a JSON answer), or read for its
//! message (an error status); and, when it ends (or is dropped: the client went
//! away), the attempt [`AttemptOutcome`] handed to the writer thread as a [`Finished`].
//! Memory per request is bounded: body copies and kept text stop at fixed caps.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hyper::StatusCode;
use hyper::header::{self, HeaderMap};
use tpscope_client::RxStamp;
use tpscope_model::{AttemptOutcome, Cause, Timestamp, Usage};
use tpscope_record::Finished;
use tpscope_stream::{
    AnyStream, Dialect, SseParser, StreamEnd, error_status, retry_after, stream_end,
};

use crate::gate::Permit;
use crate::rec::Rec;

/// Largest non-streaming answer kept for parsing (tokens and usage).
const ANSWER_LIMIT: usize = 8 << 20;
/// Largest error body kept for its message.
const ERROR_LIMIT: usize = 64 << 10;
/// Largest output text kept per stream for the tokenizer when the server sends
/// no usage; past it the count falls back to content chunks.
const TEXT_LIMIT: usize = 1 << 20;
/// Largest SSE event accepted (as the client's default).
const MAX_EVENT: usize = 1 << 20;

enum Kind {
    /// Before the response head.
    Waiting,
    Sse(SseParser),
    Answer(Vec<u8>, bool),
    Error(Vec<u8>),
}

/// The record of one completion request.
pub(crate) struct Track {
    rec: Arc<Rec>,
    dialect: Dialect,
    queued_at: Timestamp,
    admitted_at: Option<Timestamp>,
    permit: Option<Permit>,
    first_byte_at: Option<Timestamp>,
    http_status: Option<u16>,
    retry_after: Option<Duration>,
    kind: Kind,
    account: AnyStream,
    text_dropped: bool,
    done: bool,
    /// Kernel receive stamps of the upstream's reads, when the
    /// connection carries them.
    rx: RxFacts,
}

/// What the upstream's stamped reads say of the proxy's own measurement.
#[derive(Default)]
struct RxFacts {
    kernel: bool,
    reads: u64,
    traced_chunks: u64,
    inexact_chunks: u64,
    first_token_exact: Option<bool>,
    end_at: Option<Instant>,
    /// The worst lag: a read's kernel arrival to the relay handing it on.
    lag: Option<Duration>,
}

impl Track {
    /// A request that arrived (or that its client queued at `queued_at`).
    pub fn queued(rec: Arc<Rec>, dialect: Dialect, queued_at: Timestamp) -> Track {
        rec.session.queue();
        Track {
            account: dialect.account(true, false),
            rec,
            dialect,
            queued_at,
            admitted_at: None,
            permit: None,
            first_byte_at: None,
            http_status: None,
            retry_after: None,
            kind: Kind::Waiting,
            text_dropped: false,
            done: false,
            rx: RxFacts::default(),
        }
    }

    /// The request is not one to record after all (refused before it was sent):
    /// it leaves the occupancy and writes no span.
    pub fn forget(&mut self) {
        if !self.done {
            self.done = true;
            self.rec.session.leave(self.admitted_at.is_some());
            self.permit = None;
        }
    }

    /// It took a slot: now (no cap), or at `at` when the gate handed one over
    /// (the gate has moved the occupancy then).
    pub fn admitted(&mut self, permit: Option<Permit>, at: Option<Timestamp>) {
        match at {
            Some(t) => self.admitted_at = Some(t),
            None => {
                self.admitted_at = Some(self.rec.admit_at(None));
            }
        }
        self.permit = permit;
    }

    /// The response head arrived at `now`.
    pub fn head(&mut self, status: StatusCode, headers: &HeaderMap, now: Instant) {
        self.first_byte_at = Some(self.rec.session.clock().at(now));
        self.http_status = Some(status.as_u16());
        self.retry_after = retry_after(
            status.as_u16(),
            headers.get(header::RETRY_AFTER).map(|v| v.as_bytes()),
            SystemTime::now(),
        );
        let sse = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("text/event-stream"));
        self.kind = if !status.is_success() {
            Kind::Error(Vec::new())
        } else if sse {
            Kind::Sse(SseParser::with_limit(MAX_EVENT))
        } else {
            Kind::Answer(Vec::new(), false)
        };
    }

    /// Asks the CPU to fetch what the record points to and the next chunk
    /// will touch (see [`tpscope_stream::prefetch`]); the record itself is the
    /// caller's to prefetch, as part of its own state.
    #[inline]
    pub fn prefetch_data(&self) {
        self.account.prefetch_data();
    }

    /// One relayed body read, stamped with its kernel arrival when the
    /// upstream connection carries one (`kernel`).
    pub fn data_stamped(&mut self, bytes: &[u8], st: RxStamp, kernel: bool) {
        let (chunks, first, ended) = (
            self.account.content_chunks,
            self.account.first_token.is_some(),
            self.account.end.is_some(),
        );
        self.data(bytes, st.at);
        if !kernel {
            return;
        }
        let rx = &mut self.rx;
        rx.kernel = true;
        rx.reads += 1;
        let new = self.account.content_chunks - chunks;
        if st.traced {
            rx.traced_chunks += new;
            if !st.exact {
                rx.inexact_chunks += new;
            }
        }
        if !first && self.account.first_token.is_some() {
            rx.first_token_exact = Some(st.exact);
        }
        if !ended && matches!(self.account.end, Some(StreamEnd::Done(_))) {
            rx.end_at = Some(st.at);
        }
        rx.lag = rx
            .lag
            .max(Some(st.received.saturating_duration_since(st.at)));
    }

    /// One relayed body read, at `now`.
    pub fn data(&mut self, bytes: &[u8], now: Instant) {
        match &mut self.kind {
            Kind::Sse(parser) => {
                self.account.push(parser, bytes, now);
                self.keep_text_bounded();
            }
            Kind::Answer(buf, over) => {
                if buf.len() + bytes.len() > ANSWER_LIMIT {
                    *over = true;
                    *buf = Vec::new();
                } else if !*over {
                    buf.extend_from_slice(bytes);
                }
            }
            Kind::Error(buf) => {
                let room = ERROR_LIMIT.saturating_sub(buf.len());
                buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
            }
            Kind::Waiting => {}
        }
    }

    /// Past [`TEXT_LIMIT`] the text is dropped (the count falls back to content
    /// chunks), so memory per stream stays bounded.
    fn keep_text_bounded(&mut self) {
        if !self.text_dropped && self.account.text.len() > TEXT_LIMIT {
            self.text_dropped = true;
            self.account.keep_text = false;
            self.account.text = String::new();
        }
    }

    /// The upstream body ended at `now` and its last byte went to the client.
    pub fn end(&mut self, now: Instant) {
        let (cause, message, ended) = match std::mem::replace(&mut self.kind, Kind::Waiting) {
            Kind::Sse(mut parser) => {
                self.account.end_of_body(&mut parser, now);
                match stream_end(&mut self.account, "the stream ended") {
                    Ok(at) => (None, None, at),
                    Err((cause, message)) => (Some(cause), Some(message), now),
                }
            }
            Kind::Answer(buf, over) => {
                if over {
                    // Too large to parse here: ok as far as the proxy can tell.
                    self.account.event(now);
                    (None, None, now)
                } else {
                    match self.dialect.absorb_answer(&mut self.account, &buf, now) {
                        Ok(()) => (None, None, now),
                        Err((c, m)) => (Some(c), Some(m), now),
                    }
                }
            }
            Kind::Error(buf) => {
                let status = self.http_status.unwrap_or(500);
                let (cause, message) = error_status(status, status, &buf);
                (Some(cause), Some(message), now)
            }
            Kind::Waiting => (Some(Cause::Disconnect), Some("no response".into()), now),
        };
        self.finish(cause, message, ended, now);
    }

    /// The request ended without a (complete) response: `cause` and what happened.
    pub fn fail(&mut self, cause: Cause, message: String) {
        let now = Instant::now();
        self.finish(Some(cause), Some(message), now, now);
    }

    fn finish(
        &mut self,
        cause: Option<Cause>,
        mut message: Option<String>,
        ended: Instant,
        now: Instant,
    ) {
        if self.done {
            return;
        }
        self.done = true;
        let rec = &self.rec;
        let clock = &rec.session.clock();
        let released_at = clock.at(now);
        if let Some(m) = &self.account.model {
            rec.tally.model(m);
        }
        let outcomes = match self.admitted_at {
            None => {
                rec.session.leave(false);
                Vec::new()
            }
            Some(admitted_at) => {
                rec.session.leave(true);
                // The slot changes hands at the release instant: the next in
                // line is admitted as of then.
                if let Some(p) = self.permit.take() {
                    p.release_at(released_at);
                }
                let account =
                    std::mem::replace(&mut self.account, self.dialect.account(false, false));
                let mut o = AttemptOutcome::started(admitted_at);
                o.attempt.first_byte_at = self.first_byte_at;
                o.attempt.http_status = self.http_status;
                o.retry_after = self.retry_after;
                let mut o = account.close(clock, o, ended, cause, message.take());
                o.attempt.ended_at = o.attempt.ended_at.max(admitted_at);
                // The upstream's reads, kernel-stamped where the system gives
                // stamps: the proxy's own lag.
                o.attempt.end_at = self.rx.end_at.map(|t| clock.at(t));
                o.attempt.client_lag = self.rx.lag;
                o.attempt.reads = self.rx.kernel.then_some(self.rx.reads);
                o.attempt.traced_chunks = self.rx.kernel.then_some(self.rx.traced_chunks);
                o.attempt.inexact_chunks = self.rx.kernel.then_some(self.rx.inexact_chunks);
                o.attempt.first_token_exact = self.rx.first_token_exact;
                // Text is kept for the tokenizer only when usage has no count.
                if self.text_dropped || o.usage.and_then(Usage::counted).is_some() {
                    o.text = String::new();
                }
                vec![o]
            }
        };
        let cancelled = self
            .admitted_at
            .is_none()
            .then(|| message.unwrap_or_else(|| "left the queue".into()));
        rec.finished(Finished {
            seq: 0,
            queued_at: self.queued_at,
            admitted_at: self.admitted_at,
            released_at,
            outcomes,
            planned_input_tokens: None,
            cancelled,
            session_id: None,
            turn: None,
        });
    }
}

impl Drop for Track {
    fn drop(&mut self) {
        if !self.done {
            // The end marker had arrived: the response was whole, whoever
            // closed first (the openai SDK closes on `[DONE]`, often before the
            // upstream's body has ended).
            if self.account.is_done() {
                self.end(Instant::now());
                return;
            }
            if self.rec.tally.cut_one() {
                let msg = match self.admitted_at {
                    None => "the proxy stopped while it was queued (never sent)".to_string(),
                    Some(_) => format!(
                        "the proxy stopped (drain ended) after {} output tokens",
                        self.account.tokens()
                    ),
                };
                self.fail(Cause::Cancelled, msg);
                return;
            }
            let msg = match (self.admitted_at, self.first_byte_at) {
                (None, _) => "the client went away while queued (never sent)".to_string(),
                (Some(_), None) => "the client went away before the response".to_string(),
                (Some(_), Some(_)) => format!(
                    "the client went away after {} output tokens",
                    self.account.tokens()
                ),
            };
            self.fail(Cause::Cancelled, msg);
        }
    }
}
