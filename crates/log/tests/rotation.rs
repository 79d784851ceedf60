//! A rotated span log (`tpscope proxy --rotate`): files that each start with the
//! run's `run` record, read together (or by their base name) as one run, the same
//! run as one file holding the same records; a repeated `run` record that differs
//! is an error naming the file, line and field.

use std::path::{Path, PathBuf};

use tpscope_analysis::{Options, analyze};
use tpscope_log::{ReadOptions, RecordReader, expand_rotations, read_paths};
use tpscope_model::{Record, Timestamp, rotated_path};

const RUN: &str = r#"{"kind":"run","run_id":"r","schema":"tpscope.spans/1","started_at":"2026-01-01T00:00:00Z","cap":2,"labels":{"case":"rotation"}}"#;

fn at(ms: u64) -> Timestamp {
    Timestamp::from_unix_nanos(1_767_225_600_000_000_000 + ms as i64 * 1_000_000)
}

/// Span `id`, queued at `id` seconds and released 1.5 s later.
fn span(id: u64) -> String {
    let t = |ms: u64| at(id * 1000 + ms);
    format!(
        r#"{{"kind":"span","run_id":"r","span_id":"{id}","status":"ok","queued_at":"{}","admitted_at":"{}","first_token_at":"{}","last_token_at":"{}","released_at":"{}","output_tokens":{},"retry_count":0}}"#,
        t(0),
        t(100),
        t(400),
        t(1400),
        t(1500),
        10 + id
    )
}

fn sample(s: u64) -> String {
    format!(
        r#"{{"kind":"sample","run_id":"r","at":"{}","in_flight":1,"queue_depth":0,"cap":2}}"#,
        at(s * 1000 + 200)
    )
}

fn end(spans: u64, samples: u64) -> String {
    format!(
        r#"{{"kind":"end","run_id":"r","ended_at":"{}","spans":{spans},"ok":{spans},"samples":{samples}}}"#,
        at(100_000)
    )
}

/// The files of a rotation of `base`, one per element of `files` (its lines).
fn write_rotation(base: &Path, files: &[Vec<String>]) -> Vec<PathBuf> {
    files
        .iter()
        .enumerate()
        .map(|(i, lines)| {
            let p = rotated_path(base, i as u32);
            std::fs::write(
                &p,
                lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
            )
            .unwrap();
            p
        })
        .collect()
}

/// A run of four spans and three samples in three files, as the proxy rotates:
/// the last file holds only the repeated `run` record (the rotation came due
/// right after the `end` record).
fn three_files() -> Vec<Vec<String>> {
    vec![
        vec![RUN.into(), span(1), sample(1), span(2)],
        vec![
            RUN.into(),
            span(3),
            sample(3),
            span(4),
            sample(4),
            end(4, 3),
        ],
        vec![RUN.into()],
    ]
}

#[test]
fn a_rotations_files_read_as_the_one_run_one_file_holds() {
    let dir = tempfile::tempdir().unwrap();
    let files = write_rotation(&dir.path().join("live.jsonl"), &three_files());
    let set = read_paths(&files, ReadOptions::default()).unwrap();
    assert_eq!(set.runs.len(), 1);
    assert!(set.warnings.is_empty(), "{:?}", set.warnings);
    let run = &set.runs[0].input;
    assert_eq!(run.spans.len(), 4);
    assert_eq!(run.samples.len(), 3);
    assert_eq!(run.end.as_ref().map(|e| e.spans), Some(4));
    // The same records in one file, the run record once.
    let one = dir.path().join("one.jsonl");
    let lines: Vec<String> = three_files()
        .concat()
        .into_iter()
        .enumerate()
        .filter(|(i, l)| *i == 0 || l != RUN)
        .map(|(_, l)| l + "\n")
        .collect();
    std::fs::write(&one, lines.concat()).unwrap();
    let whole = read_paths(&[one], ReadOptions::default()).unwrap();
    let opts = Options::default();
    let (rotated, single) = (analyze(run, &opts), analyze(&whole.runs[0].input, &opts));
    assert_eq!(rotated, single);
    assert_eq!(rotated.counts.status.ok, 4);
    assert_eq!(rotated.counts.output_tokens, 11 + 12 + 13 + 14);
    assert!(rotated.complete);
    // The record reader gives every record, the repeated run records included.
    let mut records = RecordReader::open(&files, ReadOptions::default());
    let kinds: Vec<(u64, &str)> = records
        .by_ref()
        .map(|r| {
            let r = r.unwrap();
            let kind = match r.record {
                Record::Run(_) => "run",
                Record::Span(_) => "span",
                Record::Sample(_) => "sample",
                Record::End(_) => "end",
                Record::ServerSample(_) => "server_sample",
            };
            (r.line, kind)
        })
        .collect();
    assert_eq!(kinds.iter().filter(|(_, k)| *k == "run").count(), 3);
    assert_eq!(kinds.len(), 11);
    assert!(records.warnings().is_empty(), "{:?}", records.warnings());
}

#[test]
fn a_rotation_is_found_by_its_base_name_in_index_order() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("live.jsonl");
    let files = write_rotation(&base, &three_files());
    let expanded = expand_rotations(std::slice::from_ref(&base));
    assert_eq!(expanded.files, files);
    assert_eq!(expanded.notes.len(), 1);
    assert!(
        expanded.notes[0].contains("live.jsonl does not exist")
            && expanded.notes[0].contains("(3 files)"),
        "{:?}",
        expanded.notes
    );
    let set = read_paths(&expanded.files, ReadOptions::default()).unwrap();
    assert_eq!(set.runs[0].input.spans.len(), 4);
}

#[test]
fn a_repeated_run_record_that_differs_names_the_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = three_files();
    lines[1][0] = RUN.replace("00:00:00Z", "00:00:01Z");
    let files = write_rotation(&dir.path().join("live.jsonl"), &lines);
    let want = format!(
        "{}:1: field `started_at`: a second `run` record for run `r` with \
         \"2026-01-01T00:00:01.000000000Z\" where the first has \
         \"2026-01-01T00:00:00.000000000Z\"; a file that continues a run, as each file \
         of a rotation does, must repeat its `run` record exactly",
        files[1].display()
    );
    let e = read_paths(&files, ReadOptions::default()).unwrap_err();
    assert_eq!(e.to_string(), want);
    let last = RecordReader::open(&files, ReadOptions::default())
        .last()
        .unwrap()
        .unwrap_err();
    assert_eq!(last.to_string(), want);
    // A field only one of them has is named too.
    lines[1][0] = RUN.replace(r#","cap":2"#, "");
    let dir = tempfile::tempdir().unwrap();
    let files = write_rotation(&dir.path().join("live.jsonl"), &lines);
    let e = read_paths(&files, ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            ":1: field `cap`: a second `run` record for run `r` with absent where the first has 2"
        ),
        "{e}"
    );
    // With --skip-invalid it is counted, and the rest of the file is read.
    let opts = ReadOptions {
        skip_invalid: true,
        ..ReadOptions::default()
    };
    let set = read_paths(&files, opts).unwrap();
    assert_eq!(set.skipped["duplicate_run `cap`"], 1);
    assert_eq!(set.runs[0].input.spans.len(), 4);
}

/// Reading sizes a run's vectors from the first 4096 lines of a file; in a later
/// file of a rotation, scaling the whole run (the earlier files' spans too) would
/// reserve a multiple of what the run holds, a file of a day's rotation at a time.
#[test]
fn a_later_rotated_file_does_not_size_the_run_from_the_earlier_files_spans() {
    let dir = tempfile::tempdir().unwrap();
    let n = 12_000;
    let file = |from: u64| {
        let mut lines = vec![RUN.to_string()];
        lines.extend((from..from + n).map(span));
        lines
    };
    let files = write_rotation(&dir.path().join("live.jsonl"), &[file(1), file(1 + n)]);
    let set = read_paths(&files, ReadOptions::default()).unwrap();
    let spans = &set.runs[0].input.spans;
    assert_eq!(spans.len(), 2 * n as usize);
    assert!(
        spans.capacity() < spans.len() * 3 / 2,
        "{} spans, room for {}",
        spans.len(),
        spans.capacity()
    );
}
