//! The OpenAI Responses dialect (`POST /v1/responses`): the [`Responses`] decoder
//! that turns typed events (`response.created`, `response.output_text.delta`, …,
//! `response.completed`) into account facts, and [`absorb_response`] for a
//! non-streaming answer.
//!
//! What counts as output: the deltas of answer text (`output_text`, `refusal`),
//! of reasoning (`reasoning_text`, `reasoning_summary_text`) and of tool-call
//! arguments (`function_call_arguments`, `custom_tool_call_input`); lifecycle
//! events (`created`, `in_progress`, `output_item.added`, `…done`) do not. The
//! stream ends with `response.completed` or `response.incomplete` (a normal end:
//! the token limit or a filter; the reason becomes the finish reason), or fails
//! with `response.failed` or `error`. There is no `[DONE]`. Usage maps onto the
//! neutral [`Usage`]: `input_tokens` (cached included, as OpenAI's
//! `prompt_tokens`), `input_tokens_details.cached_tokens`, `output_tokens`
//! (reasoning included), `output_tokens_details.reasoning_tokens`. The finish
//! reason is written in the chat API's words (`stop`, `length`,
//! `content_filter`) so runs of both APIs read alike.

use std::borrow::Cow;
use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;
use tpscope_model::Cause;

use crate::account::{Decoder, StreamAccount};
use crate::openai::chunk::{JsonStr, cut};
use crate::sse::Event;
use tpscope_model::Usage;

/// The Responses decoder (stateless: every event stands alone).
#[derive(Clone, Copy, Debug, Default)]
pub struct Responses;

impl Decoder for Responses {
    const MISSING_END: &'static str = "the stream ended without response.completed";

    fn on_event(&mut self, ev: Event<'_>, now: Instant, account: &mut StreamAccount<Self>) {
        decode(ev, now, account);
    }
}

/// One event's data, whatever its type (every field optional).
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    /// A delta event's text; raw, since other events may carry other shapes.
    #[serde(borrow, default)]
    delta: Option<&'a RawValue>,
    /// The response object of the lifecycle events.
    #[serde(borrow, default)]
    response: Option<Response<'a>>,
    /// An `error` event's own fields.
    #[serde(borrow, default)]
    code: Option<&'a RawValue>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
}

/// A JSON string held raw, when it is one.
fn string(raw: Option<&RawValue>) -> Option<JsonStr<'_>> {
    raw.and_then(|r| serde_json::from_str::<JsonStr<'_>>(r.get()).ok())
}

/// The response object (a lifecycle event's `response`, or a whole answer).
#[derive(Deserialize)]
struct Response<'a> {
    #[serde(borrow, default)]
    id: Option<JsonStr<'a>>,
    /// The model that answers (kept as the run's model where requests are not
    /// parsed: the proxy).
    #[serde(borrow, default)]
    model: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    status: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    incomplete_details: Option<Incomplete<'a>>,
    /// A whole answer's output items, each read leniently (item kinds differ).
    #[serde(borrow, default)]
    output: Option<Vec<&'a RawValue>>,
}

#[derive(Deserialize)]
struct Incomplete<'a> {
    #[serde(borrow, default)]
    reason: Option<Cow<'a, str>>,
}

/// An output item of a whole answer: a message, reasoning or a tool call.
#[derive(Deserialize)]
struct Item<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<Vec<&'a RawValue>>,
    #[serde(borrow, default)]
    summary: Option<Vec<&'a RawValue>>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
}

/// A content part (`output_text`, `refusal`, `reasoning_text`, `summary_text`).
#[derive(Deserialize)]
struct Part<'a> {
    #[serde(borrow, default)]
    text: Option<&'a RawValue>,
    #[serde(borrow, default)]
    refusal: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    fn neutral(&self) -> Usage {
        Usage {
            prompt_tokens: self.input_tokens,
            completion_tokens: self.output_tokens,
            reasoning_tokens: self
                .output_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens),
            cached_tokens: self
                .input_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens),
        }
    }
}

/// What a delta event's type says it carries: `Some(true)` answer text,
/// `Some(false)` reasoning, `None` no output.
fn delta_kind(kind: &str) -> Option<bool> {
    match kind {
        "response.output_text.delta"
        | "response.refusal.delta"
        | "response.function_call_arguments.delta"
        | "response.custom_tool_call_input.delta" => Some(true),
        "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => Some(false),
        _ => None,
    }
}

/// The finish reason of a response that ended, in the chat API's words.
fn finish_of(r: &Response<'_>) -> Option<String> {
    match r.status.as_deref()? {
        "completed" => Some("stop".to_string()),
        "incomplete" => Some(
            match r
                .incomplete_details
                .as_ref()
                .and_then(|d| d.reason.as_deref())
            {
                Some("max_output_tokens") => "length".to_string(),
                Some(other) => other.to_string(),
                None => "incomplete".to_string(),
            },
        ),
        _ => None,
    }
}

/// Decodes one Responses event into `account` (the dialect-neutral entry that
/// [`crate::Dialect`] calls too).
pub fn decode<D>(ev: Event<'_>, now: Instant, account: &mut StreamAccount<D>) {
    if ev.data.trim_ascii().is_empty() {
        return;
    }
    let wire = match serde_json::from_slice::<Wire<'_>>(ev.data) {
        Ok(w) => w,
        Err(e) => {
            account.event(now);
            let n = account.events;
            account.fail(Cause::Malformed, format!("event {n} does not parse: {e}"));
            return;
        }
    };
    let name = std::str::from_utf8(ev.event).unwrap_or("");
    let kind = wire.kind.as_deref().unwrap_or(name);
    account.event(now);
    if let Some(content) = delta_kind(kind) {
        if let Some(d) = string(wire.delta).filter(|d| !d.is_empty()) {
            if let Some(out) = account.text_sink() {
                d.append_to(out);
            }
            account.output(now, content, None);
        }
        return;
    }
    match kind {
        "response.created" | "response.in_progress" | "response.queued" => {
            if let Some(r) = &wire.response {
                started(account, r);
            }
        }
        "response.completed" | "response.incomplete" => {
            if let Some(r) = &wire.response {
                ended(account, r);
            }
            account.done(now);
        }
        "response.failed" => {
            let raw = wire
                .response
                .as_ref()
                .and_then(|r| r.error)
                .map(|r| r.get());
            let (cause, message) = describe_error(raw);
            account.fail(cause, format!("response.failed in the stream: {message}"));
        }
        "error" => {
            let (cause, message) = error_of(
                string(wire.code).map(|c| c.to_cow()).as_deref(),
                string(wire.message).map(|m| m.to_cow()).as_deref(),
            );
            account.fail(cause, format!("error event in the stream: {message}"));
        }
        // output_item/content_part added and done, the `*.done` events (whose
        // text repeats the deltas), annotations and later kinds carry nothing new.
        _ => {}
    }
}

/// A response's id and model into `account` (the first of each sent is kept).
fn started<D>(account: &mut StreamAccount<D>, r: &Response<'_>) {
    if let Some(id) = r.id {
        account.response_id(|| id.to_cow().into_owned());
    }
    if let Some(m) = r.model {
        account.model(|| m.to_cow().into_owned());
    }
}

/// A finished response's id, model, usage and finish reason into `account`.
fn ended<D>(account: &mut StreamAccount<D>, r: &Response<'_>) {
    started(account, r);
    if let Some(u) = &r.usage {
        account.usage(u.neutral());
    }
    if let Some(f) = finish_of(r) {
        account.finish_reason(|| f);
    }
}

/// The cause and message of a Responses error object (`{"code": …, "message": …}`).
fn describe_error(raw: Option<&str>) -> (Cause, String) {
    #[derive(Deserialize)]
    struct Obj<'a> {
        #[serde(borrow, default)]
        code: Option<JsonStr<'a>>,
        #[serde(borrow, default)]
        message: Option<JsonStr<'a>>,
    }
    let obj = raw.and_then(|r| serde_json::from_str::<Obj<'_>>(r).ok());
    let code = obj.as_ref().and_then(|o| o.code).map(|c| c.to_cow());
    let message = obj.as_ref().and_then(|o| o.message).map(|m| m.to_cow());
    error_of(code.as_deref(), message.as_deref())
}

fn error_of(code: Option<&str>, message: Option<&str>) -> (Cause, String) {
    let cause = match code.unwrap_or("") {
        "rate_limit_exceeded" => Cause::Http429,
        c if c.starts_with("invalid_") || c == "context_length_exceeded" => Cause::Http4xx,
        // server_error, vector_store_timeout and unknown codes: the server failed
        // after accepting the request.
        _ => Cause::Http5xx,
    };
    let message = match (message, code) {
        (Some(m), _) if !m.is_empty() => cut(m),
        (_, Some(c)) if !c.is_empty() => c.to_string(),
        _ => "server reported an error".to_string(),
    };
    (cause, message)
}

/// A whole non-streaming answer (`{"object": "response", "output": [...],
/// "usage": ...}`), absorbed into `account` at `now`; the cause and message when
/// it does not parse, failed, or is not a response.
pub fn absorb_response<D>(
    account: &mut StreamAccount<D>,
    body: &[u8],
    now: Instant,
) -> Result<(), (Cause, String)> {
    let r: Response<'_> = serde_json::from_slice(body).map_err(|e| {
        (
            Cause::Malformed,
            format!("response does not parse as a Responses answer: {e}"),
        )
    })?;
    if let Some(raw) = r.error.map(|e| e.get()).filter(|e| *e != "null") {
        return Err(describe_error(Some(raw)));
    }
    let Some(items) = &r.output else {
        let shown = String::from_utf8_lossy(&body[..body.len().min(120)]);
        return Err((
            Cause::Malformed,
            format!(
                "the 200 response is not a Responses answer (no `output`): {}",
                shown.trim()
            ),
        ));
    };
    account.event(now);
    ended(account, &r);
    let (mut content, mut reasoning) = (false, false);
    let items = items
        .iter()
        .filter_map(|raw| serde_json::from_str::<Item<'_>>(raw.get()).ok());
    for item in items {
        let is_reasoning = item.kind.as_deref() == Some("reasoning");
        let parts = item
            .content
            .iter()
            .flatten()
            .chain(item.summary.iter().flatten())
            .filter_map(|raw| serde_json::from_str::<Part<'_>>(raw.get()).ok());
        let texts = parts
            .flat_map(|p| [p.text, p.refusal])
            .chain([item.arguments, item.input])
            .filter_map(string);
        for t in texts.filter(|t| !t.is_empty()) {
            if is_reasoning {
                reasoning = true;
            } else {
                content = true;
            }
            if let Some(out) = account.text_sink() {
                t.append_to(out);
            }
        }
    }
    if content || reasoning {
        account.output(now, content, None);
    }
    Ok(())
}
