//! A rotated span log end to end: the proxy writes `live-0000.jsonl`, … under
//! `--rotate`, and the log reader reads the files together, or by their base
//! name, as the one run the proxy recorded, with the totals of the spans written.

mod common;

use common::*;
use tpscope_analysis::{Options, analyze};
use tpscope_log::{ReadOptions, RecordReader, expand_rotations, read_paths};
use tpscope_model::{Record, Status};
use tpscope_sim::Speed;

#[tokio::test]
async fn a_rotated_log_reads_as_one_run_with_the_totals_of_the_spans_written() {
    let sim = sim(Speed::Max).await;
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("live.jsonl");
    let mut cfg = config(sim.addr(), &base);
    cfg.rotate = Some(tpscope_proxy::Rotate::Size(3000));
    let p = proxy(cfg).await;
    let mut asked = 0;
    for i in 0..16u32 {
        let max_tokens = 2 + i % 5;
        asked += u64::from(max_tokens);
        let r = post(
            p.addr(),
            "/v1/chat/completions",
            &chat(sim.model_name(), i % 2 == 0, max_tokens),
        )
        .await;
        assert_eq!(r.status, 200);
    }
    p.shutdown().await.unwrap();
    sim.shutdown().await.unwrap();

    // The files the proxy wrote, in index order, named as the reader names them.
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() > 2, "{files:?}");
    for (i, f) in files.iter().enumerate() {
        assert_eq!(*f, tpscope_proxy::rotated_path(&base, i as u32));
        assert_eq!(*f, tpscope_model::rotated_path(&base, i as u32));
    }
    // What was written, file by file.
    let written: Vec<_> = files.iter().flat_map(|f| spans(f)).collect();
    assert_eq!(written.len(), 16);
    let written_tokens: u64 = written.iter().map(|s| s.output_tokens).sum();
    assert_eq!(written_tokens, asked);

    // Read together: one run, every span and sample, complete, no warnings.
    let set = read_paths(&files, ReadOptions::default()).unwrap();
    assert_eq!(set.runs.len(), 1);
    assert!(set.warnings.is_empty(), "{:?}", set.warnings);
    let run = &set.runs[0].input;
    assert_eq!(run.spans.len(), written.len());
    let samples = files
        .iter()
        .flat_map(|f| records(f))
        .filter(|r| matches!(r, Record::Sample(_)))
        .count();
    assert_eq!(run.samples.len(), samples);
    assert_eq!(run.end.as_ref().map(|e| e.spans), Some(16));
    let report = analyze(run, &Options::default());
    assert!(report.complete);
    assert_eq!(report.counts.spans, 16);
    assert_eq!(report.counts.status.ok, 16);
    assert_eq!(report.counts.output_tokens, written_tokens);
    assert!(written.iter().all(|s| s.status == Status::Ok));

    // By the base name, which does not exist: the same files, the same run.
    assert!(!base.exists());
    let expanded = expand_rotations(std::slice::from_ref(&base));
    assert_eq!(expanded.files, files);
    assert_eq!(expanded.notes.len(), 1);
    let by_base = read_paths(&expanded.files, ReadOptions::default()).unwrap();
    assert_eq!(analyze(&by_base.runs[0].input, &Options::default()), report);

    // The record reader agrees, the repeated `run` records included.
    let mut reader = RecordReader::open(&files, ReadOptions::default());
    let runs = reader
        .by_ref()
        .filter(|r| matches!(r.as_ref().unwrap().record, Record::Run(_)))
        .count();
    assert_eq!(runs, files.len());
    assert!(reader.warnings().is_empty(), "{:?}", reader.warnings());
}
