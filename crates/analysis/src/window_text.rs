//! The text form of a window (`full`, `steady`, `FROM..TO` in seconds from the run's
//! start), read the same way by the CLI's `--window` and the Python package.

use std::str::FromStr;
use std::time::Duration;

use crate::window::WindowSpec;

/// Why a window's text was not understood (the caller names the flag or argument).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadWindow {
    /// Not one of the three forms.
    #[error("`{0}` is not full, steady or FROM..TO (seconds from the run's start, e.g. 10..70)")]
    Form(String),
    /// A bound that is not a number.
    #[error("`{0}` is not a number of seconds")]
    NotANumber(String),
    /// A negative or unrepresentable bound.
    #[error("`{0}` is not a non-negative number of seconds")]
    Negative(String),
    /// `TO` not after `FROM`.
    #[error("the end ({to}) must be after the start ({from})")]
    Empty {
        /// The start as written.
        from: String,
        /// The end as written.
        to: String,
    },
}

impl FromStr for WindowSpec {
    type Err = BadWindow;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "full" => Ok(WindowSpec::Full),
            "steady" => Ok(WindowSpec::Steady),
            _ => {
                let (a, b) = text
                    .split_once("..")
                    .ok_or_else(|| BadWindow::Form(text.to_string()))?;
                let secs = |s: &str| -> Result<Duration, BadWindow> {
                    let v: f64 = s
                        .trim()
                        .parse()
                        .map_err(|_| BadWindow::NotANumber(s.to_string()))?;
                    Duration::try_from_secs_f64(v).map_err(|_| BadWindow::Negative(s.to_string()))
                };
                let (from, to) = (secs(a)?, secs(b)?);
                if to <= from {
                    return Err(BadWindow::Empty {
                        from: a.to_string(),
                        to: b.to_string(),
                    });
                }
                Ok(WindowSpec::Range { from, to })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_read_all_three_forms_and_reject_the_rest_by_reason() {
        assert_eq!("full".parse(), Ok(WindowSpec::Full));
        assert_eq!("steady".parse(), Ok(WindowSpec::Steady));
        assert_eq!(
            "10..70".parse(),
            Ok(WindowSpec::Range {
                from: Duration::from_secs(10),
                to: Duration::from_secs(70)
            })
        );
        assert!(matches!(
            "most".parse::<WindowSpec>(),
            Err(BadWindow::Form(_))
        ));
        assert!(matches!(
            "a..3".parse::<WindowSpec>(),
            Err(BadWindow::NotANumber(_))
        ));
        assert!(matches!(
            "-1..3".parse::<WindowSpec>(),
            Err(BadWindow::Negative(_))
        ));
        assert!(matches!(
            "5..5".parse::<WindowSpec>(),
            Err(BadWindow::Empty { .. })
        ));
    }
}
