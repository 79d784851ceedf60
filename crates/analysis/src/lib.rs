//! tpscope's analysis: from span facts and samples to every derived metric (docs/design.md
//! §3, §6, §7) — windows, the exact gap steps, distributions, time series, cost and
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
pub mod cost;
pub mod count_check;
pub mod counts;
pub mod detail;
pub mod diagnosis;
pub mod distributions;
pub mod energy;
pub mod errors;
pub mod goodput;
pub mod idle;
pub mod infer;
pub mod input;
pub mod knee;
pub mod ledger;
pub mod levels;
pub mod metrics;
mod quality;
pub mod ramp;
pub mod report;
pub mod run_command;
pub mod run_set;
pub mod series;
pub mod server;
mod session_ids;
pub mod sessions;
pub mod settings;
pub mod stats;
pub mod steps;
#[cfg(test)]
mod test_support;
pub mod whatif;
pub mod window;
mod window_text;

pub use analyze::analyze;
pub use collect::LENGTH_EDGES;
pub use cost::Prices;
pub use counts::CauseCounts;
pub use errors::{CauseMessages, ErrorMessages, MessageCount};
pub use goodput::{Goals, Goodput, parse_goals};
pub use infer::{InferredGap, infer_gap};
pub use input::{
    ClientFacts, ClientStamps, ClientTimes, Nanos, RunInput, SampleFacts, SpanFacts, SpanText,
};
pub use metrics::{METRICS, SpanMetric, SpanMetrics, SpanRow, span_metrics, span_rows};
pub use quality::{MeasurementQuality, measurement_quality};
pub use report::RunReport;
pub use run_set::{
    ChooseRun, REPORT_SCHEMA, Report, RunSet, analyze_set, choose_run, side_warnings,
};
pub use sessions::{SessionIds, SessionTurn};
pub use settings::{BadSetting, DEFAULT_SLO_SHARE, Options, Setting, Settings, SettingsText};
pub use stats::{Summary, Tokens, TokensPerSecond};
pub use steps::{Segment, Steps};
pub use window::{Window, WindowKind, WindowSpec, steady_bounds};
pub use window_text::BadWindow;
