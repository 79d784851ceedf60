//! Placing requests whose tool recorded durations but no start times (LLMPerf, old
//! vLLM files): each request starts on the lane (one per concurrent client) that
//! frees first, in the file's order. The spans' lengths are the tool's; where they
//! sit in time is this assumption, which the import's warning states.

use std::path::Path;
use std::time::Duration;

use tpscope_model::Timestamp;

/// Where a run without any absolute time is anchored (2001-01-01T00:00:00Z).
pub const DEFAULT_ANCHOR: Timestamp = Timestamp::from_unix_nanos(978_307_200_000_000_000);

/// Closed-loop lanes: one per concurrent client.
pub struct Lanes {
    free_at: Vec<Timestamp>,
}

impl Lanes {
    /// `clients` lanes (at least one), all free at `anchor`.
    pub fn new(clients: u32, anchor: Timestamp) -> Lanes {
        Lanes {
            free_at: vec![anchor; clients.max(1) as usize],
        }
    }

    /// The start of a request lasting `d`, on the lane that frees first.
    pub fn place(&mut self, d: Duration) -> Timestamp {
        self.place_from(Timestamp::from_unix_nanos(0), d)
    }

    /// The start of a request lasting `d` that arrived at `arrival`: on the lane
    /// that frees first, not before it arrived.
    pub fn place_from(&mut self, arrival: Timestamp, d: Duration) -> Timestamp {
        let (i, free) = self
            .free_at
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|(_, t)| *t)
            .unwrap_or((0, arrival));
        let start = free.max(arrival);
        self.free_at[i] = start.after(d);
        start
    }

    /// When the last lane frees: the end of the placed timeline.
    pub fn end(&self) -> Option<Timestamp> {
        self.free_at.iter().copied().max()
    }
}

/// The warning an import whose spans were placed by [`Lanes`] carries.
pub fn placed_warning(file: &Path, tool: &str, missing: &str) -> String {
    format!(
        "{}: this {tool} output has no `{missing}`: each request was placed back to back on \
         one of the run's concurrent clients, so durations are the tool's but the timeline \
         (and the system TPS over it) is an estimate",
        file.display()
    )
}
