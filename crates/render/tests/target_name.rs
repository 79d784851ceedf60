//! The header names what a run measured: its URL, the built-in simulator, or
//! "not recorded" — an imported run without a URL was shown as "built-in simulator".

use tpscope_analysis::{Options, RunInput, analyze};
use tpscope_model::RunRecord;
use tpscope_render::{html, markdown, text};

fn run_with(record: serde_json::Value) -> tpscope_analysis::RunReport {
    let run: RunRecord = serde_json::from_value(record).unwrap();
    let input = RunInput {
        run_id: run.run_id.clone(),
        run: Some(run),
        ..RunInput::default()
    };
    analyze(&input, &Options::default())
}

fn rendered(run: tpscope_analysis::RunReport) -> Vec<String> {
    let report = tpscope_analysis::Report {
        schema: tpscope_analysis::REPORT_SCHEMA,
        runs: vec![run],
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
fn an_imported_run_without_url_is_not_called_the_built_in_simulator() {
    let run = run_with(serde_json::json!({
        "kind": "run", "run_id": "r", "schema": "tpscope.spans/1", "tool": "aiperf",
        "started_at": "2026-11-23T00:00:00Z", "target": {"model": "m", "api": "chat"},
    }));
    assert!(!run.simulated);
    for page in rendered(run) {
        assert!(page.contains("not recorded"), "{page}");
        assert!(!page.contains("built-in simulator"), "{page}");
    }
}

#[test]
fn a_run_of_the_simulator_and_a_run_with_a_url_are_named_so() {
    let sim = run_with(serde_json::json!({
        "kind": "run", "run_id": "r", "schema": "tpscope.spans/1", "tool": "tpscope 0.1.0",
        "started_at": "2026-11-23T00:00:00Z", "load": {"simulator": {"gpu": "h100"}},
    }));
    assert!(
        rendered(sim)
            .iter()
            .all(|p| p.contains("built-in simulator"))
    );
    let url = run_with(serde_json::json!({
        "kind": "run", "run_id": "r", "schema": "tpscope.spans/1", "tool": "tpscope 0.1.0",
        "started_at": "2026-11-23T00:00:00Z", "target": {"url": "http://127.0.0.1:8000/v1"},
    }));
    assert!(
        rendered(url)
            .iter()
            .all(|p| p.contains("http://127.0.0.1:8000/v1"))
    );
}
