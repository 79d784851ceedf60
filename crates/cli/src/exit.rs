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

/// The error's message as printed: its chain joined with `: `, each cause once
/// (an error that names its source in its own text, as a thiserror `source` field
/// does, printed the OS error twice), and a port in use named as such.
pub fn message(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    let mut parts: Vec<&str> = text.split(": ").collect();
    // Drop a run of 1 to 3 segments that repeats the run just before it.
    let mut i = 0;
    while i < parts.len() {
        let dup =
            (1..=3).find(|&k| i >= k && i + k <= parts.len() && parts[i - k..i] == parts[i..i + k]);
        match dup {
            Some(k) => {
                parts.drain(i..i + k);
            }
            None => i += 1,
        }
    }
    let mut out = parts.join(": ");
    // By its text: a runtime failure's chain ends at its marker.
    let lower = out.to_ascii_lowercase();
    let in_use = lower.contains("address already in use") || lower.contains("address in use");
    if in_use {
        out.push_str(
            " (another process listens on that port: give another, or port 0 for a free one)",
        );
    }
    out
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

    /// As a thiserror error with a `source` field names its source.
    #[derive(Debug)]
    struct Listen {
        source: std::io::Error,
    }

    impl fmt::Display for Listen {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "cannot listen on 127.0.0.1:9000: {}", self.source)
        }
    }

    impl std::error::Error for Listen {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    /// `tpscope sim --port P` with P taken printed "Address already in use (os
    /// error 98)" twice, and did not say what to do.
    #[test]
    fn the_os_error_was_printed_twice() {
        let io = std::io::Error::from(std::io::ErrorKind::AddrInUse);
        let shown = io.to_string();
        let e = Err::<(), _>(Listen { source: io }).failure().unwrap_err();
        let m = message(&e);
        assert_eq!(m.matches(shown.as_str()).count(), 1, "{m}");
        assert!(m.starts_with("cannot listen on 127.0.0.1:9000: "), "{m}");
        assert!(m.ends_with("or port 0 for a free one)"), "{m}");
        let plain = anyhow::anyhow!("b").context("a");
        assert_eq!(message(&plain), "a: b");
    }
}
