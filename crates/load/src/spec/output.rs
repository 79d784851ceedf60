//! Where the span log goes: the file `--out` names, standard output (`--out -`), or
//! by default a new file whose name is unique — the UTC time to the microsecond and
//! a salt from the process and the attempt — so two runs started together never
//! share one (the opener retries with the next salt on a collision).

use std::path::PathBuf;

use tpscope_model::Timestamp;
use tpscope_record::utc_compact;
use tpscope_tokens::mix;

/// Where the span log goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Standard output (`--out -`).
    Stdout,
    /// The file `--out` names.
    File(PathBuf),
    /// A new file named by [`unique_name`] in the current directory.
    Unique,
}

impl Output {
    /// `--out` as given.
    pub fn from_flag(out: Option<PathBuf>) -> Output {
        match out {
            None => Output::Unique,
            Some(p) if p.as_os_str() == "-" => Output::Stdout,
            Some(p) => Output::File(p),
        }
    }
}

/// The default log name of attempt `attempt` started at `now`, e.g.
/// `tpscope-run-20261121T140512.123456Z-3fa9c1.jsonl`.
pub fn unique_name(now: Timestamp, attempt: u32) -> PathBuf {
    let seconds = utc_compact(now); // 20261121T140512Z
    let micros = now.unix_nanos().rem_euclid(1_000_000_000) / 1_000;
    let salt =
        mix(now.unix_nanos() as u64 ^ (u64::from(std::process::id()) << 32) ^ u64::from(attempt));
    PathBuf::from(format!(
        "tpscope-run-{}.{micros:06}Z-{:06x}.jsonl",
        seconds.trim_end_matches('Z'),
        salt & 0xff_ffff
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_have_microseconds_and_differ_per_attempt() {
        let t = Timestamp::parse_rfc3339("2026-11-21T14:05:12.123456789Z").unwrap();
        let a = unique_name(t, 0).display().to_string();
        assert!(a.starts_with("tpscope-run-20261121T140512.123456Z-"), "{a}");
        assert!(a.ends_with(".jsonl"));
        assert_ne!(unique_name(t, 0), unique_name(t, 1));
    }

    #[test]
    fn dash_is_standard_output() {
        assert_eq!(Output::from_flag(Some("-".into())), Output::Stdout);
        assert_eq!(Output::from_flag(None), Output::Unique);
        assert_eq!(
            Output::from_flag(Some("a.jsonl".into())),
            Output::File("a.jsonl".into())
        );
    }
}
