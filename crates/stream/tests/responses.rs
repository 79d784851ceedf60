//! OpenAI Responses streams (tests/fixtures/responses_*.sse, shaped like the event
//! types of the official openai Python SDK 3.57) and hand-made events through the
//! `Responses` decoder and the run-time `Dialect`: answer text, reasoning and tool
//! arguments as output, lifecycle events not, usage and the finish reason from
//! `response.completed`/`response.incomplete`, `response.failed` and `error`, a cut
//! stream, a whole answer; and any split of the bytes yields the same account.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use tpscope_model::Cause;
use tpscope_stream::responses::Responses;
use tpscope_stream::{Dialect, StreamAccount, StreamEnd, Usage};

mod common;

use common::{facts, fixture, replay};

/// One read per event (events are separated by a blank line).
fn events(bytes: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 0..bytes.len().saturating_sub(1) {
        if bytes[i] == b'\n' && bytes[i + 1] == b'\n' {
            out.push(&bytes[start..i + 2]);
            start = i + 2;
        }
    }
    if start < bytes.len() {
        out.push(&bytes[start..]);
    }
    out
}

#[test]
fn text_stream_counts_deltas_and_takes_usage_from_completed() {
    let bytes = fixture("responses_text.sse");
    let (a, t0) = replay(StreamAccount::<Responses>::new(true, true), &events(&bytes));
    let f = facts(&a);
    assert_eq!(f.text, "Hi there!");
    assert_eq!(f.content_chunks, 3);
    assert_eq!(f.tokens, 3);
    assert_eq!(
        f.usage,
        Some(Usage {
            prompt_tokens: Some(36),
            completion_tokens: Some(3),
            reasoning_tokens: Some(0),
            cached_tokens: Some(0),
        })
    );
    assert_eq!(f.finish_reason.as_deref(), Some("stop"));
    assert_eq!(f.response_id.as_deref(), Some("resp_67ccd2bed1ec8190"));
    assert_eq!(a.model.as_deref(), Some("gpt-4.1-2025-04-14"));
    assert_eq!(f.end, Some(Ok(())));
    // Events 0–3 are lifecycle (created, in_progress, item and part added): the
    // first token is the first delta, read 4; the last delta is read 6.
    assert_eq!(a.first_token, Some(t0 + Duration::from_millis(4)));
    assert_eq!(a.first_content, a.first_token);
    assert_eq!(a.last_token, Some(t0 + Duration::from_millis(6)));
    assert_eq!(f.events, 11);
}

#[test]
fn reasoning_and_tool_arguments_are_output_and_incomplete_at_the_limit_is_length() {
    let bytes = fixture("responses_reasoning_tools.sse");
    let (a, t0) = replay(
        StreamAccount::<Responses>::new(true, false),
        &events(&bytes),
    );
    let f = facts(&a);
    assert_eq!(f.text, "thinksum{\"city\":\"Paris\"}");
    assert_eq!(f.content_chunks, 4);
    assert_eq!(f.tokens, 8);
    let u = f.usage.unwrap();
    assert_eq!(
        (u.prompt_tokens, u.cached_tokens, u.reasoning_tokens),
        (Some(50), Some(32), Some(5))
    );
    assert_eq!(f.finish_reason.as_deref(), Some("length"));
    assert_eq!(f.end, Some(Ok(())));
    // Reasoning first (read 2), answer-side output (the tool call) at read 5.
    assert_eq!(a.first_token, Some(t0 + Duration::from_millis(2)));
    assert_eq!(a.first_content, Some(t0 + Duration::from_millis(5)));
}

#[test]
fn response_failed_mid_stream_is_a_server_error_with_its_message() {
    let bytes = fixture("responses_failed.sse");
    let (a, _) = replay(
        StreamAccount::<Responses>::new(true, false),
        &events(&bytes),
    );
    let f = facts(&a);
    assert_eq!(f.text, "Hel");
    assert_eq!(
        f.end,
        Some(Err((
            Cause::Http5xx,
            "response.failed in the stream: The model failed to generate a response.".into()
        )))
    );
}

#[test]
fn error_event_codes_map_to_causes() {
    for (code, cause) in [
        ("rate_limit_exceeded", Cause::Http429),
        ("invalid_prompt", Cause::Http4xx),
        ("context_length_exceeded", Cause::Http4xx),
        ("server_error", Cause::Http5xx),
    ] {
        let ev = format!(
            "event: error\ndata: {{\"type\":\"error\",\"code\":\"{code}\",\"message\":\"m\",\"param\":null,\"sequence_number\":1}}\n\n"
        );
        let (a, _) = replay(
            StreamAccount::<Responses>::new(false, false),
            &[ev.as_bytes()],
        );
        assert_eq!(
            facts(&a).end,
            Some(Err((cause, "error event in the stream: m".into()))),
            "{code}"
        );
    }
}

#[test]
fn stream_without_completed_is_a_disconnect() {
    let bytes = fixture("responses_text.sse");
    let cut = &bytes[..bytes.len() / 2];
    let (a, _) = replay(StreamAccount::<Responses>::new(true, false), &[cut]);
    assert_eq!(
        facts(&a).end,
        Some(Err((
            Cause::Disconnect,
            "the stream ended without response.completed".into()
        )))
    );
    let (d, _) = replay(Dialect::Responses.account(true, false), &[cut]);
    assert_eq!(facts(&d), facts(&a));
}

#[test]
fn unknown_events_with_other_shapes_do_not_fail_the_stream() {
    let (a, _) = replay(
        StreamAccount::<Responses>::new(true, false),
        &[
            b"event: response.future_thing\ndata: {\"type\":\"response.future_thing\",\"delta\":{\"x\":1},\"code\":7}\n\n",
            b"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"ok\"}\n\n",
            b"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\"}}\n\n",
        ],
    );
    assert_eq!(a.text, "ok");
    assert!(a.is_done());
}

#[test]
fn data_that_does_not_parse_is_malformed() {
    let (a, _) = replay(
        StreamAccount::<Responses>::new(false, false),
        &[b"event: response.output_text.delta\ndata: {\"type\":\n\n"],
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
fn dialect_responses_agrees_with_its_decoder() {
    for name in [
        "responses_text.sse",
        "responses_reasoning_tools.sse",
        "responses_failed.sse",
    ] {
        let bytes = fixture(name);
        let (a, _) = replay(StreamAccount::<Responses>::new(true, true), &events(&bytes));
        let (d, _) = replay(Dialect::Responses.account(true, true), &events(&bytes));
        assert_eq!(facts(&a), facts(&d), "{name}");
    }
}

#[test]
fn whole_responses_answer_is_absorbed() {
    let body = br#"{"id":"resp_9","object":"response","status":"completed","model":"m",
        "output":[{"id":"rs","type":"reasoning","summary":[{"type":"summary_text","text":"s"}],"content":[{"type":"reasoning_text","text":"hmm"}]},
                  {"id":"msg","type":"message","role":"assistant","content":[{"type":"output_text","text":"Hi there","annotations":[]}]},
                  {"id":"fc","type":"function_call","name":"f","call_id":"c","arguments":"{\"a\":1}"},
                  {"id":"x","type":"computer_call","action":{"type":"click"}}],
        "usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":7,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":17},
        "error":null,"incomplete_details":null}"#;
    let mut a = Dialect::Responses.account(true, false);
    let now = Instant::now();
    Dialect::Responses.absorb_answer(&mut a, body, now).unwrap();
    let f = facts(&a);
    assert_eq!(f.text, "hmmsHi there{\"a\":1}");
    assert_eq!(f.tokens, 7);
    assert_eq!(f.usage.unwrap().reasoning_tokens, Some(2));
    assert_eq!(f.finish_reason.as_deref(), Some("stop"));
    assert_eq!(f.response_id.as_deref(), Some("resp_9"));
    assert_eq!(a.model.as_deref(), Some("m"));
    assert_eq!(a.first_token, Some(now));

    let failed = br#"{"id":"r","object":"response","status":"failed","output":[],
        "error":{"code":"rate_limit_exceeded","message":"slow down"}}"#;
    let mut b = Dialect::Responses.account(false, false);
    assert_eq!(
        Dialect::Responses.absorb_answer(&mut b, failed, now),
        Err((Cause::Http429, "slow down".into()))
    );
    assert!(matches!(
        Dialect::Responses.absorb_answer(&mut b, br#"{"choices":[]}"#, now),
        Err((Cause::Malformed, m)) if m.contains("no `output`")
    ));
    assert!(matches!(
        Dialect::Responses.absorb_answer(&mut b, b"not json", now),
        Err((Cause::Malformed, _))
    ));
}

proptest! {
    #[test]
    fn any_split_gives_the_same_account(cuts in proptest::collection::vec(0usize..4000, 0..12), crlf in any::<bool>()) {
        for name in ["responses_text.sse", "responses_reasoning_tools.sse", "responses_failed.sse"] {
            let mut bytes = fixture(name);
            if crlf {
                bytes = String::from_utf8(bytes).unwrap().replace('\n', "\r\n").into_bytes();
            }
            let whole = replay(StreamAccount::<Responses>::new(true, false), &[&bytes]).0;
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut reads = Vec::new();
            let mut at = 0;
            for c in cuts {
                reads.push(&bytes[at..c]);
                at = c;
            }
            reads.push(&bytes[at..]);
            let split = replay(StreamAccount::<Responses>::new(true, false), &reads).0;
            prop_assert_eq!(facts(&whole), facts(&split));
        }
    }
}
