//! The `server_sample` record: written by `LogWriter`, read back whole by the
//! record reader and into the run's analysis input by the analysis reader; a bad
//! one is an error naming the record.

use std::collections::BTreeMap;
use std::path::Path;

use tpscope_log::{LogWriter, ReadOptions, Reader, RecordReader};
use tpscope_model::{HistogramTotals, Record, ServerSampleRecord, Timestamp};

fn sample() -> ServerSampleRecord {
    ServerSampleRecord {
        run_id: "r1".into(),
        at: Timestamp::from_unix_nanos(1_800_000_000_123_456_789),
        server: Some("vllm".into()),
        running: Some(16.0),
        waiting: Some(3.0),
        kv_cache_usage: Some(0.5),
        preemptions_total: Some(0.0),
        prompt_tokens_total: Some(1000.0),
        generation_tokens_total: Some(2000.0),
        ttft: Some(HistogramTotals {
            sum: 1.5,
            count: 10.0,
        }),
        queue_time: None,
        raw: BTreeMap::from([("process_open_fds".to_string(), 66.0)]),
        gpus: Vec::new(),
    }
}

fn written() -> String {
    let mut w = LogWriter::new(Vec::new());
    w.write(&Record::ServerSample(Box::new(sample()))).unwrap();
    String::from_utf8(w.into_inner()).unwrap()
}

#[test]
fn a_server_sample_reads_back_whole_and_into_the_run() {
    let text = written();
    assert!(
        text.starts_with("{\"kind\":\"server_sample\",\"run_id\":\"r1\""),
        "{text}"
    );
    let got: Vec<Record> = RecordReader::new(
        Path::new("t.jsonl"),
        text.as_bytes(),
        ReadOptions::default(),
    )
    .map(|i| i.unwrap().record)
    .collect();
    assert_eq!(got, [Record::ServerSample(Box::new(sample()))]);

    let mut r = Reader::new(ReadOptions::default());
    r.read_from(Path::new("t.jsonl"), text.as_bytes()).unwrap();
    let set = r.finish();
    assert_eq!(set.runs.len(), 1);
    assert_eq!(set.runs[0].input.server_samples, [sample()]);
}

#[test]
fn a_server_sample_with_a_wrong_field_names_it() {
    let text = written().replace("\"running\":16.0", "\"running\":\"many\"");
    let mut r = Reader::new(ReadOptions::default());
    let err = r
        .read_from(Path::new("t.jsonl"), text.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("t.jsonl") && err.contains("server_sample"),
        "{err}"
    );
}
