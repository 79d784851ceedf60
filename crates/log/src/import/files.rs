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
    let v = aiperf_summary(path)?;
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

/// The `profile_export_aiperf.json` AIPerf writes beside its `*.jsonl` records.
fn aiperf_summary(path: &Path) -> Option<serde_json::Value> {
    if !path.file_name()?.to_str()?.ends_with(".jsonl") {
        return None;
    }
    let summary = path.with_file_name("profile_export_aiperf.json");
    serde_json::from_slice(&std::fs::read(summary).ok()?).ok()
}

/// What reproduces AIPerf's throughputs: they divide by its `benchmark_duration`,
/// from the first request sent to the last response, where tpscope's full window
/// runs from the first credit to the last request's end. The two differ by
/// milliseconds, or by whole timeouts where the last requests failed with no
/// response (20 s of a published 211.6 s run: 0.52 tok/s for AIPerf's 0.575).
/// `None` where the summary has no duration or the records do not give it.
fn aiperf_window_note(path: &Path, imported: &Imported) -> Option<String> {
    let theirs = aiperf_summary(path)?
        .get("benchmark_duration")?
        .get("avg")?
        .as_f64()?;
    let spans = &imported.spans;
    let sent = spans.iter().filter_map(|s| s.admitted_at).min()?;
    let answered = spans.iter().filter_map(|s| s.last_token_at).max()?;
    let ours = answered.since(sent)?.as_secs_f64();
    // Within AIPerf's own rounding: some builds subtract its stamps as f64
    // nanoseconds since 1970 (256 ns steps); else it is not the stretch we think.
    if (ours - theirs).abs() > 1e-6 {
        return None;
    }
    let start = imported.run.started_at;
    let first = spans.iter().map(|s| s.queued_at).min()?;
    let last = spans.iter().map(|s| s.released_at).max()?;
    let secs = |t: tpscope_model::Timestamp| t.since(start).map_or(0.0, |d| d.as_secs_f64());
    // To the microsecond, outward: the first and last tokens stay inside.
    let (from, to) = (
        (secs(sent) * 1e6).floor() / 1e6,
        (secs(answered) * 1e6).ceil() / 1e6,
    );
    Some(format!(
        "{}: AIPerf's throughputs divide by its benchmark_duration, {theirs:.9} s from the \
         first request sent to the last response; tpscope's full window ({:.9} s) runs from \
         the first credit to the last request's end; `--window {from:.6}..{to:.6}` \
         reproduces AIPerf's output throughput",
        path.display(),
        last.since(first).map_or(0.0, |d| d.as_secs_f64()),
    ))
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
        for r in &mut runs {
            if r.format == Format::Aiperf
                && let Some(note) = aiperf_window_note(f, r)
            {
                r.warnings.push(note);
            }
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
