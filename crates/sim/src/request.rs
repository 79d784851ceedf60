//! What a client asked for: the API it called (the model's [`Api`]: OpenAI chat,
//! legacy completions and Responses, Anthropic messages), and a request body
//! parsed and validated (model, streaming and usage options, token limits, and the
//! prompt counted by OpenAI's rules), with OpenAI-shaped errors for what is not
//! supported.

use serde_json::Value;
use tpscope_tokens::Tokenizer;

use crate::api_error::ApiError;

pub(crate) use tpscope_model::Api;

/// The API's name in the truth file (`messages` for Anthropic's, as the file has
/// always said; the others as the run record names them).
pub(crate) fn truth_name(api: Api) -> &'static str {
    match api {
        Api::Anthropic => "messages",
        a => a.as_str(),
    }
}

/// A parsed, validated completion request.
#[derive(Debug)]
pub(crate) struct Parsed {
    pub(crate) model: String,
    pub(crate) prompt_tokens: u32,
    pub(crate) stream: bool,
    pub(crate) include_usage: bool,
    pub(crate) max_tokens: Option<u32>,
    pub(crate) ignore_eos: bool,
    /// The prompt's tokens (ids, with stand-ins for the chat format's own), when
    /// prefix caching asked for them; as many as `prompt_tokens`.
    pub(crate) prompt_units: Option<Vec<u32>>,
}

/// Stand-ins for the chat format's tokens (message start, content start, end,
/// name), outside any vocabulary.
const MARK_START: u32 = u32::MAX - 1;
const MARK_MSG: u32 = u32::MAX - 2;
const MARK_END: u32 = u32::MAX - 3;
const MARK_NAME: u32 = u32::MAX - 4;

/// Counts a prompt's tokens and, for prefix caching, keeps them.
struct PromptTokens {
    tok: Tokenizer,
    n: usize,
    units: Option<Vec<u32>>,
}

impl PromptTokens {
    fn text(&mut self, s: &str) {
        match &mut self.units {
            Some(u) => {
                let ids = self.tok.encode(s);
                self.n += ids.len();
                u.extend(ids);
            }
            None => self.n += self.tok.count(s),
        }
    }

    fn mark(&mut self, m: u32) {
        self.n += 1;
        if let Some(u) = &mut self.units {
            u.push(m);
        }
    }
}

fn field_u32(v: &Value, name: &'static str) -> Result<Option<u32>, ApiError> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_u64() {
            Some(n) if (1..=u64::from(u32::MAX)).contains(&n) => Ok(Some(n as u32)),
            _ => Err(ApiError::bad_request(
                format!("`{name}` must be an integer ≥ 1, got {x}"),
                Some(name),
            )),
        },
    }
}

fn field_bool(v: &Value, name: &'static str) -> Result<Option<bool>, ApiError> {
    match v.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(x) => Err(ApiError::bad_request(
            format!("`{name}` must be a boolean, got {x}"),
            Some(name),
        )),
    }
}

/// Prompt tokens of a chat request: OpenAI's counting rule (3 tokens per message
/// for its role header and end marker, plus the role and content, plus 1 for a
/// `name`), and 3 for priming the assistant's reply.
/// With `units`, the tokens are kept in order: per message start, role, content
/// start, name, content, end; then start, `assistant`, content start (the reply's
/// header, so that the next turn's copy of this prompt and reply is a prefix match).
fn chat_prompt_tokens(p: &mut PromptTokens, v: &Value) -> Result<(), ApiError> {
    let msgs = match v.get("messages") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) => {
            return Err(ApiError::bad_request(
                "`messages` must not be empty",
                Some("messages"),
            ));
        }
        _ => {
            return Err(ApiError::bad_request(
                "`messages` is required and must be an array of messages",
                Some("messages"),
            ));
        }
    };
    for (i, m) in msgs.iter().enumerate() {
        let Some(role) = m.get("role").and_then(Value::as_str) else {
            return Err(ApiError::bad_request(
                format!("`messages[{i}].role` is required and must be a string"),
                Some("messages"),
            ));
        };
        p.mark(MARK_START);
        p.text(role);
        p.mark(MARK_MSG);
        if let Some(name) = m.get("name").and_then(Value::as_str) {
            p.mark(MARK_NAME);
            p.text(name);
        }
        match m.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => p.text(s),
            Some(Value::Array(parts)) => {
                for part in parts {
                    match (part.get("type").and_then(Value::as_str), part.get("text")) {
                        (Some("text"), Some(Value::String(s))) => p.text(s),
                        _ => {
                            return Err(ApiError::bad_request(
                                format!(
                                    "`messages[{i}].content` parts must be {{\"type\": \"text\", \
                                     \"text\": …}}: the simulator takes text only"
                                ),
                                Some("messages"),
                            ));
                        }
                    }
                }
            }
            Some(_) => {
                return Err(ApiError::bad_request(
                    format!("`messages[{i}].content` must be a string or an array of text parts"),
                    Some("messages"),
                ));
            }
        }
        p.mark(MARK_END);
    }
    // Priming the reply: 3 tokens, as a message header for `assistant` is when the
    // role is one token.
    p.mark(MARK_START);
    match p.tok.encode("assistant").as_slice() {
        [id] => {
            p.n += 1;
            if let Some(u) = &mut p.units {
                u.push(*id);
            }
        }
        _ => p.mark(MARK_NAME),
    }
    p.mark(MARK_MSG);
    Ok(())
}

/// Prompt tokens of a legacy completion: a string, a one-element array of
/// strings, or token ids (an array of integers, or a one-element array of them).
fn completion_prompt_tokens(p: &mut PromptTokens, v: &Value) -> Result<(), ApiError> {
    let bad = || {
        ApiError::bad_request(
            "`prompt` must be a string or an array of token ids (one prompt per request: n = 1)",
            Some("prompt"),
        )
    };
    let ids = |a: &[Value]| a.iter().map(|x| x.as_u64().unwrap_or(0) as u32).collect();
    match v.get("prompt") {
        Some(Value::String(s)) => p.text(s),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
            p.text(a[0].as_str().unwrap_or_default())
        }
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_u64) => {
            p.n += a.len();
            if let Some(u) = &mut p.units {
                *u = ids(a);
            }
        }
        Some(Value::Array(a))
            if a.len() == 1 && a[0].as_array().is_some_and(|x| x.iter().all(Value::is_u64)) =>
        {
            let inner = a[0].as_array().map_or(&[][..], Vec::as_slice);
            p.n += inner.len();
            if let Some(u) = &mut p.units {
                *u = ids(inner);
            }
        }
        _ => return Err(bad()),
    };
    if p.n == 0 {
        return Err(ApiError::bad_request(
            "`prompt` must not be empty",
            Some("prompt"),
        ));
    }
    Ok(())
}

/// Prompt tokens of a Responses request: `input` as a string (one user message) or
/// a list of messages (content a string or `input_text` parts), counted as chat
/// messages are; `instructions` as one more (system) message.
fn responses_prompt_tokens(p: &mut PromptTokens, v: &Value) -> Result<(), ApiError> {
    let messages = match v.get("input") {
        Some(Value::String(s)) => json_messages(&[("user", s.as_str())]),
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let role = item.get("role").and_then(Value::as_str).unwrap_or("user");
                let content = match item.get("content") {
                    Some(Value::String(s)) => Value::String(s.clone()),
                    Some(Value::Array(parts)) => Value::Array(
                        parts
                            .iter()
                            .map(|part| {
                                serde_json::json!({"type": "text", "text": part.get("text").cloned().unwrap_or(Value::Null)})
                            })
                            .collect(),
                    ),
                    _ => {
                        return Err(ApiError::bad_request(
                            format!("`input[{i}].content` must be a string or an array of input_text parts"),
                            Some("input"),
                        ));
                    }
                };
                out.push(serde_json::json!({"role": role, "content": content}));
            }
            Value::Array(out)
        }
        _ => {
            return Err(ApiError::bad_request(
                "`input` is required and must be a string or an array of messages",
                Some("input"),
            ));
        }
    };
    chat_prompt_tokens(p, &serde_json::json!({ "messages": messages }))
        .map_err(|e| e.renamed("messages", "input"))?;
    if let Some(Value::String(s)) = v.get("instructions") {
        p.mark(MARK_START);
        p.mark(MARK_MSG);
        p.text(s);
        p.mark(MARK_END);
    }
    Ok(())
}

fn json_messages(ms: &[(&str, &str)]) -> Value {
    Value::Array(
        ms.iter()
            .map(|(role, content)| serde_json::json!({"role": role, "content": content}))
            .collect(),
    )
}

/// Parses a request; with `units`, keeps the prompt's tokens for prefix caching.
pub(crate) fn parse(
    endpoint: Api,
    body: &[u8],
    tok: Tokenizer,
    units: bool,
) -> Result<Parsed, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("the request body is not valid JSON: {e}"), None)
    })?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
            None,
        ));
    }
    let model = match v.get("model") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(ApiError::bad_request(
                "`model` is required and must be a string",
                Some("model"),
            ));
        }
    };
    if let Some(n) = v.get("n").filter(|x| !x.is_null())
        && n.as_u64() != Some(1)
    {
        return Err(ApiError::bad_request(
            format!(
                "`n` = {n} is not supported: the simulator generates exactly one choice (n = 1)"
            ),
            Some("n"),
        ));
    }
    if let Some(b) = v.get("best_of").filter(|x| !x.is_null())
        && b.as_u64() != Some(1)
    {
        return Err(ApiError::bad_request(
            format!("`best_of` = {b} is not supported (only 1)"),
            Some("best_of"),
        ));
    }
    let stream = field_bool(&v, "stream")?.unwrap_or(false);
    // Anthropic streams always carry usage (message_start, message_delta).
    let include_usage = match v.get("stream_options") {
        _ if matches!(endpoint, Api::Anthropic | Api::Responses) => stream,
        None | Some(Value::Null) => false,
        Some(o @ Value::Object(_)) => field_bool(o, "include_usage")?.unwrap_or(false),
        Some(x) => {
            return Err(ApiError::bad_request(
                format!("`stream_options` must be an object, got {x}"),
                Some("stream_options"),
            ));
        }
    };
    if include_usage && !stream {
        return Err(ApiError::bad_request(
            "`stream_options` is only allowed when `stream` is true",
            Some("stream_options"),
        ));
    }
    let max_tokens = match endpoint {
        Api::Responses => field_u32(&v, "max_output_tokens")?,
        _ => match field_u32(&v, "max_completion_tokens")? {
            Some(m) => Some(m),
            None => field_u32(&v, "max_tokens")?,
        },
    };
    let ignore_eos = field_bool(&v, "ignore_eos")?.unwrap_or(false);
    let mut p = PromptTokens {
        tok,
        n: 0,
        units: units.then(Vec::new),
    };
    match endpoint {
        Api::Chat => chat_prompt_tokens(&mut p, &v)?,
        Api::Completions => completion_prompt_tokens(&mut p, &v)?,
        Api::Anthropic => {
            chat_prompt_tokens(&mut p, &v)?;
            // Anthropic's top-level `system`: counted as one more message.
            if let Some(Value::String(s)) = v.get("system") {
                p.mark(MARK_START);
                p.mark(MARK_MSG);
                p.text(s);
                p.mark(MARK_END);
            }
        }
        Api::Responses => responses_prompt_tokens(&mut p, &v)?,
    };
    Ok(Parsed {
        model,
        prompt_tokens: u32::try_from(p.n).unwrap_or(u32::MAX),
        prompt_units: p.units,
        stream,
        include_usage,
        max_tokens,
        ignore_eos,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use serde_json::json;

    #[test]
    fn chat_prompt_is_counted_with_the_message_overhead() {
        let tok = Tokenizer::O200kBase;
        let v = json!({"model": "m", "messages": [{"role": "user", "content": "Hello, world!"}]});
        let p = parse(Api::Chat, v.to_string().as_bytes(), tok, false).unwrap();
        // 3 priming + 3 per message + 1 ("user") + 4 ("Hello, world!").
        assert_eq!(p.prompt_tokens, 11);
        assert!(!p.stream && !p.include_usage && p.max_tokens.is_none());
    }

    #[test]
    fn prompt_units_are_as_many_as_prompt_tokens_and_turns_extend_them() {
        let tok = Tokenizer::O200kBase;
        let turn1 = json!({"model": "m", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello, world!"}]});
        let turn2 = json!({"model": "m", "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello, world!"},
            {"role": "assistant", "content": " the model"},
            {"role": "user", "content": "More."}]});
        let a = parse(Api::Chat, turn1.to_string().as_bytes(), tok, true).unwrap();
        let b = parse(Api::Chat, turn2.to_string().as_bytes(), tok, true).unwrap();
        let (ua, ub) = (a.prompt_units.unwrap(), b.prompt_units.unwrap());
        assert_eq!(ua.len(), a.prompt_tokens as usize);
        assert_eq!(ub.len(), b.prompt_tokens as usize);
        // Turn 1's prompt, then its reply's tokens, begin turn 2's prompt.
        let mut reply = ua.clone();
        reply.extend(tok.encode(" the model"));
        assert_eq!(ub[..reply.len()], reply[..]);
        let counted = parse(Api::Chat, turn2.to_string().as_bytes(), tok, false).unwrap();
        assert_eq!(counted.prompt_tokens, b.prompt_tokens);
        assert!(counted.prompt_units.is_none());
    }

    #[test]
    fn max_completion_tokens_wins_over_max_tokens() {
        let v = json!({"model": "m", "prompt": "hi", "max_tokens": 5, "max_completion_tokens": 7,
                       "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true});
        let p = parse(
            Api::Completions,
            v.to_string().as_bytes(),
            Tokenizer::O200kBase,
            false,
        )
        .unwrap();
        assert_eq!(p.max_tokens, Some(7));
        assert!(p.stream && p.include_usage && p.ignore_eos);
        let ids = json!({"model": "m", "prompt": [1, 2, 3]});
        let p = parse(
            Api::Completions,
            ids.to_string().as_bytes(),
            Tokenizer::O200kBase,
            false,
        )
        .unwrap();
        assert_eq!(p.prompt_tokens, 3);
    }

    #[test]
    fn messages_count_the_system_prompt_and_always_stream_usage() {
        let tok = Tokenizer::O200kBase;
        let v = json!({"model": "m", "max_tokens": 4, "stream": true, "system": "Hello, world!",
                       "messages": [{"role": "user", "content": "Hello, world!"}]});
        let p = parse(Api::Anthropic, v.to_string().as_bytes(), tok, false).unwrap();
        // The chat count (11) plus 3 + 4 for the system prompt.
        assert_eq!(p.prompt_tokens, 18);
        assert!(p.stream && p.include_usage);
        assert_eq!(p.max_tokens, Some(4));
    }

    #[test]
    fn unsupported_requests_get_clear_errors() {
        let tok = Tokenizer::O200kBase;
        let cases = [
            (
                json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2}),
                "`n`",
            ),
            (json!({"model": "m", "messages": []}), "`messages`"),
            (
                json!({"messages": [{"role": "user", "content": "x"}]}),
                "`model`",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}),
                "max_tokens",
            ),
            (
                json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": true}}),
                "stream_options",
            ),
        ];
        for (v, needle) in cases {
            let e = parse(Api::Chat, v.to_string().as_bytes(), tok, false).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(needle), "{} lacks {needle}", e.message);
        }
        let e = parse(Api::Chat, b"{not json", tok, false).unwrap_err();
        assert!(e.message.contains("not valid JSON"));
        let e = parse(
            Api::Completions,
            br#"{"model":"m","prompt":["a","b"]}"#,
            tok,
            false,
        )
        .unwrap_err();
        assert!(e.message.contains("n = 1"));
    }
}
