//! A run whose queue times were not stated shows the gap inferred from the
//! pipeline's shape beside the exact one, and the recipe that makes it exact
//!; a run that stated them shows no such row.

use tpscope_analysis::{Options, RunInput, SpanFacts, analyze};
use tpscope_model::{QueueTimes, RunRecord, Timestamp};
use tpscope_render::{html, markdown, text};

fn t(ms: i64) -> Timestamp {
    Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
}

/// Three batches of four, 1 … 4 s each, the next when the slowest is back.
fn input(queue_times: QueueTimes) -> RunInput {
    let mut run: RunRecord = serde_json::from_value(serde_json::json!({
        "kind": "run", "run_id": "r", "schema": "tpscope.spans/1", "tool": "x",
        "started_at": "2027-01-15T08:00:00Z",
    }))
    .unwrap();
    run.started_at = t(0);
    run.queue_times = queue_times;
    let spans = (0..3)
        .flat_map(|b| {
            (0..4).map(move |i| {
                let a = b * 4000;
                let r = a + 1000 * (i + 1);
                SpanFacts::ok(t(a), Some(t(a)), Some(t(a + 10)), Some(t(r)), t(r), 10)
            })
        })
        .collect();
    RunInput {
        run_id: "r".into(),
        run: Some(run),
        spans,
        ..RunInput::default()
    }
}

fn pages(input: &RunInput) -> Vec<String> {
    let report = tpscope_analysis::Report {
        schema: tpscope_analysis::REPORT_SCHEMA,
        runs: vec![analyze(input, &Options::default())],
        skipped: Default::default(),
        warnings: vec![],
        sweeps: Vec::new(),
    };
    vec![
        String::from_utf8(text::render(&report)).unwrap(),
        String::from_utf8(markdown::render(&report)).unwrap(),
        String::from_utf8(html::report(&report, &[])).unwrap(),
    ]
}

#[test]
fn an_unstated_queue_shows_the_inferred_gap_and_how_to_make_it_exact() {
    let pages = pages(&input(QueueTimes::Unmeasured));
    for page in &pages {
        assert!(page.contains("gap_fraction_inferred"), "{page}");
        assert!(page.contains("waves"), "{page}");
    }
    let text = &pages[0];
    // 2 × 3 s held back of 12 s.
    assert!(text.contains("50.00 %"), "{text}");
    assert!(text.contains("width 4"), "{text}");
    assert!(text.contains("x-tpscope-queued-at"), "{text}");
    assert!(text.contains("--cap"), "{text}");
}

#[test]
fn a_measured_queue_shows_no_inferred_gap() {
    for page in pages(&input(QueueTimes::Measured)) {
        assert!(!page.contains("gap_fraction_inferred"), "{page}");
    }
}
