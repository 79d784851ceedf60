//! The open-file limit checked before a run: each stream is a socket (two with
//! the built-in simulator, which holds the other end), so a run past the limit
//! would fail its connects with EMFILE ("Too many open files") — the client's own
//! limit, which once read as 576 server failures with exit 0. Refused before
//! anything runs, with the number needed.

use anyhow::bail;
use tpscope_load::spec::BenchSpec;

/// Files the process holds besides its streams (the log, the runtime, stdio).
const BASE_FILES: u64 = 64;

/// The most streams a run may hold at once: the largest cap of its levels;
/// `None` when a level has none (open loop: the server's pace decides).
fn streams(spec: &BenchSpec) -> Option<u64> {
    spec.levels
        .iter()
        .map(|l| l.cap.map(u64::from))
        .try_fold(0u64, |m, s| s.map(|s| m.max(s)))
}

/// Refuses `streams` streams of `per_stream` files each under a limit of `limit`
/// open files.
pub fn check_streams(streams: u64, per_stream: u64, limit: u64) -> anyhow::Result<()> {
    let need = streams
        .saturating_mul(per_stream)
        .saturating_add(BASE_FILES);
    if need <= limit {
        return Ok(());
    }
    let fits = limit.saturating_sub(BASE_FILES) / per_stream.max(1);
    let each = if per_stream > 1 {
        "a socket, and the built-in simulator's end of it"
    } else {
        "a socket"
    };
    bail!(
        "{streams} streams at once need about {need} open files ({each} per stream), but \
         this process may open at most {limit} (the hard limit, `ulimit -Hn`): raise it, or \
         lower --concurrency to {fits} or fewer; past the limit connects fail with \"Too many \
         open files\", the client's limit, not the server's"
    )
}

/// Checks a run against the process's open-file limit (already raised to the hard
/// limit); `sim`: the simulator runs in this process.
pub fn check(spec: &BenchSpec, sim: bool, limit: u64) -> anyhow::Result<()> {
    match streams(spec) {
        Some(n) => check_streams(n, if sim { 2 } else { 1 }, limit),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_thousand_streams_under_a_2048_limit_failed_as_server_errors() {
        let e = check_streams(5000, 1, 2048).unwrap_err().to_string();
        assert!(
            e.starts_with("5000 streams at once need about 5064 open files"),
            "{e}"
        );
        assert!(
            e.contains("at most 2048") && e.contains("--concurrency to 1984"),
            "{e}"
        );
        let e = check_streams(5000, 2, 2048).unwrap_err().to_string();
        assert!(
            e.contains("about 10064") && e.contains("to 992 or fewer"),
            "{e}"
        );
        assert!(e.contains("simulator's end"), "{e}");
        check_streams(1984, 1, 2048).unwrap();
        check_streams(u64::MAX, 2, u64::MAX - 1).unwrap_err();
    }
}
