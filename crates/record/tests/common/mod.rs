//! What the recorder's tests share: reading a log back whole (records, and the
//! analysis's view) and a brute-force gap oracle to hold the analysis's figure to.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use tpscope_analysis::analyze::{Options, analyze};
use tpscope_analysis::report::RunReport;
use tpscope_log::{ReadOptions, RecordReader, read_paths};
use tpscope_model::{EndRecord, Record, RunRecord, SampleRecord, Span, Timestamp};

/// One run of a log, as records.
#[derive(Debug, Default)]
pub struct Log {
    pub runs: Vec<RunRecord>,
    pub spans: Vec<Span>,
    pub samples: Vec<SampleRecord>,
    pub ends: Vec<EndRecord>,
    pub warnings: Vec<String>,
}

/// Every record of the file, through the record-level reader (which checks each
/// line as the analysis does).
pub fn read(path: &Path) -> Log {
    let mut reader = RecordReader::open([path], ReadOptions::default());
    let mut log = Log::default();
    for item in reader.by_ref() {
        match item.expect("the reader accepts the log").record {
            Record::Run(r) => log.runs.push(r),
            Record::Span(s) => log.spans.push(s),
            Record::Sample(s) => log.samples.push(s),
            Record::End(e) => log.ends.push(e),
            Record::ServerSample(_) => {}
        }
    }
    log.warnings = reader.warnings().to_vec();
    log
}

/// The analysis report of the file's one run, through `read_paths` + `analyze`.
pub fn report(path: &Path) -> RunReport {
    let set = read_paths(&[PathBuf::from(path)], ReadOptions::default()).expect("readable");
    assert_eq!(set.runs.len(), 1, "one run");
    analyze(&set.runs[0].input, &Options::default())
}

/// The span with this request id.
pub fn by_id<'a>(log: &'a Log, id: &str) -> &'a Span {
    log.spans
        .iter()
        .find(|s| s.request_id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no span for {id}"))
}

/// The gap fraction by brute force over elementary intervals: work queued while
/// in flight is below the cap (the run's, or the last sample's that states one).
pub fn gap_oracle(log: &Log) -> f64 {
    let n = |t: Timestamp| t.unix_nanos();
    let dequeued = |s: &Span| s.admitted_at.unwrap_or(s.released_at);
    let mut caps: Vec<(i64, u32)> = log
        .samples
        .iter()
        .filter_map(|s| s.cap.map(|c| (n(s.at), c)))
        .collect();
    caps.sort_by_key(|c| c.0);
    let mut edges: Vec<i64> = log
        .spans
        .iter()
        .flat_map(|s| [Some(s.queued_at), s.admitted_at, Some(s.released_at)])
        .flatten()
        .map(n)
        .chain(caps.iter().map(|c| c.0))
        .collect();
    edges.sort_unstable();
    edges.dedup();
    let w0 = log.spans.iter().map(|s| n(s.queued_at)).min().unwrap();
    let w1 = log.spans.iter().map(|s| n(s.released_at)).max().unwrap();
    let mut gap = 0i64;
    for w in edges.windows(2) {
        let (a, b) = (w[0].max(w0), w[1].min(w1));
        if b <= a {
            continue;
        }
        let queue = log
            .spans
            .iter()
            .filter(|s| n(s.queued_at) <= a && a < n(dequeued(s)))
            .count() as u32;
        let in_flight = log
            .spans
            .iter()
            .filter(|s| s.admitted_at.is_some_and(|t| n(t) <= a) && a < n(s.released_at))
            .count() as u32;
        let cap = caps
            .iter()
            .rev()
            .find(|c| c.0 <= a)
            .map(|c| c.1)
            .or(log.runs[0].cap);
        if queue > 0 && cap.is_none_or(|c| in_flight < c) {
            gap += b - a;
        }
    }
    gap as f64 / (w1 - w0) as f64
}
