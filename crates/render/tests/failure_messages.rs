//! The reason behind a failure count reaches every human-readable form of a report
//! (what broke: "http_4xx 3" and "no request succeeded" while the log held "HTTP 400:
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
                retry_causes: Box::default(),
                wasted_tokens: 0,
                chunks: None,
                client: Default::default(),
                session: None,
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
        sweeps: Vec::new(),
    };
    let t = String::from_utf8(text::render(&report)).unwrap();
    assert!(t.contains(&format!("http_4xx ×3: {REASON}")), "{t}");
    assert!(t.contains("http_5xx ×1: HTTP 503"), "{t}");
    let md = String::from_utf8(markdown::render(&report)).unwrap();
    assert!(
        md.contains("http_4xx ×3: HTTP 400: 'stream_options'"),
        "{md}"
    );
    let j: serde_json::Value = serde_json::from_slice(&json(&report).unwrap()).unwrap();
    let m = &j["runs"][0]["error_messages"][0];
    assert_eq!(m["cause"], "http_4xx");
    assert_eq!(m["messages"][0]["message"], REASON);
    assert_eq!(m["messages"][0]["count"], 3);
    let page = String::from_utf8(html::report(&report, &details)).unwrap();
    assert!(page.contains("http_5xx ×1: HTTP 503: &lt;overloaded&gt; &amp; retry"));
}

#[test]
fn waterfall_marks_failed_attempts_and_back_off_apart_from_the_first_token_wait() {
    // What broke: a retried request's back-off looked like a slow first token; and
    // the HTML summary did not show TTFT/TPOT at the top.
    let mut input = RunInput {
        run_id: "w".into(),
        ..RunInput::default()
    };
    let ok = |q: i64, first: i64, retries: u32| SpanFacts {
        status: Status::Ok,
        error_cause: None,
        queued_at: ts(q),
        admitted_at: Some(ts(q)),
        first_token_at: Some(ts(first)),
        last_token_at: Some(ts(first + 100)),
        released_at: ts(first + 101),
        output_tokens: 10,
        input_tokens: Some(5),
        retry_count: retries,
        retry_causes: vec![Cause::Http429; retries as usize].into(),
        wasted_tokens: 0,
        chunks: None,
        client: Default::default(),
        session: None,
    };
    input.push_span(ok(0, 50, 0), None);
    // Admitted at 10 ms, a 429, back-off until 1010 ms, first token at 1060 ms.
    input.last_attempts.push((input.spans.len(), ts(1010)));
    input.push_span(ok(10, 1060, 1), None);
    let run = analyze(&input, &Options::default());
    let d = detail(&input, &run);
    assert_eq!(
        d.waterfall.rows[1].last_attempt,
        Some(std::time::Duration::from_millis(1010))
    );
    let report = Report {
        schema: tpscope_analysis::REPORT_SCHEMA,
        runs: vec![run],
        skipped: Default::default(),
        warnings: vec![],
        sweeps: Vec::new(),
    };
    let page = String::from_utf8(html::report(&report, &[d])).unwrap();
    assert!(page.contains("failed attempts and back-off"), "legend");
    assert_eq!(
        page.matches("class=\"ph-retry\"").count(),
        1,
        "one retried request"
    );
    let lead = page.find("what the server did").expect("lead table");
    assert!(lead < page.find("failures by cause").unwrap(), "lead first");
    assert!(page[lead..].contains("TTFT after admission") && page[lead..].contains("TPOT"));
}
