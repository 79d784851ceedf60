//! Numbering a run's `session_id`s as its spans are read (readers number them so
//! that a span's facts hold no string): 0, 1, 2, … in order of first appearance.

use std::collections::HashMap;

/// Session ids below this that are written as plain decimal numbers are looked
/// up by value (16 MiB of table at most); others are hashed.
const DENSE_SESSIONS: u64 = 1 << 22;

/// Marks a value of the dense table not seen yet.
const UNSEEN: u32 = u32::MAX;

/// The `session_id`s of one run, numbered 0, 1, 2, … in order of first
/// appearance. tpscope writes its session ids as 0, 1, 2, …: those are found in
/// a table indexed by their value (hashing a third of a million ids, and keeping
/// each, cost a fifth of reading a log); any other id is hashed and kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SessionIds {
    /// By the id's decimal value: its number, or [`UNSEEN`].
    dense: Vec<u32>,
    other: HashMap<Box<str>, u32>,
    count: u32,
}

impl SessionIds {
    /// The number of session `id`, given the next one when it is new.
    pub fn number(&mut self, id: &str) -> u32 {
        if let Some(v) = decimal_id_below(id, DENSE_SESSIONS) {
            let i = v as usize;
            if i >= self.dense.len() {
                self.dense.resize((i + 1).next_power_of_two(), UNSEEN);
            }
            if self.dense[i] == UNSEEN {
                self.dense[i] = self.next();
            }
            return self.dense[i];
        }
        if let Some(&n) = self.other.get(id) {
            return n;
        }
        let n = self.next();
        self.other.insert(id.into(), n);
        n
    }

    fn next(&mut self) -> u32 {
        let n = self.count;
        // More than 4 billion sessions in a run share the last numbers.
        self.count = self.count.saturating_add(1).min(UNSEEN - 1);
        n
    }

    /// Each session's id, indexed by its number (the reverse of
    /// [`SessionIds::number`], for the per-span export).
    pub fn names(&self) -> Vec<Box<str>> {
        let mut out = vec![Box::<str>::default(); self.len()];
        let dense = self.dense.iter().enumerate().filter(|(_, n)| **n != UNSEEN);
        for (i, &n) in dense {
            if let Some(slot) = out.get_mut(n as usize) {
                *slot = i.to_string().into();
            }
        }
        for (id, &n) in &self.other {
            if let Some(slot) = out.get_mut(n as usize) {
                *slot = id.clone();
            }
        }
        out
    }

    /// Sessions numbered so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// The number an id spells in plain decimal (no sign, no leading zero), when it
/// is below `limit` (at most 10^18): ids that index a dense table instead of a
/// hash map (the log reader's span ids use it too).
pub fn decimal_id_below(id: &str, limit: u64) -> Option<u64> {
    let b = id.as_bytes();
    if b.is_empty() || b.len() > 18 || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    let mut n = 0u64;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d >= 10 {
            return None;
        }
        n = n * 10 + u64::from(d);
        if n >= limit {
            return None;
        }
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_reverse_the_numbers_of_dense_and_hashed_ids() {
        let mut ids = SessionIds::default();
        assert_eq!(ids.number("7"), 0);
        assert_eq!(ids.number("chat-a"), 1);
        assert_eq!(ids.number("0"), 2);
        assert_eq!(ids.number("7"), 0);
        assert_eq!(
            ids.names()
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>(),
            ["7", "chat-a", "0"]
        );
    }
}
