//! Microbenchmark of the client's hot path without I/O: chunk parsing, SSE
//! framing, and both together through `StreamState` (what the client does per
//! read). Prints nanoseconds per chunk. Run: `cargo bench -p tpscope-stream --bench parse`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use tpscope_stream::openai::{parse_chunk, parse_chunk_serde};
use tpscope_stream::{SseParser, StreamState};

/// A vLLM-shaped chat chunk carrying one token.
const CHAT: &str = r#"{"id":"chatcmpl-5d7c1e0b8f2a4c1e9a6b3c2d1e0f","object":"chat.completion.chunk","created":1732000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}"#;
/// The same with an escaped newline in the content.
const CHAT_ESCAPED: &str = r#"{"id":"chatcmpl-5d7c1e0b8f2a4c1e9a6b3c2d1e0f","object":"chat.completion.chunk","created":1732000000,"model":"meta-llama/Llama-3.1-8B-Instruct","choices":[{"index":0,"delta":{"content":".\n\n"},"logprobs":null,"finish_reason":null}]}"#;
/// OpenAI-shaped, with `usage: null`, `system_fingerprint` and `obfuscation`.
const OPENAI: &str = r#"{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":" image"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"Xq3k"}"#;

/// Runs `f` (which processes `per_call` chunks) for about `budget`, returns ns per chunk.
fn measure(budget: Duration, per_call: u64, mut f: impl FnMut()) -> f64 {
    for _ in 0..1000 {
        f();
    }
    let mut calls = 0u64;
    let start = Instant::now();
    let mut batch = 64;
    while start.elapsed() < budget {
        for _ in 0..batch {
            f();
        }
        calls += batch;
        batch = (batch * 2).min(1 << 16);
    }
    start.elapsed().as_nanos() as f64 / (calls * per_call) as f64
}

fn sse_bytes(data: &str, n: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for _ in 0..n {
        v.extend_from_slice(b"data: ");
        v.extend_from_slice(data.as_bytes());
        v.extend_from_slice(b"\n\n");
    }
    v
}

fn main() {
    // `cargo bench` passes `--bench`; a quick run under `cargo test --benches` too.
    let quick = std::env::args().any(|a| a == "--test")
        || std::env::var_os("TPSCOPE_BENCH_QUICK").is_some();
    let budget = if quick {
        Duration::from_millis(20)
    } else {
        Duration::from_millis(700)
    };
    println!("tpscope-stream hot path, ns per chunk (lower is better)");

    for (name, chunk) in [
        ("vLLM chat chunk", CHAT),
        ("escaped content", CHAT_ESCAPED),
        ("OpenAI chunk", OPENAI),
    ] {
        let bytes = chunk.as_bytes();
        let mut text = String::with_capacity(1 << 16);
        let ns = measure(budget, 1, || {
            let c = parse_chunk(black_box(bytes)).unwrap();
            black_box(c.collect_output(Some(&mut text)));
            if text.len() > 60_000 {
                text.clear();
            }
        });
        println!(
            "  parse_chunk + collect text  {name:<18} {ns:>7.1} ns  ({} bytes)",
            bytes.len()
        );
    }
    {
        let bytes = CHAT.as_bytes();
        let mut text = String::with_capacity(1 << 16);
        let ns = measure(budget, 1, || {
            let c = parse_chunk_serde(black_box(bytes)).unwrap();
            black_box(c.collect_output(Some(&mut text)));
            if text.len() > 60_000 {
                text.clear();
            }
        });
        println!("  (serde reference parser     vLLM chat chunk    {ns:>7.1} ns)");
    }

    for per_read in [1usize, 16] {
        let bytes = sse_bytes(CHAT, per_read);
        let mut parser = SseParser::new();
        let ns = measure(budget, per_read as u64, || {
            let n = parser.push(black_box(&bytes), |e| {
                black_box(e.data);
            });
            black_box(n.unwrap());
        });
        println!("  SSE framing                 {per_read:>2} event(s)/read  {ns:>7.1} ns");
    }
    {
        // An event split over two reads (copied into the parser's buffer).
        let bytes = sse_bytes(CHAT, 1);
        let (a, b) = bytes.split_at(bytes.len() / 2);
        let mut parser = SseParser::new();
        let ns = measure(budget, 1, || {
            parser.push(black_box(a), |_| {}).unwrap();
            parser
                .push(black_box(b), |e| {
                    black_box(e.data);
                })
                .unwrap();
        });
        println!("  SSE framing                 split over 2 reads {ns:>7.1} ns");
    }

    for per_read in [1usize, 16] {
        let bytes = sse_bytes(CHAT, per_read);
        let mut parser = SseParser::new();
        let mut state = StreamState::new(true, false);
        let now = Instant::now();
        let ns = measure(budget, per_read as u64, || {
            black_box(state.push(&mut parser, black_box(&bytes), now));
            if state.text.len() > 60_000 {
                state.text.clear();
            }
        });
        println!("  SSE + chunk + account       {per_read:>2} event(s)/read  {ns:>7.1} ns");
    }
}
