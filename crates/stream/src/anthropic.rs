//! The Anthropic Messages dialect (`POST /v1/messages`): the [`Anthropic`] decoder
//! that turns named events (`message_start`, `content_block_start`,
//! `content_block_delta`, `content_block_stop`, `message_delta`, `message_stop`,
//! `ping`, `error`) into account facts, and [`absorb_message`] for a
//! non-streaming answer.
//!
//! What counts as output: `text_delta` (answer), `thinking_delta` (reasoning),
//! `input_json_delta` (tool-call arguments), and non-empty text, thinking or a
//! tool name in a `content_block_start`; `signature_delta` and `citations_delta`
//! do not. Usage maps onto the neutral [`Usage`]: `prompt_tokens` =
//! `input_tokens` + cache creation + cache reads (the whole prompt, as OpenAI's
//! `prompt_tokens`), `cached_tokens` = cache reads, `completion_tokens` =
//! `message_delta`'s cumulative `output_tokens` (`message_start`'s is a
//! placeholder and ignored). The event is told by its data's `type`, else by its
//! `event:` name.

use std::borrow::Cow;
use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;
use tpscope_model::Cause;

use crate::account::{Decoder, StreamAccount};
use crate::openai::chunk::{JsonStr, cut};
use crate::sse::Event;
use tpscope_model::Usage;

/// The Anthropic Messages decoder (stateless: every event stands alone).
#[derive(Clone, Copy, Debug, Default)]
pub struct Anthropic;

impl Decoder for Anthropic {
    const MISSING_END: &'static str = "the stream ended without event: message_stop";

    fn on_event(&mut self, ev: Event<'_>, now: Instant, account: &mut StreamAccount<Self>) {
        decode(ev, now, account);
    }
}

/// One event's data, whatever its type (every field optional).
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    /// `message_start`'s message (and a non-streaming answer's top level).
    #[serde(borrow, default)]
    message: Option<Message<'a>>,
    #[serde(borrow, default)]
    content_block: Option<Block<'a>>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Message<'a> {
    #[serde(borrow, default)]
    id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    model: Option<JsonStr<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// A content block (`content_block_start`, or an entry of a whole answer's `content`).
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(borrow, default)]
    text: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    thinking: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    name: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    text: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    thinking: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    partial_json: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    stop_reason: Option<JsonStr<'a>>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    fn neutral(&self, with_output: bool) -> Usage {
        let prompt = self.input_tokens.map(|i| {
            i + self.cache_creation_input_tokens.unwrap_or(0)
                + self.cache_read_input_tokens.unwrap_or(0)
        });
        Usage {
            prompt_tokens: prompt,
            completion_tokens: if with_output {
                self.output_tokens
            } else {
                None
            },
            reasoning_tokens: None,
            cached_tokens: self.cache_read_input_tokens,
        }
    }
}

/// Which kinds of output a piece of the stream carried.
#[derive(Default)]
struct Seen {
    content: bool,
    reasoning: bool,
}

impl Seen {
    fn add(&mut self, s: Option<&JsonStr<'_>>, reasoning: bool, out: Option<&mut String>) {
        let Some(s) = s.filter(|s| !s.is_empty()) else {
            return;
        };
        if reasoning {
            self.reasoning = true;
        } else {
            self.content = true;
        }
        if let Some(out) = out {
            s.append_to(out);
        }
    }

    fn block(&mut self, b: &Block<'_>, mut out: Option<&mut String>) {
        self.add(b.text.as_ref(), false, out.as_deref_mut());
        self.add(b.thinking.as_ref(), true, out.as_deref_mut());
        self.add(b.name.as_ref(), false, out.as_deref_mut());
        // A whole answer's tool input is one JSON object; `{}` at a block's start
        // carries nothing yet.
        if let Some(input) = b.input.map(|r| r.get()).filter(|r| *r != "{}") {
            self.content = true;
            if let Some(out) = out {
                out.push_str(input);
            }
        }
    }
}

/// Decodes one Anthropic event into `account` (the dialect-neutral entry that
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
    if kind == "ping" {
        // A keep-alive, not a data event (as other dialects' named keep-alives).
        return;
    }
    account.event(now);
    match kind {
        "message_start" => {
            if let Some(m) = &wire.message {
                if let Some(id) = m.id {
                    account.response_id(|| id.to_cow().into_owned());
                }
                if let Some(model) = m.model {
                    account.model(|| model.to_cow().into_owned());
                }
                if let Some(u) = &m.usage {
                    account.usage(u.neutral(false));
                }
            }
        }
        "content_block_start" => {
            if let Some(b) = &wire.content_block {
                let mut seen = Seen::default();
                seen.block(b, account.text_sink());
                output(account, seen, now);
            }
        }
        "content_block_delta" => {
            if let Some(d) = &wire.delta {
                let mut seen = Seen::default();
                match d.kind.as_deref() {
                    Some("text_delta") => seen.add(d.text.as_ref(), false, account.text_sink()),
                    Some("thinking_delta") => {
                        seen.add(d.thinking.as_ref(), true, account.text_sink())
                    }
                    Some("input_json_delta") => {
                        seen.add(d.partial_json.as_ref(), false, account.text_sink())
                    }
                    // signature_delta, citations_delta and future kinds carry no output.
                    _ => {}
                }
                output(account, seen, now);
            }
        }
        "message_delta" => {
            if let Some(r) = wire.delta.as_ref().and_then(|d| d.stop_reason) {
                account.finish_reason(|| r.to_cow().into_owned());
            }
            if let Some(u) = &wire.usage {
                account.usage(u.neutral(true));
            }
        }
        "message_stop" => account.done(now),
        "error" => {
            let (cause, message) = describe_error(wire.error.map(|r| r.get()));
            account.fail(cause, format!("error event in the stream: {message}"));
        }
        // content_block_stop and event types added later carry nothing we count.
        _ => {}
    }
}

fn output<D>(account: &mut StreamAccount<D>, seen: Seen, now: Instant) {
    if seen.content || seen.reasoning {
        account.output(now, seen.content, None);
    }
}

/// The cause and message of an Anthropic error object
/// (`{"type": "overloaded_error", "message": "Overloaded"}`).
fn describe_error(raw: Option<&str>) -> (Cause, String) {
    #[derive(Deserialize)]
    struct Obj<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        message: Option<JsonStr<'a>>,
    }
    let obj = raw.and_then(|r| serde_json::from_str::<Obj<'_>>(r).ok());
    let kind = obj.as_ref().and_then(|o| o.kind.as_deref()).unwrap_or("");
    let cause = match kind {
        "rate_limit_error" => Cause::Http429,
        "invalid_request_error"
        | "authentication_error"
        | "permission_error"
        | "not_found_error"
        | "request_too_large" => Cause::Http4xx,
        // overloaded_error (HTTP 529), api_error and unknown kinds: the server
        // failed after accepting the request.
        _ => Cause::Http5xx,
    };
    let message = match obj.as_ref().and_then(|o| o.message) {
        Some(m) => cut(&m.to_cow()),
        None if !kind.is_empty() => kind.to_string(),
        None => "server reported an error".to_string(),
    };
    (cause, message)
}

/// A whole non-streaming answer (`{"type": "message", "content": [...], "usage":
/// ...}`), absorbed into `account` at `now`; the cause and message when it does
/// not parse or is an error object.
pub fn absorb_message<D>(
    account: &mut StreamAccount<D>,
    body: &[u8],
    now: Instant,
) -> Result<(), (Cause, String)> {
    #[derive(Deserialize)]
    struct Whole<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<Cow<'a, str>>,
        #[serde(borrow, default)]
        id: Option<JsonStr<'a>>,
        #[serde(borrow, default)]
        model: Option<JsonStr<'a>>,
        #[serde(default)]
        usage: Option<WireUsage>,
        #[serde(borrow, default)]
        stop_reason: Option<JsonStr<'a>>,
        #[serde(borrow, default)]
        content: Option<Vec<Block<'a>>>,
        #[serde(borrow, default)]
        error: Option<&'a RawValue>,
    }
    let w: Whole<'_> = serde_json::from_slice(body).map_err(|e| {
        (
            Cause::Malformed,
            format!("response does not parse as an Anthropic message: {e}"),
        )
    })?;
    if w.kind.as_deref() == Some("error") || w.error.is_some() {
        return Err(describe_error(w.error.map(|r| r.get())));
    }
    account.event(now);
    if let Some(id) = w.id {
        account.response_id(|| id.to_cow().into_owned());
    }
    if let Some(m) = w.model {
        account.model(|| m.to_cow().into_owned());
    }
    if let Some(r) = w.stop_reason {
        account.finish_reason(|| r.to_cow().into_owned());
    }
    if let Some(u) = &w.usage {
        account.usage(u.neutral(true));
    }
    let mut seen = Seen::default();
    for b in w.content.iter().flatten() {
        seen.block(b, account.text_sink());
    }
    output(account, seen, now);
    Ok(())
}
