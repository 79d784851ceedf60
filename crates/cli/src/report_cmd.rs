//! `tpscope report`: read span logs, analyse every run, render the report.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::ValueEnum;
use tpscope_analysis::{Options, Prices, REPORT_SCHEMA, Report, WindowSpec, analyze};
use tpscope_log::{LogSet, ReadOptions, TimeUnit, read_paths};

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
pub struct ReportArgs {
    /// Span log files (JSON Lines, format tpscope.spans/1). Runs are grouped by run_id across files.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// The window the figures cover: full, steady, or FROM..TO in seconds from the run's start (e.g. 10..70).
    #[arg(long, default_value = "full", value_name = "full|steady|FROM..TO")]
    pub window: String,
    /// Bucket length of the time series in the JSON output (e.g. 1s, 500ms).
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub bucket: String,
    /// Unit of timestamps written as numbers (since the Unix epoch).
    #[arg(long, value_name = "s|ms|us|ns")]
    pub time_unit: Option<String>,
    /// Skip invalid records (counted and reported by reason) instead of stopping at the first.
    #[arg(long)]
    pub skip_invalid: bool,
    /// Price of the deployment per hour (for cost per million output tokens and per completion).
    #[arg(long, value_name = "PRICE")]
    pub price_per_hour: Option<f64>,
    /// Price per million input tokens (API pricing).
    #[arg(long, value_name = "PRICE")]
    pub price_per_mtok_in: Option<f64>,
    /// Price per million output tokens (API pricing).
    #[arg(long, value_name = "PRICE")]
    pub price_per_mtok_out: Option<f64>,
    /// Also write a self-contained HTML page with charts to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the report to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

impl ReportArgs {
    /// The arguments `tpscope report FILE` would have, for other commands.
    pub fn for_file(path: &Path) -> ReportArgs {
        ReportArgs {
            files: vec![path.to_path_buf()],
            format: Format::Text,
            window: "full".into(),
            bucket: "1s".into(),
            time_unit: None,
            skip_invalid: false,
            price_per_hour: None,
            price_per_mtok_in: None,
            price_per_mtok_out: None,
            html: None,
            output: None,
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
}

fn parse_window(text: &str) -> anyhow::Result<WindowSpec> {
    match text {
        "full" => Ok(WindowSpec::Full),
        "steady" => Ok(WindowSpec::Steady),
        _ => {
            let (a, b) = text.split_once("..").with_context(|| {
                format!("--window: `{text}` is not full, steady or FROM..TO (seconds from the run's start, e.g. 10..70)")
            })?;
            let secs = |s: &str| -> anyhow::Result<Duration> {
                let v: f64 = s
                    .trim()
                    .parse()
                    .with_context(|| format!("--window: `{s}` is not a number of seconds"))?;
                Duration::try_from_secs_f64(v).map_err(|_| {
                    anyhow::anyhow!("--window: `{s}` is not a non-negative number of seconds")
                })
            };
            let (from, to) = (secs(a)?, secs(b)?);
            if to <= from {
                bail!("--window: the end ({b}) must be after the start ({a})");
            }
            Ok(WindowSpec::Range { from, to })
        }
    }
}

fn price(flag: &str, v: Option<f64>) -> anyhow::Result<Option<f64>> {
    match v {
        Some(p) if !p.is_finite() || p < 0.0 => bail!("{flag}: {p} is not a non-negative price"),
        _ => Ok(v),
    }
}

impl ReportConfig {
    /// Validates the flags.
    pub fn from_args(a: &ReportArgs) -> anyhow::Result<ReportConfig> {
        let time_unit = a
            .time_unit
            .as_deref()
            .map(|u| {
                u.parse::<TimeUnit>()
                    .map_err(|e| anyhow::anyhow!("--time-unit: {e}"))
            })
            .transpose()?;
        let bucket = tpscope_model::units::parse_duration(&a.bucket)
            .map_err(|e| anyhow::anyhow!("--bucket: {e}"))?;
        if bucket.is_zero() {
            bail!("--bucket: the bucket must be longer than 0");
        }
        Ok(ReportConfig {
            read: ReadOptions {
                time_unit,
                skip_invalid: a.skip_invalid,
                keep_span_ids: a.format == Format::Csv,
            },
            analysis: Options {
                window: parse_window(&a.window)?,
                bucket: Some(bucket),
                prices: Prices {
                    per_hour: price("--price-per-hour", a.price_per_hour)?,
                    per_mtok_in: price("--price-per-mtok-in", a.price_per_mtok_in)?,
                    per_mtok_out: price("--price-per-mtok-out", a.price_per_mtok_out)?,
                },
                ..Options::default()
            },
        })
    }
}

/// Reads span logs (with the reader's own file/line/field errors).
pub fn load(files: &[PathBuf], read: ReadOptions) -> anyhow::Result<LogSet> {
    Ok(read_paths(files, read)?)
}

/// Analyses every run of a log set into one report.
pub fn build_report(set: &LogSet, opts: &Options) -> Report {
    Report {
        schema: REPORT_SCHEMA,
        runs: set.runs.iter().map(|r| analyze(&r.input, opts)).collect(),
        skipped: set.skipped.clone(),
        warnings: set.warnings.clone(),
    }
}

/// Renders a report in a format (CSV needs the log set's spans and ids).
pub fn render(report: &Report, set: &LogSet, format: Format) -> Vec<u8> {
    match format {
        Format::Text => tpscope_render::text::render(report),
        Format::Json => tpscope_render::json(report),
        Format::Markdown => tpscope_render::markdown::render(report),
        Format::Csv => {
            let runs: Vec<_> = set
                .runs
                .iter()
                .map(|r| (&r.input, r.span_ids.as_slice()))
                .collect();
            tpscope_render::csv_out::render(&runs)
        }
    }
}

/// Runs `tpscope report`.
pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let cfg = ReportConfig::from_args(&args)?;
    let set = load(&args.files, cfg.read)?;
    let report = build_report(&set, &cfg.analysis);
    let bytes = render(&report, &set, args.format);
    if let Some(path) = &args.html {
        let details: Vec<_> = set
            .runs
            .iter()
            .zip(&report.runs)
            .map(|(r, rep)| tpscope_analysis::detail::detail(&r.input, rep))
            .collect();
        std::fs::write(path, tpscope_render::html::report(&report, &details))
            .with_context(|| format!("--html: writing {}", path.display()))?;
    }
    match &args.output {
        Some(path) => {
            std::fs::write(path, &bytes).with_context(|| format!("writing {}", path.display()))?
        }
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&bytes)?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the report of one span log the way `tpscope report FILE` does, to stdout.
/// `bench` calls this after a run.
pub fn print_after_bench(path: &Path) -> anyhow::Result<()> {
    run(ReportArgs::for_file(path)).map(|_| ())
}
