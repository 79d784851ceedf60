//! What the workload readers share: the error naming a file's line and field,
//! reading a file, its JSON lines, and a token count from it.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::dist::MAX_LENGTH;

/// A workload file that cannot be used: which file, line and field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FileError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, when the problem is on one line.
    pub line: Option<usize>,
    /// The field, when the problem is one field.
    pub field: Option<String>,
    /// What was expected and what was found.
    pub problem: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(fld) = &self.field {
            write!(f, ": field `{fld}`")?;
        }
        write!(f, ": {}", self.problem)
    }
}

pub(super) fn ferr(
    path: &Path,
    line: Option<usize>,
    field: Option<&str>,
    problem: impl Into<String>,
) -> FileError {
    FileError {
        path: path.to_path_buf(),
        line,
        field: field.map(str::to_string),
        problem: problem.into(),
    }
}

pub(super) fn read(path: &Path) -> Result<String, FileError> {
    std::fs::read_to_string(path).map_err(|e| ferr(path, None, None, format!("cannot read: {e}")))
}

/// The non-blank lines of a JSON Lines text, each parsed, with its 1-based number.
pub(super) fn json_lines<'a>(
    path: &'a Path,
    text: &'a str,
) -> impl Iterator<Item = Result<(usize, Value), FileError>> + 'a {
    text.lines()
        .enumerate()
        .filter(|(_, raw)| !raw.trim().is_empty())
        .map(move |(i, raw)| {
            serde_json::from_str(raw)
                .map(|v| (i + 1, v))
                .map_err(|e| ferr(path, Some(i + 1), None, format!("not valid JSON: {e}")))
        })
}

pub(super) fn positive_u32(
    v: &Value,
    path: &Path,
    line: usize,
    field: &str,
) -> Result<u32, FileError> {
    v.as_u64()
        .filter(|n| (1..=u64::from(MAX_LENGTH)).contains(n))
        .map(|n| n as u32)
        .ok_or_else(|| {
            ferr(
                path,
                Some(line),
                Some(field),
                format!("expected a whole number of tokens in 1..=1000000, found {v}"),
            )
        })
}

/// Test helpers of the readers: the bundled fixtures and temporary files.
#[cfg(test)]
pub(super) mod testing {
    use std::io::Write;
    use std::path::{Path, PathBuf};

    pub fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name)
    }

    pub fn temp(content: &str) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(content.as_bytes()).unwrap();
        f
    }
}
