//! Where the slot-seconds moved between two runs: both ledgers side
//! by side, each part's change in share, and whether a smaller gap was idle
//! time removed or only shifted into the server's queue.

use serde::Serialize;

use crate::ledger::{Capacity, Part};

/// A change of share below this (in share, 0.01 = one point) is no change.
const MOVED: f64 = 0.01;

/// One part in both runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartChange {
    /// The part's name.
    pub part: &'static str,
    /// The baseline's slot-seconds and share (`None`: not known).
    pub baseline_slot_seconds: Option<f64>,
    /// As given.
    pub baseline_share: Option<f64>,
    /// The candidate's.
    pub candidate_slot_seconds: Option<f64>,
    /// As given.
    pub candidate_share: Option<f64>,
    /// candidate_share − baseline_share.
    pub share_change: Option<f64>,
}

/// Both ledgers and what the change means.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LedgerChange {
    /// Every part, in report order.
    pub parts: Vec<PartChange>,
    /// Whether held-back time was removed or shifted, in one sentence.
    pub verdict: String,
}

/// The ledgers of two runs compared; `None` unless both have one.
pub fn ledger_change(b: Option<&Capacity>, c: Option<&Capacity>) -> Option<LedgerChange> {
    let (b, c) = (b?, c?);
    let parts: Vec<PartChange> = Part::ALL
        .iter()
        .map(|&p| {
            let (bs, cs) = (b.share(p), c.share(p));
            PartChange {
                part: p.name(),
                baseline_slot_seconds: b.seconds(p),
                baseline_share: bs,
                candidate_slot_seconds: c.seconds(p),
                candidate_share: cs,
                share_change: bs.zip(cs).map(|(x, y)| y - x),
            }
        })
        .collect();
    let change = |p: Part| parts[Part::ALL.iter().position(|&q| q == p).unwrap_or(0)].share_change;
    Some(LedgerChange {
        verdict: verdict(change),
        parts,
    })
}

fn pp(x: f64) -> String {
    format!("{:.1} points", x.abs() * 100.0)
}

/// Held back down while first_token_wait went up is a shift: the waiting moved
/// from the client's pipeline into the server's queue.
fn verdict(change: impl Fn(Part) -> Option<f64>) -> String {
    let Some(held) = change(Part::HeldBack) else {
        return "held-back time is not known in both runs: whether idle time was removed \
                cannot be said"
            .into();
    };
    let wait = change(Part::FirstTokenWait).unwrap_or(0.0);
    let generating = change(Part::Generating).unwrap_or(0.0);
    if held <= -MOVED && wait >= -held / 2.0 {
        format!(
            "a shift, not a gain: held-back slot-time fell by {} but first_token_wait rose by \
             {} — the waiting moved into the server's queue",
            pp(held),
            pp(wait)
        )
    } else if held <= -MOVED {
        format!(
            "idle time removed: held-back slot-time fell by {} and generating rose by {}",
            pp(held),
            pp(generating)
        )
    } else if held >= MOVED {
        format!("more held back: held-back slot-time rose by {}", pp(held))
    } else {
        "held-back slot-time did not move (within 1 point)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::LedgerPart;

    fn ledger(shares: &[(Part, f64)]) -> Capacity {
        Capacity {
            slot_seconds: Some(10.0),
            above_cap_slot_seconds: None,
            parts: Part::ALL
                .iter()
                .map(|&p| {
                    let s = shares.iter().find(|x| x.0 == p).map_or(0.0, |x| x.1);
                    LedgerPart {
                        part: p,
                        slot_seconds: Some(s * 10.0),
                        share: Some(s),
                        missing: None,
                        inferred: None,
                    }
                })
                .collect(),
            handoff_threshold: crate::ledger::DEFAULT_HANDOFF,
            buckets: None,
            refills: None,
            causes: Vec::new(),
        }
    }

    #[test]
    fn held_back_down_while_first_token_wait_rose_is_a_shift() {
        let b = ledger(&[(Part::HeldBack, 0.4), (Part::FirstTokenWait, 0.1)]);
        let c = ledger(&[(Part::HeldBack, 0.05), (Part::FirstTokenWait, 0.42)]);
        let ch = ledger_change(Some(&b), Some(&c)).unwrap();
        assert!(ch.verdict.starts_with("a shift"), "{}", ch.verdict);
        assert!(ch.verdict.contains("35.0 points"), "{}", ch.verdict);
        let held = ch.parts.iter().find(|p| p.part == "held_back").unwrap();
        assert!((held.share_change.unwrap() + 0.35).abs() < 1e-12);
    }

    #[test]
    fn held_back_turned_into_generating_is_idle_time_removed() {
        let b = ledger(&[(Part::HeldBack, 0.4), (Part::Generating, 0.5)]);
        let c = ledger(&[(Part::HeldBack, 0.0), (Part::Generating, 0.9)]);
        let ch = ledger_change(Some(&b), Some(&c)).unwrap();
        assert!(
            ch.verdict.starts_with("idle time removed"),
            "{}",
            ch.verdict
        );
        assert!(ledger_change(Some(&b), None).is_none());
    }
}
