//! The `sessions` section of a multi-turn run in every format, from hand-made
//! facts: two sessions of two turns, turn 2 starting ten times sooner (its
//! prefix cached); a run without sessions shows none of it.

use std::num::NonZeroU32;

use tpscope_analysis::detail::detail;
use tpscope_analysis::{Options, Report, RunInput, SessionTurn, SpanFacts, analyze};
use tpscope_model::{Status, Timestamp};
use tpscope_render::{html, json, markdown, text};

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
}

/// Ok spans: (session, turn, queued at ms, TTFT ms).
fn run(spans: &[(u32, u32, i64, i64)], sessions: bool) -> (Report, Vec<u8>) {
    let mut input = RunInput {
        run_id: "r".into(),
        ..RunInput::default()
    };
    for &(session, turn, q, ttft) in spans {
        input.push_span(
            SpanFacts {
                status: Status::Ok,
                error_cause: None,
                queued_at: ts(q),
                admitted_at: Some(ts(q)),
                first_token_at: Some(ts(q + ttft)),
                last_token_at: Some(ts(q + ttft + 100)),
                released_at: ts(q + ttft + 100),
                output_tokens: 10,
                input_tokens: Some(1000 * u64::from(turn)),
                retry_count: 0,
                retry_causes: Box::default(),
                wasted_tokens: 0,
                chunks: None,
                client: Default::default(),
                session: sessions.then(|| SessionTurn {
                    session,
                    turn: NonZeroU32::new(turn).unwrap(),
                }),
            },
            None,
        );
    }
    let r = analyze(&input, &Options::default());
    let details = vec![detail(&input, &r)];
    let report = Report {
        schema: tpscope_analysis::REPORT_SCHEMA,
        runs: vec![r],
        skipped: Default::default(),
        warnings: vec![],
        sweeps: Vec::new(),
    };
    let page = html::report(&report, &details);
    (report, page)
}

const SPANS: [(u32, u32, i64, i64); 4] = [
    (0, 1, 0, 200),
    (1, 1, 0, 200),
    (0, 2, 400, 20),
    (1, 2, 400, 20),
];

#[test]
fn every_format_shows_ttft_by_turn_its_ratio_to_turn_1_and_the_totals() {
    let (report, page) = run(&SPANS, true);
    let t = String::from_utf8(text::render(&report)).unwrap();
    assert!(t.contains("multi-turn sessions: TTFT by turn"), "{t}");
    let row2 = t
        .lines()
        .find(|l| l.trim_start().starts_with("2 "))
        .unwrap_or_else(|| panic!("a turn 2 row:\n{t}"));
    assert!(row2.contains("20.0") && row2.contains("0.10×"), "{row2}");
    assert!(
        t.contains("sessions: 2 (2 with every turn ok), 2.0 turns each on average (at most 2), 20 output and 3000 prompt tokens"),
        "{t}"
    );
    let md = String::from_utf8(markdown::render(&report)).unwrap();
    assert!(md.contains("**Multi-turn sessions**"), "{md}");
    assert!(
        md.contains("| 2 | 2 | 2 | 20.0 | 20.0 | 0.10× | 2000 |"),
        "{md}"
    );
    let j: serde_json::Value = serde_json::from_slice(&json(&report).unwrap()).unwrap();
    let s = &j["runs"][0]["sessions"];
    assert_eq!(s["by_turn"][1]["turn"], 2);
    assert!(
        (s["by_turn"][1]["ttft_p50_ratio_to_turn_1"]
            .as_f64()
            .unwrap()
            - 0.1)
            .abs()
            < 1e-9
    );
    assert_eq!(s["totals"]["sessions"], 2);
    assert_eq!(s["totals"]["input_tokens_mean"], 3000.0);
    let page = String::from_utf8(page).unwrap();
    assert!(page.contains("<h2>Multi-turn sessions</h2>"));
    assert!(page.contains("<td>0.10×</td>"));
    assert!(page.contains("TTFT by turn"), "the chart");
}

#[test]
fn a_run_without_sessions_shows_none_of_it() {
    let (report, page) = run(&SPANS, false);
    let t = String::from_utf8(text::render(&report)).unwrap();
    assert!(!t.contains("multi-turn"), "{t}");
    let md = String::from_utf8(markdown::render(&report)).unwrap();
    assert!(!md.contains("Multi-turn"), "{md}");
    let j: serde_json::Value = serde_json::from_slice(&json(&report).unwrap()).unwrap();
    assert!(j["runs"][0]["sessions"].is_null());
    assert!(!String::from_utf8(page).unwrap().contains("Multi-turn"));
}
