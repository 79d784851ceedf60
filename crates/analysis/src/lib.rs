//! tpscope's analysis: from span facts and samples to every derived metric (DESIGN.md
//! §3, §6, §7) — windows, the exact gap sweep, distributions, time series, cost and
//! comparison. Pure: no I/O, no async. Nothing else in tpscope computes these numbers.
//!
//! ```
//! use tpscope_analysis::{analyze, Options, RunInput};
//! # fn demo(run: tpscope_model::RunRecord, spans: Vec<tpscope_model::Span>) {
//! let input = RunInput::from_records(run, &spans, &[]);
//! let report = analyze(&input, &Options::default());
//! println!("{:?}", report.system_tps);
//! # }
//! ```

pub mod analyze;
mod collect;
pub mod compare;
pub mod count_check;
pub mod detail;
pub mod input;
pub mod knee;
pub mod metrics;
pub mod report;
pub mod series;
pub mod sessions;
pub mod stats;
pub mod sweep;
#[cfg(test)]
mod test_support;

pub use analyze::{Options, Prices, WindowSpec, analyze, steady_bounds};
pub use collect::LENGTH_EDGES;
pub use input::{RunInput, SampleFacts, SpanFacts};
pub use metrics::{METRICS, SpanMetric, SpanMetrics, SpanRow, span_metrics, span_rows};
pub use report::{CauseCounts, REPORT_SCHEMA, Report, RunReport, Window, WindowKind};
pub use stats::{Summary, Tokens, TokensPerSecond};
pub use sweep::{Segment, Sweep};
