//! Importing files from disk: each file's runs with ids unique among them (for
//! `tpscope import`), or a [`LogSet`] read as if they had been span logs (for
//! `report --from`, `compare --from` and Python's `from_`).

use std::io;
use std::path::{Path, PathBuf};

use super::{Format, ImportError, ImportOptions, Imported, import_runs};
use crate::{LogError, LogSet, LogWriter, ReadOptions, Reader};

/// Why files could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file could not be read.
    #[error("reading {}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A file is not what its format expects.
    #[error(transparent)]
    Import(#[from] ImportError),
    /// An imported run's records could not be read back.
    #[error(transparent)]
    Log(#[from] LogError),
    /// An imported record could not be serialised.
    #[error(transparent)]
    Write(#[from] io::Error),
    /// Every record of a file was skipped as invalid: nothing to import (a log of
    /// it would start in 1970).
    #[error(
        "{}: every one of its {skipped} records was skipped as invalid ({reasons}); nothing \
         to import (run without --skip-invalid to see the first error)",
        file.display()
    )]
    NothingImported {
        /// The file.
        file: PathBuf,
        /// Records skipped.
        skipped: u64,
        /// How many for each reason.
        reasons: String,
    },
}

/// The concurrency an LLMPerf `*_individual_responses.json` ran at, from the
/// `*_summary.json` LLMPerf writes beside it.
fn llmperf_clients(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix("_individual_responses.json")?;
    let summary = path.with_file_name(format!("{stem}_summary.json"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(summary).ok()?).ok()?;
    u32::try_from(v.get("num_concurrent_requests")?.as_u64()?).ok()
}

/// The concurrency an AIPerf `profile_export.jsonl` ran at (its records do not say),
/// from the `profile_export_aiperf.json` AIPerf writes beside it: the profiling
/// phase's `concurrency` in `input_config.phases` (AIPerf 0.10), else
/// `input_config.loadgen.concurrency` (the layout of AIPerf's example run).
fn aiperf_concurrency(path: &Path) -> Option<u32> {
    if !path.file_name()?.to_str()?.ends_with(".jsonl") {
        return None;
    }
    let summary = path.with_file_name("profile_export_aiperf.json");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(summary).ok()?).ok()?;
    let config = v.get("input_config")?;
    let phased = config
        .get("phases")
        .and_then(|p| p.as_array())
        .and_then(|phases| {
            phases
                .iter()
                .find(|p| p.get("name").and_then(|n| n.as_str()) == Some("profiling"))
                .and_then(|p| p.get("concurrency")?.as_u64())
        });
    let n = phased.or_else(|| config.get("loadgen")?.get("concurrency")?.as_u64())?;
    u32::try_from(n).ok().filter(|&n| n > 0)
}

/// Imports files (each its own run, or one run per benchmark of a GuideLLM sweep), with
/// run ids unique among them; each run comes with the file it came from.
pub fn import_files(
    from: Option<Format>,
    files: &[PathBuf],
    skip_invalid: bool,
    keep_transient: bool,
) -> Result<Vec<(PathBuf, Imported)>, LoadError> {
    let mut out: Vec<(PathBuf, Imported)> = Vec::new();
    for f in files {
        let bytes = std::fs::read(f).map_err(|source| LoadError::Read {
            file: f.clone(),
            source,
        })?;
        let mut opts = ImportOptions {
            skip_invalid,
            run_id: None,
            clients: llmperf_clients(f).or_else(|| aiperf_concurrency(f)),
            keep_transient,
        };
        let mut runs = import_runs(from, f, &bytes, &opts)?;
        for r in &runs {
            let skipped: u64 = r.skipped.values().sum();
            if r.spans.is_empty() && skipped > 0 {
                return Err(LoadError::NothingImported {
                    file: f.clone(),
                    skipped,
                    reasons: r
                        .skipped
                        .iter()
                        .map(|(k, v)| format!("{v} {k}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        let clash = |runs: &[Imported], out: &[(PathBuf, Imported)]| {
            runs.iter()
                .any(|r| out.iter().any(|(_, o)| o.run.run_id == r.run.run_id))
        };
        if clash(&runs, &out) {
            // A sweep's ids end in `#N`: its base is what came before.
            let first = &runs[0].run.run_id;
            let base = match runs.len() {
                1 => first.as_str(),
                _ => first.rsplit_once('#').map_or(first.as_str(), |(b, _)| b),
            };
            opts.run_id = Some(format!("{base}#{}", out.len() + 1));
            runs = import_runs(from, f, &bytes, &opts)?;
        }
        out.extend(runs.into_iter().map(|r| (f.clone(), r)));
    }
    Ok(out)
}

/// Imports files into a log set, as if they had been span logs (for `report` and
/// `compare`).
pub fn load_imported(
    from: Option<Format>,
    files: &[PathBuf],
    read: ReadOptions,
) -> Result<LogSet, LoadError> {
    let runs = import_files(from, files, read.skip_invalid, false)?;
    let mut reader = Reader::new(read);
    let mut warnings = Vec::new();
    let mut skipped = Vec::new();
    for (f, imported) in &runs {
        let mut bytes = Vec::new();
        let mut w = LogWriter::new(&mut bytes);
        for r in imported.records() {
            w.write(&r)?;
        }
        reader.read_from(f, bytes.as_slice())?;
        warnings.extend(imported.warnings.iter().cloned());
        skipped.extend(imported.skipped.iter().map(|(k, v)| (k.clone(), *v)));
    }
    let mut set = reader.finish();
    set.warnings.extend(warnings);
    for (k, v) in skipped {
        *set.skipped.entry(k).or_default() += v;
    }
    Ok(set)
}
