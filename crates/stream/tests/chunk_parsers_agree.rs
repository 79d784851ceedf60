//! The fast chunk scanner (`parse_chunk`) against the serde reference
//! (`parse_chunk_serde`): same result, or both reject, on every fixture event, on
//! every single-byte corruption of real chunks, and on generated chunks.

use proptest::prelude::*;
use serde_json::{Value, json};
use tpscope_stream::SseParser;
use tpscope_stream::openai::{parse_chunk, parse_chunk_serde};

fn agree(data: &[u8]) {
    let fast = parse_chunk(data);
    let reference = parse_chunk_serde(data);
    match (&fast, &reference) {
        (Ok(a), Ok(b)) => assert_eq!(
            a,
            b,
            "different results for {:?}",
            String::from_utf8_lossy(data)
        ),
        (Err(_), Err(_)) => {}
        _ => panic!(
            "fast {} / serde {} on {:?}: {:?} vs {:?}",
            fast.is_ok(),
            reference.is_ok(),
            String::from_utf8_lossy(data),
            fast.as_ref().err(),
            reference.as_ref().err()
        ),
    }
}

fn fixture_events() -> Vec<Vec<u8>> {
    let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sse") {
            let bytes = std::fs::read(&path).unwrap();
            let mut p = SseParser::new();
            p.push(&bytes, |e| out.push(e.data.to_vec())).unwrap();
        }
    }
    out.retain(|d| d != b"[DONE]");
    assert!(out.len() > 40);
    out
}

#[test]
fn fixture_events_parse_the_same() {
    for data in fixture_events() {
        agree(&data);
    }
}

#[test]
fn every_single_byte_corruption_is_judged_the_same() {
    let replacements = b"\"\\{}[],:x0- n1.eE\t/u";
    for data in fixture_events().iter().take(24) {
        for i in 0..data.len() {
            for &r in replacements {
                let mut d = data.clone();
                d[i] = r;
                agree(&d);
            }
            agree(&data[..i]);
            let mut removed = data.clone();
            removed.remove(i);
            agree(&removed);
        }
    }
}

#[test]
fn edge_cases_are_judged_the_same() {
    let cases: &[&str] = &[
        "{}",
        " { } ",
        "null",
        "{} x",
        r#"{"choices":null}"#,
        r#"{"choices":[]}"#,
        r#"{"choices":{}}"#,
        r#"{"choices":[null]}"#,
        r#"{"choices":[{"delta":null,"message":null,"text":null,"index":null}]}"#,
        r#"{"choices":[{"index":-0}]}"#,
        r#"{"choices":[{"index":-1}]}"#,
        r#"{"choices":[{"index":1.0}]}"#,
        r#"{"choices":[{"index":4294967296}]}"#,
        r#"{"choices":[{"index":01}]}"#,
        r#"{"usage":{"completion_tokens":18446744073709551615}}"#,
        r#"{"usage":{"completion_tokens":18446744073709551616}}"#,
        r#"{"usage":{"completion_tokens":1e3}}"#,
        r#"{"usage":{"completion_tokens_details":null,"prompt_tokens_details":{"cached_tokens":null}}}"#,
        r#"{"usage":{"completion_tokens":1,"completion_tokens":2}}"#,
        r#"{"id":"a","id":"b"}"#,
        r#"{"\u0069d":"escaped key"}"#,
        r#"{"choices":[{"delta":{"\u0063ontent":"x"}}]}"#,
        r#"{"choices":[{"delta":{"content":"\ud83d\ude00 \u00e9 \n \" \\ \/"}}]}"#,
        r#"{"choices":[{"delta":{"content":"\x"}}]}"#,
        r#"{"choices":[{"delta":{"content":"\u12"}}]}"#,
        r#"{"choices":[{"delta":{"content":"é日本"}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"function":null},{"function":{"name":null,"arguments":"{}"}},{}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":null}}]}"#,
        r#"{"error":null}"#,
        r#"{"error":"boom"}"#,
        r#"{"error":{"message":"m","code":[1,{"a":true}]}}"#,
        r#"{"object":"error","message":"bad","code":400}"#,
        r#"{"x":[1,2,[3,{"y":[false,true,null,-1.5e-3]}]],"choices":[]}"#,
        r#"{"x":tru}"#,
        r#"{"x":nul}"#,
        r#"{"x":1.}"#,
        r#"{"x":-}"#,
        r#"{"x":1e}"#,
        r#"{"x":[1,]}"#,
        r#"{"x":1,}"#,
        r#"{,}"#,
        r#"{"x"}"#,
        r#"{"x":"unterminated}"#,
        "{\"choices\":[{\"text\":\"a\"}]}\n",
    ];
    for c in cases {
        agree(c.as_bytes());
    }
    // A top-level array is not a chunk (serde's derive reads arrays positionally).
    assert!(parse_chunk(b"[]").is_err());
    assert!(parse_chunk(br#"["id"]"#).is_err());
    assert!(parse_chunk(b"{\"x\":\"tab\there\"}").is_err());
    // Nesting: fine to 100 levels; the scanner (recursive) stops at 128, where
    // serde_json, skipping iteratively, would go on.
    let nested = |n: usize| format!("{{\"x\":{}{}}}", "[".repeat(n), "]".repeat(n));
    agree(nested(100).as_bytes());
    assert!(parse_chunk(nested(100).as_bytes()).is_ok());
    assert!(parse_chunk(nested(100_000).as_bytes()).is_err());
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z ]{0,12}",
        any::<String>().prop_map(|s| s.chars().take(10).collect()),
        Just("line\nbreak \"quoted\" \\ tab\t".to_string()),
    ]
}

fn opt_text() -> impl Strategy<Value = Value> {
    prop_oneof![Just(Value::Null), text().prop_map(Value::String)]
}

fn extra() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        text().prop_map(Value::String),
        Just(json!({"content": [{"token": "x", "logprob": -0.1, "bytes": [120]}]})),
    ]
}

fn delta() -> impl Strategy<Value = Value> {
    (opt_text(), opt_text(), opt_text(), opt_text(), prop::option::of(opt_text()), extra(), any::<u8>()).prop_map(
        |(content, reasoning_content, reasoning, refusal, tool_args, junk, mask)| {
            let mut m = serde_json::Map::new();
            if mask & 1 != 0 {
                m.insert("role".into(), json!("assistant"));
            }
            if mask & 2 != 0 {
                m.insert("content".into(), content);
            }
            if mask & 4 != 0 {
                m.insert("reasoning_content".into(), reasoning_content);
            }
            if mask & 8 != 0 {
                m.insert("reasoning".into(), reasoning);
            }
            if mask & 16 != 0 {
                m.insert("refusal".into(), refusal);
            }
            if let Some(args) = tool_args {
                m.insert(
                    "tool_calls".into(),
                    json!([{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": args}}]),
                );
            }
            if mask & 32 != 0 {
                m.insert("unknown_field".into(), junk);
            }
            Value::Object(m)
        },
    )
}

fn chunk() -> impl Strategy<Value = Value> {
    let choice = (
        delta(),
        opt_text(),
        prop::option::of(0u32..4),
        any::<u8>(),
        extra(),
    )
        .prop_map(|(d, text, index, mask, junk)| {
            let mut m = serde_json::Map::new();
            if let Some(i) = index {
                m.insert("index".into(), json!(i));
            }
            if mask & 1 != 0 {
                m.insert("delta".into(), d);
            } else if mask & 2 != 0 {
                m.insert("message".into(), d);
            } else {
                m.insert("text".into(), text);
            }
            m.insert(
                "finish_reason".into(),
                if mask & 4 != 0 {
                    json!("stop")
                } else {
                    Value::Null
                },
            );
            m.insert("logprobs".into(), junk);
            Value::Object(m)
        });
    let usage = prop::option::of((0u64..100_000, 0u64..100_000, prop::option::of(0u64..100)))
        .prop_map(|u| match u {
            None => Value::Null,
            Some((p, c, r)) => json!({
                "prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c,
                "completion_tokens_details": r.map(|r| json!({"reasoning_tokens": r})),
                "prompt_tokens_details": {"cached_tokens": p / 2}
            }),
        });
    (
        prop::collection::vec(choice, 0..3),
        usage,
        any::<u8>(),
        text(),
    )
        .prop_map(|(choices, usage, mask, id)| {
            let mut m = serde_json::Map::new();
            m.insert("id".into(), Value::String(id));
            m.insert("object".into(), json!("chat.completion.chunk"));
            m.insert("created".into(), json!(1_732_000_000u64));
            m.insert("model".into(), json!("org/model-8B"));
            match mask % 3 {
                0 => {
                    m.insert("choices".into(), Value::Array(choices));
                }
                1 => {
                    m.insert("choices".into(), Value::Null);
                }
                _ => {}
            }
            if mask & 8 != 0 {
                m.insert("usage".into(), usage);
            }
            if mask & 16 != 0 {
                m.insert("error".into(), json!({"message": "boom", "code": 503}));
            }
            Value::Object(m)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn generated_chunks_parse_the_same(v in chunk(), pretty in any::<bool>()) {
        let bytes = if pretty { serde_json::to_vec_pretty(&v).unwrap() } else { serde_json::to_vec(&v).unwrap() };
        let fast = parse_chunk(&bytes);
        prop_assert!(fast.is_ok(), "{:?} on {}", fast.err(), String::from_utf8_lossy(&bytes));
        prop_assert_eq!(fast.unwrap(), parse_chunk_serde(&bytes).unwrap());
    }
}
