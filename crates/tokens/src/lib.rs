//! Offline tokenizers: tiktoken's `o200k_base` and `cl100k_base` (embedded in the
//! binary) and Hugging Face `tokenizer.json` files (`hf:PATH`, loaded offline):
//! counting text, and making deterministic text of an exact token length
//! (synthetic prompts for `bench`, pseudo-output for `sim`). [`Tokenizer`] is the
//! one type every count in tpscope goes through.
#![warn(missing_docs)]

mod hf;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

pub use hf::{ChatSpecials, HfTokenizer};

/// An offline tokenizer. `Copy`: a Hugging Face tokenizer is loaded once per file
/// and kept for the life of the process.
#[derive(Clone, Copy, Default)]
pub enum Tokenizer {
    /// `o200k_base` (GPT-4o family). The default.
    #[default]
    O200kBase,
    /// `cl100k_base` (GPT-4, GPT-3.5).
    Cl100kBase,
    /// A Hugging Face `tokenizer.json` (`hf:PATH`).
    Hf(&'static HfTokenizer),
}

impl PartialEq for Tokenizer {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Tokenizer {}

impl std::hash::Hash for Tokenizer {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.name().hash(state);
    }
}

impl fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tokenizer({})", self.name())
    }
}

/// A `--tokenizer` value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenizerError {
    /// A name that is not known.
    #[error(
        "unknown tokenizer `{0}` (expected o200k_base, cl100k_base or hf:PATH to a tokenizer.json or a model directory)"
    )]
    Unknown(String),
    /// `hf:` with no path.
    #[error("`hf:` needs a path: hf:PATH to a tokenizer.json or a model directory holding one")]
    NoPath,
    /// A Hugging Face tokenizer file that is missing or malformed.
    #[error("{}: {problem}", path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What was expected and what was found.
        problem: String,
    },
}

/// The old name of [`TokenizerError`].
pub type UnknownTokenizer = TokenizerError;

impl FromStr for Tokenizer {
    type Err = TokenizerError;
    /// `o200k_base`, `cl100k_base`, or `hf:PATH` (which loads the file now).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "o200k_base" | "o200k" => Ok(Tokenizer::O200kBase),
            "cl100k_base" | "cl100k" => Ok(Tokenizer::Cl100kBase),
            _ => match s.strip_prefix("hf:") {
                Some("") => Err(TokenizerError::NoPath),
                Some(p) => Ok(Tokenizer::Hf(hf::load(std::path::Path::new(p))?)),
                None => Err(TokenizerError::Unknown(s.to_string())),
            },
        }
    }
}

impl fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Common English words; those that are one token with a leading space under a
/// tokenizer form its word list (checked at first use, not assumed).
pub(crate) const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there",
    "been", "if", "more", "when", "will", "would", "who", "so", "no", "model", "token", "time",
    "system", "data", "value", "stream", "server", "request", "first", "last", "queue", "batch",
    "cache", "memory", "speed", "light", "water", "river", "stone", "green", "house", "world",
    "people", "story", "number", "answer", "question", "small", "large", "quick", "brown", "fox",
    "jumps", "over", "lazy", "dog", "morning", "evening", "night", "day", "year", "city", "road",
    "music", "paper", "table", "window", "garden", "market", "energy", "power", "signal", "engine",
];

/// The words that encode as exactly one token each (with a leading space).
fn single_token_words(bpe: &CoreBPE) -> Vec<&'static str> {
    WORDS
        .iter()
        .copied()
        .filter(|w| bpe.encode_ordinary(&format!(" {w}")).len() == 1)
        .collect()
}

struct Loaded {
    bpe: &'static CoreBPE,
    words: Vec<&'static str>,
    word_ids: Vec<u32>,
}

/// The built-in tokenizer behind `t` (`None` for a Hugging Face one).
fn tiktoken(t: Tokenizer) -> Option<Tokenizer> {
    (!matches!(t, Tokenizer::Hf(_))).then_some(t)
}

fn loaded(t: Tokenizer) -> &'static Loaded {
    static O200K: OnceLock<Loaded> = OnceLock::new();
    static CL100K: OnceLock<Loaded> = OnceLock::new();
    let (cell, make): (&OnceLock<Loaded>, fn() -> &'static CoreBPE) = match t {
        Tokenizer::O200kBase => (&O200K, tiktoken_rs::o200k_base_singleton),
        // Callers pass built-in tokenizers only; a Hugging Face one is never here.
        Tokenizer::Cl100kBase | Tokenizer::Hf(_) => (&CL100K, tiktoken_rs::cl100k_base_singleton),
    };
    cell.get_or_init(|| {
        let bpe = make();
        let words = single_token_words(bpe);
        Loaded {
            word_ids: words
                .iter()
                .map(|w| bpe.encode_ordinary(&format!(" {w}"))[0])
                .collect(),
            words,
            bpe,
        }
    })
}

impl Tokenizer {
    /// The tokenizer's name as written in span logs (`o200k_base`, `cl100k_base`,
    /// `hf:<model>@<hash of the file>`).
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::O200kBase => "o200k_base",
            Tokenizer::Cl100kBase => "cl100k_base",
            Tokenizer::Hf(h) => h.name,
        }
    }

    /// What `--tokenizer` takes to load this tokenizer again: its name, or
    /// `hf:PATH` to the file it was loaded from.
    pub fn spec(self) -> String {
        match self {
            Tokenizer::Hf(h) => format!("hf:{}", h.path.display()),
            t => t.name().to_string(),
        }
    }

    /// Loads the tokenizer now (about 0.1 s in release), so the first use on a hot
    /// path does not pay for it. (A Hugging Face tokenizer is loaded when parsed.)
    pub fn warm(self) {
        if let Some(t) = tiktoken(self) {
            let _ = loaded(t);
        }
    }

    /// What the tokenizer's `tokenizer_config.json` says about chat-template tokens
    /// (`None` for the built-in tokenizers, which have no such file).
    pub fn chat_specials(self) -> Option<&'static ChatSpecials> {
        match self {
            Tokenizer::Hf(h) => Some(&h.specials),
            _ => None,
        }
    }

    /// Tokens in `text`, counted as ordinary text (special-token strings are text;
    /// no special tokens are added).
    pub fn count(self, text: &str) -> usize {
        match self {
            Tokenizer::Hf(h) => h.count(text),
            t => loaded(t).bpe.encode_ordinary(text).len(),
        }
    }

    /// Special tokens the model's server adds to a prompt (a BOS token): the
    /// tokenizer file's post-processor says; none for the built-in tokenizers.
    pub fn added_special_tokens(self) -> usize {
        match self {
            Tokenizer::Hf(h) => h.added_special_tokens(),
            _ => 0,
        }
    }

    /// Token ids of `text`, as [`Tokenizer::count`] counts them.
    pub fn encode(self, text: &str) -> Vec<u32> {
        match self {
            Tokenizer::Hf(h) => h.encode(text),
            t => loaded(t).bpe.encode_ordinary(text),
        }
    }

    fn words(self) -> &'static [&'static str] {
        match self {
            Tokenizer::Hf(h) => &h.words,
            t => &loaded(t).words,
        }
    }

    fn word_index(self, seed: u64, i: u64) -> usize {
        (mix(seed ^ mix(i)) % self.words().len() as u64) as usize
    }

    /// The token id of [`Tokenizer::word`]`(seed, i)` with its leading space (the
    /// simulator's output tokens, for prefix caching).
    pub fn word_id(self, seed: u64, i: u64) -> u32 {
        let k = self.word_index(seed, i);
        match self {
            Tokenizer::Hf(h) => h.word_ids[k],
            t => loaded(t).word_ids[k],
        }
    }

    /// The `i`-th word of the deterministic word stream for `seed`. Each word is a
    /// single token with its leading space, so `n` words joined are `n` tokens
    /// (checked for every tokenizer in the tests, and for Hugging Face files by
    /// [`Tokenizer::text_with_tokens`] itself).
    pub fn word(self, seed: u64, i: u64) -> &'static str {
        self.words()[self.word_index(seed, i)]
    }

    /// Text of exactly `n` tokens under this tokenizer: `n` single-token words, each
    /// with a leading space, chosen deterministically from `seed`.
    pub fn text_with_tokens(self, n: usize, seed: u64) -> String {
        let mut s = String::with_capacity(n * 7);
        for i in 0..n as u64 {
            s.push(' ');
            s.push_str(self.word(seed, i));
        }
        if let Tokenizer::Hf(h) = self
            && !h.joins_exactly
        {
            // A tokenizer whose pre-tokenizer merges across word boundaries would
            // break the one-word-one-token rule: trim or extend until exact.
            fix_length(self, &mut s, n, seed);
        }
        s
    }
}

/// Makes `s` exactly `n` tokens long by dropping or adding words at its end.
fn fix_length(t: Tokenizer, s: &mut String, n: usize, seed: u64) {
    let mut extra = n as u64;
    for _ in 0..64 {
        let have = t.count(s);
        if have == n {
            return;
        }
        if have > n {
            match s.rfind(' ') {
                Some(k) => s.truncate(k),
                None => s.clear(),
            }
        } else {
            s.push(' ');
            s.push_str(t.word(seed, extra));
            extra += 1;
        }
    }
}

/// SplitMix64 finaliser: a cheap, well-mixed hash of a 64-bit value.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_counts_match_tiktoken() {
        // o200k("Hello, world!") = [13225, 11, 2375, 0]
        assert_eq!(Tokenizer::O200kBase.count("Hello, world!"), 4);
        assert_eq!(Tokenizer::O200kBase.count(""), 0);
    }

    #[test]
    fn synthetic_text_has_the_exact_token_count() {
        for t in [Tokenizer::O200kBase, Tokenizer::Cl100kBase] {
            assert!(
                loaded(t).words.len() > 50,
                "{t}: too few single-token words"
            );
            for n in [0, 1, 2, 7, 100, 1000, 4096] {
                for seed in [0, 1, 42] {
                    let text = t.text_with_tokens(n, seed);
                    assert_eq!(t.count(&text), n, "{t} n={n} seed={seed}");
                }
            }
        }
    }

    #[test]
    fn names_parse() {
        assert_eq!(
            "o200k_base".parse::<Tokenizer>().unwrap(),
            Tokenizer::O200kBase
        );
        assert_eq!(
            "cl100k_base".parse::<Tokenizer>().unwrap(),
            Tokenizer::Cl100kBase
        );
        assert!("gpt2".parse::<Tokenizer>().is_err());
    }
}
