//! The reason behind a failure count reaches every human-readable form of a report
//! (issue 16: "http_4xx 3" and "no request succeeded" while the log held "HTTP 400:
//! `stream_options` is only allowed when `stream` is true").

use tpscope_analysis::detail::detail;
use tpscope_analysis::{Options, Report, RunInput, SpanFacts, analyze};
use tpscope_model::{Cause, Status, Timestamp};
use tpscope_render::{html, json, markdown, text};

const REASON: &str = "HTTP 400: `stream_options` is only allowed when `stream` is true";

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
}

fn failed_run() -> RunInput {
    let mut input = RunInput {
        run_id: "r".into(),
        ..RunInput::default()
    };
    for i in 0..4 {
        let (cause, message) = if i < 3 {
            (Cause::Http4xx, REASON)
        } else {
            (Cause::Http5xx, "HTTP 503: <overloaded> & retry")
        };
        input.error_messages.add(cause, message);
        input.push_span(
            SpanFacts {
                status: Status::Error,
                error_cause: Some(cause),
                queued_at: ts(i),
                admitted_at: Some(ts(i)),
                first_token_at: None,
                last_token_at: None,
                released_at: ts(i + 5),
                output_tokens: 0,
                input_tokens: None,
                retry_count: 0,
                retry_causes: vec![],
                wasted_tokens: 0,
                chunks: None,
            },
            None,
        );
    }
    input
}

#[test]
fn failure_messages_show_in_text_markdown_json_and_html() {
    let input = failed_run();
    let run = analyze(&input, &Options::default());
    let details = vec![detail(&input, &run)];
    let report = Report {
        schema: tpscope_analysis::REPORT_SCHEMA,
        runs: vec![run],
        skipped: Default::default(),
        warnings: vec![],
    };
    let t = String::from_utf8(text::render(&report)).unwrap();
    assert!(t.contains(&format!("http_4xx ×3: {REASON}")), "{t}");
    assert!(t.contains("http_5xx ×1: HTTP 503"), "{t}");
    let md = String::from_utf8(markdown::render(&report)).unwrap();
    assert!(md.contains("http_4xx ×3: HTTP 400: 'stream_options'"), "{md}");
    let j: serde_json::Value = serde_json::from_slice(&json(&report).unwrap()).unwrap();
    let m = &j["runs"][0]["error_messages"][0];
    assert_eq!(m["cause"], "http_4xx");
    assert_eq!(m["messages"][0]["message"], REASON);
    assert_eq!(m["messages"][0]["count"], 3);
    let page = String::from_utf8(html::report(&report, &details)).unwrap();
    assert!(page.contains("http_5xx ×1: HTTP 503: &lt;overloaded&gt; &amp; retry"));
}
