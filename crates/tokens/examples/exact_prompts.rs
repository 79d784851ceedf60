//! Prints tpscope's exact-length prompts as JSON lines `{"n": N, "seed": S,
//! "text": "..."}` for a tokenizer (`o200k_base`, `cl100k_base`, `hf:PATH`), so an
//! outside implementation can check their lengths
//! (`scripts/check_tokenizer_lengths.py` does, with the Python `tokenizers`).
//!
//! Usage: exact_prompts TOKENIZER N...

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(name) = args.next() else {
        eprintln!("usage: exact_prompts TOKENIZER N...");
        std::process::exit(2);
    };
    let tok: tpscope_tokens::Tokenizer = match name.parse() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    for n in args {
        let Ok(n) = n.parse::<usize>() else {
            eprintln!("`{n}` is not a token count");
            std::process::exit(2);
        };
        for seed in [0u64, 1, 42] {
            let text = tok.text_with_tokens(n, seed);
            println!(
                "{}",
                serde_json::json!({"n": n, "seed": seed, "text": text, "counted": tok.count(&text)})
            );
        }
    }
}
