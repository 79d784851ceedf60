//! What a client asked for: the completion endpoints (OpenAI chat and legacy
//! completions, Anthropic messages), and a request body
//! parsed and validated (model, streaming and usage options, token limits, and the
//! prompt counted by OpenAI's rules), with OpenAI-shaped errors for what is not
//! supported.

use serde_json::Value;
use tpscope_tokens::Tokenizer;

use crate::api_error::ApiError;

/// The completion endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Chat,
    Completions,
    /// Anthropic's `/v1/messages`.
    Messages,
}

impl Endpoint {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Endpoint::Chat => "chat",
            Endpoint::Completions => "completions",
            Endpoint::Messages => "messages",
        }
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
fn chat_prompt_tokens(tok: Tokenizer, v: &Value) -> Result<usize, ApiError> {
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
    let mut n = 3;
    for (i, m) in msgs.iter().enumerate() {
        let Some(role) = m.get("role").and_then(Value::as_str) else {
            return Err(ApiError::bad_request(
                format!("`messages[{i}].role` is required and must be a string"),
                Some("messages"),
            ));
        };
        n += 3 + tok.count(role);
        if let Some(name) = m.get("name").and_then(Value::as_str) {
            n += 1 + tok.count(name);
        }
        match m.get("content") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => n += tok.count(s),
            Some(Value::Array(parts)) => {
                for p in parts {
                    match (p.get("type").and_then(Value::as_str), p.get("text")) {
                        (Some("text"), Some(Value::String(s))) => n += tok.count(s),
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
    }
    Ok(n)
}

/// Prompt tokens of a legacy completion: a string, a one-element array of
/// strings, or token ids (an array of integers, or a one-element array of them).
fn completion_prompt_tokens(tok: Tokenizer, v: &Value) -> Result<usize, ApiError> {
    let bad = || {
        ApiError::bad_request(
            "`prompt` must be a string or an array of token ids (one prompt per request: n = 1)",
            Some("prompt"),
        )
    };
    let n = match v.get("prompt") {
        Some(Value::String(s)) => tok.count(s),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
            tok.count(a[0].as_str().unwrap_or_default())
        }
        Some(Value::Array(a)) if !a.is_empty() && a.iter().all(Value::is_u64) => a.len(),
        Some(Value::Array(a))
            if a.len() == 1 && a[0].as_array().is_some_and(|x| x.iter().all(Value::is_u64)) =>
        {
            a[0].as_array().map_or(0, Vec::len)
        }
        _ => return Err(bad()),
    };
    if n == 0 {
        return Err(ApiError::bad_request(
            "`prompt` must not be empty",
            Some("prompt"),
        ));
    }
    Ok(n)
}

pub(crate) fn parse(endpoint: Endpoint, body: &[u8], tok: Tokenizer) -> Result<Parsed, ApiError> {
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
        _ if endpoint == Endpoint::Messages => stream,
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
    let max_tokens = match field_u32(&v, "max_completion_tokens")? {
        Some(m) => Some(m),
        None => field_u32(&v, "max_tokens")?,
    };
    let ignore_eos = field_bool(&v, "ignore_eos")?.unwrap_or(false);
    let prompt_tokens = match endpoint {
        Endpoint::Chat => chat_prompt_tokens(tok, &v)?,
        Endpoint::Completions => completion_prompt_tokens(tok, &v)?,
        Endpoint::Messages => {
            chat_prompt_tokens(tok, &v)?
                + match v.get("system") {
                    Some(Value::String(s)) => 3 + tok.count(s),
                    _ => 0,
                }
        }
    };
    Ok(Parsed {
        model,
        prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
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
        let p = parse(Endpoint::Chat, v.to_string().as_bytes(), tok).unwrap();
        // 3 priming + 3 per message + 1 ("user") + 4 ("Hello, world!").
        assert_eq!(p.prompt_tokens, 11);
        assert!(!p.stream && !p.include_usage && p.max_tokens.is_none());
    }

    #[test]
    fn max_completion_tokens_wins_over_max_tokens() {
        let v = json!({"model": "m", "prompt": "hi", "max_tokens": 5, "max_completion_tokens": 7,
                       "stream": true, "stream_options": {"include_usage": true}, "ignore_eos": true});
        let p = parse(
            Endpoint::Completions,
            v.to_string().as_bytes(),
            Tokenizer::O200kBase,
        )
        .unwrap();
        assert_eq!(p.max_tokens, Some(7));
        assert!(p.stream && p.include_usage && p.ignore_eos);
        let ids = json!({"model": "m", "prompt": [1, 2, 3]});
        let p = parse(
            Endpoint::Completions,
            ids.to_string().as_bytes(),
            Tokenizer::O200kBase,
        )
        .unwrap();
        assert_eq!(p.prompt_tokens, 3);
    }

    #[test]
    fn messages_count_the_system_prompt_and_always_stream_usage() {
        let tok = Tokenizer::O200kBase;
        let v = json!({"model": "m", "max_tokens": 4, "stream": true, "system": "Hello, world!",
                       "messages": [{"role": "user", "content": "Hello, world!"}]});
        let p = parse(Endpoint::Messages, v.to_string().as_bytes(), tok).unwrap();
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
            let e = parse(Endpoint::Chat, v.to_string().as_bytes(), tok).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            assert!(e.message.contains(needle), "{} lacks {needle}", e.message);
        }
        let e = parse(Endpoint::Chat, b"{not json", tok).unwrap_err();
        assert!(e.message.contains("not valid JSON"));
        let e = parse(
            Endpoint::Completions,
            br#"{"model":"m","prompt":["a","b"]}"#,
            tok,
        )
        .unwrap_err();
        assert!(e.message.contains("n = 1"));
    }
}
