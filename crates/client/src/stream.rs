//! What one OpenAI-style response stream carried, accumulated event by event
//! without I/O: first/last output instants, content chunks, usage, text, response
//! id, finish reason, and how the stream ended. The client drives it from its read
//! loop; the proxy can drive it from the bytes it forwards.
//!
//! Instants are the caller's: pass the instant of the read that completed each
//! event (see [`crate::sse`]).

use std::time::Instant;

use tpscope_model::{Cause, ChunkMark};

use crate::chunk::{self, Chunk, Usage, is_done, parse_chunk};
use crate::sse::{Event, SseError, SseParser};

/// How a stream ended, once it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// `data: [DONE]` arrived, in the read stamped with this instant.
    Done(Instant),
    /// The stream failed: an error event or chunk, a chunk that does not parse, or
    /// an oversized event.
    Failed {
        /// The cause (closed list).
        cause: Cause,
        /// What went wrong (the server's message, or the parse error).
        message: String,
    },
}

/// The running account of one response stream.
#[derive(Clone, Debug)]
pub struct StreamState {
    /// Keep output and reasoning text in `text`.
    pub keep_text: bool,
    /// The read that completed the first event carrying non-empty output or
    /// reasoning text.
    pub first_token: Option<Instant>,
    /// The read that completed the first event carrying non-empty answer text
    /// (content, refusal or tool call; reasoning excluded).
    pub first_content: Option<Instant>,
    /// The read that completed the last event carrying output.
    pub last_token: Option<Instant>,
    /// The read that completed the last data event of any kind.
    pub last_event: Option<Instant>,
    /// The server's token counts (the last value of each field sent).
    pub usage: Option<Usage>,
    /// Events that carried non-empty output or reasoning text.
    pub content_chunks: u64,
    /// Output and reasoning text received, unescaped (when `keep_text`).
    pub text: String,
    /// One mark per content chunk (when created with `record_chunks`): offset
    /// from `first_token`, and tokens (growth of `usage.completion_tokens` when the
    /// server sends usage on every chunk, else 1).
    pub chunks: Option<Vec<ChunkMark>>,
    /// The response id (from the first chunk that has one).
    pub response_id: Option<String>,
    /// The first `finish_reason` sent.
    pub finish_reason: Option<String>,
    /// Data events received (`[DONE]` and error events included; comments and
    /// other named events excluded).
    pub events: u64,
    /// Set once the stream has ended; later events are ignored.
    pub end: Option<StreamEnd>,
    last_completion_tokens: u64,
}

impl StreamState {
    /// An empty account.
    pub fn new(keep_text: bool, record_chunks: bool) -> Self {
        StreamState {
            keep_text,
            first_token: None,
            first_content: None,
            last_token: None,
            last_event: None,
            usage: None,
            content_chunks: 0,
            text: String::new(),
            chunks: record_chunks.then(Vec::new),
            response_id: None,
            finish_reason: None,
            events: 0,
            end: None,
            last_completion_tokens: 0,
        }
    }

    /// Output tokens so far: usage's `completion_tokens` when the server sent it,
    /// else one per content chunk (a lower bound).
    pub fn tokens(&self) -> u64 {
        self.usage
            .and_then(|u| u.completion_tokens)
            .unwrap_or(self.content_chunks)
    }

    /// Whether `[DONE]` arrived (and nothing failed before it).
    pub fn is_done(&self) -> bool {
        matches!(self.end, Some(StreamEnd::Done(_)))
    }

    /// Feeds one read's bytes through `parser`, stamping every event it completes
    /// with `now`. An oversized event ends the stream as `malformed`. Returns the
    /// number of events completed.
    pub fn push(&mut self, parser: &mut SseParser, bytes: &[u8], now: Instant) -> usize {
        match parser.push(bytes, |ev| self.on_event(ev, now)) {
            Ok(n) => n,
            Err(e) => {
                self.fail(Cause::Malformed, sse_error_message(&e));
                0
            }
        }
    }

    /// The body ended at `now`: dispatches an event left without its blank line
    /// (see [`SseParser::finish`]), then, if the stream had not ended, ends it as a
    /// `disconnect`.
    pub fn end_of_body(&mut self, parser: &mut SseParser, now: Instant) {
        parser.finish(|ev| self.on_event(ev, now));
        if self.end.is_none() {
            self.end = Some(StreamEnd::Failed {
                cause: Cause::Disconnect,
                message: "the stream ended without data: [DONE]".into(),
            });
        }
    }

    /// Ends the stream with a failure, unless it had already ended.
    pub fn fail(&mut self, cause: Cause, message: String) {
        if self.end.is_none() {
            self.end = Some(StreamEnd::Failed { cause, message });
        }
    }

    /// One completed SSE event, stamped with the instant of the read that
    /// completed it.
    pub fn on_event(&mut self, ev: Event<'_>, now: Instant) {
        if self.end.is_some() {
            return;
        }
        if !ev.is_message() {
            if ev.event == b"error" {
                self.events += 1;
                self.last_event = Some(now);
                let err = match parse_chunk(ev.data).ok().and_then(|c| c.server_error()) {
                    Some(e) => e,
                    None => chunk::ServerError {
                        cause: Cause::Http5xx,
                        message: chunk::error_body_message(ev.data)
                            .unwrap_or_else(|| "(no message)".into()),
                    },
                };
                self.fail(
                    err.cause,
                    format!("error event in the stream: {}", err.message),
                );
            }
            // Other named events (keep-alives of some gateways) are not chunks.
            return;
        }
        self.events += 1;
        self.last_event = Some(now);
        if is_done(ev.data) {
            self.end = Some(StreamEnd::Done(now));
            return;
        }
        match parse_chunk(ev.data) {
            Ok(c) => {
                if let Some(err) = c.server_error() {
                    self.fail(err.cause, format!("error in the stream: {}", err.message));
                } else {
                    self.absorb(&c, now);
                }
            }
            Err(e) => {
                let n = self.events;
                self.fail(
                    Cause::Malformed,
                    format!("event {n} does not parse: {}", e.0),
                );
            }
        }
    }

    /// Takes what one parsed chunk (or a whole non-streaming answer) carries.
    pub fn absorb(&mut self, chunk: &Chunk<'_>, now: Instant) {
        if self.response_id.is_none()
            && let Some(id) = chunk.id
        {
            self.response_id = Some(id.to_cow().into_owned());
        }
        if self.finish_reason.is_none()
            && let Some(r) = chunk.finish_reason()
        {
            self.finish_reason = Some(r.to_cow().into_owned());
        }
        let mut usage_growth = None;
        if let Some(u) = chunk.usage {
            self.usage = Some(self.usage.map_or(u, |old| old.merged(u)));
            if let Some(c) = u.completion_tokens {
                usage_growth = Some(c.saturating_sub(self.last_completion_tokens));
                self.last_completion_tokens = c;
            }
        }
        let seen = chunk.collect_output(if self.keep_text {
            Some(&mut self.text)
        } else {
            None
        });
        if !seen.any() {
            return;
        }
        self.content_chunks += 1;
        let first = *self.first_token.get_or_insert(now);
        if seen.content && self.first_content.is_none() {
            self.first_content = Some(now);
        }
        self.last_token = Some(now);
        if let Some(marks) = &mut self.chunks {
            let tokens = usage_growth
                .filter(|&t| t > 0)
                .unwrap_or(1)
                .min(u64::from(u32::MAX)) as u32;
            marks.push(ChunkMark {
                offset: now.saturating_duration_since(first),
                tokens,
            });
        }
    }
}

fn sse_error_message(e: &SseError) -> String {
    format!("{e} (raise max_event_bytes if this is expected)")
}
