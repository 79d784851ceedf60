//! Hugging Face tokenizers (`hf:PATH`): a `tokenizer.json` loaded offline with the
//! `tokenizers` crate, checked on the way in so a wrong file is a clear error, and
//! kept for the life of the process (one load per distinct file).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde_json::Value;

use crate::TokenizerError;

/// The `tokenizers` crate's tokenizer.
#[cfg(feature = "hf")]
pub(crate) type Engine = tokenizers::Tokenizer;

/// Built without the `hf` feature, no file loads ([`read`] says why), so no
/// [`HfTokenizer`] exists: the type has no values.
#[cfg(not(feature = "hf"))]
pub(crate) enum Engine {}

/// A loaded Hugging Face tokenizer, with what tpscope derives from it once.
pub struct HfTokenizer {
    /// The name written in span logs: `hf:<model>@<content hash>`.
    pub(crate) name: &'static str,
    /// Where it was loaded from.
    pub(crate) path: PathBuf,
    pub(crate) inner: Engine,
    /// Words that encode as one token each (with a leading space).
    pub(crate) words: Vec<&'static str>,
    /// The token id of each word (with its leading space).
    pub(crate) word_ids: Vec<u32>,
    /// The chat template's special tokens, from `tokenizer_config.json` beside it.
    pub(crate) specials: ChatSpecials,
    /// Whether single-token words joined count one token each (checked at load);
    /// when not, text of an exact length is corrected by counting it.
    pub(crate) joins_exactly: bool,
}

/// What `tokenizer_config.json` says about tokens a chat template adds around the
/// text (used to explain a count that differs from the server's `usage`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChatSpecials {
    /// The beginning-of-text token, when the model adds one.
    pub bos_token: Option<String>,
    /// The end-of-turn token.
    pub eos_token: Option<String>,
    /// Whether the config carries a chat template.
    pub has_chat_template: bool,
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfTokenizer")
            .field("name", &self.name)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl HfTokenizer {
    /// Tokens in `text`, without the special tokens a post-processor would add.
    /// Special tokens the tokenizer adds to one sequence (a BOS: Llama 3's 1,
    /// Qwen 2's 0), as `num_special_tokens_to_add()` says in Python.
    #[cfg(not(feature = "hf"))]
    pub(crate) fn added_special_tokens(&self) -> usize {
        match self.inner {}
    }

    /// Special tokens the tokenizer adds to one sequence (a BOS: Llama 3's 1,
    /// Qwen 2's 0), as `num_special_tokens_to_add()` says in Python.
    #[cfg(feature = "hf")]
    pub(crate) fn added_special_tokens(&self) -> usize {
        use tokenizers::PostProcessor;
        self.inner
            .get_post_processor()
            .map_or(0, |p| p.added_tokens(false))
    }

    #[cfg(not(feature = "hf"))]
    pub(crate) fn count(&self, _: &str) -> usize {
        match self.inner {}
    }

    /// Token ids of `text`, without added special tokens.
    #[cfg(not(feature = "hf"))]
    pub(crate) fn encode(&self, _: &str) -> Vec<u32> {
        match self.inner {}
    }

    /// Tokens in `text`, without the special tokens a post-processor would add.
    #[cfg(feature = "hf")]
    pub(crate) fn count(&self, text: &str) -> usize {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.len())
            // An encoding error (none is known for valid UTF-8) falls back to a
            // conservative figure rather than a panic on input.
            .unwrap_or_else(|_| text.split_whitespace().count())
    }

    /// Token ids of `text`, without added special tokens.
    #[cfg(feature = "hf")]
    pub(crate) fn encode(&self, text: &str) -> Vec<u32> {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .unwrap_or_default()
    }
}

/// Loads `path` (a `tokenizer.json`, or a directory holding one), once per file.
pub(crate) fn load(path: &Path) -> Result<&'static HfTokenizer, TokenizerError> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, &'static HfTokenizer>>> = OnceLock::new();
    let file = if path.is_dir() {
        path.join("tokenizer.json")
    } else {
        path.to_path_buf()
    };
    let key = file.canonicalize().unwrap_or_else(|_| file.clone());
    let cache = LOADED.get_or_init(Default::default);
    if let Some(t) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(t);
    }
    let t: &'static HfTokenizer = Box::leak(Box::new(read(path, &file)?));
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, t);
    Ok(t)
}

fn bad(path: &Path, problem: impl Into<String>) -> TokenizerError {
    TokenizerError::BadFile {
        path: path.to_path_buf(),
        problem: problem.into(),
    }
}

fn read(given: &Path, file: &Path) -> Result<HfTokenizer, TokenizerError> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        let what = if given.is_dir() {
            "a model directory holding tokenizer.json"
        } else {
            "a Hugging Face tokenizer.json (or a model directory holding one)"
        };
        bad(file, format!("cannot read ({e}); expected {what}"))
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|e| {
        bad(
            file,
            format!("not JSON ({e}); expected a Hugging Face tokenizer.json"),
        )
    })?;
    // JSON of another kind (a config.json, a vocab.json) gets a message that says
    // so, rather than the deserialiser's first complaint.
    let model_ok = v
        .get("model")
        .and_then(|m| m.as_object())
        .is_some_and(|m| m.contains_key("vocab") || m.contains_key("type"));
    if !model_ok {
        return Err(bad(
            file,
            "JSON but not a tokenizer: expected a Hugging Face tokenizer.json with a \
             `model` object (BPE, WordPiece, Unigram or WordLevel)",
        ));
    }
    let inner = engine(&text).map_err(|problem| bad(file, problem))?;
    let dir = file.parent().unwrap_or(Path::new("."));
    let specials = read_config(&dir.join("tokenizer_config.json"))?;
    let model = dir
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| !n.is_empty())
        .unwrap_or("tokenizer");
    // The content hash makes the name identify the tokenizer, not where it lies: two
    // runs with the same file are comparable, two with different files are not.
    let name: &'static str =
        Box::leak(format!("hf:{model}@{:08x}", fnv1a(text.as_bytes()) as u32).into_boxed_str());
    let mut t = HfTokenizer {
        name,
        path: file.to_path_buf(),
        inner,
        words: Vec::new(),
        word_ids: Vec::new(),
        specials,
        joins_exactly: false,
    };
    t.words = crate::WORDS
        .iter()
        .copied()
        .filter(|w| t.count(&format!(" {w}")) == 1)
        .collect();
    t.word_ids = t
        .words
        .iter()
        .map(|w| t.encode(&format!(" {w}"))[0])
        .collect();
    if t.words.len() < 8 {
        return Err(bad(
            file,
            "too few common English words are single tokens under this tokenizer \
             to make prompts of exact lengths",
        ));
    }
    // Every word after every other (and the first word of a text) in one probe.
    let mut probe = String::new();
    for a in &t.words {
        for b in t.words.iter().take(16) {
            probe.push(' ');
            probe.push_str(a);
            probe.push(' ');
            probe.push_str(b);
        }
    }
    t.joins_exactly = t.count(&probe) == 32 * t.words.len();
    Ok(t)
}

#[cfg(feature = "hf")]
fn engine(text: &str) -> Result<Engine, String> {
    text.parse()
        .map_err(|e| format!("not a usable Hugging Face tokenizer.json: {e}"))
}

#[cfg(not(feature = "hf"))]
fn engine(_: &str) -> Result<Engine, String> {
    Err(
        "this build reads no Hugging Face tokenizer.json (tpscope-tokens was built \
         without its `hf` feature)"
            .into(),
    )
}

/// `tokenizer_config.json` is optional; when present it must be a JSON object.
fn read_config(path: &Path) -> Result<ChatSpecials, TokenizerError> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(ChatSpecials::default());
    };
    let v: Value = serde_json::from_str(&text).map_err(|e| {
        bad(
            path,
            format!("not JSON ({e}); expected tokenizer_config.json"),
        )
    })?;
    let Some(o) = v.as_object() else {
        return Err(bad(path, "expected a JSON object (tokenizer_config.json)"));
    };
    // Special tokens are a string or {"content": "..."}.
    let token = |k: &str| match o.get(k) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Object(t)) => t.get("content").and_then(Value::as_str).map(str::to_string),
        _ => None,
    };
    let adds_bos = o.get("add_bos_token").and_then(Value::as_bool) != Some(false);
    Ok(ChatSpecials {
        bos_token: token("bos_token").filter(|_| adds_bos),
        eos_token: token("eos_token"),
        has_chat_template: o.contains_key("chat_template"),
    })
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}
