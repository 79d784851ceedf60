//! OpenAI-style response chunks: the `data:` payload of one streamed event (chat
//! `chat.completion.chunk` or legacy `text_completion`), and the non-streaming
//! answer, parsed without I/O into borrowed types. Shared by the client and proxy.
//!
//! What counts as output: chat `delta.content`, `delta.reasoning_content` and
//! `delta.reasoning` (reasoning is output too), `delta.refusal`, tool-call
//! fragments (`tool_calls[].function.name` / `.arguments`), and legacy
//! `choices[].text`; in a non-streaming answer the same fields of `message`. An
//! empty string is not output, so the usual role-only first chunk carries none.
//!
//! Cost: no allocation for a typical chunk. [`parse_chunk`](super::parse_chunk) is
//! a hand-written scanner (module `scan`, which depends on this one) that skips unknown fields (`logprobs`, `created`, …)
//! without building them; [`parse_chunk_serde`] is the serde reference it is
//! tested against. Strings are kept as raw JSON string bodies ([`JsonStr`]) and
//! unescaped only when the caller copies them out.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;
use tpscope_model::Cause;

use crate::Usage;

/// The end-of-stream marker of OpenAI-style streams (`data: [DONE]`).
pub const DONE: &[u8] = b"[DONE]";

/// Whether an event's data is the `[DONE]` end marker (surrounding spaces allowed).
#[inline]
pub fn is_done(data: &[u8]) -> bool {
    data == DONE || data.trim_ascii() == DONE
}

/// A JSON string exactly as it appears in the payload, quotes removed and escapes
/// still in place. Unescaping happens only when it is copied out.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct JsonStr<'a> {
    raw: &'a str,
}

impl<'a> JsonStr<'a> {
    /// Wraps the body of a JSON string literal (between its quotes).
    pub fn from_raw(raw: &'a str) -> Self {
        JsonStr { raw }
    }

    /// The string body with its escapes (`\n`, `\u00e9`, …) as written.
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// Whether the string is `""`.
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }

    /// Appends the unescaped text to `out`.
    pub fn append_to(&self, out: &mut String) {
        // The common case (no escape) stays inline here.
        match memchr::memchr(b'\\', self.raw.as_bytes()) {
            None => out.push_str(self.raw),
            Some(first) => {
                out.push_str(&self.raw[..first]);
                tpscope_json::unescape_into(&self.raw[first..], out);
            }
        }
    }

    /// The unescaped text (borrowed when it has no escapes).
    pub fn to_cow(&self) -> Cow<'a, str> {
        if memchr::memchr(b'\\', self.raw.as_bytes()).is_none() {
            Cow::Borrowed(self.raw)
        } else {
            let mut s = String::with_capacity(self.raw.len());
            self.append_to(&mut s);
            Cow::Owned(s)
        }
    }
}

/// Any JSON value exactly as it appears in the payload (used for `error` and
/// `code`, whose shapes vary between servers and are read only on failure).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RawJson<'a>(&'a str);

impl<'a> RawJson<'a> {
    /// Wraps the text of one JSON value.
    pub fn from_raw(raw: &'a str) -> Self {
        RawJson(raw)
    }

    /// The JSON text.
    pub fn get(&self) -> &'a str {
        self.0
    }
}

impl fmt::Debug for RawJson<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawJson<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: &'a RawValue = Deserialize::deserialize(d)?;
        Ok(RawJson(raw.get()))
    }
}

impl fmt::Debug for JsonStr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\"", self.raw)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for JsonStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: &'a RawValue = Deserialize::deserialize(d)?;
        let s = raw.get();
        match s.as_bytes() {
            [b'"', .., b'"'] if s.len() >= 2 => Ok(JsonStr {
                raw: &s[1..s.len() - 1],
            }),
            _ => Err(de::Error::invalid_type(
                de::Unexpected::Other("a non-string value"),
                &"a string",
            )),
        }
    }
}

/// Up to one element stored inline, the rest in a vector that stays unallocated
/// for the usual single `choices` entry or single tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Few<T> {
    first: Option<T>,
    rest: Vec<T>,
}

impl<T> Default for Few<T> {
    fn default() -> Self {
        Few {
            first: None,
            rest: Vec::new(),
        }
    }
}

impl<T> Few<T> {
    /// The elements in order.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.first.iter().chain(self.rest.iter())
    }

    /// How many elements there are.
    pub fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// Appends a default element and returns it, to be filled in place.
    pub(crate) fn push_default(&mut self) -> &mut T
    where
        T: Default,
    {
        if self.first.is_none() {
            self.first.insert(T::default())
        } else {
            self.rest.push(T::default());
            let last = self.rest.len() - 1;
            &mut self.rest[last]
        }
    }

    pub(crate) fn push(&mut self, x: T) {
        if self.first.is_none() {
            self.first = Some(x);
        } else {
            self.rest.push(x);
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Few<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Few<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Few<T>, A::Error> {
                let mut few = Few::default();
                if let Some(first) = seq.next_element()? {
                    few.first = Some(first);
                    while let Some(x) = seq.next_element()? {
                        few.rest.push(x);
                    }
                }
                Ok(few)
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData))
    }
}

/// One parsed chunk (or non-streaming answer). Every field is optional because
/// servers differ; `choices: null` or a missing `choices` reads as no choices.
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Chunk<'a> {
    /// The response id (`chatcmpl-…`, `cmpl-…`).
    #[serde(borrow, default)]
    pub id: Option<JsonStr<'a>>,
    /// `chat.completion.chunk`, `text_completion`, `chat.completion`, or `error`.
    #[serde(borrow, default)]
    pub object: Option<JsonStr<'a>>,
    /// The model that answered.
    #[serde(borrow, default)]
    pub model: Option<JsonStr<'a>>,
    /// The choices of this chunk.
    #[serde(borrow, default)]
    pub choices: Option<Few<Choice<'a>>>,
    /// Token counts, when this chunk carries them (the last chunk with
    /// `include_usage`, the finishing chunk on some servers, or every chunk with
    /// vLLM's continuous usage stats).
    #[serde(default, deserialize_with = "wire_usage")]
    pub usage: Option<Usage>,
    /// An error reported inside the stream (`data: {"error": …}`).
    #[serde(borrow, default)]
    pub error: Option<RawJson<'a>>,
    /// Top-level `message`, used by error objects of the `{"object": "error"}` style.
    #[serde(borrow, default)]
    pub message: Option<JsonStr<'a>>,
    /// Top-level `code`, used by error objects of the `{"object": "error"}` style.
    #[serde(borrow, default)]
    pub code: Option<RawJson<'a>>,
}

/// One entry of `choices`.
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Choice<'a> {
    /// The choice index (for `n > 1`).
    #[serde(default)]
    pub index: Option<u32>,
    /// Streamed chat: what this chunk adds.
    #[serde(borrow, default)]
    pub delta: Option<Delta<'a>>,
    /// Non-streaming chat: the whole message.
    #[serde(borrow, default)]
    pub message: Option<Delta<'a>>,
    /// Legacy completions: the text this chunk adds (or the whole text).
    #[serde(borrow, default)]
    pub text: Option<JsonStr<'a>>,
    /// Why generation stopped (`stop`, `length`, `tool_calls`, …); null until then.
    #[serde(borrow, default)]
    pub finish_reason: Option<JsonStr<'a>>,
}

/// A chat delta (streaming) or message (non-streaming).
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Delta<'a> {
    /// `assistant` on the first chunk.
    #[serde(borrow, default)]
    pub role: Option<JsonStr<'a>>,
    /// Output text.
    #[serde(borrow, default)]
    pub content: Option<JsonStr<'a>>,
    /// Reasoning text (DeepSeek, SGLang, older vLLM).
    #[serde(borrow, default)]
    pub reasoning_content: Option<JsonStr<'a>>,
    /// Reasoning text (vLLM ≥ 0.11, some gateways).
    #[serde(borrow, default)]
    pub reasoning: Option<JsonStr<'a>>,
    /// A refusal message (OpenAI).
    #[serde(borrow, default)]
    pub refusal: Option<JsonStr<'a>>,
    /// Tool-call fragments.
    #[serde(borrow, default)]
    pub tool_calls: Option<Few<ToolCall<'a>>>,
}

/// One tool-call fragment.
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
pub struct ToolCall<'a> {
    /// The function name and argument fragments.
    #[serde(borrow, default)]
    pub function: Option<FunctionCall<'a>>,
}

/// A function call's name and arguments (fragments, when streamed).
#[derive(Debug, Default, PartialEq, Eq, Deserialize)]
pub struct FunctionCall<'a> {
    /// The function name (first fragment only, usually).
    #[serde(borrow, default)]
    pub name: Option<JsonStr<'a>>,
    /// A fragment of the JSON arguments.
    #[serde(borrow, default)]
    pub arguments: Option<JsonStr<'a>>,
}

/// OpenAI's `usage` object as sent, read into the neutral [`Usage`].
#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    /// `completion_tokens_details.reasoning_tokens` (part of `completion_tokens`).
    #[serde(default, deserialize_with = "reasoning_tokens")]
    completion_tokens_details: Option<u64>,
    /// `prompt_tokens_details.cached_tokens` (part of `prompt_tokens`).
    #[serde(default, deserialize_with = "cached_tokens")]
    prompt_tokens_details: Option<u64>,
}

fn wire_usage<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Usage>, D::Error> {
    Ok(Option::<WireUsage>::deserialize(d)?.map(|u| Usage {
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
        reasoning_tokens: u.completion_tokens_details,
        cached_tokens: u.prompt_tokens_details,
    }))
}

fn reasoning_tokens<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct Details {
        #[serde(default)]
        reasoning_tokens: Option<u64>,
    }
    Ok(Option::<Details>::deserialize(d)?.and_then(|x| x.reasoning_tokens))
}

fn cached_tokens<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    #[derive(Deserialize)]
    struct Details {
        #[serde(default)]
        cached_tokens: Option<u64>,
    }
    Ok(Option::<Details>::deserialize(d)?.and_then(|x| x.cached_tokens))
}

/// What kind of output a piece of text is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartKind {
    /// Answer text (`content`, or legacy `text`).
    Content,
    /// Reasoning text (`reasoning_content` or `reasoning`).
    Reasoning,
    /// A refusal message.
    Refusal,
    /// A tool call's name or argument fragment.
    ToolCall,
}

impl Delta<'_> {
    fn for_each_part<'s>(&'s self, f: &mut impl FnMut(PartKind, &JsonStr<'s>)) {
        // Reasoning first: servers send it before the answer.
        for s in [&self.reasoning_content, &self.reasoning]
            .into_iter()
            .flatten()
        {
            f(PartKind::Reasoning, s);
        }
        if let Some(s) = &self.content {
            f(PartKind::Content, s);
        }
        if let Some(s) = &self.refusal {
            f(PartKind::Refusal, s);
        }
        if let Some(calls) = &self.tool_calls {
            for call in calls.iter() {
                if let Some(func) = &call.function {
                    for s in [&func.name, &func.arguments].into_iter().flatten() {
                        f(PartKind::ToolCall, s);
                    }
                }
            }
        }
    }
}

impl<'a> Choice<'a> {
    /// Calls `f` for every piece of output text in this choice (empty ones included).
    pub fn for_each_part<'s>(&'s self, mut f: impl FnMut(PartKind, &JsonStr<'s>)) {
        if let Some(d) = &self.delta {
            d.for_each_part(&mut f);
        }
        if let Some(m) = &self.message {
            m.for_each_part(&mut f);
        }
        if let Some(t) = &self.text {
            f(PartKind::Content, t);
        }
    }
}

/// Output found in a chunk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputSeen {
    /// Some non-empty answer, refusal or tool-call text.
    pub content: bool,
    /// Some non-empty reasoning text.
    pub reasoning: bool,
}

impl OutputSeen {
    /// Whether the chunk carried any output (content or reasoning).
    pub fn any(self) -> bool {
        self.content || self.reasoning
    }
}

/// An error reported by the server inside a stream or an error body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerError {
    /// The cause it maps to: the `code` when it is an HTTP status (429, 4xx, 5xx),
    /// otherwise `http_5xx` (the server failed after accepting the request).
    pub cause: Cause,
    /// The server's message (cut to 300 characters), or a placeholder.
    pub message: String,
}

impl<'a> Chunk<'a> {
    /// The choices (none when `choices` was null or missing).
    pub fn choices(&self) -> impl Iterator<Item = &Choice<'a>> {
        self.choices.iter().flat_map(|c| c.iter())
    }

    /// Appends every non-empty piece of output text to `out` (when given) and says
    /// which kinds were seen.
    pub fn collect_output(&self, mut out: Option<&mut String>) -> OutputSeen {
        let mut seen = OutputSeen::default();
        for choice in self.choices() {
            choice.for_each_part(|kind, s| {
                if s.is_empty() {
                    return;
                }
                match kind {
                    PartKind::Reasoning => seen.reasoning = true,
                    _ => seen.content = true,
                }
                if let Some(out) = out.as_deref_mut() {
                    s.append_to(out);
                }
            });
        }
        seen
    }

    /// The chunk's only fact besides its choice, when it has exactly one: one
    /// non-empty piece of output text (and its kind), with no usage, finish
    /// reason or error (the chunks that the decoder's repeat shortcut may skip
    /// parsing when they come again with other text).
    pub fn lone_output(&self) -> Option<(PartKind, JsonStr<'_>)> {
        if self.usage.is_some() || self.error.is_some() || self.finish_reason().is_some() {
            return None;
        }
        let mut choices = self.choices();
        let choice = choices.next()?;
        if choices.next().is_some() {
            return None;
        }
        let mut parts = 0;
        let mut lone = None;
        choice.for_each_part(|kind, s| {
            parts += 1;
            lone = Some((kind, *s));
        });
        match lone {
            Some((kind, s)) if parts == 1 && !s.is_empty() => Some((kind, s)),
            _ => None,
        }
    }

    /// The first `finish_reason` that is set.
    pub fn finish_reason(&self) -> Option<JsonStr<'a>> {
        self.choices().find_map(|c| c.finish_reason)
    }

    /// The error this chunk reports, if it is one (`{"error": …}` or
    /// `{"object": "error", …}`).
    pub fn server_error(&self) -> Option<ServerError> {
        if let Some(raw) = self.error {
            return Some(describe_error(raw.get()));
        }
        if self.object.is_some_and(|o| o.raw() == "error") {
            let cause = self
                .code
                .and_then(|c| code_cause(c.get()))
                .unwrap_or(Cause::Http5xx);
            let message = self
                .message
                .map(|m| cut(&m.to_cow()))
                .unwrap_or_else(|| "server reported an error".to_string());
            return Some(ServerError { cause, message });
        }
        None
    }
}

fn code_cause(code: &str) -> Option<Cause> {
    let s = code.trim_matches('"');
    s.parse::<u16>().ok().and_then(Cause::from_http_status)
}

/// Cuts a server message to 300 characters.
pub(crate) fn cut(s: &str) -> String {
    const MAX: usize = 300;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn describe_error(text: &str) -> ServerError {
    #[derive(Deserialize)]
    struct Obj<'a> {
        #[serde(borrow, default)]
        message: Option<JsonStr<'a>>,
        #[serde(borrow, default)]
        code: Option<&'a RawValue>,
        #[serde(borrow, default, rename = "type")]
        kind: Option<JsonStr<'a>>,
    }
    if let Ok(obj) = serde_json::from_str::<Obj<'_>>(text) {
        let cause = obj
            .code
            .and_then(|c| code_cause(c.get()))
            .unwrap_or(Cause::Http5xx);
        let message = match (obj.message, obj.kind) {
            (Some(m), _) => cut(&m.to_cow()),
            (None, Some(k)) => cut(&k.to_cow()),
            (None, None) => "server reported an error".to_string(),
        };
        return ServerError { cause, message };
    }
    if let Ok(s) = serde_json::from_str::<Cow<'_, str>>(text) {
        return ServerError {
            cause: Cause::Http5xx,
            message: cut(&s),
        };
    }
    ServerError {
        cause: Cause::Http5xx,
        message: "server reported an error".to_string(),
    }
}

/// A chunk that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("chunk does not parse as an OpenAI-style JSON object: {0}")]
pub struct ChunkError(pub String);

/// The reference parser: the same result as [`parse_chunk`](super::parse_chunk) through serde_json's
/// derive (about three times slower); kept to check the fast one against.
pub fn parse_chunk_serde(data: &[u8]) -> Result<Chunk<'_>, ChunkError> {
    serde_json::from_slice(data).map_err(|e| ChunkError(e.to_string()))
}

/// Extracts a message from an HTTP error body (`{"error": {"message": …}}`,
/// `{"message": …}`, `{"detail": …}` or plain text), cut to 300 characters.
pub fn error_body_message(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Body<'a> {
        #[serde(borrow, default)]
        error: Option<&'a RawValue>,
        #[serde(borrow, default)]
        message: Option<JsonStr<'a>>,
        #[serde(borrow, default)]
        detail: Option<&'a RawValue>,
    }
    if let Ok(b) = serde_json::from_slice::<Body<'_>>(body) {
        if let Some(e) = b.error {
            return Some(describe_error(e.get()).message);
        }
        if let Some(m) = b.message {
            return Some(cut(&m.to_cow()));
        }
        if let Some(d) = b.detail {
            return Some(cut(d.get().trim_matches('"')));
        }
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    (!text.is_empty()).then(|| cut(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_marker() {
        assert!(is_done(b"[DONE]"));
        assert!(is_done(b" [DONE] "));
        assert!(!is_done(b"[DONE"));
    }

    #[test]
    fn error_body_messages() {
        assert_eq!(
            error_body_message(br#"{"error":{"message":"rate limited","code":429}}"#).unwrap(),
            "rate limited"
        );
        assert_eq!(
            error_body_message(br#"{"object":"error","message":"bad"}"#).unwrap(),
            "bad"
        );
        assert_eq!(
            error_body_message(br#"{"detail":"Not Found"}"#).unwrap(),
            "Not Found"
        );
        assert_eq!(
            error_body_message(b"upstream down").unwrap(),
            "upstream down"
        );
        assert_eq!(error_body_message(b"  "), None);
        assert!(cut(&"é".repeat(400)).chars().count() <= 301);
    }
}
