//! Pure renderers: each takes a finished report (or comparison) and returns bytes —
//! terminal text, markdown, JSON, CSV and a self-contained HTML page. They format;
//! they never compute a metric.
#![warn(missing_docs)]

pub mod compare;
pub mod count_check;
pub mod csv_out;
pub mod diagnosis;
pub mod energy;
pub mod fmt;
pub mod html;
pub mod lead;
pub mod ledger;
pub mod levels;
pub mod markdown;
mod quality;
pub mod ramp;
pub mod rows;
pub mod section;
pub mod sessions;
pub mod text;

use tpscope_analysis::Report;

/// A report could not be serialised.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// JSON serialisation failed.
    #[error("writing JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// CSV serialisation failed.
    #[error("writing CSV: {0}")]
    Csv(#[from] csv::Error),
}

/// A value as pretty JSON, ending with a newline.
pub(crate) fn pretty_json<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, RenderError> {
    let mut v = serde_json::to_vec_pretty(value)?;
    v.push(b'\n');
    Ok(v)
}

/// The report as pretty JSON (schema `tpscope.report/1`), ending with a newline.
pub fn json(report: &Report) -> Result<Vec<u8>, RenderError> {
    pretty_json(report)
}
