//! The count check section in every format, from a hand-made tally: the figures
//! in text, markdown, JSON and HTML, its warning once among the run's warnings;
//! a run without the check shows none of it (and JSON says `null`).

use tpscope_analysis::count_check::CountTally;
use tpscope_analysis::detail::detail;
use tpscope_analysis::{Options, Report, RunInput, analyze};
use tpscope_render::{html, json, markdown, text};

fn report(tally: CountTally) -> (Report, String) {
    let input = RunInput {
        run_id: "r".into(),
        count_tally: tally,
        ..RunInput::default()
    };
    let r = analyze(&input, &Options::default());
    let details = vec![detail(&input, &r)];
    let report = Report {
        schema: tpscope_analysis::REPORT_SCHEMA,
        runs: vec![r],
        skipped: Default::default(),
        warnings: vec![],
        sweeps: Vec::new(),
    };
    let page = String::from_utf8(html::report(&report, &details)).unwrap();
    (report, page)
}

const OFF: CountTally = CountTally {
    spans: 64,
    usage_tokens: 2000,
    tokenizer_tokens: 2212,
    spans_differing: 40,
};

#[test]
fn every_format_shows_the_check_and_its_warning_once() {
    let (report, page) = report(OFF);
    let t = String::from_utf8(text::render(&report)).unwrap();
    let line = "on 64 spans, the tokenizer counted 2212 output tokens where usage said 2000 \
                (+10.60 %; 40 spans differ)";
    assert!(t.contains(&format!("  count check: {line}\n")), "{t}");
    assert_eq!(t.matches("the tokenizer's counts differ").count(), 1, "{t}");
    let md = String::from_utf8(markdown::render(&report)).unwrap();
    assert!(md.contains("**Count check.** On 64 spans"), "{md}");
    assert_eq!(
        md.matches("the tokenizer's counts differ").count(),
        1,
        "{md}"
    );
    assert!(page.contains("<h2>Count check</h2>"), "{page}");
    assert!(
        page.contains("On 64 spans, the tokenizer counted 2212"),
        "{page}"
    );
    let j: serde_json::Value = serde_json::from_slice(&json(&report).unwrap()).unwrap();
    let c = &j["runs"][0]["count_check"];
    assert_eq!(c["spans"], 64);
    assert_eq!(c["usage_tokens"], 2000);
    assert_eq!(c["tokenizer_tokens"], 2212);
    assert_eq!(c["spans_differing"], 40);
    assert!(
        (c["difference"].as_f64().unwrap() - 0.106).abs() < 1e-12,
        "{c}"
    );
    assert!(c["warning"].as_str().unwrap().contains("+10.6 %"), "{c}");
}

#[test]
fn agreement_shows_the_figures_without_a_warning() {
    let (report, _) = report(CountTally {
        tokenizer_tokens: 2010,
        ..OFF
    });
    let t = String::from_utf8(text::render(&report)).unwrap();
    assert!(t.contains("(+0.50 %; 40 spans differ)"), "{t}");
    assert!(!t.contains("the tokenizer's counts differ"), "{t}");
    assert!(
        report.runs[0]
            .count_check
            .as_ref()
            .unwrap()
            .warning
            .is_none()
    );
}

#[test]
fn a_run_without_the_check_shows_none_of_it() {
    let (report, page) = report(CountTally::default());
    let t = String::from_utf8(text::render(&report)).unwrap();
    let md = String::from_utf8(markdown::render(&report)).unwrap();
    assert!(!t.contains("count check"), "{t}");
    assert!(!md.contains("Count check"), "{md}");
    assert!(!page.contains("Count check"), "{page}");
    let j: serde_json::Value = serde_json::from_slice(&json(&report).unwrap()).unwrap();
    assert!(j["runs"][0]["count_check"].is_null());
}
