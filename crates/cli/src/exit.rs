//! Exit statuses, and the marker that tells a runtime failure (1) from bad input (2).
//!
//! Most errors a command returns are about what it was given (flags, files,
//! records), so an unmarked error exits 2. A command marks with
//! [`ResultExt::failure`] what went wrong while it ran (the target could not be
//! reached, a file could not be written, a server could not bind), which exits 1.

use std::fmt;

/// Exit status for a runtime failure.
pub const EXIT_FAILURE: u8 = 1;
/// Exit status for bad input (flags, files, records).
pub const EXIT_BAD_INPUT: u8 = 2;

/// An error that happened while running, not because of the input.
pub struct Failure(anyhow::Error);

impl fmt::Debug for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for Failure {
    // The whole inner chain, so `{:#}` of the outer error reads as if unmarked.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for Failure {}

/// Marks errors as runtime failures.
pub trait ResultExt<T> {
    /// This error happened while running: exit 1, not 2.
    fn failure(self) -> anyhow::Result<T>;
}

impl<T, E: Into<anyhow::Error>> ResultExt<T> for Result<T, E> {
    fn failure(self) -> anyhow::Result<T> {
        self.map_err(|e| anyhow::Error::new(Failure(e.into())))
    }
}

/// The exit status for an error a command returned.
pub fn status_of(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<Failure>()) {
        EXIT_FAILURE
    } else {
        EXIT_BAD_INPUT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn marked_failures_exit_1_and_read_as_unmarked() {
        let plain: anyhow::Result<()> = Err(anyhow::anyhow!("refused")).context("connecting");
        let marked = Err::<(), _>(anyhow::anyhow!("refused"))
            .failure()
            .context("connecting");
        let (plain, marked) = (plain.unwrap_err(), marked.unwrap_err());
        assert_eq!(status_of(&plain), EXIT_BAD_INPUT);
        assert_eq!(status_of(&marked), EXIT_FAILURE);
        assert_eq!(format!("{plain:#}"), format!("{marked:#}"));
    }
}
