//! `tpscope import`: other tools' per-request outputs (and OTLP/JSON traces) into a
//! span log, and the on-the-fly import behind `report --from` and `compare --from`.
//! The output file is never replaced unless `--overwrite` says so, as bench's `--out`.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use tpscope_log::import::{Format, ImportOptions, Imported, import_runs};
use tpscope_log::{LogSet, LogWriter, ReadOptions, Reader};

use crate::exit::ResultExt;

/// Flags of `tpscope import`.
#[derive(clap::Args, Debug, Clone)]
pub struct ImportArgs {
    /// The tool that wrote the files: auto, vllm, aiperf, guidellm, genai-bench, inference-perf, llmperf, otlp.
    #[arg(long, default_value = "auto", value_name = "FORMAT")]
    pub from: String,
    /// The files to import (one run each; a GuideLLM sweep gives one run per benchmark).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The span log to write (`-` is standard output).
    #[arg(long, short = 'o', value_name = "OUT.jsonl")]
    pub output: PathBuf,
    /// Replace OUT if it exists.
    #[arg(long)]
    pub overwrite: bool,
    /// Skip records that cannot be mapped (counted by reason) instead of stopping at the first.
    #[arg(long)]
    pub skip_invalid: bool,
}

/// A `--from` value: `None` is `auto` (sniffed per file).
pub fn parse_from(flag: &str, text: &str) -> anyhow::Result<Option<Format>> {
    if text == "auto" {
        return Ok(None);
    }
    text.parse::<Format>()
        .map(Some)
        .map_err(|e| anyhow::anyhow!("{flag}: {e}"))
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

/// Imports files (each its own run, or one run per benchmark of a GuideLLM sweep), with
/// run ids unique among them; each run comes with the file it came from.
pub fn import_files(
    from: Option<Format>,
    files: &[PathBuf],
    skip_invalid: bool,
) -> anyhow::Result<Vec<(PathBuf, Imported)>> {
    let mut out: Vec<(PathBuf, Imported)> = Vec::new();
    for f in files {
        let bytes = std::fs::read(f).with_context(|| format!("reading {}", f.display()))?;
        let mut opts = ImportOptions {
            skip_invalid,
            run_id: None,
            clients: llmperf_clients(f),
        };
        let mut runs = import_runs(from, f, &bytes, &opts)?;
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
) -> anyhow::Result<LogSet> {
    let runs = import_files(from, files, read.skip_invalid)?;
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

fn open(path: &Path, overwrite: bool) -> anyhow::Result<Box<dyn Write>> {
    if path == Path::new("-") {
        return Ok(Box::new(io::stdout().lock()));
    }
    let t = crate::out_file::Target { flag: "-o", path };
    Ok(Box::new(crate::out_file::create(t, overwrite, true)?))
}

/// Runs `tpscope import`.
pub fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let from = parse_from("--from", &args.from)?;
    let inputs: Vec<&Path> = args.files.iter().map(PathBuf::as_path).collect();
    let target = crate::out_file::Target {
        flag: "-o",
        path: &args.output,
    };
    crate::out_file::check(&[target], &inputs, args.overwrite)?;
    let runs = import_files(from, &args.files, args.skip_invalid)?;
    let mut w = LogWriter::new(BufWriter::new(open(&args.output, args.overwrite)?));
    let mut stderr = io::stderr().lock();
    for (_, r) in &runs {
        for rec in r.records() {
            w.write(&rec).failure().context("writing the span log")?;
        }
        let skipped: u64 = r.skipped.values().sum();
        let _ = writeln!(
            stderr,
            "imported {} requests from {} as {} (run {}){}",
            r.spans.len(),
            r.run
                .labels
                .get("source_file")
                .map(String::as_str)
                .unwrap_or("?"),
            r.format,
            r.run.run_id,
            if skipped > 0 {
                format!(", {skipped} records skipped")
            } else {
                String::new()
            }
        );
        for warn in &r.warnings {
            let _ = writeln!(stderr, "warning: {warn}");
        }
    }
    w.flush().failure().context("writing the span log")?;
    Ok(ExitCode::SUCCESS)
}
