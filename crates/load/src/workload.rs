//! Workloads: what each request asks for (prompt and `max_tokens`), from synthetic
//! lengths, the bundled Azure chat lengths, a JSONL file of prompts or messages, a
//! ShareGPT file, or a Mooncake / Azure trace (which also carries arrival times).
//!
//! Request `seq` of a run is a pure function of (workload, seed, seq): runs are
//! reproducible, and prompts are built only when a request is admitted.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;
use tpscope_model::Timestamp;
use tpscope_tokens::{Tokenizer, mix};

use crate::dist::LengthDist;

pub use tpscope_client::{Message, Prompt, RequestSpec};

/// One request, ready to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// What is sent: the prompt and `max_tokens` (always set).
    pub spec: RequestSpec,
    /// Prompt tokens under the run's tokenizer, when the workload knows them exactly
    /// (synthetic prompts, traces); the server's `usage` wins when it reports them.
    pub input_tokens: Option<u64>,
}

impl Request {
    /// The requested output length.
    pub fn max_tokens(&self) -> u32 {
        self.spec.max_tokens.unwrap_or(0)
    }
}

/// One prompt read from a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromptItem {
    /// The prompt.
    pub prompt: Prompt,
    /// The output length the file asks for (`max_tokens`, or the reference reply's
    /// token count for ShareGPT), if any.
    pub max_tokens: Option<u32>,
}

/// One request of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    /// Arrival offset from the trace's first request (before `--time-scale`).
    pub offset: Duration,
    /// Prompt tokens.
    pub input: u32,
    /// Output tokens (sent as `max_tokens`).
    pub output: u32,
    /// Mooncake prefix-block hashes (512 tokens per block): requests sharing leading
    /// ids get the same prompt prefix. Empty for Azure traces.
    pub hash_ids: Vec<u64>,
}

/// Tokens per Mooncake hash block.
pub const MOONCAKE_BLOCK_TOKENS: u32 = 512;

/// What the requests of a run ask for.
#[derive(Clone, Debug)]
pub enum Workload {
    /// Synthetic prompts of exact token lengths drawn from distributions.
    Synthetic {
        /// Prompt lengths.
        input: LengthDist,
        /// `max_tokens`.
        output: LengthDist,
    },
    /// (input, output) pairs drawn jointly from the bundled Azure conversation trace:
    /// the default, so lengths vary the way real chat traffic does.
    AzureChat,
    /// Prompts from a file, in file order (wrapping around when a run asks for more
    /// requests than the file has); `max_tokens` from the file, else from `output`.
    Prompts {
        /// Where they came from (for the run record).
        source: String,
        /// The prompts.
        items: Arc<Vec<PromptItem>>,
        /// Output lengths for items that do not give one.
        output: LengthDist,
    },
    /// Lengths (and prefix sharing) from a trace, in trace order.
    Trace {
        /// Where it came from (for the run record).
        source: String,
        /// The entries.
        entries: Arc<Vec<TraceEntry>>,
    },
}

impl Workload {
    /// How many distinct requests the workload holds, when it is a file (`None` for
    /// synthetic workloads, which never run out).
    pub fn len(&self) -> Option<usize> {
        match self {
            Workload::Synthetic { .. } | Workload::AzureChat => None,
            Workload::Prompts { items, .. } => Some(items.len()),
            Workload::Trace { entries, .. } => Some(entries.len()),
        }
    }

    /// Whether the workload is a file with no requests.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// Request `seq` for `seed`, with synthetic text made by `tokenizer`.
    pub fn request(&self, seq: u64, seed: u64, tokenizer: Tokenizer) -> Request {
        let req_seed = mix(seed ^ mix(seq.wrapping_add(0x5EED)));
        let mut rng = StdRng::seed_from_u64(req_seed);
        match self {
            Workload::Synthetic { input, output } => {
                let n_in = input.sample(&mut rng);
                let n_out = output.sample(&mut rng);
                synthetic(n_in, n_out, req_seed, tokenizer)
            }
            Workload::AzureChat => {
                let t = azure_lengths();
                let (i, o) = t[(req_seed % t.len() as u64) as usize];
                synthetic(i.max(1), o.max(1), req_seed, tokenizer)
            }
            Workload::Prompts { items, output, .. } => {
                let item = &items[(seq % items.len().max(1) as u64) as usize];
                Request {
                    spec: RequestSpec {
                        prompt: item.prompt.clone(),
                        max_tokens: Some(
                            item.max_tokens.unwrap_or_else(|| output.sample(&mut rng)),
                        ),
                    },
                    input_tokens: None,
                }
            }
            Workload::Trace { entries, .. } => {
                let e = &entries[(seq % entries.len().max(1) as u64) as usize];
                Request {
                    spec: RequestSpec {
                        prompt: Prompt::Text(prefix_shared_text(e, req_seed, tokenizer)),
                        max_tokens: Some(e.output.max(1)),
                    },
                    input_tokens: Some(u64::from(e.input)),
                }
            }
        }
    }

    /// A short description for the run record's load settings.
    pub fn describe(&self) -> Value {
        match self {
            Workload::Synthetic { input, output } => serde_json::json!({
                "kind": "synthetic", "input_tokens": input.to_string(), "output_tokens": output.to_string()
            }),
            Workload::AzureChat => serde_json::json!({
                "kind": "azure_chat_lengths",
                "source": "Azure LLM inference trace 2023, conversation (bundled)"
            }),
            Workload::Prompts {
                source,
                items,
                output,
            } => serde_json::json!({
                "kind": "prompts", "source": source, "prompts": items.len(), "output_tokens_default": output.to_string()
            }),
            Workload::Trace { source, entries } => serde_json::json!({
                "kind": "trace", "source": source, "entries": entries.len()
            }),
        }
    }
}

fn synthetic(n_in: u32, n_out: u32, seed: u64, tokenizer: Tokenizer) -> Request {
    Request {
        spec: RequestSpec {
            prompt: Prompt::Text(tokenizer.text_with_tokens(n_in as usize, seed)),
            max_tokens: Some(n_out.max(1)),
        },
        input_tokens: Some(u64::from(n_in)),
    }
}

/// Text of exactly `e.input` tokens in which block k (512 tokens) is determined by
/// `hash_ids[k]`, so requests sharing leading hash ids share a prompt prefix; tokens
/// beyond the listed blocks are unique to the request.
fn prefix_shared_text(e: &TraceEntry, req_seed: u64, tokenizer: Tokenizer) -> String {
    let n = e.input as u64;
    let mut s = String::with_capacity(e.input as usize * 7);
    for i in 0..n {
        let block = i / u64::from(MOONCAKE_BLOCK_TOKENS);
        let w = match e.hash_ids.get(block as usize) {
            Some(h) => tokenizer.word(mix(*h ^ 0xB10C), i % u64::from(MOONCAKE_BLOCK_TOKENS)),
            None => tokenizer.word(req_seed, i),
        };
        s.push(' ');
        s.push_str(w);
    }
    s
}

/// The bundled Azure 2023 conversation trace as (input, output) token pairs.
pub fn azure_lengths() -> &'static [(u32, u32)] {
    static TABLE: OnceLock<Vec<(u32, u32)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        include_str!("../data/azure_conv_lengths.txt")
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| {
                let (a, b) = l.split_once(' ')?;
                Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
            })
            .collect()
    })
}

/// A workload file that cannot be used: which file, line and field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FileError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when the problem is on one line.
    pub line: Option<usize>,
    /// The field, when the problem is one field.
    pub field: Option<String>,
    /// What was expected and what was found.
    pub problem: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(fld) = &self.field {
            write!(f, ": field `{fld}`")?;
        }
        write!(f, ": {}", self.problem)
    }
}

fn ferr(
    path: &Path,
    line: Option<usize>,
    field: Option<&str>,
    problem: impl Into<String>,
) -> FileError {
    FileError {
        path: path.to_path_buf(),
        line,
        field: field.map(str::to_string),
        problem: problem.into(),
    }
}

fn read(path: &Path) -> Result<String, FileError> {
    std::fs::read_to_string(path).map_err(|e| ferr(path, None, None, format!("cannot read: {e}")))
}

fn positive_u32(v: &Value, path: &Path, line: usize, field: &str) -> Result<u32, FileError> {
    v.as_u64()
        .filter(|n| (1..=u64::from(crate::dist::MAX_LENGTH)).contains(n))
        .map(|n| n as u32)
        .ok_or_else(|| {
            ferr(
                path,
                Some(line),
                Some(field),
                format!("expected a whole number of tokens in 1..=1000000, found {v}"),
            )
        })
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
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(raw)
            .map_err(|e| ferr(path, Some(line), None, format!("not valid JSON: {e}")))?;
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

/// Reads a ShareGPT file: a JSON array (or JSONL) of `{"conversations": [{"from":
/// "human", "value": ...}, {"from": "gpt", "value": ...}, ...]}`. The first human
/// turn is the prompt; when a reply follows it, the reply's token count (under
/// `tokenizer`) is the output length, as `vllm bench serve` does.
pub fn read_sharegpt(path: &Path, tokenizer: Tokenizer) -> Result<Vec<PromptItem>, FileError> {
    let text = read(path)?;
    let trimmed = text.trim_start();
    // (line number for messages, record)
    let records: Vec<(Option<usize>, Value)> = if trimmed.starts_with('[') {
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
        let mut out = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let v = serde_json::from_str(raw)
                .map_err(|e| ferr(path, Some(i + 1), None, format!("not valid JSON: {e}")))?;
            out.push((Some(i + 1), v));
        }
        out
    };
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
        let max_tokens = reply.map(|r| {
            tokenizer
                .count(&r)
                .clamp(1, crate::dist::MAX_LENGTH as usize) as u32
        });
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

/// Reads a Mooncake trace (JSONL: `timestamp` in ms, `input_length`,
/// `output_length`, optional `hash_ids`).
pub fn read_mooncake(path: &Path) -> Result<Vec<TraceEntry>, FileError> {
    let text = read(path)?;
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(raw)
            .map_err(|e| ferr(path, Some(line), None, format!("not valid JSON: {e}")))?;
        let ts = v
            .get("timestamp")
            .and_then(|t| t.as_f64())
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| {
                ferr(
                    path,
                    Some(line),
                    Some("timestamp"),
                    "expected a non-negative number of milliseconds",
                )
            })?;
        let input = positive_u32(
            v.get("input_length").unwrap_or(&Value::Null),
            path,
            line,
            "input_length",
        )?;
        let output = positive_u32(
            v.get("output_length").unwrap_or(&Value::Null),
            path,
            line,
            "output_length",
        )?;
        let hash_ids = match v.get("hash_ids") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(k, h)| {
                    h.as_u64().ok_or_else(|| {
                        ferr(
                            path,
                            Some(line),
                            Some(&format!("hash_ids[{k}]")),
                            "expected a non-negative integer",
                        )
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(ferr(
                    path,
                    Some(line),
                    Some("hash_ids"),
                    "expected an array of integers",
                ));
            }
        };
        out.push(TraceEntry {
            offset: Duration::from_secs_f64(ts / 1000.0),
            input,
            output,
            hash_ids,
        });
    }
    finish_trace(path, out)
}

/// Reads an Azure LLM inference trace CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`,
/// TIMESTAMP like `2023-11-16 18:17:03.9799600`, UTC assumed).
pub fn read_azure_csv(path: &Path) -> Result<Vec<TraceEntry>, FileError> {
    let text = read(path)?;
    let mut lines = text.lines().enumerate();
    let header = lines
        .next()
        .map(|(_, h)| h.trim().trim_start_matches('\u{feff}'))
        .ok_or_else(|| {
            ferr(
                path,
                Some(1),
                None,
                "empty file: expected the header TIMESTAMP,ContextTokens,GeneratedTokens",
            )
        })?;
    let cols: Vec<&str> = header.split(',').map(str::trim).collect();
    let find = |name: &str| {
        cols.iter()
            .position(|c| c.eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                ferr(
                    path,
                    Some(1),
                    Some(name),
                    "missing from the header (expected TIMESTAMP,ContextTokens,GeneratedTokens)",
                )
            })
    };
    let (ci_t, ci_in, ci_out) = (
        find("TIMESTAMP")?,
        find("ContextTokens")?,
        find("GeneratedTokens")?,
    );
    let mut out = Vec::new();
    let mut first: Option<Timestamp> = None;
    for (i, raw) in lines {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = raw.split(',').map(str::trim).collect();
        let get = |k: usize, name: &str| {
            f.get(k)
                .copied()
                .ok_or_else(|| ferr(path, Some(line), Some(name), "missing (too few columns)"))
        };
        let ts_text = get(ci_t, "TIMESTAMP")?;
        let ts = Timestamp::parse_rfc3339(&format!("{ts_text}Z")).map_err(|_| {
            ferr(
                path,
                Some(line),
                Some("TIMESTAMP"),
                format!("`{ts_text}` is not a time like 2023-11-16 18:17:03.9799600"),
            )
        })?;
        let num = |k: usize, name: &str| -> Result<u32, FileError> {
            let t = get(k, name)?;
            t.parse::<u32>()
                .ok()
                .filter(|n| *n <= crate::dist::MAX_LENGTH)
                .ok_or_else(|| {
                    ferr(
                        path,
                        Some(line),
                        Some(name),
                        format!("`{t}` is not a whole number of tokens"),
                    )
                })
        };
        let input = num(ci_in, "ContextTokens")?;
        let output = num(ci_out, "GeneratedTokens")?;
        let first = *first.get_or_insert(ts);
        let offset = ts.since(first).ok_or_else(|| {
            ferr(
                path,
                Some(line),
                Some("TIMESTAMP"),
                "earlier than the first row (rows must be sorted by time)",
            )
        })?;
        out.push(TraceEntry {
            offset,
            input: input.max(1),
            output: output.max(1),
            hash_ids: Vec::new(),
        });
    }
    finish_trace(path, out)
}

fn finish_trace(path: &Path, mut out: Vec<TraceEntry>) -> Result<Vec<TraceEntry>, FileError> {
    if out.is_empty() {
        return Err(ferr(path, None, None, "holds no requests"));
    }
    // Replay in time order (stable: ties keep file order); offsets from the first.
    out.sort_by_key(|e| e.offset);
    let base = out[0].offset;
    for e in &mut out {
        e.offset -= base;
    }
    Ok(out)
}

/// The trace formats `--trace` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// Mooncake JSONL.
    Mooncake,
    /// Azure LLM inference trace CSV.
    Azure,
}

/// Parses `mooncake:FILE` or `azure:FILE`.
pub fn parse_trace_arg(text: &str) -> Result<(TraceFormat, PathBuf), String> {
    let (kind, file) = text
        .split_once(':')
        .ok_or_else(|| format!("`{text}`: expected mooncake:FILE or azure:FILE"))?;
    let fmt = match kind {
        "mooncake" => TraceFormat::Mooncake,
        "azure" => TraceFormat::Azure,
        _ => {
            return Err(format!(
                "`{kind}` is not a trace format (expected mooncake or azure)"
            ));
        }
    };
    if file.is_empty() {
        return Err(format!("`{text}`: the file name is missing"));
    }
    Ok((fmt, PathBuf::from(file)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name)
    }

    fn temp(content: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(content.as_bytes()).unwrap();
        f
    }

    #[test]
    fn synthetic_prompts_have_the_exact_input_length_and_are_reproducible() {
        let w = Workload::Synthetic {
            input: LengthDist::Fixed(300),
            output: LengthDist::Uniform { lo: 10, hi: 20 },
        };
        let tk = Tokenizer::O200kBase;
        let a = w.request(5, 42, tk);
        assert_eq!(a, w.request(5, 42, tk));
        assert_ne!(a, w.request(6, 42, tk));
        let Prompt::Text(t) = &a.spec.prompt else {
            panic!("text expected")
        };
        assert_eq!(tk.count(t), 300);
        assert_eq!(a.input_tokens, Some(300));
        assert!((10..=20).contains(&a.max_tokens()));
    }

    #[test]
    fn azure_default_lengths_vary() {
        let w = Workload::AzureChat;
        let lens: std::collections::BTreeSet<u32> = (0..50)
            .map(|s| w.request(s, 1, Tokenizer::O200kBase).max_tokens())
            .collect();
        assert!(lens.len() > 20, "{lens:?}");
        assert_eq!(azure_lengths().len(), 19_366);
    }

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

    #[test]
    fn reads_the_mooncake_fixture_with_prefix_sharing() {
        let entries = read_mooncake(&fixture("mooncake_200.jsonl")).unwrap();
        assert_eq!(entries.len(), 200);
        assert_eq!(entries[0].offset, Duration::ZERO);
        assert!(entries.windows(2).all(|w| w[0].offset <= w[1].offset));
        let tk = Tokenizer::O200kBase;
        let small = TraceEntry {
            offset: Duration::ZERO,
            input: 1100,
            output: 5,
            hash_ids: vec![1, 2, 3],
        };
        let other = TraceEntry {
            hash_ids: vec![1, 2, 9],
            ..small.clone()
        };
        let a = prefix_shared_text(&small, 1, tk);
        let b = prefix_shared_text(&other, 2, tk);
        assert_eq!(tk.count(&a), 1100);
        let words = |s: &str| s.split(' ').skip(1).map(str::to_string).collect::<Vec<_>>();
        let (wa, wb) = (words(&a), words(&b));
        assert_eq!(wa[..1024], wb[..1024], "the two shared blocks must match");
        assert_ne!(wa[1024..], wb[1024..]);
    }

    #[test]
    fn bad_mooncake_lines_name_the_field() {
        let f = temp(
            "{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 2}\n{\"timestamp\": -1, \"input_length\": 5, \"output_length\": 2}\n",
        );
        let e = read_mooncake(f.path()).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(2), Some("timestamp")),
            "{e}"
        );
        let f = temp("{\"timestamp\": 0, \"input_length\": 5}\n");
        let e = read_mooncake(f.path()).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("output_length"), "{e}");
    }

    #[test]
    fn reads_the_azure_fixture() {
        let entries = read_azure_csv(&fixture("azure_conv_200.csv")).unwrap();
        assert_eq!(entries.len(), 200);
        assert_eq!((entries[0].input, entries[0].output), (374, 44));
        // 18:15:46.6805900 → 18:15:50.9951690
        assert_eq!(entries[1].offset, Duration::from_nanos(4_314_579_000));
        let f = temp("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,10,x\n");
        let e = read_azure_csv(f.path()).unwrap_err();
        assert_eq!(
            (e.line, e.field.as_deref()),
            (Some(2), Some("GeneratedTokens")),
            "{e}"
        );
        let f = temp("TIME,ContextTokens,GeneratedTokens\n");
        assert_eq!(
            read_azure_csv(f.path()).unwrap_err().field.as_deref(),
            Some("TIMESTAMP")
        );
    }

    #[test]
    fn trace_arguments_parse() {
        assert_eq!(
            parse_trace_arg("mooncake:a.jsonl").unwrap(),
            (TraceFormat::Mooncake, PathBuf::from("a.jsonl"))
        );
        assert!(parse_trace_arg("splitwise:a").is_err());
        assert!(parse_trace_arg("azure:").is_err());
        assert!(parse_trace_arg("a.csv").is_err());
    }
}
