//! Hugging Face tokenizers from the committed fixtures (a Llama-3 and a Qwen2.5
//! `tokenizer.json`, see tests/data/README.md): loading, exact-length text, and
//! clear errors for files that are not tokenizers.

#![cfg(feature = "hf")]

use std::io::Write;
use std::path::{Path, PathBuf};

use tpscope_tokens::{Tokenizer, TokenizerError};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn hf(dir: &str) -> Tokenizer {
    format!("hf:{}", data(dir).display()).parse().unwrap()
}

#[test]
fn exact_length_prompts_are_exact_under_llama3_and_qwen() {
    for dir in ["llama3", "qwen2"] {
        let t = hf(dir);
        for n in [0, 1, 2, 7, 100, 513, 2048] {
            for seed in [0, 1, 42] {
                let text = t.text_with_tokens(n, seed);
                assert_eq!(t.count(&text), n, "{t} n={n} seed={seed}");
            }
        }
    }
}

#[test]
fn known_counts_match_the_python_tokenizers_package() {
    // Figures from `tokenizers` 0.23.3 (PyPI), encode(text, add_special_tokens=False).
    let text = "Hello, world! The quick brown fox 日本語 🤖 x=1234;";
    assert_eq!(hf("llama3").count(text), 18);
    assert_eq!(hf("qwen2").count(text), 21);
}

#[test]
fn names_identify_the_file_not_its_place() {
    let a = hf("qwen2");
    let b: Tokenizer = format!("hf:{}", data("qwen2/tokenizer.json").display())
        .parse()
        .unwrap();
    assert_eq!(a, b);
    assert!(a.name().starts_with("hf:qwen2@"), "{a}");
    assert_ne!(a, hf("llama3"));
    assert_ne!(a, Tokenizer::O200kBase);
    let sp = a.chat_specials().unwrap();
    assert_eq!(sp.eos_token.as_deref(), Some("<|im_end|>"));
    assert_eq!(sp.bos_token, None, "Qwen adds no BOS");
    assert_eq!(
        hf("llama3").chat_specials().unwrap().bos_token.as_deref(),
        Some("<|begin_of_text|>")
    );
}

fn bad_file(content: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("tokenizer.json");
    std::fs::File::create(&p)
        .unwrap()
        .write_all(content.as_bytes())
        .unwrap();
    let msg = format!("hf:{}", p.display())
        .parse::<Tokenizer>()
        .unwrap_err()
        .to_string();
    (dir, msg)
}

#[test]
fn json_that_is_not_a_tokenizer_is_a_clear_error() {
    let (dir, msg) = bad_file("{\"architectures\": [\"LlamaForCausalLM\"]}");
    assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
    assert!(msg.contains("JSON but not a tokenizer"), "{msg}");
    let (_d, msg) = bad_file("not json at all");
    assert!(msg.contains("not JSON"), "{msg}");
    let (_d, msg) = bad_file("{\"model\": {\"type\": \"BPE\", \"vocab\": 3}}");
    assert!(
        msg.contains("not a usable Hugging Face tokenizer.json"),
        "{msg}"
    );
}

#[test]
fn a_missing_file_or_directory_names_the_path() {
    let e = "hf:/nonexistent/model".parse::<Tokenizer>().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("/nonexistent/model"), "{msg}");
    assert!(msg.contains("tokenizer.json"), "{msg}");
    let empty = tempfile::tempdir().unwrap();
    let msg = format!("hf:{}", empty.path().display())
        .parse::<Tokenizer>()
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("model directory holding tokenizer.json"),
        "{msg}"
    );
    assert_eq!(
        "hf:".parse::<Tokenizer>().unwrap_err(),
        TokenizerError::NoPath
    );
    assert!(matches!(
        "gpt2".parse::<Tokenizer>().unwrap_err(),
        TokenizerError::Unknown(_)
    ));
}

/// vLLM's random prompts leave room for the BOS token the server adds
/// (`num_special_tokens_to_add()`); tpscope's were one token longer.
#[test]
fn special_tokens_the_server_adds_are_known() {
    assert_eq!(hf("llama3").added_special_tokens(), 1);
    assert_eq!(hf("qwen2").added_special_tokens(), 0);
    assert_eq!(Tokenizer::O200kBase.added_special_tokens(), 0);
}
