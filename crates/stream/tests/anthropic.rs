//! Anthropic Messages streams (tests/fixtures/anthropic_*.sse, shaped like the
//! documented wire format) and hand-made events through the `Anthropic` decoder
//! and the run-time `Dialect`: output, reasoning, tool input, usage, the
//! `message_stop` end, `ping`, `error`, a cut stream; and any split of the bytes
//! yields the same account.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use tpscope_model::Cause;
use tpscope_stream::anthropic::Anthropic;
use tpscope_stream::{Dialect, StreamAccount, StreamEnd, Usage};

mod common;

use common::{Facts, facts, fixture, replay};

fn lines(bytes: &[u8]) -> Vec<&[u8]> {
    bytes.split_inclusive(|&b| b == b'\n').collect()
}

#[test]
fn text_stream_counts_deltas_and_takes_usage_from_message_delta() {
    let bytes = fixture("anthropic_text.sse");
    let (a, t0) = replay(StreamAccount::<Anthropic>::new(true, true), &lines(&bytes));
    assert_eq!(
        facts(&a),
        Facts {
            text: "Hello!\né".into(),
            content_chunks: 2,
            tokens: 15,
            usage: Some(Usage {
                prompt_tokens: Some(25),
                completion_tokens: Some(15),
                reasoning_tokens: None,
                cached_tokens: Some(0),
            }),
            finish_reason: Some("end_turn".into()),
            response_id: Some("msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY".into()),
            // ping is a keep-alive, not a data event.
            events: 7,
            end: Some(Ok(())),
        }
    );
    // Lines: message_start 0-2, block start 3-5, ping 6-8, first delta's data line
    // is read 10 and its blank line read 11.
    assert_eq!(a.first_token, Some(t0 + Duration::from_millis(11)));
    assert_eq!(a.first_content, a.first_token);
    assert_eq!(a.last_token, Some(t0 + Duration::from_millis(14)));
    assert_eq!(a.chunks.as_ref().map(Vec::len), Some(2));
    let Some(StreamEnd::Done(at)) = a.end else {
        panic!("not done")
    };
    assert_eq!(at, t0 + Duration::from_millis(23));
}

#[test]
fn thinking_and_tool_input_are_output_signatures_are_not() {
    let bytes = fixture("anthropic_thinking_tools.sse");
    let (a, _) = replay(StreamAccount::<Anthropic>::new(true, false), &[&bytes]);
    let f = facts(&a);
    assert_eq!(
        f.text,
        "Let me check the weather.get_weather{\"location\": \"San Francisco, CA\"}"
    );
    // thinking_delta, tool_use start (its name), two non-empty input_json_deltas.
    assert_eq!(f.content_chunks, 4);
    assert_eq!(f.tokens, 89);
    assert_eq!(f.finish_reason.as_deref(), Some("tool_use"));
    // The whole prompt: input + cache creation + cache reads.
    assert_eq!(f.usage.unwrap().prompt_tokens, Some(582));
    assert_eq!(f.usage.unwrap().cached_tokens, Some(100));
    assert_eq!(f.end, Some(Ok(())));
}

#[test]
fn reasoning_first_then_content_sets_first_content_later() {
    let bytes = fixture("anthropic_thinking_tools.sse");
    let (a, _) = replay(
        StreamAccount::<Anthropic>::new(false, false),
        &lines(&bytes),
    );
    assert!(a.first_content.unwrap() > a.first_token.unwrap());
    assert!(a.text.is_empty());
}

#[test]
fn error_event_fails_with_overloaded_as_5xx() {
    let bytes = fixture("anthropic_overloaded.sse");
    let (a, _) = replay(StreamAccount::<Anthropic>::new(true, false), &[&bytes]);
    let f = facts(&a);
    assert_eq!(f.text, "Par");
    assert_eq!(f.tokens, 1);
    assert_eq!(
        f.end,
        Some(Err((
            Cause::Http5xx,
            "error event in the stream: Overloaded".into()
        )))
    );
}

#[test]
fn error_types_map_to_causes() {
    for (kind, cause) in [
        ("rate_limit_error", Cause::Http429),
        ("invalid_request_error", Cause::Http4xx),
        ("api_error", Cause::Http5xx),
        ("something_new", Cause::Http5xx),
    ] {
        let ev = format!(
            "event: error\ndata: {{\"type\":\"error\",\"error\":{{\"type\":\"{kind}\"}}}}\n\n"
        );
        let (a, _) = replay(
            StreamAccount::<Anthropic>::new(false, false),
            &[ev.as_bytes()],
        );
        assert_eq!(
            facts(&a).end,
            Some(Err((cause, format!("error event in the stream: {kind}")))),
            "{kind}"
        );
    }
}

#[test]
fn stream_without_message_stop_is_a_disconnect() {
    let bytes = fixture("anthropic_cut.sse");
    let (a, _) = replay(StreamAccount::<Anthropic>::new(true, false), &[&bytes]);
    assert_eq!(
        facts(&a).end,
        Some(Err((
            Cause::Disconnect,
            "the stream ended without event: message_stop".into()
        )))
    );
    // The run-time dialect names the same end marker.
    let (d, _) = replay(Dialect::Anthropic.account(true, false), &[&bytes]);
    assert_eq!(facts(&d), facts(&a));
}

#[test]
fn data_that_does_not_parse_is_malformed() {
    let (a, _) = replay(
        StreamAccount::<Anthropic>::new(false, false),
        &[b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\n\n"],
    );
    assert!(matches!(
        a.end,
        Some(StreamEnd::Failed {
            cause: Cause::Malformed,
            ..
        })
    ));
}

#[test]
fn event_name_decides_when_data_has_no_type() {
    let (a, _) = replay(
        StreamAccount::<Anthropic>::new(true, false),
        &[
            b"event: content_block_delta\ndata: {\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n",
            b"event: message_stop\ndata: {}\n\n",
        ],
    );
    assert_eq!(a.text, "x");
    assert!(a.is_done());
}

#[test]
fn dialect_openai_and_anthropic_agree_with_their_decoders() {
    for name in [
        "anthropic_text.sse",
        "anthropic_thinking_tools.sse",
        "anthropic_overloaded.sse",
    ] {
        let bytes = fixture(name);
        let (a, _) = replay(StreamAccount::<Anthropic>::new(true, true), &lines(&bytes));
        let (d, _) = replay(Dialect::Anthropic.account(true, true), &lines(&bytes));
        assert_eq!(facts(&a), facts(&d), "{name}");
    }
    let bytes = fixture("openai_chat_usage.sse");
    let (o, _) = replay(tpscope_stream::StreamState::new(true, true), &lines(&bytes));
    let (d, _) = replay(Dialect::OpenAi.account(true, true), &lines(&bytes));
    assert_eq!(facts(&o), facts(&d));
}

#[test]
fn whole_anthropic_answer_is_absorbed() {
    let body = br#"{"id":"msg_9","type":"message","role":"assistant","model":"m",
        "content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Hi there"},
                   {"type":"tool_use","id":"t","name":"f","input":{"a":1}}],
        "stop_reason":"end_turn","stop_sequence":null,
        "usage":{"input_tokens":10,"output_tokens":7}}"#;
    let mut a = Dialect::Anthropic.account(true, false);
    let now = Instant::now();
    Dialect::Anthropic.absorb_answer(&mut a, body, now).unwrap();
    let f = facts(&a);
    assert_eq!(f.text, "hmmHi theref{\"a\":1}");
    assert_eq!(f.tokens, 7);
    assert_eq!(f.usage.unwrap().prompt_tokens, Some(10));
    assert_eq!(f.finish_reason.as_deref(), Some("end_turn"));
    assert_eq!(f.response_id.as_deref(), Some("msg_9"));
    assert_eq!(a.first_token, Some(now));

    let err = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let mut b = Dialect::Anthropic.account(false, false);
    assert_eq!(
        Dialect::Anthropic.absorb_answer(&mut b, err, now),
        Err((Cause::Http5xx, "Overloaded".into()))
    );
    assert!(matches!(
        Dialect::Anthropic.absorb_answer(&mut b, b"not json", now),
        Err((Cause::Malformed, _))
    ));
}

proptest! {
    #[test]
    fn any_split_gives_the_same_account(cuts in proptest::collection::vec(0usize..2000, 0..12), crlf in any::<bool>()) {
        for name in ["anthropic_text.sse", "anthropic_thinking_tools.sse", "anthropic_overloaded.sse"] {
            let mut bytes = fixture(name);
            if crlf {
                bytes = String::from_utf8(bytes).unwrap().replace('\n', "\r\n").into_bytes();
            }
            let whole = facts(&replay(StreamAccount::<Anthropic>::new(true, false), &[&bytes]).0);
            let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut reads = Vec::new();
            let mut prev = 0;
            for p in points {
                reads.push(&bytes[prev..p]);
                prev = p;
            }
            reads.push(&bytes[prev..]);
            let split = facts(&replay(StreamAccount::<Anthropic>::new(true, false), &reads).0);
            prop_assert_eq!(whole, split);
        }
    }
}
