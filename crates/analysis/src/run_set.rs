//! From a set of read runs to what `report` and `compare` analyse: the report of
//! every run (the `tpscope.report/1` document, [`Report`]), one run chosen by id,
//! a side's reader warnings. The reader's set ([`RunSet`], implemented by
//! `tpscope_log::LogSet`) is all they need, so the CLI and the Python package
//! build the same document.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analyze::analyze;
use crate::input::RunInput;
use crate::levels::{SweepTable, sweep_tables};
use crate::report::RunReport;
use crate::settings::Options;

/// The schema name of the JSON report.
pub const REPORT_SCHEMA: &str = "tpscope.report/1";

/// Reports of every run read, plus what the reader had to say.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Always [`REPORT_SCHEMA`].
    pub schema: &'static str,
    /// One report per run, in order of first appearance.
    pub runs: Vec<RunReport>,
    /// Records skipped (with `--skip-invalid`), by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Reader warnings (cut-off last lines, runs without `run` or `end` records).
    pub warnings: Vec<String>,
    /// The table of each load sweep among the runs (one run per level).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sweeps: Vec<SweepTable>,
}

/// Runs as a reader gives them, with what it had to say.
pub trait RunSet {
    /// One read run (its facts and whatever else the reader keeps).
    type Run;
    /// The runs, in order of first appearance.
    fn runs(&self) -> &[Self::Run];
    /// A run's facts.
    fn input(run: &Self::Run) -> &RunInput;
    /// Records skipped, by reason.
    fn skipped(&self) -> &BTreeMap<String, u64>;
    /// The reader's warnings.
    fn warnings(&self) -> &[String];
}

/// Analyses every run of a set into one report (with the reader's skipped
/// records and warnings, and the table of each sweep it holds).
pub fn analyze_set<S: RunSet>(set: &S, opts: &Options) -> Report {
    let inputs: Vec<&RunInput> = set.runs().iter().map(S::input).collect();
    let mut runs: Vec<_> = inputs.iter().map(|i| analyze(i, opts)).collect();
    let pairs: Vec<_> = inputs.iter().copied().zip(&runs).collect();
    let sweeps = sweep_tables(&pairs, opts.slo_share);
    crate::levels::apply_knees(&mut runs, &sweeps);
    Report {
        schema: REPORT_SCHEMA,
        runs,
        skipped: set.skipped().clone(),
        warnings: set.warnings().to_vec(),
        sweeps,
    }
}

/// Why no single run could be chosen from a set (the caller adds the file and
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
pub fn choose_run<'a, S: RunSet>(set: &'a S, id: Option<&str>) -> Result<&'a S::Run, ChooseRun> {
    let runs = set.runs();
    let ids = || {
        runs.iter()
            .map(|r| S::input(r).run_id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match id {
        Some(id) => runs
            .iter()
            .find(|r| S::input(r).run_id == id)
            .ok_or_else(|| ChooseRun::NotFound {
                id: id.to_string(),
                runs: if runs.is_empty() {
                    "none".to_string()
                } else {
                    ids()
                },
            }),
        None => match runs {
            [one] => Ok(one),
            [] => Err(ChooseRun::Empty),
            _ => Err(ChooseRun::Several {
                count: runs.len(),
                runs: ids(),
            }),
        },
    }
}

/// A set's reader warnings and skipped-record counts, each prefixed with `side`
/// (`baseline`, `candidate`), as `compare` lists them beside its own.
pub fn side_warnings<S: RunSet>(set: &S, side: &str) -> Vec<String> {
    let mut warnings: Vec<String> = set
        .warnings()
        .iter()
        .map(|w| format!("{side}: {w}"))
        .collect();
    if !set.skipped().is_empty() {
        let list: Vec<String> = set
            .skipped()
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::capped_run;

    struct Set {
        runs: Vec<RunInput>,
        skipped: BTreeMap<String, u64>,
        warnings: Vec<String>,
    }

    impl RunSet for Set {
        type Run = RunInput;
        fn runs(&self) -> &[RunInput] {
            &self.runs
        }
        fn input(run: &RunInput) -> &RunInput {
            run
        }
        fn skipped(&self) -> &BTreeMap<String, u64> {
            &self.skipped
        }
        fn warnings(&self) -> &[String] {
            &self.warnings
        }
    }

    fn run(id: &str) -> RunInput {
        RunInput {
            run_id: id.to_string(),
            ..capped_run(2)
        }
    }

    fn set(ids: &[&str]) -> Set {
        Set {
            runs: ids.iter().map(|id| run(id)).collect(),
            skipped: BTreeMap::from([("bad json".to_string(), 2)]),
            warnings: vec!["cut-off last line".into()],
        }
    }

    #[test]
    fn a_run_is_chosen_by_id_or_as_the_only_one() {
        let two = set(&["a", "b"]);
        assert_eq!(choose_run(&two, Some("b")).unwrap().run_id, "b");
        assert_eq!(
            choose_run(&two, None).unwrap_err().to_string(),
            "the file holds 2 runs (a, b)"
        );
        assert_eq!(
            choose_run(&two, Some("c")).unwrap_err().to_string(),
            "has no run `c` (its runs: a, b)"
        );
        assert_eq!(choose_run(&set(&["x"]), None).unwrap().run_id, "x");
        assert_eq!(choose_run(&set(&[]), None), Err(ChooseRun::Empty));
        assert!(
            choose_run(&set(&[]), Some("a"))
                .unwrap_err()
                .to_string()
                .ends_with("(its runs: none)")
        );
    }

    #[test]
    fn the_report_holds_every_run_and_the_readers_words() {
        let s = set(&["a", "b"]);
        let r = analyze_set(&s, &Options::default());
        let ids: Vec<_> = r.runs.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!((r.schema, r.skipped.len()), (REPORT_SCHEMA, 1));
        assert_eq!(r.warnings, s.warnings);
        assert_eq!(
            side_warnings(&s, "baseline"),
            [
                "baseline: cut-off last line",
                "baseline: skipped invalid records: 2 bad json"
            ]
        );
    }
}
