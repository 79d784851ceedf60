//! `tpscope compare`: read a baseline and a candidate run (two files, or two runs of
//! one file), judge the acceptance criteria with bootstrap intervals, and print the
//! verdicts; optionally write the HTML page. Exit 0 all pass, 1 any fail, 3
//! inconclusive, 2 bad input.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::ValueEnum;
use tpscope_analysis::compare::{CompareConfig, RunRef, Setting, Thresholds, compare};
use tpscope_analysis::detail::compare_details;
use tpscope_analysis::stats::bootstrap::BootstrapConfig;
use tpscope_analysis::{ChooseRun, Settings};
use tpscope_log::{LoadedRun, LogSet, ReadOptions};

use crate::analysis_flags::{AnalysisFlags, write_out};
use crate::report_cmd;

/// Output formats of `tpscope compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    /// A terminal table.
    Text,
    /// The comparison as JSON (schema tpscope.compare/1).
    Json,
    /// Markdown for a pull-request comment.
    Markdown,
}

/// Flags of `tpscope compare`.
#[derive(clap::Args, Debug, Clone)]
// Two shared flags read differently here: both runs are windowed, and both priced.
#[command(
    // Negative numbers reach the value checks, which name the flag and the bound.
    allow_negative_numbers = true,
    mut_arg("window", |a| a.help("The window both runs' figures cover: full, steady, or FROM..TO in seconds from each run's start")),
    mut_arg("price_per_hour", |a| a.help("Price of the deployment per hour (cost per million output tokens and per completion, side by side)")),
    // Only a sweep's table reads it; compare judges two runs.
    mut_arg("slo_percentile", |a| a.hide(true))
)]
pub struct CompareArgs {
    /// BASELINE and CANDIDATE span logs; or one log holding both runs, chosen with --baseline-run and --candidate-run.
    #[arg(required = true, num_args = 1..=2, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The baseline's run_id (needed when its file holds several runs).
    #[arg(long, value_name = "RUN_ID")]
    pub baseline_run: Option<String>,
    /// The candidate's run_id (needed when its file holds several runs).
    #[arg(long, value_name = "RUN_ID")]
    pub candidate_run: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: CompareFormat,
    /// Also write a self-contained HTML page with the verdicts and both runs' charts overlaid.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the comparison to FILE instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace an existing -o or --html file (never one of the input files).
    #[arg(long)]
    pub overwrite: bool,
    /// Bootstrap resamples per run and criterion.
    #[arg(long, default_value_t = 2000, value_name = "N")]
    pub resamples: usize,
    /// Seed of the bootstrap (the same seed gives the same intervals).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Coverage of the confidence intervals, e.g. 0.95 or 95%.
    #[arg(long, default_value = "95%", value_name = "LEVEL")]
    pub confidence: String,
    /// System TPS must rise by more than this share of the baseline, e.g. 0, 5% or 0.05 (negative: tolerate a loss).
    #[arg(
        long,
        default_value = "0%",
        value_name = "SHARE",
        allow_hyphen_values = true
    )]
    pub min_tps_gain: String,
    /// Success rate may fall by at most this much (absolute), e.g. 1% or 0.01.
    #[arg(long, default_value = "1%", value_name = "SHARE")]
    pub max_success_drop: String,
    /// Gap fraction must fall by more than this much (absolute share of the window), e.g. 0, 2% or 0.02.
    #[arg(
        long,
        default_value = "0%",
        value_name = "SHARE",
        allow_hyphen_values = true
    )]
    pub min_gap_drop: String,
    /// Retry rate (retries per span) may rise by at most this much.
    #[arg(long, default_value_t = 0.01, value_name = "N")]
    pub max_retry_rise: f64,
    /// With --goodput: goodput (requests per second meeting the goals) may fall by
    /// at most this share of the baseline, e.g. 1% or 0.01.
    #[arg(long, default_value = "1%", value_name = "SHARE")]
    pub max_goodput_drop: String,
    /// Compare even when the runs' token source, tokenizer or model differ.
    #[arg(long)]
    pub allow_mismatch: bool,
    /// Reading, window and prices (shared with `report`).
    #[command(flatten)]
    pub analysis: AnalysisFlags,
}

/// A share written as `5%` or `0.05`.
fn share(flag: &str, text: &str) -> anyhow::Result<f64> {
    let t = text.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| anyhow::anyhow!("{flag}: `{text}` is not a share (expected e.g. 5% or 0.05)"))?;
    if !v.is_finite() {
        bail!("{flag}: `{text}` is not a finite number");
    }
    Ok(v)
}

/// The comparison settings of a command line, validated.
fn config(a: &CompareArgs) -> anyhow::Result<CompareConfig> {
    let cfg = CompareConfig {
        thresholds: Thresholds {
            min_tps_gain: share("--min-tps-gain", &a.min_tps_gain)?,
            max_success_drop: share("--max-success-drop", &a.max_success_drop)?,
            min_gap_drop: share("--min-gap-drop", &a.min_gap_drop)?,
            max_goodput_drop: share("--max-goodput-drop", &a.max_goodput_drop)?,
            max_retry_rise: a.max_retry_rise,
        },
        bootstrap: BootstrapConfig {
            resamples: a.resamples,
            seed: a.seed,
            level: share("--confidence", &a.confidence)?,
        },
        allow_mismatch: a.allow_mismatch,
    };
    cfg.check().map_err(|e| {
        let text = match e.setting {
            Setting::Confidence => a.confidence.clone(),
            Setting::Resamples => a.resamples.to_string(),
            Setting::MinTpsGain => a.min_tps_gain.clone(),
            Setting::MaxSuccessDrop => a.max_success_drop.clone(),
            Setting::MinGapDrop => a.min_gap_drop.clone(),
            Setting::MaxRetryRise => a.max_retry_rise.to_string(),
            Setting::MaxGoodputDrop => a.max_goodput_drop.clone(),
        };
        anyhow::anyhow!("{}: {text} {e}", e.setting.flag())
    })?;
    Ok(cfg)
}

/// One side's run, taken out of its file's log set.
struct Chosen {
    run: LoadedRun,
    source: String,
    warnings: Vec<String>,
}

fn choose(
    set: &LogSet,
    file: &Path,
    run: Option<&str>,
    side: &str,
    flag: &str,
) -> anyhow::Result<Chosen> {
    let found = tpscope_analysis::choose_run(set, run).map_err(|e| match e {
        ChooseRun::NotFound { .. } => anyhow::anyhow!("{flag}: {} {e}", file.display()),
        ChooseRun::Empty => anyhow::anyhow!("{}: {e} (the {side})", file.display()),
        ChooseRun::Several { .. } => {
            anyhow::anyhow!("{}: {e}; choose the {side} with {flag}", file.display())
        }
    })?;
    let source = match run {
        Some(id) => format!("{}#{id}", file.display()),
        None => file.display().to_string(),
    };
    Ok(Chosen {
        run: found.clone(),
        source,
        warnings: tpscope_analysis::side_warnings(set, side),
    })
}

fn load_sides(a: &CompareArgs, settings: &Settings) -> anyhow::Result<(Chosen, Chosen)> {
    let (read, from) = (ReadOptions::of(settings), settings.from);
    match a.files.as_slice() {
        [one] => {
            let (Some(b), Some(c)) = (&a.baseline_run, &a.candidate_run) else {
                bail!(
                    "compare needs two files (BASELINE CANDIDATE), or one file with --baseline-run and --candidate-run"
                );
            };
            if b == c {
                bail!("--baseline-run and --candidate-run name the same run `{b}`");
            }
            let set = report_cmd::load(std::slice::from_ref(one), read, from)?;
            Ok((
                choose(&set, one, Some(b), "baseline", "--baseline-run")?,
                choose(&set, one, Some(c), "candidate", "--candidate-run")?,
            ))
        }
        [bf, cf] => {
            // Read apart: a run id that appears in both files is two runs here.
            let bs = report_cmd::load(std::slice::from_ref(bf), read, from)?;
            let cs = report_cmd::load(std::slice::from_ref(cf), read, from)?;
            Ok((
                choose(
                    &bs,
                    bf,
                    a.baseline_run.as_deref(),
                    "baseline",
                    "--baseline-run",
                )?,
                choose(
                    &cs,
                    cf,
                    a.candidate_run.as_deref(),
                    "candidate",
                    "--candidate-run",
                )?,
            ))
        }
        _ => bail!("compare takes one or two files, not {}", a.files.len()),
    }
}

/// Runs `tpscope compare`.
pub fn run(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let cfg = config(&args)?;
    // The bootstrap chooses each run's bucket.
    let settings = args.analysis.settings(None)?;
    let opts = settings.options;
    report_cmd::check_outputs(
        &args.files,
        args.output.as_deref(),
        args.html.as_deref(),
        args.overwrite,
    )?;
    let (base, cand) = load_sides(&args, &settings)?;
    let mut compared = compare(
        RunRef {
            input: &base.run.input,
            source: &base.source,
        },
        RunRef {
            input: &cand.run.input,
            source: &cand.source,
        },
        &opts,
        &cfg,
    )
    .with_context(|| format!("comparing {} with {}", base.source, cand.source))
    .map_err(|e| {
        if args.allow_mismatch {
            e
        } else {
            e.context("pass --allow-mismatch to compare them anyway")
        }
    })?;
    let mut reader_warnings = base.warnings;
    reader_warnings.extend(cand.warnings);
    reader_warnings.append(&mut compared.comparison.warnings);
    compared.comparison.warnings = reader_warnings;

    let c = &compared.comparison;
    let bytes = match args.format {
        CompareFormat::Text => {
            let color = use_color(
                args.output.is_none() && std::io::stdout().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            );
            tpscope_render::compare::text(c, color)
        }
        // Unmarked like every compare error: exit 1 means a criterion failed.
        CompareFormat::Json => tpscope_render::compare::json(c)?,
        CompareFormat::Markdown => tpscope_render::compare::markdown(c),
    };
    if let Some(path) = &args.html {
        // The charts' own analysis: one readable TPS bucket for both runs.
        let (db, dc) = compare_details(&base.run.input, &cand.run.input, &opts);
        let page = tpscope_render::html::compare(&compared, &db, &dc);
        write_out(&page, Some(path), "--html", args.overwrite, false)?;
    }
    write_out(&bytes, args.output.as_deref(), "-o", args.overwrite, false)?;
    Ok(ExitCode::from(tpscope_render::compare::exit_code(
        c.overall,
    )))
}

/// Whether the text verdicts are coloured: only when they go to a terminal and
/// `NO_COLOR` is unset or empty (no-color.org); never into a file or a pipe.
fn use_color(to_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    to_terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_were_never_coloured_on_a_terminal() {
        assert!(use_color(true, None));
        assert!(use_color(true, Some(std::ffi::OsStr::new(""))));
        assert!(!use_color(true, Some(std::ffi::OsStr::new("1"))));
        // A file (-o) or a pipe is not a terminal.
        assert!(!use_color(false, None));
    }

    #[test]
    fn shares_take_percent_or_fraction_and_name_the_flag() {
        assert_eq!(share("--x", "5%").unwrap(), 0.05);
        assert_eq!(share("--x", "0.05").unwrap(), 0.05);
        assert_eq!(share("--x", "-2 %").unwrap(), -0.02);
        let e = share("--min-tps-gain", "lots").unwrap_err().to_string();
        assert!(e.contains("--min-tps-gain") && e.contains("lots"), "{e}");
        assert!(share("--x", "inf").is_err());
    }
}
