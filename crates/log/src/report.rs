//! From a read [`LogSet`] to what `report` and `compare` analyse: the report of every
//! run, and one run chosen by id. Shared by the CLI and the Python package, so both
//! build the same `tpscope.report/1` document from the same files.

use tpscope_analysis::levels::sweep_tables;
use tpscope_analysis::{Options, REPORT_SCHEMA, Report, analyze};

use crate::reader::{LoadedRun, LogSet};

/// Analyses every run of a log set into one report (with the reader's skipped
/// records and warnings, and the table of each sweep it holds).
pub fn report(set: &LogSet, opts: &Options) -> Report {
    let mut runs: Vec<_> = set.runs.iter().map(|r| analyze(&r.input, opts)).collect();
    let pairs: Vec<_> = set.runs.iter().map(|r| &r.input).zip(&runs).collect();
    let sweeps = sweep_tables(&pairs, opts.slo_share);
    tpscope_analysis::levels::apply_knees(&mut runs, &sweeps);
    Report {
        schema: REPORT_SCHEMA,
        runs,
        skipped: set.skipped.clone(),
        warnings: set.warnings.clone(),
        sweeps,
    }
}

/// Why no single run could be chosen from a log set (the caller adds the file and
/// the flag or argument that names the run).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChooseRun {
    /// No run has the id asked for.
    #[error("has no run `{id}` (its runs: {runs})")]
    NotFound {
        /// The id asked for.
        id: String,
        /// The ids it holds, comma-separated (`none` when it holds none).
        runs: String,
    },
    /// No id was given and the set holds no run.
    #[error("no runs in the file")]
    Empty,
    /// No id was given and the set holds several runs.
    #[error("the file holds {count} runs ({runs})")]
    Several {
        /// How many.
        count: usize,
        /// Their ids, comma-separated.
        runs: String,
    },
}

/// The run with id `id`, or the only run when `id` is `None`.
pub fn choose_run<'a>(set: &'a LogSet, id: Option<&str>) -> Result<&'a LoadedRun, ChooseRun> {
    let ids = || {
        set.runs
            .iter()
            .map(|r| r.input.run_id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match id {
        Some(id) => set
            .runs
            .iter()
            .find(|r| r.input.run_id == id)
            .ok_or_else(|| ChooseRun::NotFound {
                id: id.to_string(),
                runs: if set.runs.is_empty() {
                    "none".to_string()
                } else {
                    ids()
                },
            }),
        None => match set.runs.as_slice() {
            [one] => Ok(one),
            [] => Err(ChooseRun::Empty),
            _ => Err(ChooseRun::Several {
                count: set.runs.len(),
                runs: ids(),
            }),
        },
    }
}

/// A run's reader warnings and skipped-record counts, each prefixed with `side`
/// (`baseline`, `candidate`), as `compare` lists them beside its own.
pub fn side_warnings(set: &LogSet, side: &str) -> Vec<String> {
    let mut warnings: Vec<String> = set
        .warnings
        .iter()
        .map(|w| format!("{side}: {w}"))
        .collect();
    if !set.skipped.is_empty() {
        let list: Vec<String> = set
            .skipped
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        warnings.push(format!(
            "{side}: skipped invalid records: {}",
            list.join(", ")
        ));
    }
    warnings
}
