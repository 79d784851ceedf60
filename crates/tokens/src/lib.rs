//! Offline tokenizers (tiktoken's `o200k_base` and `cl100k_base`, embedded in the
//! binary): counting text, and making deterministic text of an exact token length
//! (synthetic prompts for `bench`, pseudo-output for `sim`).

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

/// An offline tokenizer known by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Tokenizer {
    /// `o200k_base` (GPT-4o family). The default.
    #[default]
    O200kBase,
    /// `cl100k_base` (GPT-4, GPT-3.5).
    Cl100kBase,
}

/// A tokenizer name that is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tokenizer `{0}` (expected o200k_base or cl100k_base)")]
pub struct UnknownTokenizer(pub String);

impl FromStr for Tokenizer {
    type Err = UnknownTokenizer;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "o200k_base" | "o200k" => Ok(Tokenizer::O200kBase),
            "cl100k_base" | "cl100k" => Ok(Tokenizer::Cl100kBase),
            _ => Err(UnknownTokenizer(s.to_string())),
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
const WORDS: &[&str] = &[
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
}

fn loaded(t: Tokenizer) -> &'static Loaded {
    static O200K: OnceLock<Loaded> = OnceLock::new();
    static CL100K: OnceLock<Loaded> = OnceLock::new();
    let (cell, make): (&OnceLock<Loaded>, fn() -> &'static CoreBPE) = match t {
        Tokenizer::O200kBase => (&O200K, tiktoken_rs::o200k_base_singleton),
        Tokenizer::Cl100kBase => (&CL100K, tiktoken_rs::cl100k_base_singleton),
    };
    cell.get_or_init(|| {
        let bpe = make();
        Loaded {
            words: single_token_words(bpe),
            bpe,
        }
    })
}

impl Tokenizer {
    /// The tokenizer's name as written in span logs (`o200k_base`, `cl100k_base`).
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::O200kBase => "o200k_base",
            Tokenizer::Cl100kBase => "cl100k_base",
        }
    }

    /// Loads the tokenizer now (about 0.1 s in release), so the first use on a hot
    /// path does not pay for it.
    pub fn warm(self) {
        let _ = loaded(self);
    }

    /// Tokens in `text`, counted as ordinary text (special-token strings are text).
    pub fn count(self, text: &str) -> usize {
        loaded(self).bpe.encode_ordinary(text).len()
    }

    /// The `i`-th word of the deterministic word stream for `seed`. Each word is a
    /// single token with its leading space, so `n` words joined are `n` tokens.
    pub fn word(self, seed: u64, i: u64) -> &'static str {
        let words = &loaded(self).words;
        words[(mix(seed ^ mix(i)) % words.len() as u64) as usize]
    }

    /// Text of exactly `n` tokens under this tokenizer: `n` single-token words, each
    /// with a leading space, chosen deterministically from `seed`.
    pub fn text_with_tokens(self, n: usize, seed: u64) -> String {
        let mut s = String::with_capacity(n * 7);
        for i in 0..n as u64 {
            s.push(' ');
            s.push_str(self.word(seed, i));
        }
        s
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
