//! tpscope's analysis: from span facts and samples to every derived metric (docs/design.md
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
#![warn(missing_docs)]

pub mod analyze;
mod collect;
pub mod compare;
pub mod count_check;
pub mod detail;
pub mod diagnosis;
pub mod errors;
pub mod goodput;
pub mod input;
pub mod knee;
pub mod levels;
pub mod metrics;
mod quality;
pub mod ramp;
pub mod report;
pub mod series;
pub mod server;
pub mod sessions;
pub mod stats;
pub mod sweep;
#[cfg(test)]
mod test_support;
mod window_text;

pub use analyze::{DEFAULT_SLO_SHARE, Options, Prices, WindowSpec, analyze, steady_bounds};
pub use collect::LENGTH_EDGES;
pub use errors::{CauseMessages, ErrorMessages, MessageCount};
pub use goodput::{Goals, Goodput, parse_goals};
pub use input::{ClientFacts, RunInput, SampleFacts, SpanFacts, SpanText};
pub use metrics::{METRICS, SpanMetric, SpanMetrics, SpanRow, span_metrics, span_rows};
pub use quality::{MeasurementQuality, measurement_quality};
pub use report::{CauseCounts, REPORT_SCHEMA, Report, RunReport, Window, WindowKind};
pub use sessions::{SessionIds, SessionTurn};
pub use stats::{Summary, Tokens, TokensPerSecond};
pub use sweep::{Segment, Sweep};
pub use window_text::BadWindow;
