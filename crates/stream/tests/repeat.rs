//! The repeat shortcut of the OpenAI decoder (chunks that differ from the last
//! simple one only in their text are not parsed again) gives the account the
//! same facts as parsing every chunk: on generated streams that mix repeats with
//! escapes, control bytes, other ids, usage, finish reasons, reasoning, empty
//! text, trailing members the decoder skips or reads, and unparsable chunks,
//! and on the fixture streams.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use tpscope_model::Cause;
use tpscope_stream::openai::{self, StreamState, is_done, parse_chunk};
use tpscope_stream::{SseParser, StreamEnd};

/// The reference: every event parsed whole (no shortcut), as the decoder did
/// before it kept one.
fn reference(events: &[Vec<u8>], t0: Instant) -> StreamState {
    let mut acc = StreamState::new(true, true);
    for (i, data) in events.iter().enumerate() {
        if acc.end.is_some() {
            break;
        }
        let now = t0 + Duration::from_millis(i as u64);
        acc.event(now);
        if is_done(data) {
            if acc.completion_events == 0 {
                acc.fail(Cause::Malformed, String::new());
            } else {
                acc.done(now);
            }
            continue;
        }
        match parse_chunk(data) {
            Ok(c) => match c.server_error() {
                Some(e) => acc.fail(e.cause, String::new()),
                None => openai::absorb(&mut acc, &c, now),
            },
            Err(_) => acc.fail(Cause::Malformed, String::new()),
        }
    }
    acc
}

/// The decoder as the client runs it: the events framed as SSE, one per read.
fn decoded(events: &[Vec<u8>], t0: Instant) -> StreamState {
    let mut acc = StreamState::new(true, true);
    let mut parser = SseParser::new();
    for (i, data) in events.iter().enumerate() {
        let mut bytes = b"data: ".to_vec();
        bytes.extend_from_slice(data);
        bytes.extend_from_slice(b"\n\n");
        acc.push(&mut parser, &bytes, t0 + Duration::from_millis(i as u64));
    }
    acc
}

fn assert_same(a: &StreamState, b: &StreamState) {
    assert_eq!(a.content_chunks, b.content_chunks);
    assert_eq!(a.text, b.text);
    assert_eq!(a.first_token, b.first_token);
    assert_eq!(a.first_content, b.first_content);
    assert_eq!(a.last_token, b.last_token);
    assert_eq!(a.last_event, b.last_event);
    assert_eq!(a.usage, b.usage);
    assert_eq!(a.chunks, b.chunks);
    assert_eq!(a.response_id, b.response_id);
    assert_eq!(a.model, b.model);
    assert_eq!(a.finish_reason, b.finish_reason);
    assert_eq!(a.events, b.events);
    assert_eq!(a.completion_events, b.completion_events);
    // A parse failure's message is the decoder's own; its kind must agree.
    let kind = |e: &Option<StreamEnd>| match e {
        None => "open",
        Some(StreamEnd::Done(_)) => "done",
        Some(StreamEnd::Failed { .. }) => "failed",
    };
    assert_eq!(kind(&a.end), kind(&b.end));
    if let (Some(StreamEnd::Done(x)), Some(StreamEnd::Done(y))) = (&a.end, &b.end) {
        assert_eq!(x, y);
    }
}

/// Trailing top-level members: none, ones the decoder skips (as OpenAI's
/// `obfuscation`, the relay benchmark's `bench`), fields it reads, malformed.
const TAILS: &[&str] = &[
    "",
    "",
    r#","obfuscation":"Zq"}"#,
    r#","obfuscation":"x7Q4"}"#,
    r#","bench":{"seq":1,"sent_ns":20}}"#,
    r#","bench":{"seq":12,"sent_ns":345},"x":[true,null]}"#,
    r#" , "o" : [1,{"a":"\n"}] }"#,
    r#","usage":null}"#,
    r#","id":"z"}"#,
    r#","x":}"#,
    r#","x":1,}"#,
    r#","\u0078":1}"#,
    r#","x":"\q"}"#,
    r#","x":1}]"#,
];

/// One chunk of a generated stream: mostly the usual chunk with other text,
/// its closing brace replaced by the tail `TAILS[tail]` (when it has one).
fn chunk(kind: u8, text: &str, id: u8, tail: usize) -> Vec<u8> {
    let mut c = chunk_whole(kind, text, id);
    if !TAILS[tail].is_empty() && c.ends_with(b"}") {
        c.pop();
        c.extend_from_slice(TAILS[tail].as_bytes());
    }
    c
}

fn chunk_whole(kind: u8, text: &str, id: u8) -> Vec<u8> {
    let head = format!(
        r#"{{"id":"chatcmpl-{id}","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{{"#
    );
    let body = match kind {
        0..=5 => format!(r#""content":"{text}"}},"logprobs":null,"finish_reason":null}}]}}"#),
        6 => format!(r#""reasoning_content":"{text}"}},"logprobs":null,"finish_reason":null}}]}}"#),
        7 => format!(r#""content":"{text}"}},"logprobs":null,"finish_reason":"stop"}}]}}"#),
        8 => format!(
            r#""content":"{text}"}},"logprobs":null,"finish_reason":null}}],"usage":{{"prompt_tokens":3,"completion_tokens":{}}}}}"#,
            text.len()
        ),
        9 => format!(r#""role":"assistant","content":"{text}"}},"finish_reason":null}}]}}"#),
        10 => format!(r#""content":"{text}"}},"logprobs":null,"finish_reason":null}}]"#),
        _ => format!(r#""content":"{text}","refusal":"{text}"}},"finish_reason":null}}]}}"#),
    };
    format!("{head}{body}").into_bytes()
}

const TEXTS: &[&str] = &[
    " the",
    "",
    " caf\u{e9}",
    r#"a\"b"#,
    r"\n",
    r"\u00e9",
    "\u{1}",
    " word",
    "x",
    "\t",
];

proptest! {
    #[test]
    fn the_shortcut_gives_the_facts_of_full_parses(
        picks in prop::collection::vec(
            (0u8..14, 0usize..TEXTS.len(), 0u8..3, 0usize..TAILS.len()),
            1..40,
        ),
        done in any::<bool>(),
    ) {
        let mut events: Vec<Vec<u8>> = picks
            .iter()
            .map(|&(k, t, id, tail)| chunk(k, TEXTS[t], id, tail))
            .collect();
        if done {
            events.push(b"[DONE]".to_vec());
        }
        let t0 = Instant::now();
        assert_same(&decoded(&events, t0), &reference(&events, t0));
    }
}

#[test]
fn fixture_streams_give_the_facts_of_full_parses() {
    let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    let mut streams = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "sse") {
            continue;
        }
        let mut events = Vec::new();
        let mut named = false;
        SseParser::new()
            .push(&std::fs::read(&path).unwrap(), |e| {
                named |= !e.is_message();
                events.push(e.data.to_vec());
            })
            .unwrap();
        // Named events (Anthropic, Responses, errors) are another decoder's.
        if named {
            continue;
        }
        streams += 1;
        let t0 = Instant::now();
        assert_same(&decoded(&events, t0), &reference(&events, t0));
    }
    assert!(streams > 3, "only {streams} OpenAI fixture streams");
}
