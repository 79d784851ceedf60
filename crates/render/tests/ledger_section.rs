//! The capacity ledger's section on its own, in text, markdown and a page: a
//! run in waves (two slots, each wave waiting for its slowest request), whose
//! ledger holds back slot-time, names the cause and says what work-conserving
//! dispatch would gain; a run without a cap says why its free slots are not known.

use tpscope_analysis::{Options, REPORT_SCHEMA, Report, RunInput, RunReport, SpanFacts, analyze};
use tpscope_model::{RunRecord, SCHEMA, Target, Timestamp};
use tpscope_render::{html, ledger};

fn ts(ms: i64) -> Timestamp {
    Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
}

/// Three waves of two requests, all queued at 0: in each wave one request
/// takes 100 ms and the other `long` ms, and the next wave starts after both.
fn waves(cap: Option<u32>) -> RunReport {
    let mut input = RunInput {
        run_id: "waves".into(),
        run: Some(RunRecord {
            run_id: "waves".into(),
            schema: SCHEMA.into(),
            tool: "tpscope 0.1.0".into(),
            started_at: ts(0),
            target: Target::default(),
            cap,
            token_source: None,
            tokenizer: None,
            sample_interval: None,
            sample_heartbeat: None,
            load: serde_json::Value::Null,
            labels: Default::default(),
            queue_times: Default::default(),
        }),
        ..RunInput::default()
    };
    let mut start = 0;
    for long in [400, 600, 500] {
        for hold in [100, long] {
            let s = SpanFacts::ok(
                ts(0),
                Some(ts(start)),
                Some(ts(start + 20)),
                Some(ts(start + hold - 1)),
                ts(start + hold),
                hold as u64,
            );
            input.push_span(s, None);
        }
        start += long;
    }
    analyze(&input, &Options::default())
}

#[test]
fn ledger_section_text_snapshot() {
    let r = waves(Some(2));
    let text = ledger::section(&r).unwrap().text();
    assert!(text.contains("Blocked orchestration"), "{text}");
    assert!(text.contains("What fixing it gains"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn ledger_section_markdown_snapshot() {
    insta::assert_snapshot!(ledger::section(&waves(Some(2))).unwrap().markdown());
}

#[test]
fn ledger_section_html_snapshot() {
    let report = Report {
        schema: REPORT_SCHEMA,
        runs: vec![waves(Some(2))],
        skipped: Default::default(),
        warnings: Vec::new(),
        sweeps: Vec::new(),
    };
    let page = String::from_utf8(html::report(&report, &[])).unwrap();
    let from = page.find("<h2>Capacity").expect("the ledger's section");
    let to = from + page[from..].find("</ul>\n").expect("the findings") + "</ul>\n".len();
    insta::assert_snapshot!(&page[from..to]);
}

#[test]
fn a_run_without_a_cap_says_why_its_free_slots_are_not_known() {
    let text = ledger::section(&waves(None)).unwrap().text();
    let held = text.lines().find(|l| l.contains("held_back")).unwrap();
    assert!(
        held.contains("—") && held.contains("not known: the cap was unknown or unlimited"),
        "{text}"
    );
    assert!(text.contains("slot-time not known"), "{text}");
    assert!(!text.contains("What fixing it gains"), "{text}");
}
