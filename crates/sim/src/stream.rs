//! Response bodies: the SSE body that formats one chunk per token (OpenAI chunks,
//! Anthropic `content_block_delta` or Responses `response.output_text.delta`
//! events) from pre-built byte prefixes (no per-token allocation or serde), fed by the engine through the
//! sequence's hand-off ([`crate::handoff`]); fault injection on the way out (cut,
//! stall, malformed event, slow first token); and ground-truth stamps taken when a
//! frame is handed to the socket writer.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

use crate::app::{App, Cmd};
use crate::draws::Fault;
use crate::handoff::{Done, SeqShared};
use crate::request::Api;
use crate::responses::{self, Shape};
use crate::truth::TruthRecord;

/// How long a cut waits after its last frame before closing the connection, so
/// the writer flushes what was sent (an error from the body discards unflushed
/// bytes).
const CUT_FLUSH: std::time::Duration = std::time::Duration::from_millis(10);

/// Most tokens formatted into one frame, so a far-behind stream still yields to
/// the writer regularly (about 170 bytes per token).
const MAX_FRAME_TOKENS: u32 = 128;

/// Pre-formatted pieces of one request's SSE chunks.
pub(crate) struct ChunkFmt {
    endpoint: Api,
    /// `data: {"id":…,"object":…,"created":…,"model":…,"choices":[`
    head: Box<[u8]>,
    /// `head` + the opening of a token's content string.
    tok_pre: Box<[u8]>,
    /// Closes a token chunk (with `,"usage":null` when usage was asked for).
    tok_post: &'static [u8],
    usage_null: bool,
    prompt_tokens: u32,
    /// The Responses API's response object, for its events after the last token.
    responses: Option<Shape>,
}

/// Anthropic's `stop_reason` for the simulator's finish reason.
pub(crate) fn anthropic_stop_reason(finish_reason: &str) -> &'static str {
    match finish_reason {
        "length" => "max_tokens",
        _ => "end_turn",
    }
}

impl ChunkFmt {
    pub(crate) fn new(
        endpoint: Api,
        id: &str,
        created: u64,
        model_json: &str,
        include_usage: bool,
        prompt_tokens: u32,
    ) -> Self {
        let object = match endpoint {
            Api::Chat => "chat.completion.chunk",
            Api::Completions => "text_completion",
            Api::Anthropic => "message",
            Api::Responses => "response",
        };
        let responses = (endpoint == Api::Responses).then(|| Shape {
            id: id.to_string(),
            created,
            model: serde_json::from_str(model_json).unwrap_or_default(),
            prompt_tokens,
        });
        let head = match (endpoint, &responses) {
            // message_start and the text block's start; the id and usage are
            // known before the first token.
            (Api::Responses, Some(shape)) => shape.head(),
            (Api::Anthropic, _) => format!(
                "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"{id}\",\"type\":\"{object}\",\"role\":\"assistant\",\"content\":[],\"model\":{model_json},\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{{\"input_tokens\":{prompt_tokens},\"output_tokens\":0}}}}}}\n\n\
                 event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{{\"type\":\"text\",\"text\":\"\"}}}}\n\n"
            ),
            _ => format!(
                "data: {{\"id\":\"{id}\",\"object\":\"{object}\",\"created\":{created},\"model\":{model_json},\"choices\":["
            ),
        };
        let open: &str = match endpoint {
            Api::Chat => "{\"index\":0,\"delta\":{\"content\":\"",
            Api::Completions => "{\"index\":0,\"text\":\"",
            Api::Anthropic | Api::Responses => "",
        };
        let tok_pre = match (endpoint, &responses) {
            (Api::Responses, Some(shape)) => shape.token_prefix(),
            (Api::Anthropic, _) => "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"".to_string(),
            _ => format!("{head}{open}"),
        };
        let tok_post: &'static [u8] = match (endpoint, include_usage) {
            (Api::Anthropic, _) => b"\"}}\n\n",
            // Closed with the token's sequence number by `responses::token_suffix`.
            (Api::Responses, _) => b"",
            (Api::Chat, false) => b"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n",
            (Api::Chat, true) => {
                b"\"},\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n"
            }
            (Api::Completions, false) => b"\",\"logprobs\":null,\"finish_reason\":null}]}\n\n",
            (Api::Completions, true) => {
                b"\",\"logprobs\":null,\"finish_reason\":null}],\"usage\":null}\n\n"
            }
        };
        ChunkFmt {
            endpoint,
            tok_pre: tok_pre.into_bytes().into_boxed_slice(),
            head: head.into_bytes().into_boxed_slice(),
            tok_post,
            usage_null: include_usage,
            prompt_tokens,
            responses,
        }
    }

    fn usage_tail(&self) -> &'static [u8] {
        if self.usage_null {
            b",\"usage\":null}\n\n"
        } else {
            b"}\n\n"
        }
    }

    /// The chat role chunk (`delta: {role, content: ""}`), Anthropic's
    /// `message_start` and `content_block_start`, or the Responses lifecycle events
    /// before the first delta, which carry no token.
    fn role(&self, buf: &mut BytesMut) {
        if matches!(self.endpoint, Api::Anthropic | Api::Responses) {
            buf.extend_from_slice(&self.head);
        }
        if self.endpoint == Api::Chat {
            buf.extend_from_slice(&self.head);
            buf.extend_from_slice(
                b"{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]",
            );
            buf.extend_from_slice(self.usage_tail());
        }
    }

    /// Token `i`'s chunk; `word` is plain ASCII letters, so it needs no escaping.
    #[inline]
    fn token(&self, buf: &mut BytesMut, word: &str, i: u32) {
        buf.extend_from_slice(&self.tok_pre);
        buf.extend_from_slice(b" ");
        buf.extend_from_slice(word.as_bytes());
        if self.responses.is_some() {
            responses::token_suffix(buf, i);
        } else {
            buf.extend_from_slice(self.tok_post);
        }
    }

    /// Everything after the last token: the finish reason, usage when asked for
    /// and the end marker (`[DONE]`, Anthropic's `message_delta` with usage and
    /// `message_stop`, or the Responses events that repeat the `text`, made only
    /// for them, and `response.completed`).
    fn end(
        &self,
        buf: &mut BytesMut,
        reason: &str,
        completion: u32,
        text: impl FnOnce() -> String,
    ) {
        if let Some(shape) = &self.responses {
            shape.end(buf, reason, completion, &text());
            return;
        }
        if self.endpoint == Api::Anthropic {
            let stop = anthropic_stop_reason(reason);
            buf.extend_from_slice(
                format!(
                    "event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n\
                     event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{stop}\",\"stop_sequence\":null}},\"usage\":{{\"output_tokens\":{completion}}}}}\n\n\
                     event: message_stop\ndata: {{\"type\":\"message_stop\"}}\n\n"
                )
                .as_bytes(),
            );
            return;
        }
        self.finish(buf, reason);
        if self.usage_null {
            self.usage(buf, self.prompt_tokens, completion);
        }
        buf.extend_from_slice(b"data: [DONE]\n\n");
    }

    /// The last choice chunk: empty content and the finish reason.
    fn finish(&self, buf: &mut BytesMut, reason: &str) {
        buf.extend_from_slice(&self.head);
        match self.endpoint {
            Api::Chat => buf.extend_from_slice(
                b"{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"",
            ),
            Api::Completions | Api::Anthropic | Api::Responses => buf.extend_from_slice(
                b"{\"index\":0,\"text\":\"\",\"logprobs\":null,\"finish_reason\":\"",
            ),
        }
        buf.extend_from_slice(reason.as_bytes());
        buf.extend_from_slice(b"\"}]");
        buf.extend_from_slice(self.usage_tail());
    }

    /// The usage chunk (`choices: []`), sent only when usage was asked for.
    fn usage(&self, buf: &mut BytesMut, prompt: u32, completion: u32) {
        buf.extend_from_slice(&self.head);
        let total = u64::from(prompt) + u64::from(completion);
        buf.extend_from_slice(
            format!(
                "],\"usage\":{{\"prompt_tokens\":{prompt},\"completion_tokens\":{completion},\"total_tokens\":{total}}}}}\n\n"
            )
            .as_bytes(),
        );
    }

    /// A `data:` event that is not JSON (a chunk cut short).
    fn malformed(&self, buf: &mut BytesMut) {
        buf.extend_from_slice(&self.tok_pre);
        buf.extend_from_slice(b"\n\n");
    }
}

/// The text of a request's first `n` tokens, as their chunks carried it.
pub(crate) fn words(tok: tpscope_tokens::Tokenizer, seed: u64, n: u32) -> String {
    let mut text = String::with_capacity(n as usize * 8);
    for i in 0..u64::from(n) {
        text.push(' ');
        text.push_str(tok.word(seed, i));
    }
    text
}

/// Why a body ended early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// A cut fault: the connection is closed mid-response.
    #[error("simulated fault: response cut")]
    Cut,
    /// The simulator is shutting down.
    #[error("simulator shutting down")]
    Aborted,
}

/// The parts of a request the bodies need.
pub(crate) struct Delivery {
    pub app: Arc<App>,
    pub shared: Arc<SeqShared>,
    pub index: u64,
    pub word_seed: u64,
    /// Tokens the engine will generate.
    pub target: u32,
    pub finish_reason: &'static str,
    pub prompt_tokens: u32,
    pub fault: Option<Fault>,
    pub truth: TruthRecord,
    /// Whether the engine may still hold the sequence (abort it on drop).
    pub armed: bool,
}

impl Delivery {
    fn stamp_tokens(&mut self, from: u32, to: u32) {
        if to > from {
            let now = self.app.clock.at(Instant::now());
            if from == 0 {
                self.truth.first_token_at = Some(now);
            }
            self.truth.last_token_at = Some(now);
            self.truth.tokens = to;
        }
    }
}

impl Drop for Delivery {
    fn drop(&mut self) {
        if self.armed {
            self.app.send(Cmd::Abort(self.index));
        }
        self.app.record_truth(self.truth.clone());
    }
}

/// The streaming (SSE) body of one request.
pub(crate) struct SseBody {
    d: Delivery,
    fmt: ChunkFmt,
    sent: u32,
    /// The cut/stall/malformed/slow-first fault, until it has been applied.
    pending: Option<Fault>,
    sleep: Option<Pin<Box<Sleep>>>,
    /// A cut is due once `sleep` (the flush wait) ends.
    cutting: bool,
    ended: bool,
    buf: BytesMut,
}

impl SseBody {
    pub(crate) fn new(d: Delivery, fmt: ChunkFmt) -> Self {
        let pending = d.fault;
        SseBody {
            d,
            fmt,
            sent: 0,
            pending,
            sleep: None,
            cutting: false,
            ended: false,
            buf: BytesMut::with_capacity(4096),
        }
    }

    /// The token count at which the pending fault fires (never past the end).
    fn fault_point(&self) -> Option<u32> {
        let f = &self.d.app.config.faults;
        let k = match self.pending? {
            Fault::Cut => f.cut_after,
            Fault::Stall => f.stall_after,
            Fault::Malformed => f.malformed_after,
            _ => return None,
        };
        Some(k.min(self.d.target))
    }
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        loop {
            if let Some(s) = this.sleep.as_mut() {
                if s.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                this.sleep = None;
            }
            if this.cutting {
                this.cutting = false;
                this.ended = true;
                return Poll::Ready(Some(Err(BodyError::Cut)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            let point = this.fault_point();
            if point == Some(this.sent) {
                let faults = &this.d.app.config.faults;
                match this.pending.take() {
                    Some(Fault::Cut) => {
                        this.cutting = true;
                        this.sleep = Some(Box::pin(tokio::time::sleep(CUT_FLUSH)));
                        continue;
                    }
                    Some(Fault::Stall) => {
                        this.sleep = Some(Box::pin(tokio::time::sleep(faults.stall_for)));
                        continue;
                    }
                    Some(Fault::Malformed) => this.fmt.malformed(&mut this.buf),
                    _ => {}
                }
            }
            let (produced, done) = match this.d.shared.poll_progress(this.sent, cx) {
                Poll::Ready(x) => x,
                Poll::Pending if this.buf.is_empty() => return Poll::Pending,
                // A malformed event is waiting to go out: send it now.
                Poll::Pending => {
                    return Poll::Ready(Some(Ok(Frame::data(this.buf.split().freeze()))));
                }
            };
            if done == Some(Done::Aborted) {
                this.ended = true;
                return Poll::Ready(Some(Err(BodyError::Aborted)));
            }
            if this.sent == 0 && produced > 0 && this.pending == Some(Fault::SlowFirstToken) {
                this.pending = None;
                let delay = this.d.app.config.faults.slow_first_token_delay;
                this.sleep = Some(Box::pin(tokio::time::sleep(delay)));
                continue;
            }
            let mut limit = produced.min(this.sent.saturating_add(MAX_FRAME_TOKENS));
            if let Some(p) = this.fault_point() {
                limit = limit.min(p);
            }
            let from = this.sent;
            if from == 0 && limit > 0 {
                this.fmt.role(&mut this.buf);
            }
            let tok = this.d.app.config.tokenizer;
            for i in from..limit {
                this.fmt
                    .token(&mut this.buf, tok.word(this.d.word_seed, u64::from(i)), i);
            }
            this.sent = limit;
            if done == Some(Done::Finished) && limit == produced && this.pending.is_none() {
                if from == 0 && limit == 0 {
                    this.fmt.role(&mut this.buf);
                }
                let seed = this.d.word_seed;
                this.fmt
                    .end(&mut this.buf, this.d.finish_reason, produced, || {
                        words(tok, seed, produced)
                    });
                this.ended = true;
                this.d.armed = false;
                this.d.truth.finish_reason = Some(this.d.finish_reason);
            } else if done == Some(Done::Finished) && limit == produced {
                // Finished, but a fault is due at this point: it fires next round.
                this.d.armed = false;
            }
            if this.buf.is_empty() {
                continue;
            }
            this.d.stamp_tokens(from, limit);
            return Poll::Ready(Some(Ok(Frame::data(this.buf.split().freeze()))));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.sleep.is_none()
    }
}

/// A non-streaming body: one frame (whose hand-off stamps both token times), or
/// part of one followed by an error (a cut).
pub(crate) struct OnceBody {
    d: Delivery,
    data: Option<Bytes>,
    len: u64,
    cut: bool,
    sleep: Option<Pin<Box<Sleep>>>,
    tokens: u32,
}

impl OnceBody {
    pub(crate) fn new(d: Delivery, data: Bytes, cut: bool, tokens: u32) -> Self {
        let len = data.len() as u64;
        let data = if cut {
            Some(data.slice(..data.len() / 2))
        } else {
            Some(data)
        };
        OnceBody {
            d,
            data,
            len,
            cut,
            sleep: None,
            tokens,
        }
    }
}

impl Body for OnceBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        match this.data.take() {
            Some(b) => {
                if this.cut {
                    this.sleep = Some(Box::pin(tokio::time::sleep(CUT_FLUSH)));
                } else {
                    this.d.stamp_tokens(0, this.tokens);
                }
                Poll::Ready(Some(Ok(Frame::data(b))))
            }
            None if this.cut => {
                if let Some(s) = this.sleep.as_mut()
                    && s.as_mut().poll(cx).is_pending()
                {
                    return Poll::Pending;
                }
                this.cut = false;
                Poll::Ready(Some(Err(BodyError::Cut)))
            }
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && !self.cut
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}
