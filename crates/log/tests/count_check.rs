//! The count check from the analysis reader: each span's `tokenizer_output_tokens`
//! is added to its run's tally as it is read (from a file or any reader, standard
//! input included), on both paths; a value that is not a count is an error
//! naming the field.

use std::io::Cursor;
use std::path::Path;

use tpscope_analysis::count_check::CountTally;
use tpscope_analysis::{Options, analyze};
use tpscope_log::{LogError, LogSet, ReadOptions, Reader};

const RUN: &str = r#"{"kind":"run","run_id":"r","schema":"tpscope.spans/1","started_at":"2026-01-01T00:00:00Z","cap":2,"tokenizer":"o200k_base"}"#;

/// A span as tpscope writes it (the fast path reads it), `tokens` by usage.
fn span(id: u32, tokens: u64, counted: &str) -> String {
    format!(
        r#"{{"kind":"span","run_id":"r","span_id":"{id}","status":"ok","queued_at":"2026-01-01T00:00:00.000000000Z","admitted_at":"2026-01-01T00:00:00.000000000Z","first_token_at":"2026-01-01T00:00:01.000000000Z","last_token_at":"2026-01-01T00:00:02.000000000Z","released_at":"2026-01-01T00:00:02.000000000Z","output_tokens":{tokens},"token_source":"usage","retry_count":0{counted}}}"#
    )
}

fn read(text: &str) -> Result<LogSet, LogError> {
    let mut r = Reader::new(ReadOptions::default());
    r.read_from(Path::new("<stdin>"), Cursor::new(text.as_bytes().to_vec()))?;
    Ok(r.finish())
}

#[test]
fn spans_counted_both_ways_are_tallied_on_either_path_and_reach_the_report() {
    let fast = span(1, 100, r#","tokenizer_output_tokens":110"#);
    // Keys out of the writer's order: the general path reads it.
    let general = span(2, 100, "").replace(
        r#"{"kind":"span","#,
        r#"{"tokenizer_output_tokens":130,"kind":"span","#,
    );
    let not_counted = span(3, 50, "");
    let chunks = span(4, 50, r#","tokenizer_output_tokens":70"#)
        .replace(r#""token_source":"usage""#, r#""token_source":"chunks""#);
    let log = format!("{RUN}\n{fast}\n{general}\n{not_counted}\n{chunks}\n");
    let set = read(&log).unwrap();
    let input = &set.runs[0].input;
    assert_eq!(
        input.count_tally,
        CountTally {
            spans: 2,
            usage_tokens: 200,
            tokenizer_tokens: 240,
            spans_differing: 2,
        }
    );
    let report = analyze(input, &Options::default());
    let c = report.count_check.unwrap();
    assert_eq!((c.spans, c.usage_tokens, c.tokenizer_tokens), (2, 200, 240));
    let w = c.warning.unwrap();
    assert!(w.contains("+20.0 %") && w.contains("(o200k_base;"), "{w}");
    assert!(report.warnings.contains(&w), "{:?}", report.warnings);
}

#[test]
fn a_log_without_tokenizer_counts_has_no_check() {
    let set = read(&format!("{RUN}\n{}\n", span(1, 100, ""))).unwrap();
    let report = analyze(&set.runs[0].input, &Options::default());
    assert_eq!(report.count_check, None);
}

#[test]
fn a_tokenizer_count_that_is_not_a_count_is_an_error_naming_the_field() {
    for bad in [r#""many""#, "-3", "1.5"] {
        let line = span(1, 100, &format!(r#","tokenizer_output_tokens":{bad}"#));
        let e = read(&format!("{RUN}\n{line}\n")).unwrap_err().to_string();
        assert!(
            e.starts_with("<stdin>:2: field `tokenizer_output_tokens`: "),
            "{bad}: {e}"
        );
    }
    let null = span(1, 100, r#","tokenizer_output_tokens":null"#);
    let set = read(&format!("{RUN}\n{null}\n")).unwrap();
    assert_eq!(set.runs[0].input.count_tally, CountTally::default());
}
