//! The file lock (a second recorder on a file being written is refused, and
//! `Overwrite` does not empty it), and the handle's HTTP status and received text
//! (counted by the tokenizer when no usage came).

use tpscope_record::{OpenMode, RecordError, Recorder, RunInfo, Usage};

fn spans(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["kind"] == "span")
        .collect()
}

#[test]
fn a_second_recorder_on_a_file_being_written_is_refused_and_overwrite_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let first = Recorder::create(&path, RunInfo::new()).unwrap();
    first.queued("a").admitted().finish_ok(None);
    first.flush();
    for mode in [OpenMode::Append, OpenMode::Overwrite] {
        match Recorder::open(&path, RunInfo::new(), mode) {
            Err(RecordError::Locked { holder, .. }) => {
                assert!(holder.contains(&std::process::id().to_string()), "{holder}");
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("a second recorder was let in ({mode:?})"),
        }
    }
    first.close().unwrap();
    assert_eq!(
        spans(&path).len(),
        1,
        "the refused overwrite emptied the file"
    );
    let again = Recorder::open(&path, RunInfo::new(), OpenMode::Append).unwrap();
    again.close().unwrap();
}

#[test]
fn the_http_status_and_text_of_an_attempt_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    let rec = Recorder::create(&path, RunInfo::new()).unwrap();
    let r = rec.queued("texted").admitted();
    r.http_status(503);
    r.retry(tpscope_record::Cause::Http5xx);
    r.http_status(200);
    r.tokens(1);
    r.tokens(1);
    r.text("Rivers carve valleys slowly over many thousands of years.");
    r.finish_ok(None);
    let u = rec.queued("usage").admitted();
    u.text("Rivers carve valleys.");
    u.finish_ok(Usage::new(9, None));
    rec.close().unwrap();
    let s = spans(&path);
    let texted = s.iter().find(|s| s["request_id"] == "texted").unwrap();
    let statuses: Vec<_> = texted["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["http_status"].as_u64())
        .collect();
    assert_eq!(statuses, [Some(503), Some(200)]);
    assert!(
        texted["token_source"]
            .as_str()
            .unwrap()
            .starts_with("tokenizer"),
        "{texted}"
    );
    assert!(texted["output_tokens"].as_u64().unwrap() > 2, "{texted}");
    let usage = s.iter().find(|s| s["request_id"] == "usage").unwrap();
    assert_eq!(usage["output_tokens"], 9);
    assert_eq!(usage["token_source"], "usage");
}
