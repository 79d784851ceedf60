//! The figures the ratio lines compare, one row per path and round, kept in a
//! tab-separated log that later runs append to (`--log FILE`), and the ratio
//! lines themselves, over one run's rounds or over every run in such logs
//! (`--pool FILE`): on a shared machine a few percent between two proxies takes
//! more rounds than one run holds (docs/proxy-bench.md, *Method*: ratios).
//!
//! Rounds pair within a run only: a run's `tpscope` round 3 is compared with
//! the same run's nginx and direct rounds 3, never with another run's.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::path::Path;

use tpscope_analysis::stats::ratio;

use crate::path::PathKind;
use crate::stats::RoundRatios;

/// The log's first line; a file that starts otherwise is not appended to.
pub const HEADER: &str =
    "run\tround\tpath\tprogram\tp50_us\tp99_us\tcpu_us_per_token\tuser_us_per_token";

/// What the ratio lines need of one path's round.
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    /// The run it belongs to (its start, Unix seconds, and the process id).
    pub run: String,
    pub round: u32,
    pub path: PathKind,
    /// The program that relayed (empty for the direct path).
    pub program: String,
    /// Latency percentiles, send → client read (µs).
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// The proxy's CPU, and its user-space part, per relayed token (µs).
    pub cpu_us: Option<f64>,
    pub user_us: Option<f64>,
}

/// A figure as the log keeps it: microseconds to the nanosecond (the clocks'
/// resolution); empty when there is none.
fn field(v: Option<f64>) -> String {
    v.map_or(String::new(), |x| format!("{x:.3}"))
}

impl Figures {
    /// The row, without its line end.
    pub fn row(&self) -> String {
        format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            self.run,
            self.round,
            self.path.name(),
            self.program,
            field(self.p50_us),
            field(self.p99_us),
            field(self.cpu_us),
            field(self.user_us)
        )
    }
}

/// Appends `rows` to the log at `file`, writing the header first when the file
/// is new; a file that is not such a log is left as it is (an error naming it).
pub fn append(file: &Path, rows: &[Figures]) -> Result<(), String> {
    let name = file.display();
    // Only the first line is read: a log grows by a few rows per round.
    let first = std::fs::File::open(file).and_then(|f| {
        let mut line = String::new();
        std::io::BufReader::new(f).read_line(&mut line)?;
        Ok(line)
    });
    let fresh = match first {
        // An empty file (made with `touch`) takes the header too.
        Ok(line) if line.is_empty() => true,
        Ok(line) => {
            if line.trim_end_matches(['\n', '\r']) != HEADER {
                return Err(format!(
                    "--log {name}: not a rounds log (its first line is not the header `{}`); choose another file",
                    HEADER.replace('\t', " ")
                ));
            }
            false
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => return Err(format!("--log {name}: {e}")),
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .map_err(|e| format!("--log {name}: {e}"))?;
    let mut text = String::new();
    if fresh {
        text.push_str(HEADER);
        text.push('\n');
    }
    for r in rows {
        text.push_str(&r.row());
        text.push('\n');
    }
    f.write_all(text.as_bytes())
        .map_err(|e| format!("--log {name}: {e}"))
}

/// The rows of a log's text; `name` (the file) is what an error names, with
/// the line and the field.
pub fn parse(name: &str, text: &str) -> Result<Vec<Figures>, String> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, h)) if h == HEADER => {}
        _ => {
            return Err(format!(
                "{name}:1: not a rounds log (expected the header `{}`)",
                HEADER.replace('\t', " ")
            ));
        }
    }
    let mut rows = Vec::new();
    for (i, line) in lines {
        if line.is_empty() {
            continue;
        }
        let at = i + 1;
        let f: Vec<&str> = line.split('\t').collect();
        let fields = HEADER.split('\t').count();
        if f.len() != fields {
            return Err(format!(
                "{name}:{at}: {} fields, expected {fields} ({})",
                f.len(),
                HEADER.replace('\t', ", ")
            ));
        }
        let num = |k: usize, what: &str| -> Result<Option<f64>, String> {
            if f[k].is_empty() {
                return Ok(None);
            }
            f[k].parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .map(Some)
                .ok_or(format!(
                    "{name}:{at}: {what} `{}`: expected a number or nothing",
                    f[k]
                ))
        };
        let round = f[1]
            .parse()
            .map_err(|_| format!("{name}:{at}: round `{}`: expected a round number", f[1]))?;
        rows.push(Figures {
            run: f[0].to_string(),
            round,
            path: PathKind::from_name(f[2]).ok_or(format!(
                "{name}:{at}: path `{}`: expected direct, tpscope, baseline, nginx or litellm",
                f[2]
            ))?,
            program: f[3].to_string(),
            p50_us: num(4, "p50_us")?,
            p99_us: num(5, "p99_us")?,
            cpu_us: num(6, "cpu_us_per_token")?,
            user_us: num(7, "user_us_per_token")?,
        });
    }
    Ok(rows)
}

/// A figure of a round that a ratio line compares.
type Figure<'a> = dyn Fn(&Figures) -> Option<f64> + 'a;

/// tpscope against the other paths, round by round (each ratio within one
/// round of one run, so the machine's load is the same for both): CPU per
/// token, its user-space part, and the added latency (over the direct path of
/// the same round) at the median and p99; with the distribution-free 95 %
/// interval of the rounds' median ratio and what it shows. One heading and
/// four lines per path compared; none without pairs.
pub fn ratio_lines(rows: &[Figures]) -> Vec<String> {
    let of = |path: PathKind, r: &Figures| {
        rows.iter()
            .find(|o| o.path == path && o.run == r.run && o.round == r.round)
    };
    let added =
        |r: &Figures, q: fn(&Figures) -> Option<f64>| Some(q(r)? - q(of(PathKind::Direct, r)?)?);
    let figures: [(&str, &Figure); 4] = [
        ("CPU per token", &|r| r.cpu_us),
        ("user space", &|r| r.user_us),
        ("added p50", &|r| added(r, |f| f.p50_us)),
        ("added p99", &|r| added(r, |f| f.p99_us)),
    ];
    let mut lines = Vec::new();
    for other in [PathKind::Baseline, PathKind::Nginx, PathKind::Litellm] {
        let pairs: Vec<(&Figures, &Figures)> = rows
            .iter()
            .filter(|r| r.path == PathKind::Tpscope)
            .filter_map(|r| Some((r, of(other, r)?)))
            .collect();
        if pairs.is_empty() {
            continue;
        }
        let runs: BTreeSet<&str> = pairs.iter().map(|(t, _)| t.run.as_str()).collect();
        lines.push(match runs.len() {
            1 => format!("tpscope / {}, {} rounds:", other.name(), pairs.len()),
            n => format!(
                "tpscope / {}, {} rounds of {n} runs:",
                other.name(),
                pairs.len()
            ),
        });
        for (name, f) in &figures {
            let ratios = pairs.iter().map(|(t, o)| ratio(f(t)?, f(o)?));
            lines.push(format!("  {name:<13} {}", RoundRatios::of(ratios)));
        }
    }
    lines
}

/// The programs each path ran in `rows` (so that a pool mixing builds says so).
pub fn programs(rows: &[Figures]) -> Vec<(PathKind, BTreeSet<String>)> {
    let mut out: Vec<(PathKind, BTreeSet<String>)> = Vec::new();
    for r in rows.iter().filter(|r| !r.program.is_empty()) {
        match out.iter_mut().find(|(p, _)| *p == r.path) {
            Some((_, set)) => {
                set.insert(r.program.clone());
            }
            None => out.push((r.path, BTreeSet::from([r.program.clone()]))),
        }
    }
    out
}
