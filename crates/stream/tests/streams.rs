//! Golden SSE byte streams (tests/fixtures/*.sse, shaped like real vLLM, SGLang,
//! OpenAI, llama.cpp and gateway output) through the sans-I/O parsers: what each
//! yields, and that any split of the bytes into reads (and any line-end style)
//! yields the same events and the same account.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use tpscope_model::Cause;
use tpscope_stream::openai::{self as chunk, PartKind};
use tpscope_stream::{SseParser, StreamEnd, StreamState};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const FIXTURES: &[&str] = &[
    "openai_chat_usage.sse",
    "vllm_chat_continuous_usage.sse",
    "vllm_continuous_usage_empty_delta.sse",
    "sglang_reasoning.sse",
    "vllm_reasoning_field.sse",
    "llamacpp_chat.sse",
    "vllm_completions.sse",
    "gateway_choices_null_pings.sse",
    "openai_tool_calls.sse",
    "openai_refusal.sse",
    "vllm_error_midstream.sse",
    "multi_choice_n2.sse",
    "truncated_json.sse",
    "no_done.sse",
];

/// What a stream yields, without instants (which depend on how it was split).
#[derive(Debug, Clone, PartialEq)]
struct Account {
    events: Vec<(String, String)>,
    text: String,
    content_chunks: u64,
    tokens: u64,
    usage: Option<tpscope_stream::Usage>,
    finish_reason: Option<String>,
    response_id: Option<String>,
    end: Option<Result<(), Cause>>,
    chunk_tokens: Vec<u32>,
}

/// Feeds `reads` one by one, the i-th stamped `t0 + i ms`, then ends the body.
fn replay(reads: &[&[u8]]) -> (Account, StreamState, Instant) {
    let t0 = Instant::now();
    let mut parser = SseParser::new();
    let mut state = StreamState::new(true, true);
    let mut events = Vec::new();
    let mut copy = SseParser::new();
    for (i, r) in reads.iter().enumerate() {
        let now = t0 + Duration::from_millis(i as u64);
        state.push(&mut parser, r, now);
        copy.push(r, |e| {
            events.push((
                String::from_utf8_lossy(e.event).into_owned(),
                String::from_utf8_lossy(e.data).into_owned(),
            ))
        })
        .unwrap();
    }
    copy.finish(|e| {
        events.push((
            String::from_utf8_lossy(e.event).into_owned(),
            String::from_utf8_lossy(e.data).into_owned(),
        ))
    });
    state.end_of_body(&mut parser, t0 + Duration::from_millis(reads.len() as u64));
    let account = Account {
        events,
        text: state.text.clone(),
        content_chunks: state.content_chunks,
        tokens: state.tokens(),
        usage: state.usage,
        finish_reason: state.finish_reason.clone(),
        response_id: state.response_id.clone(),
        end: state.end.as_ref().map(|e| match e {
            StreamEnd::Done(_) => Ok(()),
            StreamEnd::Failed { cause, .. } => Err(*cause),
        }),
        chunk_tokens: state
            .chunks
            .as_ref()
            .unwrap()
            .iter()
            .map(|m| m.tokens)
            .collect(),
    };
    (account, state, t0)
}

fn whole(name: &str) -> Account {
    replay(&[&fixture(name)]).0
}

fn with_line_ends(bytes: &[u8], end: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() * 2);
    for &b in bytes {
        if b == b'\n' {
            out.extend_from_slice(end);
        } else {
            out.push(b);
        }
    }
    out
}

#[test]
fn openai_usage_chunk_with_details_and_escaped_text() {
    let a = whole("openai_chat_usage.sse");
    assert_eq!(a.end, Some(Ok(())));
    assert_eq!(a.text, "The image shows\n\"é\" 😀");
    assert_eq!(
        a.content_chunks, 3,
        "the role-only first chunk is not a token"
    );
    assert_eq!(a.tokens, 46);
    let u = a.usage.unwrap();
    assert_eq!(
        (
            u.prompt_tokens,
            u.completion_tokens,
            u.cached_tokens,
            u.reasoning_tokens
        ),
        (Some(1117), Some(46), Some(1024), Some(0))
    );
    assert_eq!(a.finish_reason.as_deref(), Some("stop"));
    assert_eq!(
        a.response_id.as_deref(),
        Some("chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG")
    );
    assert_eq!(a.events.len(), 7);
}

#[test]
fn vllm_continuous_usage_takes_the_last_and_marks_multi_token_chunks() {
    let a = whole("vllm_chat_continuous_usage.sse");
    assert_eq!(a.end, Some(Ok(())));
    assert_eq!(a.text, "Hello! How can I");
    assert_eq!(a.tokens, 5);
    assert_eq!(a.content_chunks, 3);
    assert_eq!(
        a.chunk_tokens,
        [1, 3, 1],
        "growth of completion_tokens per chunk"
    );
    assert_eq!(a.finish_reason.as_deref(), Some("length"));
}

#[test]
fn usage_on_empty_content_chunks_is_carried_to_the_next_chunk() {
    // vLLM's continuous usage stats on a token that decoded to no text yet: its
    // growth belongs to the next chunk with text (what broke: 0 of 20,156 chunks
    // counted as more than one token).
    let a = whole("vllm_continuous_usage_empty_delta.sse");
    assert_eq!(a.end, Some(Ok(())));
    assert_eq!(a.text, "Caf\u{e9} au lait");
    assert_eq!(a.tokens, 6);
    assert_eq!(a.content_chunks, 2);
    assert_eq!(a.chunk_tokens, [1, 4], "1 + the empty chunk's 1 + 3");
}

#[test]
fn a_stream_of_nothing_but_done_is_malformed() {
    // What broke: a 200 stream with no completion counted as ok with 0 tokens.
    let (a, state, _) = replay(&[b"data: [DONE]\n\n"]);
    assert_eq!(a.end, Some(Err(Cause::Malformed)));
    let Some(StreamEnd::Failed { message, .. }) = &state.end else {
        panic!()
    };
    assert!(message.contains("before any completion chunk"), "{message}");
    // JSON events that are not completion chunks (another API's stream) either.
    let (a, _, _) = replay(&[b"data: {\"token\":{\"text\":\"hi\"}}\n\ndata: [DONE]\n\n"]);
    assert_eq!(a.end, Some(Err(Cause::Malformed)));
    // A completion that generated nothing (only a role and a finish) is still ok.
    let (a, _, _) = replay(&[
        b"data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
    ]);
    assert_eq!(a.end, Some(Ok(())));
}

#[test]
fn sglang_reasoning_content_counts_as_output() {
    let (a, state, t0) = replay(&[&fixture("sglang_reasoning.sse")]);
    assert_eq!(a.end, Some(Ok(())));
    assert_eq!(a.text, "Okay, the user asks 1+1.\n\n2");
    assert_eq!(a.content_chunks, 3);
    assert_eq!(a.tokens, 15);
    assert_eq!(state.first_token, Some(t0));
    // Split before the answer: reasoning is the first token, the answer comes later.
    let bytes = fixture("sglang_reasoning.sse");
    let at = find(&bytes, b"\"content\":\"\\n\\n2\"");
    let (_, state, t0) = replay(&[&bytes[..at], &bytes[at..]]);
    assert_eq!(state.first_token, Some(t0));
    assert_eq!(state.first_content, Some(t0 + Duration::from_millis(1)));
}

#[test]
fn vllm_reasoning_field_and_usage_on_the_finish_chunk() {
    let a = whole("vllm_reasoning_field.sse");
    assert_eq!(a.end, Some(Ok(())));
    assert_eq!(a.text, "Let me thinkYes.");
    assert_eq!(a.content_chunks, 2);
    assert_eq!(a.tokens, 10);
    assert_eq!(a.usage.unwrap().reasoning_tokens, Some(7));
    assert_eq!(a.finish_reason.as_deref(), Some("stop"));
}

#[test]
fn llamacpp_usage_and_timings_on_the_finish_chunk() {
    let a = whole("llamacpp_chat.sse");
    assert_eq!(a.end, Some(Ok(())));
    assert_eq!(a.text, "Sure, here");
    assert_eq!(a.content_chunks, 2);
    assert_eq!(a.tokens, 3);
    assert_eq!(a.usage.unwrap().prompt_tokens, Some(20));
    assert_eq!(a.finish_reason.as_deref(), Some("stop"));
}

#[test]
fn legacy_completions_text() {
    let a = whole("vllm_completions.sse");
    assert_eq!(a.end, Some(Ok(())));
    assert_eq!(a.text, " San Francisco is");
    assert_eq!(a.content_chunks, 3);
    assert_eq!(a.tokens, 3);
    assert_eq!(a.response_id.as_deref(), Some("cmpl-3f2e"));
}

#[test]
fn gateway_comments_named_events_null_and_missing_choices() {
    let a = whole("gateway_choices_null_pings.sse");
    assert_eq!(a.end, Some(Ok(())));
    assert_eq!(a.text, "Hi!");
    assert_eq!(a.content_chunks, 2);
    assert_eq!(a.tokens, 2);
    // The keep-alive event is seen by the SSE layer but is not a chunk.
    assert!(a.events.iter().any(|(e, _)| e == "keepalive"));
}

#[test]
fn tool_call_fragments_and_refusals_are_output() {
    let a = whole("openai_tool_calls.sse");
    assert_eq!(a.end, Some(Ok(())));
    assert_eq!(a.text, "get_weather{\"location\":\"Paris\"}");
    assert_eq!(a.content_chunks, 3);
    assert_eq!(a.finish_reason.as_deref(), Some("tool_calls"));
    let a = whole("openai_refusal.sse");
    assert_eq!(a.text, "I can't help with that.");
    assert_eq!(a.content_chunks, 1);
}

#[test]
fn error_in_the_stream_fails_with_its_code() {
    let (a, state, _) = replay(&[&fixture("vllm_error_midstream.sse")]);
    assert_eq!(a.end, Some(Err(Cause::Http5xx)));
    assert_eq!(a.tokens, 1, "tokens before the error are kept");
    let Some(StreamEnd::Failed { message, .. }) = &state.end else {
        panic!()
    };
    assert!(message.contains("The engine is dead."), "{message}");
    // A 429-coded error and an `event: error` event.
    let bytes = b"data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"error\":{\"message\":\"busy\",\"code\":\"429\"}}\n\n";
    assert_eq!(replay(&[bytes]).0.end, Some(Err(Cause::Http429)));
    let bytes = b"event: error\ndata: {\"error\":{\"message\":\"overloaded\",\"type\":\"overloaded_error\"}}\n\n";
    let (a, state, _) = replay(&[bytes]);
    assert_eq!(a.end, Some(Err(Cause::Http5xx)));
    let Some(StreamEnd::Failed { message, .. }) = &state.end else {
        panic!()
    };
    assert!(message.contains("overloaded"), "{message}");
    let (a, _, _) = replay(&[b"data: {\"object\":\"error\",\"message\":\"bad\",\"code\":400}\n\n"]);
    assert_eq!(a.end, Some(Err(Cause::Http4xx)));
}

#[test]
fn several_choices_are_all_output() {
    let a = whole("multi_choice_n2.sse");
    assert_eq!(a.text, "ABba");
    assert_eq!(a.content_chunks, 3);
    assert_eq!(a.finish_reason.as_deref(), Some("stop"));
}

#[test]
fn cut_json_is_malformed_and_a_missing_done_is_a_disconnect() {
    let a = whole("truncated_json.sse");
    assert_eq!(a.end, Some(Err(Cause::Malformed)));
    assert_eq!(a.tokens, 1);
    let a = whole("no_done.sse");
    assert_eq!(a.end, Some(Err(Cause::Disconnect)));
    assert_eq!(a.tokens, 2);
}

#[test]
fn events_after_done_are_ignored() {
    let a = whole("openai_refusal.sse");
    let mut bytes = fixture("openai_refusal.sse");
    bytes.extend_from_slice(
        b"data: {\"choices\":[{\"delta\":{\"content\":\"late\"}}]}\n\ndata: garbage\n\n",
    );
    let b = replay(&[&bytes]).0;
    assert_eq!(b.end, Some(Ok(())));
    assert_eq!(b.text, a.text);
}

#[test]
fn each_event_is_stamped_by_the_read_that_completed_it() {
    let bytes = fixture("llamacpp_chat.sse");
    // Cut inside the first content event ("Sure"): its read is the second one.
    let at = find(&bytes, b"Sure") + 2;
    let (_, state, t0) = replay(&[&bytes[..at], &bytes[at..]]);
    assert_eq!(state.first_token, Some(t0 + Duration::from_millis(1)));
    assert_eq!(
        state.last_token,
        Some(t0 + Duration::from_millis(1)),
        "one read completed both content events"
    );
    let marks = state.chunks.unwrap();
    assert_eq!(
        marks.iter().map(|m| m.offset).collect::<Vec<_>>(),
        [Duration::ZERO, Duration::ZERO]
    );
    // One event per read: each gets its own instant.
    let reads: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    let (_, state, t0) = replay(&reads);
    let first_content_line = reads
        .iter()
        .position(|r| find_opt(r, b"Sure").is_some())
        .unwrap();
    // The event completes at the blank line after its data line.
    assert_eq!(
        state.first_token,
        Some(t0 + Duration::from_millis(first_content_line as u64 + 1))
    );
}

#[test]
fn every_two_way_split_gives_the_same_account() {
    for name in FIXTURES {
        let bytes = fixture(name);
        let expected = whole(name);
        for k in 0..=bytes.len() {
            let got = replay(&[&bytes[..k], &bytes[k..]]).0;
            assert_eq!(got, expected, "{name} split at {k}");
        }
    }
}

#[test]
fn byte_at_a_time_and_other_line_ends_give_the_same_account() {
    for name in FIXTURES {
        let bytes = fixture(name);
        let expected = whole(name);
        let ones: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(replay(&ones).0, expected, "{name} byte by byte");
        for end in [&b"\r\n"[..], b"\r"] {
            let v = with_line_ends(&bytes, end);
            assert_eq!(replay(&[&v]).0, expected, "{name} with {end:?}");
            let ones: Vec<&[u8]> = v.chunks(1).collect();
            assert_eq!(
                replay(&ones).0,
                expected,
                "{name} with {end:?} byte by byte"
            );
        }
        let mut bom = vec![0xEF, 0xBB, 0xBF];
        bom.extend_from_slice(&bytes);
        assert_eq!(
            replay(&[&bom[..2], &bom[2..]]).0,
            expected,
            "{name} with a BOM"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_split_gives_the_same_events(cuts in prop::collection::vec(0.0f64..1.0, 0..12), style in 0usize..3, which in 0..FIXTURES.len()) {
        let name = FIXTURES[which];
        let expected = whole(name);
        let bytes = match style {
            0 => fixture(name),
            1 => with_line_ends(&fixture(name), b"\r\n"),
            _ => with_line_ends(&fixture(name), b"\r"),
        };
        let mut points: Vec<usize> = cuts.iter().map(|c| (c * bytes.len() as f64) as usize).collect();
        points.sort_unstable();
        let mut reads = Vec::new();
        let mut prev = 0;
        for p in points {
            reads.push(&bytes[prev..p]);
            prev = p;
        }
        reads.push(&bytes[prev..]);
        prop_assert_eq!(replay(&reads).0, expected);
    }
}

#[test]
fn part_kinds_are_reported() {
    let c = chunk::parse_chunk(br#"{"choices":[{"delta":{"reasoning_content":"r","content":"c","refusal":"n","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}}]}"#).unwrap();
    let mut kinds = Vec::new();
    for choice in c.choices() {
        choice.for_each_part(|k, s| kinds.push((k, s.raw().to_string())));
    }
    assert_eq!(
        kinds,
        [
            (PartKind::Reasoning, "r".to_string()),
            (PartKind::Content, "c".into()),
            (PartKind::Refusal, "n".into()),
            (PartKind::ToolCall, "f".into()),
            (PartKind::ToolCall, "{}".into()),
        ]
    );
}

#[test]
fn non_streaming_answers_parse_with_the_same_types() {
    let body = br#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there","reasoning_content":null,"tool_calls":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#;
    let c = chunk::parse_response(body).unwrap();
    let mut text = String::new();
    assert!(c.collect_output(Some(&mut text)).content);
    assert_eq!(text, "Hello there");
    assert_eq!(c.usage.unwrap().completion_tokens, Some(2));
    assert_eq!(c.finish_reason().unwrap().raw(), "stop");
    let legacy = br#"{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":"abc","finish_reason":"length"}],"usage":null}"#;
    let c = chunk::parse_response(legacy).unwrap();
    let mut text = String::new();
    c.collect_output(Some(&mut text));
    assert_eq!(text, "abc");
    assert!(c.usage.is_none());
}

fn find(hay: &[u8], needle: &[u8]) -> usize {
    find_opt(hay, needle)
        .unwrap_or_else(|| panic!("{:?} not found", String::from_utf8_lossy(needle)))
}

fn find_opt(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
