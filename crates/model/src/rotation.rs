//! The names of a rotated span log's files (`--rotate`): `STEM-0000.EXT`,
//! `STEM-0001.EXT`, … beside the base name given, so that they sort in order.
//! One place, for the writer that rotates and the reader that joins them.

use std::path::{Path, PathBuf};

/// The `index`-th file of the rotation of `base` (`spans.jsonl` →
/// `spans-0003.jsonl`; a base without an extension gets none).
pub fn rotated_path(base: &Path, index: u32) -> PathBuf {
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match base.extension() {
        Some(ext) => format!("{stem}-{index:04}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{index:04}"),
    };
    base.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotated_names_keep_the_directory_and_extension_and_sort_in_order() {
        assert_eq!(
            rotated_path(Path::new("/tmp/d/live.jsonl"), 3),
            Path::new("/tmp/d/live-0003.jsonl")
        );
        assert_eq!(rotated_path(Path::new("live"), 12), Path::new("live-0012"));
        assert_eq!(
            rotated_path(Path::new("a.b.jsonl"), 0),
            Path::new("a.b-0000.jsonl")
        );
    }
}
