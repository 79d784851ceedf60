//! The one gap predicate (docs/design.md §3): when work waits while a slot is free.
//! The exact sweep, the sampled estimate, the live counters and the proxy's
//! Prometheus counters all ask this one place.

/// What a run held at one instant: streams in flight, requests waiting, the cap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Occupancy {
    /// Requests holding a slot.
    pub in_flight: u32,
    /// Requests ready but not yet admitted.
    pub queue_depth: u32,
    /// The cap in force; `None` when uncapped or unknown.
    pub cap: Option<u32>,
}

impl Occupancy {
    /// Whether work waits (queue depth > 0).
    pub fn is_backlog(&self) -> bool {
        self.queue_depth > 0
    }

    /// Whether this is a gap: work waits while fewer streams than the cap are in
    /// flight (any in-flight count, when uncapped: then a waiting request is
    /// held back by something other than the cap).
    pub fn is_gap(&self) -> bool {
        self.is_backlog() && self.cap.is_none_or(|c| self.in_flight < c)
    }

    /// Whether every slot is taken.
    pub fn at_cap(&self) -> bool {
        self.cap.is_some_and(|c| self.in_flight >= c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occ(in_flight: u32, queue_depth: u32, cap: Option<u32>) -> Occupancy {
        Occupancy {
            in_flight,
            queue_depth,
            cap,
        }
    }

    #[test]
    fn a_gap_needs_waiting_work_and_a_free_slot() {
        assert!(occ(3, 1, Some(4)).is_gap());
        assert!(!occ(4, 1, Some(4)).is_gap());
        assert!(!occ(0, 0, Some(4)).is_gap());
        assert!(occ(9, 2, None).is_gap());
        assert!(occ(4, 0, Some(4)).at_cap() && !occ(3, 5, Some(4)).at_cap());
        assert!(!occ(7, 0, None).at_cap());
    }
}
