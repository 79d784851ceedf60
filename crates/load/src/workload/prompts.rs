//! Prompt files: a JSONL file of prompts or chat messages (OpenAI batch lines too),
//! and ShareGPT conversations, read into [`PromptItem`]s with errors naming the
//! file, line and field.

use std::path::Path;

use serde_json::Value;
use tpscope_client::{Message, Prompt};
use tpscope_tokens::Tokenizer;

use super::file::{FileError, ferr, json_lines, positive_u32, read};
use crate::dist::MAX_LENGTH;

/// One prompt read from a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptItem {
    /// The prompt.
    pub prompt: Prompt,
    /// The output length the file asks for (`max_tokens`, or the reference reply's
    /// token count for ShareGPT), if any.
    pub max_tokens: Option<u32>,
}

fn messages_of(
    v: &Value,
    path: &Path,
    line: usize,
    field: &str,
) -> Result<Vec<Message>, FileError> {
    let arr = v.as_array().ok_or_else(|| {
        ferr(
            path,
            Some(line),
            Some(field),
            "expected an array of {role, content} objects",
        )
    })?;
    if arr.is_empty() {
        return Err(ferr(
            path,
            Some(line),
            Some(field),
            "expected at least one message",
        ));
    }
    arr.iter()
        .enumerate()
        .map(|(i, m)| {
            let role = m.get("role").and_then(Value::as_str).ok_or_else(|| {
                ferr(
                    path,
                    Some(line),
                    Some(&format!("{field}[{i}].role")),
                    "expected a string",
                )
            })?;
            let content = match m.get("content") {
                Some(Value::String(s)) => s.clone(),
                // Content parts: keep the text parts, in order.
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join(""),
                _ => {
                    return Err(ferr(
                        path,
                        Some(line),
                        Some(&format!("{field}[{i}].content")),
                        "expected a string (or an array of text parts)",
                    ));
                }
            };
            Ok(Message {
                role: role.to_string(),
                content,
            })
        })
        .collect()
}

/// Reads a JSONL file of prompts. Each non-blank line is one of:
/// - a JSON string (the prompt);
/// - `{"prompt": "...", "max_tokens": N}`;
/// - `{"messages": [{"role": "user", "content": "..."}], "max_tokens": N}`;
/// - an OpenAI batch line `{"body": {...one of the above...}}`.
///
/// `max_tokens` (or `output_tokens`, or `max_completion_tokens`) is optional.
pub fn read_prompts_jsonl(path: &Path) -> Result<Vec<PromptItem>, FileError> {
    let text = read(path)?;
    let mut items = Vec::new();
    for parsed in json_lines(path, &text) {
        let (line, v) = parsed?;
        let v = match v.get("body") {
            Some(b) if b.is_object() => b.clone(),
            _ => v,
        };
        let item = match &v {
            Value::String(s) => PromptItem {
                prompt: Prompt::Text(s.clone()),
                max_tokens: None,
            },
            Value::Object(o) => {
                let prompt = if let Some(m) = o.get("messages") {
                    Prompt::Messages(messages_of(m, path, line, "messages")?)
                } else if let Some(p) = o.get("prompt") {
                    Prompt::Text(
                        p.as_str()
                            .ok_or_else(|| {
                                ferr(path, Some(line), Some("prompt"), "expected a string")
                            })?
                            .to_string(),
                    )
                } else {
                    return Err(ferr(
                        path,
                        Some(line),
                        Some("prompt"),
                        "missing: expected `prompt` (a string) or `messages` (an array)",
                    ));
                };
                let mut max_tokens = None;
                for key in ["max_tokens", "max_completion_tokens", "output_tokens"] {
                    if let Some(n) = o.get(key) {
                        max_tokens = Some(positive_u32(n, path, line, key)?);
                        break;
                    }
                }
                PromptItem { prompt, max_tokens }
            }
            _ => {
                return Err(ferr(
                    path,
                    Some(line),
                    None,
                    "expected a string or an object with `prompt` or `messages`",
                ));
            }
        };
        items.push(item);
    }
    if items.is_empty() {
        return Err(ferr(path, None, None, "holds no prompts"));
    }
    Ok(items)
}

/// The records of a conversation file, each with its line number (JSON Lines) or
/// none (a JSON array): shared by the ShareGPT prompts and multi-turn sessions.
pub(crate) fn conversation_records(path: &Path) -> Result<Vec<(Option<usize>, Value)>, FileError> {
    let text = read(path)?;
    let trimmed = text.trim_start();
    Ok(if trimmed.starts_with('[') {
        let v: Vec<Value> = serde_json::from_str(trimmed).map_err(|e| {
            ferr(
                path,
                Some(e.line()),
                None,
                format!("not a JSON array of conversations: {e}"),
            )
        })?;
        v.into_iter().map(|r| (None, r)).collect()
    } else {
        json_lines(path, &text)
            .map(|parsed| parsed.map(|(line, v)| (Some(line), v)))
            .collect::<Result<_, _>>()?
    })
}

/// Reads a ShareGPT file: a JSON array (or JSONL) of `{"conversations": [{"from":
/// "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}`. The first human
/// turn is the prompt; when a reply follows it, the reply's token count (under
/// `tokenizer`) is the output length, as `vllm bench serve` does.
pub fn read_sharegpt(path: &Path, tokenizer: Tokenizer) -> Result<Vec<PromptItem>, FileError> {
    let records = conversation_records(path)?;
    let mut items = Vec::new();
    for (idx, (line, rec)) in records.iter().enumerate() {
        let at = |field: &str| match line {
            Some(_) => field.to_string(),
            None => format!("[{idx}].{field}"),
        };
        let conv = rec
            .get("conversations")
            .or_else(|| rec.get("conversation"))
            .and_then(Value::as_array)
            .ok_or_else(|| {
                ferr(
                    path,
                    *line,
                    Some(&at("conversations")),
                    "missing or not an array",
                )
            })?;
        let turn = |t: &Value| -> (String, Option<String>) {
            let from = t
                .get("from")
                .or_else(|| t.get("role"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let value = t
                .get("value")
                .or_else(|| t.get("content"))
                .and_then(Value::as_str)
                .map(str::to_string);
            (from, value)
        };
        let Some(first) = conv
            .iter()
            .position(|t| matches!(turn(t).0.as_str(), "human" | "user"))
        else {
            // A conversation without a human turn has no prompt: skip it, as vLLM does.
            continue;
        };
        let prompt = turn(&conv[first]).1.ok_or_else(|| {
            ferr(
                path,
                *line,
                Some(&at(&format!("conversations[{first}].value"))),
                "expected a string",
            )
        })?;
        if prompt.trim().is_empty() {
            continue;
        }
        let reply = conv
            .get(first + 1)
            .map(turn)
            .filter(|(from, _)| {
                matches!(
                    from.as_str(),
                    "gpt" | "assistant" | "chatgpt" | "bard" | "bing"
                )
            })
            .and_then(|(_, v)| v);
        let max_tokens = reply.map(|r| tokenizer.count(&r).clamp(1, MAX_LENGTH as usize) as u32);
        items.push(PromptItem {
            prompt: Prompt::Text(prompt),
            max_tokens,
        });
    }
    if items.is_empty() {
        return Err(ferr(
            path,
            None,
            None,
            "holds no conversation with a human prompt",
        ));
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::super::file::testing::{fixture, temp};
    use super::*;

    #[test]
    fn reads_prompt_and_message_lines() {
        let f = temp(
            "\"just text\"\n\n{\"prompt\": \"hi\", \"max_tokens\": 7}\n{\"messages\": [{\"role\": \"user\", \"content\": \"yo\"}]}\n{\"body\": {\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]}], \"max_completion_tokens\": 3}}\n",
        );
        let items = read_prompts_jsonl(f.path()).unwrap();
        assert_eq!(items.len(), 4);
        assert_eq!(items[0].prompt, Prompt::Text("just text".into()));
        assert_eq!(items[1].max_tokens, Some(7));
        assert!(matches!(&items[2].prompt, Prompt::Messages(m) if m[0].content == "yo"));
        assert!(matches!(&items[3].prompt, Prompt::Messages(m) if m[0].content == "ab"));
        assert_eq!(items[3].max_tokens, Some(3));
    }

    #[test]
    fn bad_prompt_lines_name_file_line_and_field() {
        for (content, line, field) in [
            ("{\"prompt\": \"a\"}\n{\"prompt\": 5}\n", 2, Some("prompt")),
            (
                "{\"messages\": [{\"role\": \"user\"}]}\n",
                1,
                Some("messages[0].content"),
            ),
            (
                "{\"prompt\": \"a\", \"max_tokens\": 0}\n",
                1,
                Some("max_tokens"),
            ),
            ("{\"text\": \"a\"}\n", 1, Some("prompt")),
            ("{\"prompt\": \"a\"}\nnot json\n", 2, None),
        ] {
            let f = temp(content);
            let e = read_prompts_jsonl(f.path()).unwrap_err();
            assert_eq!(e.line, Some(line), "{e}");
            assert_eq!(e.field.as_deref(), field, "{e}");
            assert!(
                e.to_string().starts_with(&f.path().display().to_string()),
                "{e}"
            );
        }
        let empty = temp("\n\n");
        assert!(
            read_prompts_jsonl(empty.path())
                .unwrap_err()
                .problem
                .contains("no prompts")
        );
    }

    #[test]
    fn reads_the_sharegpt_fixture() {
        let items = read_sharegpt(&fixture("sharegpt_20.json"), Tokenizer::O200kBase).unwrap();
        assert_eq!(items.len(), 20);
        assert!(
            items
                .iter()
                .all(|i| matches!(&i.prompt, Prompt::Text(t) if !t.is_empty()))
        );
        // First turns only: no reference reply, so the output length comes from the flags.
        assert!(items.iter().all(|i| i.max_tokens.is_none()));
        let with_reply = temp(
            "{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}, {\"from\": \"gpt\", \"value\": \"Hello, world!\"}]}\n",
        );
        let items = read_sharegpt(with_reply.path(), Tokenizer::O200kBase).unwrap();
        assert_eq!(items[0].max_tokens, Some(4));
        let bad = temp("[{\"id\": 1}]");
        let e = read_sharegpt(bad.path(), Tokenizer::O200kBase).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("[0].conversations"), "{e}");
    }
}
