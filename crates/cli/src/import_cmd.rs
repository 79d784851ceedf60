//! `tpscope import`: other tools' per-request outputs (and OTLP/JSON traces) into a
//! span log, and the on-the-fly import behind `report --from` and `compare --from`.
//! The output file is never replaced unless `--overwrite` says so, as bench's `--out`.

use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use tpscope_log::LogWriter;
use tpscope_log::import::import_files;

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
    /// Keep the requests a tool leaves out of its own metrics (GuideLLM's warm-up and cool-down).
    #[arg(long)]
    pub keep_transient: bool,
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
    let from = tpscope_analysis::settings::import_format(&args.from)
        .map_err(crate::analysis_flags::flag_error)?;
    let inputs: Vec<&Path> = args.files.iter().map(PathBuf::as_path).collect();
    let target = crate::out_file::Target {
        flag: "-o",
        path: &args.output,
    };
    crate::out_file::check(&[target], &inputs, args.overwrite)?;
    let runs = import_files(from, &args.files, args.skip_invalid, args.keep_transient)?;
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
