//! The ledger's report value: its parts, their names, and the JSON form
//! (`capacity: {"slot_seconds", "parts": {NAME: {"slot_seconds", "share"}}, …}`).

use std::time::Duration;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// What a slot was doing; the ledger's parts, in the order reports list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// Admitted, the connection not yet made.
    Connect,
    /// Request sent, no token yet (server queue, prefill, network).
    FirstTokenWait,
    /// Between the first and last token of an attempt that ended ok.
    Generating,
    /// Last token to release.
    Post,
    /// Inside an attempt that did not end ok.
    Failed,
    /// Between a failed attempt and the next, holding the slot.
    Backoff,
    /// Free while work waited, refilled within the hand-off threshold.
    Handoff,
    /// Free while work waited, longer than the threshold.
    HeldBack,
    /// Free with nothing waiting.
    NoDemand,
}

impl Part {
    /// Every part, in report order.
    pub const ALL: [Part; 9] = [
        Part::Connect,
        Part::FirstTokenWait,
        Part::Generating,
        Part::Post,
        Part::Failed,
        Part::Backoff,
        Part::Handoff,
        Part::HeldBack,
        Part::NoDemand,
    ];

    /// The part's name in every format.
    pub fn name(self) -> &'static str {
        match self {
            Part::Connect => "connect",
            Part::FirstTokenWait => "first_token_wait",
            Part::Generating => "generating",
            Part::Post => "post",
            Part::Failed => "failed",
            Part::Backoff => "backoff",
            Part::Handoff => "handoff",
            Part::HeldBack => "held_back",
            Part::NoDemand => "no_demand",
        }
    }

    /// Whether the part counts free slots (the others count occupied ones).
    pub fn is_free(self) -> bool {
        matches!(self, Part::Handoff | Part::HeldBack | Part::NoDemand)
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// Slot-nanoseconds per part (integers, so the parts add up exactly).
pub type SlotNanos = [i128; 9];

/// How a part was found when it was not measured directly: a hook for
/// estimates (an inferred held-back share for logs without queue times).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inferred {
    /// The method, in a few words.
    pub method: String,
}

/// One part of the ledger.
#[derive(Clone, Debug, PartialEq)]
pub struct LedgerPart {
    /// Which part.
    pub part: Part,
    /// Its slot-seconds (`None`: the run cannot know it; see `missing`).
    pub slot_seconds: Option<f64>,
    /// Its share of the slot-time (`None` when either is unknown).
    pub share: Option<f64>,
    /// Why it is absent.
    pub missing: Option<String>,
    /// Set when the figure is an estimate rather than a measurement.
    pub inferred: Option<Inferred>,
}

impl Serialize for LedgerPart {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("slot_seconds", &self.slot_seconds)?;
        m.serialize_entry("share", &self.share)?;
        if let Some(why) = &self.missing {
            m.serialize_entry("missing", why)?;
        }
        if let Some(inf) = &self.inferred {
            m.serialize_entry("inferred", &true)?;
            m.serialize_entry("method", &inf.method)?;
        }
        m.end()
    }
}

/// The ledger of a window: slot-time and its parts, per bucket when the report
/// has a time series.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Capacity {
    /// ∫ cap dt over the window (`None` when the cap was unknown or unlimited
    /// for part of it: free slots are then not defined).
    pub slot_seconds: Option<f64>,
    /// ∫ (in_flight − cap)⁺ dt: spans in flight above the cap (a merged or
    /// corrupt log), included in the busy parts; absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub above_cap_slot_seconds: Option<f64>,
    /// The parts, in [`Part::ALL`] order.
    #[serde(serialize_with = "parts_map")]
    pub parts: Vec<LedgerPart>,
    /// The hand-off threshold used.
    #[serde(
        rename = "handoff_threshold_s",
        serialize_with = "tpscope_model::time::duration_secs::serialize"
    )]
    pub handoff_threshold: Duration,
    /// Slot-seconds per part per bucket of the time series (absent without one).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "buckets_map"
    )]
    pub buckets: Option<Vec<[f64; 9]>>,
    /// How freed slots were refilled while work waited (absent when the free
    /// parts are).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refills: Option<Refills>,
    /// The gap's causes that hold a noticeable share, largest first.
    pub causes: Vec<super::GapCause>,
}

/// Refills of freed slots while work waited, by kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Refills {
    /// Refilled within the hand-off threshold.
    pub handoff: RefillStat,
    /// Refilled later.
    pub held_back: RefillStat,
    /// Mean free slots while work waited (`None` without a gap).
    pub mean_free_slots_in_gap: Option<f64>,
}

/// Refills of one kind: how many and how long each slot waited for work that waited.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RefillStat {
    /// Slots refilled (or cut by a lower cap) after waiting.
    pub count: u64,
    /// Their mean wait (`None` when none).
    pub mean_wait_s: Option<f64>,
}

impl Capacity {
    /// The part `p`.
    pub fn part(&self, p: Part) -> &LedgerPart {
        &self.parts[p.index()]
    }

    /// The slot-seconds of `p`, when known.
    pub fn seconds(&self, p: Part) -> Option<f64> {
        self.part(p).slot_seconds
    }

    /// The share of `p`, when known.
    pub fn share(&self, p: Part) -> Option<f64> {
        self.part(p).share
    }
}

fn parts_map<S: Serializer>(parts: &[LedgerPart], s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(Some(parts.len()))?;
    for p in parts {
        m.serialize_entry(p.part.name(), p)?;
    }
    m.end()
}

fn buckets_map<S: Serializer>(b: &Option<Vec<[f64; 9]>>, s: S) -> Result<S::Ok, S::Error> {
    let b = b.as_deref().unwrap_or_default();
    let mut m = s.serialize_map(Some(9))?;
    for p in Part::ALL {
        let col: Vec<f64> = b.iter().map(|row| row[p.index()]).collect();
        m.serialize_entry(p.name(), &col)?;
    }
    m.end()
}
