//! The neutral account of one response stream: first/last output instants,
//! content chunks, usage, text, response id, finish reason, and how the stream
//! ended. One [`Decoder`] per API dialect (OpenAI: [`crate::openai::OpenAi`])
//! turns SSE events into facts for it; the account knows no wire format, so a new
//! dialect is a new decoder module, not an edit here. The framing, oversized-event
//! and end-of-body rules are the same for every dialect.
//!
//! Instants are the caller's: each fact carries the instant of the read that
//! completed its event (see [`crate::sse`]).

use std::time::Instant;

use tpscope_model::{Cause, ChunkMark};

use crate::Usage;
use crate::sse::{Event, SseError, SseParser};

/// Turns one API dialect's SSE events into facts for the account.
pub trait Decoder: Default {
    /// Why a body that ended before the dialect's end marker is a disconnect.
    const MISSING_END: &'static str;

    /// One completed SSE event, stamped with the instant of the read that
    /// completed it; called only while the stream has not ended.
    fn on_event(&mut self, ev: Event<'_>, now: Instant, account: &mut StreamAccount<Self>);

    /// [`Self::MISSING_END`], or this decoder's own when it is chosen at run time.
    fn missing_end(&self) -> &'static str {
        Self::MISSING_END
    }
}

/// How a stream ended, once it has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// The dialect's end marker (OpenAI: `data: [DONE]`) arrived, in the read
    /// stamped with this instant.
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

/// The running account of one response stream, fed by the dialect decoder `D`.
#[derive(Clone, Debug)]
pub struct StreamAccount<D> {
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
    /// The response id (from the first event that has one).
    pub response_id: Option<String>,
    /// The model the server named (from the first event that names one).
    pub model: Option<String>,
    /// The first finish reason sent.
    pub finish_reason: Option<String>,
    /// Data events received (end markers and error events included; comments and
    /// other named events excluded).
    pub events: u64,
    /// Events that were completion chunks of the dialect (OpenAI: with `choices`
    /// or `usage`); an end marker after none of them ends nothing that was asked
    /// for, so the decoder fails it as `malformed`.
    pub completion_events: u64,
    /// Set once the stream has ended; later events are ignored.
    pub end: Option<StreamEnd>,
    last_completion_tokens: u64,
    /// Growth of `completion_tokens` sent on events without output text (vLLM's
    /// continuous usage stats on a token that decoded to nothing yet), carried to
    /// the next content chunk's mark so that a chunk can count as several tokens.
    pending_growth: u64,
    /// The last event whose only fact was its output text (the decoder's
    /// shortcut for the events that repeat it with other text).
    pub(crate) repeat: crate::repeat::Repeat,
    decoder: D,
}

impl<D: Decoder> StreamAccount<D> {
    /// An empty account.
    pub fn new(keep_text: bool, record_chunks: bool) -> Self {
        Self::with_decoder(D::default(), keep_text, record_chunks)
    }

    /// An empty account fed by `decoder` (a dialect chosen at run time).
    pub fn with_decoder(decoder: D, keep_text: bool, record_chunks: bool) -> Self {
        StreamAccount {
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
            model: None,
            finish_reason: None,
            events: 0,
            completion_events: 0,
            end: None,
            last_completion_tokens: 0,
            pending_growth: 0,
            repeat: Default::default(),
            decoder,
        }
    }

    /// Asks the CPU to fetch what the account points to and the next event
    /// will touch: the kept repeat event and the end of the kept text (see
    /// [`crate::prefetch`]; the account itself is the caller's to prefetch).
    #[inline]
    pub fn prefetch_data(&self) {
        self.repeat.prefetch();
        crate::prefetch(self.text.as_ptr().wrapping_add(self.text.len()), 1);
    }

    /// Feeds one read's bytes through `parser`, stamping every event it completes
    /// with `now`. An oversized event ends the stream as `malformed`. Returns the
    /// number of events completed.
    pub fn push(&mut self, parser: &mut SseParser, bytes: &[u8], now: Instant) -> usize {
        match parser.push(bytes, |ev| self.on_event(ev, now)) {
            Ok(n) => n,
            Err(e) => {
                self.sse_failed(&e);
                0
            }
        }
    }

    /// The SSE parser refused the body (`e`, an oversized event): the stream
    /// ends as `malformed`. For callers that drive the parser themselves.
    pub fn sse_failed(&mut self, e: &SseError) {
        self.fail(Cause::Malformed, sse_error_message(e));
    }

    /// The body ended at `now`: dispatches an event left without its blank line
    /// (see [`SseParser::finish`]), then, if the stream had not ended, ends it as a
    /// `disconnect`.
    pub fn end_of_body(&mut self, parser: &mut SseParser, now: Instant) {
        parser.finish(|ev| self.on_event(ev, now));
        if self.end.is_none() {
            self.end = Some(StreamEnd::Failed {
                cause: Cause::Disconnect,
                message: self.decoder.missing_end().into(),
            });
        }
    }

    /// One completed SSE event, stamped with the instant of the read that
    /// completed it.
    pub fn on_event(&mut self, ev: Event<'_>, now: Instant) {
        if self.end.is_some() {
            return;
        }
        // The decoder is taken out while it writes to the account (for the
        // stateless decoders this is free).
        let mut decoder = std::mem::take(&mut self.decoder);
        decoder.on_event(ev, now, self);
        self.decoder = decoder;
    }
}

impl<D> StreamAccount<D> {
    /// Output tokens so far: usage's `completion_tokens` when the server sent it,
    /// else one per content chunk (a lower bound).
    pub fn tokens(&self) -> u64 {
        self.usage
            .and_then(|u| u.completion_tokens)
            .unwrap_or(self.content_chunks)
    }

    /// Whether the end marker arrived (and nothing failed before it).
    pub fn is_done(&self) -> bool {
        matches!(self.end, Some(StreamEnd::Done(_)))
    }

    /// Ends the stream with a failure, unless it had already ended.
    pub fn fail(&mut self, cause: Cause, message: String) {
        if self.end.is_none() {
            self.end = Some(StreamEnd::Failed { cause, message });
        }
    }

    /// A data event arrived at `now` (counted whatever it carries).
    pub fn event(&mut self, now: Instant) {
        self.events += 1;
        self.last_event = Some(now);
    }

    /// The dialect's end marker arrived at `now`.
    pub fn done(&mut self, now: Instant) {
        self.end = Some(StreamEnd::Done(now));
    }

    /// Keeps the first response id sent.
    pub fn response_id(&mut self, id: impl FnOnce() -> String) {
        if self.response_id.is_none() {
            self.response_id = Some(id());
        }
    }

    /// Keeps the first model named.
    pub fn model(&mut self, model: impl FnOnce() -> String) {
        if self.model.is_none() {
            self.model = Some(model());
        }
    }

    /// Keeps the first finish reason sent.
    pub fn finish_reason(&mut self, reason: impl FnOnce() -> String) {
        if self.finish_reason.is_none() {
            self.finish_reason = Some(reason());
        }
    }

    /// Merges token counts the server sent; returns how much
    /// `completion_tokens` grew, when the update carries it.
    pub fn usage(&mut self, u: Usage) -> Option<u64> {
        self.usage = Some(self.usage.map_or(u, |old| old.merged(u)));
        let c = u.completion_tokens?;
        let growth = c.saturating_sub(self.last_completion_tokens);
        self.last_completion_tokens = c;
        Some(growth)
    }

    /// An event without output text brought `usage_growth` (what [`Self::usage`]
    /// returned for it): kept for the next content chunk's mark. Growth after the
    /// last content chunk (the usage-only chunk of `include_usage`) is never used.
    pub fn growth_without_output(&mut self, usage_growth: Option<u64>) {
        self.pending_growth += usage_growth.unwrap_or(0);
    }

    /// Where an event's output text goes: `Some` when the text is kept.
    pub fn text_sink(&mut self) -> Option<&mut String> {
        self.keep_text.then_some(&mut self.text)
    }

    /// An event at `now` carried output; `content` when some of it was answer
    /// text (not only reasoning), `usage_growth` what [`Self::usage`] returned for
    /// the same event.
    pub fn output(&mut self, now: Instant, content: bool, usage_growth: Option<u64>) {
        self.content_chunks += 1;
        let first = *self.first_token.get_or_insert(now);
        if content && self.first_content.is_none() {
            self.first_content = Some(now);
        }
        self.last_token = Some(now);
        let carried = std::mem::take(&mut self.pending_growth);
        if let Some(marks) = &mut self.chunks {
            let tokens = Some(usage_growth.map_or(carried, |g| g + carried))
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
