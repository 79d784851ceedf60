//! The OpenAI Responses API's wire shapes (`POST /v1/responses`): the streamed
//! typed events (`response.created` … `response.output_text.delta` …
//! `response.completed`, each with its `sequence_number`) and the whole answer,
//! as the official API sends them (the event types of the openai SDK), so its
//! `responses.create(stream=True)` and `responses.stream()` read the simulator.
//!
//! Events before the first token: created, in_progress, the message item added,
//! its text part added (sequence numbers 0–3); token `i` is number `4 + i`; after
//! the last token the text and part and item are done and the response completed.
//! At the token limit the response's status is `incomplete` with the reason
//! `max_output_tokens`, carried by `response.completed` as vLLM sends it (OpenAI's
//! own API sends `response.incomplete`, which the SDK's `responses.stream()`
//! helper does not take as an end; tpscope's decoder reads both).

use bytes::BytesMut;
use serde_json::{Value, json};

/// Sequence number of the first token's delta event.
const FIRST_DELTA_SEQ: u32 = 4;

/// The response object (`response` of the lifecycle events, or the whole answer).
pub(crate) struct Shape {
    pub id: String,
    pub created: u64,
    pub model: String,
    pub prompt_tokens: u32,
}

impl Shape {
    fn item_id(&self) -> String {
        format!("msg_{}", self.id)
    }

    /// The response object with `status`, `output` and `usage` as given.
    fn object(&self, status: &str, output: Value, usage: Value, reason: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
            "usage": usage,
            "error": null,
            "incomplete_details": reason.map(|r| json!({"reason": r})),
        })
    }

    fn message(&self, status: &str, text: &str) -> Value {
        json!({
            "id": self.item_id(),
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        })
    }

    fn usage(&self, completion: u32) -> Value {
        json!({
            "input_tokens": self.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": u64::from(self.prompt_tokens) + u64::from(completion),
        })
    }

    /// The events before the first token (they carry none).
    pub(crate) fn head(&self) -> String {
        let empty = self.object("in_progress", json!([]), Value::Null, None);
        let mut out = String::with_capacity(1024);
        event(&mut out, "response.created", 0, json!({"response": empty}));
        event(
            &mut out,
            "response.in_progress",
            1,
            json!({"response": empty}),
        );
        let mut item = self.message("in_progress", "");
        item["content"] = json!([]);
        event(
            &mut out,
            "response.output_item.added",
            2,
            json!({"output_index": 0, "item": item}),
        );
        event(
            &mut out,
            "response.content_part.added",
            3,
            json!({"item_id": self.item_id(), "output_index": 0, "content_index": 0,
                   "part": {"type": "output_text", "text": "", "annotations": []}}),
        );
        out
    }

    /// What precedes each token's text in its delta event.
    pub(crate) fn token_prefix(&self) -> String {
        format!(
            "event: response.output_text.delta\ndata: {{\"type\":\"response.output_text.delta\",\"item_id\":\"{}\",\"output_index\":0,\"content_index\":0,\"delta\":\"",
            self.item_id()
        )
    }

    /// The events after the last of `completion` tokens, whose text is `text`;
    /// `reason` is the simulator's finish reason (`length` is incomplete).
    pub(crate) fn end(&self, buf: &mut BytesMut, reason: &str, completion: u32, text: &str) {
        let mut seq = FIRST_DELTA_SEQ + completion;
        let mut next = || {
            seq += 1;
            seq - 1
        };
        let id = self.item_id();
        let part = json!({"type": "output_text", "text": text, "annotations": []});
        let mut out = String::with_capacity(text.len() * 3 + 2048);
        event(
            &mut out,
            "response.output_text.done",
            next(),
            json!({"item_id": id, "output_index": 0, "content_index": 0, "text": text, "logprobs": []}),
        );
        event(
            &mut out,
            "response.content_part.done",
            next(),
            json!({"item_id": id, "output_index": 0, "content_index": 0, "part": part}),
        );
        event(
            &mut out,
            "response.output_item.done",
            next(),
            json!({"output_index": 0, "item": self.message("completed", text)}),
        );
        let whole = self.answer(reason, completion, text);
        event(
            &mut out,
            "response.completed",
            next(),
            json!({ "response": whole }),
        );
        buf.extend_from_slice(out.as_bytes());
    }

    /// The finished response object.
    pub(crate) fn answer(&self, reason: &str, completion: u32, text: &str) -> Value {
        let output = json!([self.message("completed", text)]);
        let usage = self.usage(completion);
        if reason == "length" {
            self.object("incomplete", output, usage, Some("max_output_tokens"))
        } else {
            self.object("completed", output, usage, None)
        }
    }
}

/// Closes a token's delta event whose sequence number is that of token `i`.
pub(crate) fn token_suffix(buf: &mut BytesMut, i: u32) {
    use std::fmt::Write as _;
    buf.extend_from_slice(b"\",\"logprobs\":[],\"sequence_number\":");
    // Writing a number into a BytesMut cannot fail (and does not allocate).
    let _ = write!(buf, "{}", FIRST_DELTA_SEQ + i);
    buf.extend_from_slice(b"}\n\n");
}

/// One named event whose data is `fields` with its type and sequence number.
fn event(out: &mut String, kind: &str, seq: u32, mut fields: Value) {
    fields["type"] = json!(kind);
    fields["sequence_number"] = json!(seq);
    out.push_str("event: ");
    out.push_str(kind);
    out.push_str("\ndata: ");
    out.push_str(&fields.to_string());
    out.push_str("\n\n");
}
