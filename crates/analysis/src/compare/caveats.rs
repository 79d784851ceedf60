//! What limits a comparison beyond its criteria: runs whose workloads differ
//! (the server chose where replies end), and runs measured poorly (a verdict from
//! them is not to be trusted either way).

use crate::report::RunReport;

/// Output tokens may differ by this share before the workloads are said to differ.
const TOKENS_SAME: f64 = 0.01;

/// The warning when two runs of as many requests generated different amounts of
/// output: the server decided where replies end (EOS), so the runs measured
/// different work even with one seed.
pub(super) fn workload_differs(b: &RunReport, c: &RunReport) -> Option<String> {
    let (nb, nc) = (b.counts.output_tokens, c.counts.output_tokens);
    let base = nb.max(nc);
    if b.counts.spans != c.counts.spans || base == 0 {
        return None;
    }
    let diff = nb.abs_diff(nc) as f64 / base as f64;
    (diff > TOKENS_SAME).then(|| {
        format!(
            "the workloads differ: {nb} output tokens in the baseline, {nc} in the candidate, \
             over {} requests each ({:.1} % apart) — the server chose where replies end \
             (EOS); give --output-tokens N (which sends ignore_eos) so both runs ask for the \
             same work",
            b.counts.spans,
            diff * 100.0
        )
    })
}

/// The warning when either run's measurement quality is poor: its verdict is then
/// inconclusive rather than a pass or a fail.
pub(super) fn poor_quality(b: &RunReport, c: &RunReport) -> Option<String> {
    let poor: Vec<&str> = [("baseline", b), ("candidate", c)]
        .into_iter()
        .filter(|(_, r)| r.measurement_quality.poor)
        .map(|(side, _)| side)
        .collect();
    (!poor.is_empty()).then(|| {
        // The side's own warning says why; this says what it does to the verdict.
        format!(
            "the verdict is inconclusive: the {} was measured poorly (run both again with \
             the client unloaded)",
            poor.join(" and the ")
        )
    })
}
