//! `tpscope.analyze` and `tpscope.compare`: the same reading, analysis and JSON
//! rendering as `tpscope report --format json` and `tpscope compare --format json`
//! (the functions the CLI calls), returned as text for the Python side to parse.

use std::path::PathBuf;

use pyo3::prelude::*;
use tpscope_analysis::compare::{CompareConfig, RunRef, Setting, Thresholds, compare};
use tpscope_analysis::stats::bootstrap::BootstrapConfig;
use tpscope_analysis::{ChooseRun, Settings, SettingsText};
use tpscope_log::{LogSet, ReadOptions, read_paths};

use crate::err;

/// The settings, validated as the CLI's flags are; each error names its argument.
fn settings(text: &SettingsText<'_>) -> PyResult<Settings> {
    Settings::new(text).map_err(|e| err(format!("{}: {e}", e.setting.key())))
}

/// How to read span logs with `time_unit` and `skip_invalid` as given (each
/// checked as the CLI's flags are).
pub(crate) fn read_options(time_unit: Option<&str>, skip_invalid: bool) -> PyResult<ReadOptions> {
    let s = settings(&SettingsText {
        time_unit,
        skip_invalid,
        ..SettingsText::default()
    })?;
    Ok(ReadOptions::of(&s))
}

/// Reads span logs as the CLI does: a rotation's base name reads its files as
/// one run.
pub(crate) fn read_logs(paths: &[PathBuf], opts: ReadOptions) -> PyResult<LogSet> {
    read_paths(&tpscope_log::expand_rotations(paths).files, opts).map_err(err)
}

/// Reads span logs, or with `from_` other tools' results, imported first;
/// `keep_span_ids` for the per-span CSV.
fn read(paths: &[PathBuf], settings: &Settings, keep_span_ids: bool) -> PyResult<LogSet> {
    let mut opts = ReadOptions::of(settings);
    opts.keep_span_ids = keep_span_ids;
    match settings.from {
        Some(format) => tpscope_log::import::load_imported(format, paths, opts).map_err(err),
        None => read_logs(paths, opts),
    }
}

/// Python `UserWarning`s (the CLI's stderr warnings).
fn warn_all(py: Python<'_>, warnings: &[String]) -> PyResult<()> {
    let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
    for w in warnings {
        let msg = std::ffi::CString::new(w.as_str()).map_err(err)?;
        PyErr::warn(py, &category, &msg, 1)?;
    }
    Ok(())
}

/// The `tpscope.report/1` document of the span logs `paths`, as JSON text (or the
/// text, markdown or per-span CSV that `tpscope report --format` prints).
#[pyfunction]
#[pyo3(signature = (paths, *, window="full", bucket="1s", time_unit=None, skip_invalid=false, price_per_hour=None, price_per_mtok_in=None, price_per_mtok_out=None, price_per_kwh=None, goodput=None, slo_percentile=90.0, from_=None, handoff=None, format="json"))]
#[allow(clippy::too_many_arguments)]
pub fn analyze_json(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    window: &str,
    bucket: &str,
    time_unit: Option<&str>,
    skip_invalid: bool,
    price_per_hour: Option<f64>,
    price_per_mtok_in: Option<f64>,
    price_per_mtok_out: Option<f64>,
    price_per_kwh: Option<f64>,
    goodput: Option<&str>,
    slo_percentile: f64,
    from_: Option<&str>,
    handoff: Option<&str>,
    format: &str,
) -> PyResult<String> {
    if !["json", "text", "markdown", "csv"].contains(&format) {
        return Err(err(format!(
            "format: `{format}` is not \"json\", \"text\", \"markdown\" or \"csv\""
        )));
    }
    if paths.is_empty() {
        return Err(err("analyze: no span log given"));
    }
    let settings = settings(&SettingsText {
        window,
        bucket: Some(bucket),
        time_unit,
        skip_invalid,
        price_per_hour,
        price_per_mtok_in,
        price_per_mtok_out,
        price_per_kwh,
        goodput: goodput.into_iter().collect(),
        slo_percentile,
        from: from_,
        handoff,
        pipeline_width: None,
    })?;
    let (json, skipped) = py.detach(|| {
        let set = read(&paths, &settings, format == "csv")?;
        let report = tpscope_analysis::analyze_set(&set, &settings.options);
        let bytes = match format {
            "text" => tpscope_render::text::render(&report),
            "markdown" => tpscope_render::markdown::render(&report),
            "csv" => {
                let runs: Vec<_> = set
                    .runs
                    .iter()
                    .map(|r| (&r.input, r.span_ids.as_slice(), r.span_text.as_slice()))
                    .collect();
                tpscope_render::csv_out::render(&runs).map_err(err)?
            }
            _ => tpscope_render::json(&report).map_err(err)?,
        };
        Ok::<_, PyErr>((
            String::from_utf8(bytes).map_err(err)?,
            set.unknown_kind_warnings(),
        ))
    })?;
    warn_all(py, &skipped)?;
    Ok(json)
}

/// One side of a comparison: its run, where it came from, and its reader warnings.
fn side(
    path: &PathBuf,
    run: Option<&str>,
    side: &str,
    arg: &str,
    settings: &Settings,
) -> PyResult<(tpscope_log::LoadedRun, String, Vec<String>)> {
    let set = read(std::slice::from_ref(path), settings, false)?;
    let chosen = tpscope_analysis::choose_run(&set, run).map_err(|e| match e {
        ChooseRun::NotFound { .. } => err(format!("{arg}: {} {e}", path.display())),
        ChooseRun::Empty => err(format!("{}: {e} (the {side})", path.display())),
        ChooseRun::Several { .. } => err(format!(
            "{}: {e}; choose the {side} with {arg}",
            path.display()
        )),
    })?;
    let source = match run {
        Some(id) => format!("{}#{id}", path.display()),
        None => path.display().to_string(),
    };
    let mut warnings = tpscope_analysis::side_warnings(&set, side);
    warnings.extend(set.unknown_kind_warnings());
    Ok((chosen.clone(), source, warnings))
}

/// The `tpscope.compare/1` document of a candidate run against a baseline, as JSON
/// (or the text or markdown `tpscope compare` prints), with the CLI's exit status.
#[pyfunction]
#[pyo3(signature = (baseline, candidate, *, baseline_run=None, candidate_run=None, resamples=2000, seed=1, confidence=0.95, min_tps_gain=0.0, max_success_drop=0.01, min_gap_drop=0.0, max_retry_rise=0.01, max_goodput_drop=0.01, allow_mismatch=false, window="full", time_unit=None, skip_invalid=false, price_per_hour=None, price_per_mtok_in=None, price_per_mtok_out=None, goodput=None, from_=None, format="json"))]
#[allow(clippy::too_many_arguments)]
pub fn compare_json(
    py: Python<'_>,
    baseline: PathBuf,
    candidate: PathBuf,
    baseline_run: Option<&str>,
    candidate_run: Option<&str>,
    resamples: usize,
    seed: u64,
    confidence: f64,
    min_tps_gain: f64,
    max_success_drop: f64,
    min_gap_drop: f64,
    max_retry_rise: f64,
    max_goodput_drop: f64,
    allow_mismatch: bool,
    window: &str,
    time_unit: Option<&str>,
    skip_invalid: bool,
    price_per_hour: Option<f64>,
    price_per_mtok_in: Option<f64>,
    price_per_mtok_out: Option<f64>,
    goodput: Option<&str>,
    from_: Option<&str>,
    format: &str,
) -> PyResult<(String, u8)> {
    if !["json", "text", "markdown"].contains(&format) {
        return Err(err(format!(
            "format: `{format}` is not \"json\", \"text\" or \"markdown\""
        )));
    }
    let cfg = CompareConfig {
        thresholds: Thresholds {
            min_tps_gain,
            max_success_drop,
            min_gap_drop,
            max_retry_rise,
            max_goodput_drop,
        },
        bootstrap: BootstrapConfig {
            resamples,
            seed,
            level: confidence,
        },
        allow_mismatch,
    };
    cfg.check().map_err(|e| {
        let value = match e.setting {
            Setting::Resamples => resamples.to_string(),
            Setting::Confidence => confidence.to_string(),
            Setting::MinTpsGain => min_tps_gain.to_string(),
            Setting::MaxSuccessDrop => max_success_drop.to_string(),
            Setting::MinGapDrop => min_gap_drop.to_string(),
            Setting::MaxRetryRise => max_retry_rise.to_string(),
            Setting::MaxGoodputDrop => max_goodput_drop.to_string(),
        };
        err(format!("{}: {value} {e}", e.setting.key()))
    })?;
    // The bootstrap chooses each run's bucket, as in the CLI.
    let settings = settings(&SettingsText {
        window,
        time_unit,
        skip_invalid,
        price_per_hour,
        price_per_mtok_in,
        price_per_mtok_out,
        goodput: goodput.into_iter().collect(),
        from: from_,
        ..SettingsText::default()
    })?;
    let opts = settings.options;
    py.detach(|| {
        let (b, bsource, mut warnings) = side(
            &baseline,
            baseline_run,
            "baseline",
            "baseline_run",
            &settings,
        )?;
        let (c, csource, cwarnings) = side(
            &candidate,
            candidate_run,
            "candidate",
            "candidate_run",
            &settings,
        )?;
        let mut compared = compare(
            RunRef {
                input: &b.input,
                source: &bsource,
            },
            RunRef {
                input: &c.input,
                source: &csource,
            },
            &opts,
            &cfg,
        )
        .map_err(|e| {
            let hint = if allow_mismatch {
                String::new()
            } else {
                " (pass allow_mismatch=True to compare them anyway)".into()
            };
            err(format!("comparing {bsource} with {csource}: {e}{hint}"))
        })?;
        warnings.extend(cwarnings);
        warnings.append(&mut compared.comparison.warnings);
        compared.comparison.warnings = warnings;
        let c = &compared.comparison;
        let bytes = match format {
            "text" => tpscope_render::compare::text(c, false),
            "markdown" => tpscope_render::compare::markdown(c),
            _ => tpscope_render::compare::json(c).map_err(err)?,
        };
        let status = tpscope_render::compare::exit_code(c.overall);
        Ok((String::from_utf8(bytes).map_err(err)?, status))
    })
}
