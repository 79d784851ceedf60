//! The native half of the `tpscope` Python package (`tpscope._tpscope`): the
//! recording API of docs/design.md §17 over `tpscope_record::Recorder`, and the report and
//! compare documents built by the same Rust code as `tpscope report/compare --format
//! json`. The Python half (python/tpscope) adds context managers and SDK instrumentation.
#![warn(missing_docs)]

use pyo3::prelude::*;

mod analysis;
mod args;
mod recorder;
mod spans;

pyo3::create_exception!(
    _tpscope,
    TpscopeError,
    pyo3::exceptions::PyException,
    "An error from tpscope's Rust core (a span log that cannot be read or written, a bad argument); the message is the Rust one."
);

/// Maps any displayable Rust error to a [`TpscopeError`] with its message.
pub(crate) fn err(e: impl std::fmt::Display) -> PyErr {
    TpscopeError::new_err(e.to_string())
}

#[pymodule]
fn _tpscope(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TpscopeError", m.py().get_type::<TpscopeError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add(
        "CAUSES",
        tpscope_model::Cause::ALL
            .iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>(),
    )?;
    m.add("REPORT_SCHEMA", tpscope_analysis::REPORT_SCHEMA)?;
    m.add("COMPARE_SCHEMA", tpscope_analysis::compare::COMPARE_SCHEMA)?;
    m.add_class::<recorder::PyRecorder>()?;
    m.add_class::<recorder::PyRequest>()?;
    m.add_function(wrap_pyfunction!(analysis::analyze_json, m)?)?;
    m.add_function(wrap_pyfunction!(analysis::compare_json, m)?)?;
    m.add_function(wrap_pyfunction!(spans::spans_columns, m)?)?;
    Ok(())
}
