//! Every file a command writes: an existing file is never replaced unless
//! `--overwrite` says so, and a command never writes onto one of its own inputs (nor
//! two of its outputs onto one file), even with `--overwrite`. A FIFO, pipe or device
//! (`/dev/stdout`) is written to as it is: there is nothing to replace.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use anyhow::{Context, bail};

use crate::exit::ResultExt;

/// One file a command is about to write, with the flag that named it.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    /// The flag, for messages (`-o`, `--html`, `--out`).
    pub flag: &'a str,
    /// The path given.
    pub path: &'a Path,
}

/// Whether two paths name the same file (only files that exist can).
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(ma), Ok(mb)) => same_meta(&ma, &mb),
        // Neither exists yet, or one does not: only the same spelling can clash.
        _ => a == b,
    }
}

#[cfg(unix)]
fn same_meta(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_meta(_: &std::fs::Metadata, _: &std::fs::Metadata) -> bool {
    false
}

fn is_regular(p: &Path) -> Option<bool> {
    std::fs::metadata(p).ok().map(|m| m.is_file())
}

/// Refuses, before anything runs, a target that is one of `inputs` (even with
/// `overwrite`), two targets onto one file, and a target that exists without
/// `overwrite`. `-` (standard input or output) is never a file here.
pub fn check(targets: &[Target<'_>], inputs: &[&Path], overwrite: bool) -> anyhow::Result<()> {
    let stdio = Path::new("-");
    for (i, t) in targets.iter().enumerate() {
        if t.path == stdio {
            continue;
        }
        if let Some(input) = inputs.iter().find(|i| **i != stdio && same_file(t.path, i)) {
            bail!(
                "{}: {} is one of this command's inputs ({}); writing there would destroy \
                 it, even with --overwrite: give another name",
                t.flag,
                t.path.display(),
                input.display()
            );
        }
        if let Some(other) = targets[..i]
            .iter()
            .find(|o| o.path != stdio && same_file(t.path, o.path))
        {
            bail!(
                "{} and {} name the same file ({}): give each its own",
                other.flag,
                t.flag,
                t.path.display()
            );
        }
        if !overwrite && is_regular(t.path) == Some(true) {
            return Err(exists(t));
        }
    }
    Ok(())
}

fn exists(t: &Target<'_>) -> anyhow::Error {
    anyhow::anyhow!(
        "{}: {} already exists; give another name, remove it, or add --overwrite to replace it",
        t.flag,
        t.path.display()
    )
}

/// Opens a target for writing: created new (atomically refusing one that appeared
/// since [`check`]) unless `overwrite`; a FIFO or device is opened as it is. An
/// error other than "exists" is a runtime failure when `failure` (exit 1; `compare`
/// keeps 1 for a failed criterion and leaves it unmarked).
pub fn create(t: Target<'_>, overwrite: bool, failure: bool) -> anyhow::Result<File> {
    let opened = match is_regular(t.path) {
        Some(false) => OpenOptions::new().write(true).open(t.path),
        _ if overwrite => File::create(t.path),
        _ => OpenOptions::new().write(true).create_new(true).open(t.path),
    };
    match opened {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(exists(&t)),
        Err(e) => Err(mark(e, failure))
            .with_context(|| format!("{}: creating {}", t.flag, t.path.display())),
    }
}

fn mark(e: io::Error, failure: bool) -> anyhow::Error {
    if failure {
        Err::<(), _>(e).failure().unwrap_err()
    } else {
        e.into()
    }
}

/// Writes `bytes` to a target as [`create`] opens it.
pub fn write(t: Target<'_>, overwrite: bool, failure: bool, bytes: &[u8]) -> anyhow::Result<()> {
    let mut f = create(t, overwrite, failure)?;
    f.write_all(bytes)
        .and_then(|()| f.flush())
        .map_err(|e| mark(e, failure))
        .with_context(|| format!("{}: writing {}", t.flag, t.path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t<'a>(flag: &'a str, path: &'a Path) -> Target<'a> {
        Target { flag, path }
    }

    #[test]
    fn report_output_onto_its_own_span_log_is_refused_even_with_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("run.jsonl");
        std::fs::write(&log, "{}\n").unwrap();
        // Another spelling of the same file.
        let other = dir.path().join(".").join("run.jsonl");
        for overwrite in [false, true] {
            let e = check(&[t("-o", &other)], &[&log], overwrite)
                .unwrap_err()
                .to_string();
            assert!(e.contains("-o:") && e.contains("inputs"), "{e}");
        }
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "{}\n");
    }

    #[test]
    fn an_existing_output_is_replaced_only_with_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("report.txt");
        std::fs::write(&out, "old").unwrap();
        let e = check(&[t("--html", &out)], &[], false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--html:") && e.contains("--overwrite"), "{e}");
        let e = write(t("--html", &out), false, true, b"new").unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "old");
        check(&[t("--html", &out)], &[], true).unwrap();
        write(t("--html", &out), true, true, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        let fresh = dir.path().join("fresh.txt");
        check(&[t("-o", &fresh)], &[], false).unwrap();
        write(t("-o", &fresh), false, true, b"x").unwrap();
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "x");
    }

    #[test]
    fn two_outputs_onto_one_file_are_refused_and_devices_are_written_as_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.html");
        let e = check(&[t("-o", &p), t("--html", &p)], &[], true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("-o and --html"), "{e}");
        let null = Path::new("/dev/null");
        if null.exists() {
            check(&[t("-o", null)], &[], false).unwrap();
            write(t("-o", null), false, true, b"x").unwrap();
        }
        check(&[t("-o", Path::new("-"))], &[Path::new("-")], false).unwrap();
    }
}
