//! Run assembly: records filed under their run (across files), duplicate span
//! ids and runs found, the vectors sized ahead, and warnings for incomplete runs.

use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

use tpscope_analysis::RunInput;

use super::parse::Parsed;
use super::{FileState, LoadedRun, LogSet, Reader};
use crate::scalar::{FieldResult, problem};

/// A hasher for keys that already are keyed hashes (span ids hashed with random
/// SipHash keys): hashing them again cost 4 % of reading.
#[derive(Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Not used by u128 keys; fold anything else in rather than drop it.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u128(&mut self, v: u128) {
        self.0 = (v as u64) ^ ((v >> 64) as u64);
    }
}

pub(super) struct RunAcc {
    run: LoadedRun,
    ids: SpanIds,
}

/// Ids below this that are written as plain decimal numbers are kept in a bitset
/// (8 MiB at most); others are hashed.
const DENSE_IDS: u64 = 1 << 26;

/// The span ids of one run seen so far, to find duplicates. tpscope numbers spans
/// 1, 2, 3, …: such ids are bits in a bitset (a hash set of a million ids cost a
/// cache miss per span and 32 bytes per span); any other id is kept as a 128-bit
/// keyed hash (a false duplicate needs a 128-bit collision). Every id text goes
/// the same way each time, so the two never overlap.
#[derive(Default)]
struct SpanIds {
    dense: Vec<u64>,
    other: HashSet<u128, BuildHasherDefault<PreHashed>>,
}

impl SpanIds {
    /// Records `id`; false when it was seen before.
    fn insert(&mut self, id: &str, keys: &(RandomState, RandomState)) -> bool {
        if let Some(n) = dense_id(id) {
            let (word, bit) = ((n / 64) as usize, 1u64 << (n % 64));
            if word >= self.dense.len() {
                self.dense.resize((word + 1).next_power_of_two(), 0);
            }
            let fresh = self.dense[word] & bit == 0;
            self.dense[word] |= bit;
            return fresh;
        }
        let mut h1 = keys.0.build_hasher();
        let mut h2 = keys.1.build_hasher();
        h1.write(id.as_bytes());
        h2.write(id.as_bytes());
        self.other
            .insert((u128::from(h1.finish()) << 64) | u128::from(h2.finish()))
    }
}

/// The number an id spells in plain decimal (no sign, no leading zero), when it
/// is below [`DENSE_IDS`].
fn dense_id(id: &str) -> Option<u64> {
    let b = id.as_bytes();
    if b.is_empty() || b.len() > 8 || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    let mut n = 0u64;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d >= 10 {
            return None;
        }
        n = n * 10 + u64::from(d);
    }
    (n < DENSE_IDS).then_some(n)
}

impl Reader {
    /// Reserves room for the rest of the file, extrapolating from the lines read:
    /// growing a vector of a million spans by doubling copied it repeatedly and
    /// held two copies at the peak. Only a file of one run is extrapolated.
    pub(super) fn reserve_rest(&mut self, file: &FileState) {
        let (Some(size), [acc]) = (file.size, &mut self.accs[..]) else {
            return;
        };
        if file.bytes == 0 || size <= file.bytes {
            return;
        }
        // A little over the estimate, so that a slightly longer tail does not
        // trigger a doubling.
        let scale = (size - file.bytes) as f64 / file.bytes as f64 * 1.02;
        let input = &mut acc.run.input;
        let more = |n: usize| (n as f64 * scale) as usize;
        input.spans.reserve(more(input.spans.len()));
        input.samples.reserve(more(input.samples.len()));
        acc.ids.other.reserve(more(acc.ids.other.len()));
        if self.opts.keep_span_ids {
            acc.run.span_ids.reserve(more(acc.run.span_ids.len()));
        }
    }

    /// Files a parsed record under its run.
    pub(super) fn file(&mut self, run_id: &str, parsed: Parsed<'_>) -> FieldResult<()> {
        // Consecutive records nearly always share a run: check the last one first.
        let idx = match self
            .last
            .filter(|&i| self.accs[i].run.input.run_id == run_id)
        {
            Some(i) => i,
            None => match self.index.get(run_id) {
                Some(i) => *i,
                None => {
                    self.index.insert(run_id.to_string(), self.accs.len());
                    self.accs.push(RunAcc {
                        run: LoadedRun {
                            input: RunInput {
                                run_id: run_id.to_string(),
                                ..RunInput::default()
                            },
                            span_ids: Vec::new(),
                        },
                        ids: SpanIds::default(),
                    });
                    self.accs.len() - 1
                }
            },
        };
        self.last = Some(idx);
        let acc = &mut self.accs[idx];
        match parsed {
            Parsed::Span {
                facts,
                source,
                span_id,
            } => {
                if !acc.ids.insert(&span_id, &self.hash_keys) {
                    return Err(problem(
                        "span_id",
                        "duplicate_span_id",
                        format!("duplicate span id `{span_id}` in run `{run_id}`"),
                    ));
                }
                acc.run.input.push_span(facts, source.as_ref());
                if self.opts.keep_span_ids {
                    acc.run.span_ids.push(span_id.into());
                }
            }
            Parsed::Sample(s) => acc.run.input.samples.push(s),
            Parsed::Run(r) => {
                if acc.run.input.run.is_some() {
                    return Err(problem(
                        "run_id",
                        "duplicate_run",
                        format!("a second `run` record for run `{run_id}`"),
                    ));
                }
                acc.run.input.run = Some(r);
            }
            Parsed::End(e) => acc.run.input.end = Some(e),
        }
        Ok(())
    }

    /// Finishes reading: warnings for incomplete runs, and the runs in order.
    pub fn finish(mut self) -> LogSet {
        for acc in self.accs {
            let i = &acc.run.input;
            if i.run.is_none() {
                self.set.warnings.push(format!(
                    "run `{}` has no `run` record (its cap and settings are unknown)",
                    i.run_id
                ));
            }
            if let Some(end) = &i.end
                && end.spans != i.spans.len() as u64
            {
                self.set.warnings.push(format!(
                    "run `{}`: the `end` record counts {} spans, the log has {}",
                    i.run_id,
                    end.spans,
                    i.spans.len()
                ));
            }
            self.set.runs.push(acc.run);
        }
        self.set
    }
}
