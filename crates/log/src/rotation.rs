//! Reading a rotated span log by its base name: `tpscope report live.jsonl`, when
//! `live.jsonl` does not exist but the proxy's `--rotate` wrote `live-0000.jsonl`,
//! `live-0001.jsonl`, …, reads those files in index order. Each starts with the
//! run's `run` record; the reader joins them into one run.

use std::path::{Path, PathBuf};

use tpscope_model::rotated_path;

/// The files of the rotation of `base`, in index order: `None` unless `base`
/// itself does not exist and its first rotated file does. The files are those
/// from index 0 up to the first missing one.
pub fn rotation_files(base: &Path) -> Option<Vec<PathBuf>> {
    if base.exists() || !rotated_path(base, 0).is_file() {
        return None;
    }
    let mut files = Vec::new();
    for index in 0.. {
        let p = rotated_path(base, index);
        if !p.is_file() {
            break;
        }
        files.push(p);
    }
    Some(files)
}

/// Paths as given, with each base name of a rotation (see [`rotation_files`])
/// replaced by the rotation's files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expanded {
    /// The files to read, in order.
    pub files: Vec<PathBuf>,
    /// One line per base name replaced, for the caller to show.
    pub notes: Vec<String>,
}

/// Replaces each path that names a rotation by its base name with the rotation's
/// files; every other path (standard input's `-` included) is kept as given.
pub fn expand_rotations(paths: &[PathBuf]) -> Expanded {
    let mut out = Expanded::default();
    for p in paths {
        let rotation = (p.as_os_str() != "-").then(|| rotation_files(p)).flatten();
        match rotation {
            Some(files) => {
                let (first, last) = (&files[0], &files[files.len() - 1]);
                out.notes.push(if files.len() == 1 {
                    format!(
                        "{} does not exist; reading its rotation's one file, {}",
                        p.display(),
                        first.display()
                    )
                } else {
                    format!(
                        "{} does not exist; reading its rotation as one log: {} … {} ({} files)",
                        p.display(),
                        first.display(),
                        last.display(),
                        files.len()
                    )
                });
                out.files.extend(files);
            }
            None => out.files.push(p.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_base_name_is_its_rotation_in_index_order_up_to_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("live.jsonl");
        for i in [0, 1, 2, 4] {
            std::fs::write(rotated_path(&base, i), "x\n").unwrap();
        }
        let files = rotation_files(&base).unwrap();
        assert_eq!(
            files,
            (0..3).map(|i| rotated_path(&base, i)).collect::<Vec<_>>()
        );
        let other = dir.path().join("other.jsonl");
        let e = expand_rotations(&[other.clone(), base.clone(), PathBuf::from("-")]);
        let mut want = vec![other.clone()];
        want.extend(files);
        want.push(PathBuf::from("-"));
        assert_eq!(e.files, want);
        assert_eq!(e.notes.len(), 1);
        assert!(e.notes[0].contains("(3 files)"), "{:?}", e.notes);
        // A base name that exists is read as itself, rotation or not.
        std::fs::write(&base, "x\n").unwrap();
        assert_eq!(rotation_files(&base), None);
        assert_eq!(rotation_files(&other), None);
    }
}
