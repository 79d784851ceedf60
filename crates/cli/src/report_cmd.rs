//! `tpscope report`: read span logs, analyse every run, render the report.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::bail;
use clap::ValueEnum;
use tpscope_analysis::{Options, Report};
use tpscope_log::import::{Format as ImportFormat, load_imported};
use tpscope_log::{LogSet, ReadOptions, Reader, read_paths};
use tpscope_render::RenderError;

use crate::analysis_flags::{AnalysisFlags, write_out};
use crate::exit::ResultExt;

/// Output formats of `tpscope report`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A terminal summary.
    Text,
    /// The full report as JSON (schema tpscope.report/1).
    Json,
    /// The summary as markdown tables.
    Markdown,
    /// One row per span with its derived metrics.
    Csv,
}

/// Flags of `tpscope report`.
#[derive(clap::Args, Debug, Clone)]
// Negative numbers reach the value checks, which name the flag and the bound.
#[command(allow_negative_numbers = true)]
pub struct ReportArgs {
    /// Span log files (JSON Lines, format tpscope.spans/1; `-` reads standard input). Runs are grouped by run_id across files; a rotated log's files read as one run, and its base name (live.jsonl for live-0000.jsonl, …) reads them all.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Reading, window and prices (shared with `compare`).
    #[command(flatten)]
    pub analysis: AnalysisFlags,
    /// Bucket length of the time series in the JSON output (e.g. 1s, 500ms).
    // Listed right after --window, as before the shared flags were grouped: it takes
    // --time-unit's place in the order, and a tie sorts by name ("bucket" first).
    #[arg(long, default_value = "1s", value_name = "DURATION", display_order = 2)]
    pub bucket: String,
    /// Also write a self-contained HTML page with charts to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the report to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace an existing -o or --html file (never one of the input files).
    #[arg(long)]
    pub overwrite: bool,
}

impl ReportArgs {
    /// The arguments `tpscope report FILE` would have, for other commands.
    pub fn for_file(path: &Path) -> ReportArgs {
        ReportArgs {
            files: vec![path.to_path_buf()],
            format: Format::Text,
            analysis: AnalysisFlags::default(),
            bucket: "1s".into(),
            html: None,
            output: None,
            overwrite: false,
        }
    }
}

/// The analysis settings of a `report` command line, validated.
#[derive(Clone, Debug)]
pub struct ReportConfig {
    /// How to read.
    pub read: ReadOptions,
    /// How to analyse.
    pub analysis: Options,
    /// Whether the files are imported (`Some`, with the format or `None` for auto).
    pub from: Option<Option<ImportFormat>>,
}

impl ReportConfig {
    /// Validates the flags.
    pub fn from_args(a: &ReportArgs) -> anyhow::Result<ReportConfig> {
        let settings = a.analysis.settings(Some(&a.bucket))?;
        Ok(ReportConfig {
            read: ReadOptions {
                keep_span_ids: a.format == Format::Csv,
                ..ReadOptions::of(&settings)
            },
            analysis: settings.options,
            from: settings.from,
        })
    }
}

/// Reads span logs (with the reader's own file/line/field errors); `-` reads
/// standard input, which is named `<stdin>` in messages; a missing base name of a
/// rotated log reads its files (said on stderr), as does a record of a kind this
/// version does not read, skipped. With `from`, the files are other tools'
/// results, imported first.
pub fn load(
    files: &[PathBuf],
    read: ReadOptions,
    from: Option<Option<ImportFormat>>,
) -> anyhow::Result<LogSet> {
    if let Some(format) = from {
        return Ok(load_imported(format, files, read)?);
    }
    let expanded = tpscope_log::expand_rotations(files);
    for note in &expanded.notes {
        eprintln!("note: {note}");
    }
    let set = read_logs(&expanded.files, read)?;
    for w in set.unknown_kind_warnings() {
        eprintln!("warning: {w}");
    }
    Ok(set)
}

/// Reads span log files, `-` as standard input.
fn read_logs(files: &[PathBuf], read: ReadOptions) -> anyhow::Result<LogSet> {
    let stdin = Path::new("-");
    if !files.iter().any(|f| f == stdin) {
        return Ok(read_paths(files, read)?);
    }
    if files.iter().filter(|f| *f == stdin).count() > 1 {
        bail!("`-` (standard input) can be given only once");
    }
    let mut reader = Reader::new(read);
    for f in files {
        if f == stdin {
            reader.read_from(Path::new("<stdin>"), std::io::stdin().lock())?;
        } else {
            reader.read_path(f)?;
        }
    }
    Ok(reader.finish())
}

/// Analyses every run of a log set into one report, with the table of each load
/// sweep among them (`bench` prints those same tables at the end of a sweep).
pub fn build_report(set: &LogSet, opts: &Options) -> Report {
    tpscope_analysis::analyze_set(set, opts)
}

/// Renders a report in a format (CSV needs the log set's spans and ids).
pub fn render(report: &Report, set: &LogSet, format: Format) -> Result<Vec<u8>, RenderError> {
    match format {
        Format::Text => Ok(tpscope_render::text::render(report)),
        Format::Json => tpscope_render::json(report),
        Format::Markdown => Ok(tpscope_render::markdown::render(report)),
        Format::Csv => {
            let runs: Vec<_> = set
                .runs
                .iter()
                .map(|r| (&r.input, r.span_ids.as_slice(), r.span_text.as_slice()))
                .collect();
            tpscope_render::csv_out::render(&runs)
        }
    }
}

/// Refuses, before reading anything, an `-o` or `--html` file that exists (without
/// `overwrite`) or that is one of the `inputs` (even with it): `report run.jsonl -o
/// run.jsonl` once replaced the span log with the text report. `compare` shares it.
pub fn check_outputs(
    inputs: &[PathBuf],
    output: Option<&Path>,
    html: Option<&Path>,
    overwrite: bool,
) -> anyhow::Result<()> {
    use crate::out_file::{Target, check};
    let targets: Vec<Target<'_>> = [("-o", output), ("--html", html)]
        .into_iter()
        .filter_map(|(flag, p)| p.map(|path| Target { flag, path }))
        .collect();
    let inputs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    check(&targets, &inputs, overwrite)
}

/// Runs `tpscope report`.
pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let cfg = ReportConfig::from_args(&args)?;
    check_outputs(
        &args.files,
        args.output.as_deref(),
        args.html.as_deref(),
        args.overwrite,
    )?;
    let set = load(&args.files, cfg.read, cfg.from)?;
    let report = build_report(&set, &cfg.analysis);
    let bytes = render(&report, &set, args.format).failure()?;
    if let Some(path) = &args.html {
        let details: Vec<_> = set
            .runs
            .iter()
            .zip(&report.runs)
            .map(|(r, rep)| tpscope_analysis::detail::detail(&r.input, rep))
            .collect();
        let page = tpscope_render::html::report(&report, &details);
        write_out(&page, Some(path), "--html", args.overwrite, true)?;
    }
    write_out(&bytes, args.output.as_deref(), "-o", args.overwrite, true)?;
    Ok(ExitCode::SUCCESS)
}
