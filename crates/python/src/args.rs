//! Python arguments to Rust integers with errors that name the argument and the
//! value to use (PyO3's own say only "out of range integral type conversion").

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;

use crate::err;

/// `v` as `T`; a value out of `T`'s range is an `OverflowError` and a non-integer
/// a `TypeError`, each naming `name` and what `expected` says to pass.
pub(crate) fn int<T: TryFrom<i64>>(
    name: &str,
    v: &Bound<'_, PyAny>,
    expected: &str,
) -> PyResult<T> {
    let shown = || {
        v.repr()
            .map(|r| r.to_string())
            .unwrap_or_else(|_| "the value".into())
    };
    let overflow = || {
        PyOverflowError::new_err(format!(
            "{name}: {} is out of range; pass {expected}",
            shown()
        ))
    };
    match v.extract::<i64>() {
        Ok(n) => T::try_from(n).map_err(|_| overflow()),
        Err(e) if e.is_instance_of::<PyOverflowError>(v.py()) => Err(overflow()),
        Err(_) => Err(PyTypeError::new_err(format!(
            "{name}: {} is not an integer; pass {expected}",
            shown()
        ))),
    }
}

/// A count (tokens): a non-negative integer.
pub(crate) fn count(name: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    int(name, v, "a non-negative integer (a count)")
}

/// An in-flight cap: 1 or more (0 would admit nothing).
pub(crate) fn positive_cap(name: &str, v: &Bound<'_, PyAny>) -> PyResult<u32> {
    let cap: u32 = int(
        name,
        v,
        "your pipeline's concurrency limit, from 1 to 4294967295 (e.g. cap=8)",
    )?;
    if cap == 0 {
        return Err(err(format!(
            "{name}: 0 would admit no request; pass your pipeline's concurrency limit \
             (e.g. {name}=8), or None when it has none"
        )));
    }
    Ok(cap)
}
