//! Traces: Mooncake JSONL and Azure LLM inference CSV, read into [`TraceEntry`]s
//! (arrival offset, lengths, prefix blocks) sorted by time; and the prompt text of
//! an entry, sharing prefixes as its hash blocks say.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tpscope_model::Timestamp;
use tpscope_tokens::{Tokenizer, mix};

use super::file::{FileError, ferr, json_lines, positive_u32, read};
use crate::dist::MAX_LENGTH;

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

/// Text of exactly `e.input` tokens in which block k (512 tokens) is determined by
/// `hash_ids[k]`, so requests sharing leading hash ids share a prompt prefix; tokens
/// beyond the listed blocks are unique to the request.
pub(super) fn prefix_shared_text(
    e: &TraceEntry,
    req_seed: u64,
    prompt_salt: u64,
    tokenizer: Tokenizer,
) -> String {
    let n = e.input as u64;
    let mut s = String::with_capacity(e.input as usize * 7);
    for i in 0..n {
        let block = i / u64::from(MOONCAKE_BLOCK_TOKENS);
        let w = match e.hash_ids.get(block as usize) {
            // Blocks with one hash id share text within a run (the trace's
            // prefix reuse); the salt keeps them apart across runs.
            Some(h) => tokenizer.word(
                mix(*h ^ 0xB10C ^ prompt_salt),
                i % u64::from(MOONCAKE_BLOCK_TOKENS),
            ),
            None => tokenizer.word(req_seed, i),
        };
        s.push(' ');
        s.push_str(w);
    }
    s
}

/// Reads a Mooncake trace (JSONL: `timestamp` in ms, `input_length`,
/// `output_length`, optional `hash_ids`).
pub fn read_mooncake(path: &Path) -> Result<Vec<TraceEntry>, FileError> {
    let text = read(path)?;
    let mut out = Vec::new();
    for parsed in json_lines(path, &text) {
        let (line, v) = parsed?;
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
                .filter(|n| *n <= MAX_LENGTH)
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

impl TraceFormat {
    /// The name `--trace` gives it.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Azure => "azure",
        }
    }

    /// Reads a trace file of this format.
    pub fn read(self, path: &Path) -> Result<Vec<TraceEntry>, FileError> {
        match self {
            TraceFormat::Mooncake => read_mooncake(path),
            TraceFormat::Azure => read_azure_csv(path),
        }
    }
}

/// A `--trace` value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadTraceArg {
    /// No `KIND:` prefix.
    #[error("`{0}`: expected mooncake:FILE or azure:FILE")]
    NoKind(String),
    /// An unknown kind.
    #[error("`{0}` is not a trace format (expected mooncake or azure)")]
    Kind(String),
    /// `KIND:` with no file.
    #[error("`{0}`: the file name is missing")]
    NoFile(String),
}

/// Parses `mooncake:FILE` or `azure:FILE`.
pub fn parse_trace_arg(text: &str) -> Result<(TraceFormat, PathBuf), BadTraceArg> {
    let (kind, file) = text
        .split_once(':')
        .ok_or_else(|| BadTraceArg::NoKind(text.to_string()))?;
    let fmt = match kind {
        "mooncake" => TraceFormat::Mooncake,
        "azure" => TraceFormat::Azure,
        _ => return Err(BadTraceArg::Kind(kind.to_string())),
    };
    if file.is_empty() {
        return Err(BadTraceArg::NoFile(text.to_string()));
    }
    Ok((fmt, PathBuf::from(file)))
}

#[cfg(test)]
mod tests {
    use super::super::file::testing::{fixture, temp};
    use super::*;

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
        let a = prefix_shared_text(&small, 1, 0, tk);
        let b = prefix_shared_text(&other, 2, 0, tk);
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
