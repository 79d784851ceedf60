//! Snapshots of the comparison's text, markdown and JSON, from a hand-made
//! comparison (so they change only when the renderers do), one verdict of each kind.

use std::time::Duration;

use tpscope_analysis::compare::{
    BootstrapUsed, COMPARE_SCHEMA, ChangeKind, Comparison, Criterion, CriterionResult, HeadlineRow,
    Mismatch, Side, Thresholds, Verdict,
};
use tpscope_analysis::metrics::{Better, MetricUnit};
use tpscope_analysis::stats::bootstrap::Interval;
use tpscope_render::compare::{exit_code, json, markdown, text};

fn side(run_id: &str, source: &str, spans: u64, window: f64) -> Side {
    Side {
        run_id: run_id.into(),
        source: source.into(),
        model: Some("llama-3.1-8b".into()),
        token_sources: vec![format!("usage ({spans} spans)")],
        window: Some(Duration::from_secs_f64(window)),
        spans,
        buckets: 200,
        bucket: Some(Duration::from_millis(600)),
        block_len: 6,
    }
}

fn iv(low: f64, high: f64) -> Option<Interval> {
    Some(Interval {
        low,
        high,
        level: 0.95,
    })
}

fn row(metric: &str, unit: MetricUnit, better: Better, b: f64, c: f64) -> HeadlineRow {
    HeadlineRow {
        metric: metric.into(),
        unit,
        better,
        baseline: Some(b),
        candidate: Some(c),
        change: Some(c - b),
        relative_change: Some(c / b - 1.0),
    }
}

fn comparison() -> Comparison {
    Comparison {
        schema: COMPARE_SCHEMA,
        baseline: side("base-1", "runs/base.jsonl", 1200, 120.5),
        candidate: side("cand-1", "runs/cand.jsonl", 1190, 118.25),
        criteria: vec![
            CriterionResult {
                criterion: Criterion::SystemTps,
                baseline: Some(1520.25),
                candidate: Some(1710.5),
                change_kind: ChangeKind::Relative,
                change: Some(0.125144),
                interval: iv(0.081, 0.172),
                threshold: 0.0,
                verdict: Verdict::Pass,
                reason: "the whole interval is above +0.00 %".into(),
            },
            CriterionResult {
                criterion: Criterion::SuccessRate,
                baseline: Some(0.995),
                candidate: Some(0.97),
                change_kind: ChangeKind::Absolute,
                change: Some(-0.025),
                interval: iv(-0.036, -0.015),
                threshold: -0.01,
                verdict: Verdict::Fail,
                reason: "the whole interval is below −1.00 pp".into(),
            },
            CriterionResult {
                criterion: Criterion::GapFraction,
                baseline: Some(0.0),
                candidate: Some(0.0),
                change_kind: ChangeKind::Absolute,
                change: Some(0.0),
                interval: None,
                threshold: -0.0,
                verdict: Verdict::Skipped,
                reason: "the baseline had no backlog (nothing waited for a slot): not judged"
                    .into(),
            },
            CriterionResult {
                criterion: Criterion::RetryRate,
                baseline: Some(0.02),
                candidate: Some(0.025),
                change_kind: ChangeKind::Absolute,
                change: Some(0.005),
                interval: iv(-0.004, 0.014),
                threshold: 0.01,
                verdict: Verdict::Inconclusive,
                reason: "the interval spans +0.0100 retries per span".into(),
            },
        ],
        overall: Verdict::Fail,
        mismatches: vec![Mismatch {
            what: "tokenizer",
            baseline: "o200k_base".into(),
            candidate: "cl100k_base".into(),
        }],
        headline: vec![
            row(
                "system_tps",
                MetricUnit::TokensPerSecond,
                Better::Higher,
                1520.25,
                1710.5,
            ),
            row(
                "success_rate",
                MetricUnit::Fraction,
                Better::Higher,
                0.995,
                0.97,
            ),
            row(
                "ttft_user p50",
                MetricUnit::Seconds,
                Better::Lower,
                0.2345,
                0.1988,
            ),
            row(
                "t_queue p99",
                MetricUnit::Seconds,
                Better::Lower,
                12.5,
                10.25,
            ),
            row(
                "cost per million output tokens",
                MetricUnit::Money,
                Better::Lower,
                0.7306,
                0.6493,
            ),
            HeadlineRow {
                metric: "gap_fraction_of_backlog".into(),
                unit: MetricUnit::Fraction,
                better: Better::Lower,
                baseline: None,
                candidate: None,
                change: None,
                relative_change: None,
            },
        ],
        thresholds: Thresholds::default(),
        bootstrap: BootstrapUsed {
            resamples: 2000,
            seed: 1,
            level: 0.95,
        },
        warnings: vec![
            "compared although tokenizer differs: baseline o200k_base, candidate cl100k_base"
                .into(),
        ],
        capacity: None,
    }
}

#[test]
fn compare_text_snapshot() {
    insta::assert_snapshot!(String::from_utf8(text(&comparison(), false)).unwrap());
}

/// The text without its ANSI colour sequences.
fn strip_ansi(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(ch) = chars.next() {
        if ch == '\x1b' {
            assert_eq!(chars.next(), Some('['), "only CSI sequences: {s:?}");
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}

#[test]
fn compare_verdicts_had_no_colour_on_a_terminal() {
    let c = comparison();
    let plain = String::from_utf8(text(&c, false)).unwrap();
    assert!(!plain.contains('\x1b'), "colour off has no escapes");
    let coloured = String::from_utf8(text(&c, true)).unwrap();
    // Colour on changes nothing but the escapes around the verdict words.
    assert_eq!(strip_ansi(&coloured), plain);
    // Overall (FAIL) once; each coloured criterion in its table row and its reason line.
    assert_eq!(coloured.matches("\x1b[31mFAIL\x1b[0m").count(), 1);
    assert_eq!(coloured.matches("\x1b[32mpass\x1b[0m").count(), 2);
    assert_eq!(coloured.matches("\x1b[31mfail\x1b[0m").count(), 2);
    assert_eq!(coloured.matches("\x1b[33minconclusive\x1b[0m").count(), 2);
    // Skipped stays plain; no other escape anywhere.
    assert!(!coloured.contains("\x1b[0mskipped") && !coloured.contains("m skipped"));
    assert_eq!(coloured.matches('\x1b').count(), 2 * (1 + 2 + 2 + 2));
}

#[test]
fn compare_markdown_snapshot() {
    insta::assert_snapshot!(String::from_utf8(markdown(&comparison())).unwrap());
}

#[test]
fn compare_json_snapshot() {
    insta::assert_snapshot!(String::from_utf8(json(&comparison()).unwrap()).unwrap());
}

#[test]
fn exit_codes_follow_the_overall_verdict() {
    assert_eq!(exit_code(Verdict::Pass), 0);
    assert_eq!(exit_code(Verdict::Fail), 1);
    assert_eq!(exit_code(Verdict::Inconclusive), 3);
}

#[test]
fn pipes_in_values_do_not_break_markdown_tables() {
    let mut c = comparison();
    c.baseline.source = "a|b.jsonl".into();
    let md = String::from_utf8(markdown(&c)).unwrap();
    assert!(md.contains("a\\|b.jsonl"));
}
