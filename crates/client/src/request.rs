//! The wire side of one request that is not HTTP plumbing: the JSON body sent
//! (chat `messages`, completions `prompt`, Responses `input`, or Anthropic
//! `system` + `messages`, tpscope's fields, the endpoint's extra fields). The
//! `Retry-After` rule is the stream layer's (`tpscope_stream::retry_after`).

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer as _};

use crate::config::{Api, Endpoint, Message, Prompt, RequestSpec};

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'a str,
    content: &'a str,
}

/// `max_tokens` of an Anthropic request that did not set one (the API requires it).
pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u32 = 4096;

/// The JSON body of one request: `model`, `messages` (chat) or `prompt`
/// (completions), `max_tokens`, `stream: true`, `stream_options.include_usage`
/// when asked, then the endpoint's extra fields (which replace tpscope's own of the
/// same name). Anthropic: system messages become the top-level `system`,
/// `max_tokens` is always sent, and usage needs no asking. Responses: the prompt is
/// `input` (a string, or the messages), the limit `max_output_tokens`, and usage
/// needs no asking.
pub fn request_body(endpoint: &Endpoint, spec: &RequestSpec) -> Vec<u8> {
    let mut out = Vec::with_capacity(192 + prompt_len(&spec.prompt));
    let extra = &endpoint.extra_body;
    let mut ser = serde_json::Serializer::new(&mut out);
    // Serialising strings, numbers and `serde_json::Value`s into a Vec cannot fail.
    let result = (|| -> Result<(), serde_json::Error> {
        let mut map = ser.serialize_map(None)?;
        if !extra.contains_key("model") {
            map.serialize_entry("model", &endpoint.model)?;
        }
        let prompt_key = match endpoint.api {
            Api::Completions => "prompt",
            Api::Responses => "input",
            Api::Chat | Api::Anthropic => "messages",
        };
        if !extra.contains_key(prompt_key) {
            match (endpoint.api, &spec.prompt) {
                (Api::Completions, Prompt::Text(t)) => map.serialize_entry("prompt", t)?,
                (Api::Completions, Prompt::Messages(ms)) => {
                    map.serialize_entry("prompt", &joined(ms.iter()))?
                }
                (Api::Responses, Prompt::Text(t)) => map.serialize_entry("input", t)?,
                (Api::Responses, Prompt::Messages(ms)) => {
                    map.serialize_entry("input", &wire(ms.iter()))?
                }
                (_, Prompt::Text(t)) => map.serialize_entry(
                    "messages",
                    &[WireMessage {
                        role: "user",
                        content: t,
                    }],
                )?,
                (Api::Anthropic, Prompt::Messages(ms)) => {
                    let (system, rest): (Vec<_>, Vec<_>) =
                        ms.iter().partition(|m| m.role == "system");
                    if !system.is_empty() && !extra.contains_key("system") {
                        map.serialize_entry("system", &joined(system.into_iter()))?;
                    }
                    map.serialize_entry("messages", &wire(rest.into_iter()))?;
                }
                (_, Prompt::Messages(ms)) => map.serialize_entry("messages", &wire(ms.iter()))?,
            }
        }
        let max_tokens = match endpoint.api {
            Api::Anthropic => Some(spec.max_tokens.unwrap_or(ANTHROPIC_DEFAULT_MAX_TOKENS)),
            _ => spec.max_tokens,
        };
        let max_key = match endpoint.api {
            Api::Responses => "max_output_tokens",
            _ => "max_tokens",
        };
        if let Some(n) = max_tokens
            && !extra.contains_key(max_key)
        {
            map.serialize_entry(max_key, &n)?;
        }
        if !extra.contains_key("stream") {
            map.serialize_entry("stream", &true)?;
        }
        if endpoint.include_usage
            && matches!(endpoint.api, Api::Chat | Api::Completions)
            && !extra.contains_key("stream_options")
        {
            map.serialize_entry(
                "stream_options",
                &serde_json::json!({"include_usage": true}),
            )?;
        }
        for (k, v) in extra {
            map.serialize_entry(k, v)?;
        }
        map.end()
    })();
    debug_assert!(result.is_ok());
    out
}

fn wire<'a>(ms: impl Iterator<Item = &'a Message>) -> Vec<WireMessage<'a>> {
    ms.map(|m| WireMessage {
        role: &m.role,
        content: &m.content,
    })
    .collect()
}

/// Messages' contents as one text, paragraphs apart.
fn joined<'a>(ms: impl Iterator<Item = &'a Message>) -> String {
    ms.map(|m| m.content.as_str())
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn prompt_len(p: &Prompt) -> usize {
    match p {
        Prompt::Text(t) => t.len(),
        Prompt::Messages(ms) => ms.iter().map(|m| m.content.len() + m.role.len() + 32).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_body_has_messages_stream_usage_and_extra_fields() {
        let mut ep = Endpoint::new("http://h/v1", Api::Chat, "m");
        ep.extra_body
            .insert("ignore_eos".into(), serde_json::Value::Bool(true));
        ep.extra_body
            .insert("max_tokens".into(), serde_json::json!(9));
        let spec = RequestSpec {
            prompt: Prompt::Messages(vec![
                Message {
                    role: "system".into(),
                    content: "be brief".into(),
                },
                Message {
                    role: "user".into(),
                    content: "hi \"there\"".into(),
                },
            ]),
            max_tokens: Some(5),
        };
        let v: serde_json::Value = serde_json::from_slice(&request_body(&ep, &spec)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "model": "m",
                "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi \"there\""}],
                "stream": true,
                "stream_options": {"include_usage": true},
                "ignore_eos": true,
                "max_tokens": 9,
            })
        );
    }

    #[test]
    fn anthropic_body_moves_system_messages_and_always_has_max_tokens() {
        let ep = Endpoint::new("http://h/v1", Api::Anthropic, "claude");
        let spec = RequestSpec {
            prompt: Prompt::Messages(vec![
                Message {
                    role: "system".into(),
                    content: "be brief".into(),
                },
                Message {
                    role: "user".into(),
                    content: "hi".into(),
                },
            ]),
            max_tokens: None,
        };
        let v: serde_json::Value = serde_json::from_slice(&request_body(&ep, &spec)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "model": "claude",
                "system": "be brief",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": ANTHROPIC_DEFAULT_MAX_TOKENS,
                "stream": true,
            })
        );
    }

    #[test]
    fn responses_body_has_input_and_max_output_tokens_and_asks_no_usage() {
        // include_usage is on by default: the Responses API sends usage unasked
        // and rejects `stream_options`.
        let ep = Endpoint::new("http://h/v1", Api::Responses, "m");
        let text = RequestSpec {
            prompt: Prompt::Text("once".into()),
            max_tokens: Some(3),
        };
        let v: serde_json::Value = serde_json::from_slice(&request_body(&ep, &text)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m", "input": "once", "max_output_tokens": 3, "stream": true})
        );
        let messages = RequestSpec {
            prompt: Prompt::Messages(vec![Message {
                role: "user".into(),
                content: "hi".into(),
            }]),
            max_tokens: None,
        };
        let v: serde_json::Value = serde_json::from_slice(&request_body(&ep, &messages)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m", "input": [{"role": "user", "content": "hi"}], "stream": true})
        );
    }

    #[test]
    fn completions_body_has_prompt_and_max_tokens() {
        let mut ep = Endpoint::new("http://h/v1", Api::Completions, "m");
        ep.include_usage = false;
        let spec = RequestSpec {
            prompt: Prompt::Text("once".into()),
            max_tokens: Some(3),
        };
        let v: serde_json::Value = serde_json::from_slice(&request_body(&ep, &spec)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"model": "m", "prompt": "once", "max_tokens": 3, "stream": true})
        );
        let spec = RequestSpec {
            prompt: Prompt::Messages(vec![
                Message {
                    role: "user".into(),
                    content: "a".into(),
                },
                Message {
                    role: "user".into(),
                    content: "b".into(),
                },
            ]),
            max_tokens: None,
        };
        let v: serde_json::Value = serde_json::from_slice(&request_body(&ep, &spec)).unwrap();
        assert_eq!(v["prompt"], "a\n\nb");
    }
}
