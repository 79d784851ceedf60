//! The run record's `queue_times`: read as written, `measured` when absent, and
//! the label `queue_times=unmeasured` of logs imported before the field read the
//! same way (one release of compatibility); the analysis then forgets the queue.

use std::io::Cursor;
use std::path::Path;

use tpscope_analysis::{Options, analyze};
use tpscope_log::{LogSet, ReadOptions, Reader, RecordReader};
use tpscope_model::{QueueTimes, Record};

const RUN: &str = r#"{"kind":"run","run_id":"r","schema":"tpscope.spans/1","started_at":"2026-01-01T00:00:00Z","cap":2}"#;
const SPAN: &str = r#"{"kind":"span","run_id":"r","span_id":"1","status":"ok","queued_at":"2026-01-01T00:00:00Z","admitted_at":"2026-01-01T00:00:00.5Z","first_token_at":"2026-01-01T00:00:01Z","last_token_at":"2026-01-01T00:00:02Z","released_at":"2026-01-01T00:00:02Z","output_tokens":4}"#;

/// `RUN` with `fields` added.
fn run_with(fields: &str) -> String {
    RUN.replace(r#""cap":2"#, &format!(r#""cap":2,{fields}"#))
}

fn read(run: &str) -> Result<LogSet, String> {
    let mut r = Reader::new(ReadOptions::default());
    r.read_from(
        Path::new("test.jsonl"),
        Cursor::new(format!("{run}\n{SPAN}\n").into_bytes()),
    )
    .map_err(|e| e.to_string())?;
    Ok(r.finish())
}

/// The run record as the record reader reads it.
fn whole(run: &str) -> tpscope_model::RunRecord {
    let mut r = RecordReader::new(
        Path::new("test.jsonl"),
        run.as_bytes(),
        ReadOptions::default(),
    );
    match r.next().unwrap().unwrap().record {
        Record::Run(r) => r,
        other => panic!("{other:?}"),
    }
}

#[test]
fn queue_times_is_read_as_written_and_absent_means_measured() {
    for (fields, want) in [
        ("", QueueTimes::Measured),
        (r#""queue_times":null"#, QueueTimes::Measured),
        (r#""queue_times":"measured""#, QueueTimes::Measured),
        (r#""queue_times":"unmeasured""#, QueueTimes::Unmeasured),
    ] {
        let run = if fields.is_empty() {
            RUN.to_string()
        } else {
            run_with(fields)
        };
        let set = read(&run).unwrap();
        let record = set.runs[0].input.run.as_ref().unwrap();
        assert_eq!(record.queue_times, want, "{fields}");
        assert_eq!(whole(&run).queue_times, want, "{fields}");
        let report = analyze(&set.runs[0].input, &Options::default());
        assert_eq!(
            report.gap_fraction.is_none(),
            want == QueueTimes::Unmeasured,
            "{fields}"
        );
    }
    let e = read(&run_with(r#""queue_times":"guessed""#)).unwrap_err();
    assert_eq!(
        e,
        "test.jsonl:1: field `queue_times`: unknown value `guessed` (expected measured or unmeasured)"
    );
    let e = read(&run_with(r#""queue_times":false"#)).unwrap_err();
    assert!(
        e.starts_with("test.jsonl:1: field `queue_times`: expected a string"),
        "{e}"
    );
}

#[test]
fn logs_imported_before_the_field_carry_a_label_that_reads_as_unmeasured() {
    let old = run_with(r#""labels":{"queue_times":"unmeasured","job":"a"}"#);
    let set = read(&old).unwrap();
    let record = set.runs[0].input.run.as_ref().unwrap();
    assert_eq!(record.queue_times, QueueTimes::Unmeasured);
    // The label is taken into the field, so a re-export writes the new form.
    assert_eq!(record.labels.len(), 1);
    assert_eq!(record.labels["job"], "a");
    assert_eq!(whole(&old), *record);
    let report = analyze(&set.runs[0].input, &Options::default());
    assert_eq!(report.gap_fraction, None);
    assert_eq!(report.distributions.t_queue.count, 0);
    assert!(report.warnings.iter().any(|w| w.contains("no queue")));
    // Another value of the label is only a label; the field, when written, wins.
    let other = read(&run_with(r#""labels":{"queue_times":"maybe"}"#)).unwrap();
    let record = other.runs[0].input.run.as_ref().unwrap();
    assert_eq!(record.queue_times, QueueTimes::Measured);
    assert_eq!(record.labels["queue_times"], "maybe");
    let both = run_with(r#""queue_times":"measured","labels":{"queue_times":"unmeasured"}"#);
    let record = read(&both).unwrap().runs[0].input.run.clone().unwrap();
    assert_eq!(record.queue_times, QueueTimes::Measured);
}
