//! Requests counted by how they ended: the one tally of ok, error and cancelled
//! that the `end` record, the writer's run counts and the bench's run summary
//! share (written flat in JSON: `ok`, `error`, `cancelled`).

use serde::{Deserialize, Serialize};

use crate::cause::Status;

/// Spans counted by status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCounts {
    /// Of status `ok`.
    #[serde(default)]
    pub ok: u64,
    /// Of status `error`.
    #[serde(default)]
    pub error: u64,
    /// Of status `cancelled`.
    #[serde(default)]
    pub cancelled: u64,
}

impl StatusCounts {
    /// Counts one span of status `s`.
    pub fn add(&mut self, s: Status) {
        match s {
            Status::Ok => self.ok += 1,
            Status::Error => self.error += 1,
            Status::Cancelled => self.cancelled += 1,
        }
    }

    /// All counted (ok + error + cancelled).
    pub fn total(&self) -> u64 {
        self.ok + self.error + self.cancelled
    }

    /// The counts of both.
    pub fn plus(self, o: StatusCounts) -> StatusCounts {
        StatusCounts {
            ok: self.ok + o.ok,
            error: self.error + o.error,
            cancelled: self.cancelled + o.cancelled,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_status_apart_and_sums_runs() {
        let mut c = StatusCounts::default();
        for s in [Status::Ok, Status::Ok, Status::Error, Status::Cancelled] {
            c.add(s);
        }
        assert_eq!((c.ok, c.error, c.cancelled, c.total()), (2, 1, 1, 4));
        assert_eq!(c.plus(c).total(), 8);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(json, r#"{"ok":2,"error":1,"cancelled":1}"#);
    }
}
