//! Run assembly: records filed under their run (across files, a rotation's
//! repeated `run` records included), duplicate span ids and differing `run`
//! records found, the vectors sized ahead, and warnings for incomplete runs.
//! The record reader keeps the same books ([`Runs`]) without the analysis input.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

use tpscope_analysis::{RunInput, SessionTurn, SpanText};
use tpscope_model::RunRecord;

use super::lines::FileState;
use super::parse::Parsed;
use super::{LoadedRun, LogSet, Reader};
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

/// What the records of one run are gathered into.
pub(super) trait RunData {
    /// Nothing yet of run `run_id`.
    fn new(run_id: &str) -> Self;
    /// The run's id.
    fn run_id(&self) -> &str;
}

impl RunData for LoadedRun {
    fn new(run_id: &str) -> LoadedRun {
        LoadedRun {
            input: RunInput {
                run_id: run_id.to_string(),
                ..RunInput::default()
            },
            span_ids: Vec::new(),
            span_text: Vec::new(),
        }
    }
    fn run_id(&self) -> &str {
        &self.input.run_id
    }
}

/// The runs read so far, in order of first appearance, with the span ids seen.
pub(super) struct Runs<T> {
    index: HashMap<String, usize>,
    accs: Vec<RunAcc<T>>,
    /// The run of the previous record.
    last: Option<usize>,
    hash_keys: (RandomState, RandomState),
}

struct RunAcc<T> {
    run: T,
    ids: SpanIds,
}

impl<T> Default for Runs<T> {
    fn default() -> Self {
        Runs {
            index: HashMap::new(),
            accs: Vec::new(),
            last: None,
            hash_keys: (RandomState::new(), RandomState::new()),
        }
    }
}

impl<T: RunData> Runs<T> {
    /// Where run `run_id` is, added when new. Inlined: a call per record showed
    /// in instruction counts.
    #[inline(always)]
    fn index_of(&mut self, run_id: &str) -> usize {
        // Consecutive records nearly always share a run: check the last one first.
        let idx = match self.last.filter(|&i| self.accs[i].run.run_id() == run_id) {
            Some(i) => i,
            None => match self.index.get(run_id) {
                Some(i) => *i,
                None => {
                    self.index.insert(run_id.to_string(), self.accs.len());
                    self.accs.push(RunAcc {
                        run: T::new(run_id),
                        ids: SpanIds::default(),
                    });
                    self.accs.len() - 1
                }
            },
        };
        self.last = Some(idx);
        idx
    }

    /// Run `run_id`, added when new.
    #[inline]
    pub(super) fn run(&mut self, run_id: &str) -> &mut T {
        let i = self.index_of(run_id);
        &mut self.accs[i].run
    }

    /// Run `run_id` for a span `span_id` of it; an error when the run has one
    /// with that id already.
    #[inline]
    pub(super) fn span(&mut self, run_id: &str, span_id: &str) -> FieldResult<&mut T> {
        let i = self.index_of(run_id);
        let acc = &mut self.accs[i];
        if !acc.ids.insert(span_id, &self.hash_keys) {
            return Err(problem(
                "span_id",
                "duplicate_span_id",
                format!("duplicate span id `{span_id}` in run `{run_id}`"),
            ));
        }
        Ok(&mut acc.run)
    }

    /// The runs in order of first appearance.
    pub(super) fn into_runs(self) -> impl Iterator<Item = T> {
        self.accs.into_iter().map(|acc| acc.run)
    }
}

/// Checks a `run` record met again for a run that has one. A file that continues
/// a run repeats its `run` record exactly (each file of a rotation starts with
/// it, so that it reads on its own), and the two files read as one run; a record
/// that differs is another run under the same id: an error naming the first
/// field that differs.
pub(super) fn repeated_run(first: &RunRecord, again: &RunRecord) -> FieldResult<()> {
    if first == again {
        return Ok(());
    }
    let run_id = &first.run_id;
    let why = "a file that continues a run, as each file of a rotation does, must repeat \
               its `run` record exactly";
    // Compared as written, so that the field is named as in the file.
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) =
        (serde_json::to_value(first), serde_json::to_value(again))
    else {
        return Err(problem(
            "",
            "duplicate_run",
            format!("a second, different `run` record for run `{run_id}`; {why}"),
        ));
    };
    let shown = |v: Option<&serde_json::Value>| v.map_or("absent".to_string(), |v| v.to_string());
    let differs = a
        .keys()
        .chain(b.keys().filter(|k| !a.contains_key(*k)))
        .find(|k| a.get(*k) != b.get(*k));
    Err(match differs {
        Some(key) => problem(
            key.as_str(),
            "duplicate_run",
            format!(
                "a second `run` record for run `{run_id}` with {} where the first has {}; {why}",
                shown(b.get(key)),
                shown(a.get(key)),
            ),
        ),
        None => problem(
            "",
            "duplicate_run",
            format!("a second, different `run` record for run `{run_id}`; {why}"),
        ),
    })
}

/// Counts a record of a kind this version does not read.
pub(super) fn count_kind(counts: &mut BTreeMap<String, u64>, kind: &str) {
    match counts.get_mut(kind) {
        Some(n) => *n += 1,
        None => {
            counts.insert(kind.to_string(), 1);
        }
    }
}

/// The warnings for a run read whole: no `run` record, or an `end` record that
/// counts another number of spans than were read.
pub(super) fn run_warnings(
    run_id: &str,
    has_run: bool,
    end_spans: Option<u64>,
    spans: u64,
    warnings: &mut Vec<String>,
) {
    if !has_run {
        warnings.push(format!(
            "run `{run_id}` has no `run` record (its cap and settings are unknown)"
        ));
    }
    if let Some(end) = end_spans
        && end != spans
    {
        warnings.push(format!(
            "run `{run_id}`: the `end` record counts {end} spans, the log has {spans}"
        ));
    }
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
    #[inline]
    fn insert(&mut self, id: &str, keys: &(RandomState, RandomState)) -> bool {
        if let Some(n) = tpscope_analysis::sessions::decimal_id_below(id, DENSE_IDS) {
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

/// How many spans, samples, hashed ids and kept span ids the only run held;
/// zeros when the reader holds no run or several.
#[derive(Clone, Copy, Default)]
pub(super) struct RunLens([usize; 4]);

impl Reader {
    /// What the only run holds, taken as a file starts (see [`Reader::reserve_rest`]).
    pub(super) fn run_lens(&self) -> RunLens {
        match &self.runs.accs[..] {
            [acc] => RunLens([
                acc.run.input.spans.len(),
                acc.run.input.samples.len(),
                acc.ids.other.len(),
                acc.run.span_ids.len(),
            ]),
            _ => RunLens::default(),
        }
    }

    /// Reserves room for the rest of the file, extrapolating from the lines read:
    /// growing a vector of a million spans by doubling copied it repeatedly and
    /// held two copies at the peak. Only a file of one run is extrapolated, and
    /// only from what this file added (`file_base`: the run when the file began):
    /// a later file of a rotation would otherwise multiply the earlier files' spans.
    pub(super) fn reserve_rest(&mut self, file: &FileState) {
        let (Some(size), [acc]) = (file.size, &mut self.runs.accs[..]) else {
            return;
        };
        if file.bytes == 0 || size <= file.bytes {
            return;
        }
        // A little over the estimate, so that a slightly longer tail does not
        // trigger a doubling.
        let scale = (size - file.bytes) as f64 / file.bytes as f64 * 1.02;
        let input = &mut acc.run.input;
        let [spans, samples, other, ids] = self.file_base.0;
        let more = |n: usize, before: usize| (n.saturating_sub(before) as f64 * scale) as usize;
        input.spans.reserve(more(input.spans.len(), spans));
        input.samples.reserve(more(input.samples.len(), samples));
        acc.ids.other.reserve(more(acc.ids.other.len(), other));
        if self.opts.keep_span_ids {
            acc.run.span_ids.reserve(more(acc.run.span_ids.len(), ids));
        }
    }

    /// Files a parsed record under its run. Inlined, so that a span's facts
    /// go from the line's parse into the run's vector without a copy at each
    /// step (four copies a span were 5 % of reading).
    #[inline(always)]
    pub(super) fn file(&mut self, run_id: &str, parsed: Parsed<'_>) -> FieldResult<()> {
        match parsed {
            Parsed::Span {
                mut facts,
                stamps,
                source,
                span_id,
                error_message,
                request_id,
                last_attempt_at,
                session,
                tokenizer_tokens,
            } => {
                let run = self.runs.span(run_id, &span_id)?;
                if let Some((id, turn)) = session {
                    let session = run.input.session_ids.number(&id);
                    facts.session = Some(SessionTurn { session, turn });
                }
                if let Some((t, between)) = last_attempt_at {
                    let i = run.input.spans.len();
                    run.input.last_attempts.push((i, t));
                    run.input.retry_waits.push((i, between));
                }
                if let Some(m) = &error_message {
                    run.input.add_error_message(&facts, m);
                }
                if self.opts.keep_span_ids {
                    run.span_ids.push(span_id.into());
                    run.span_text.push(SpanText {
                        request_id: request_id.map(|r| r.into()),
                        token_source: source.as_ref().map(|s| s.to_string().into()),
                        error_message: facts.error_cause.and(error_message).map(|m| m.into()),
                    });
                }
                run.input
                    .count_tally
                    .add(facts.output_tokens, source.as_ref(), tokenizer_tokens);
                run.input.push_stamped_span(facts, stamps, source.as_ref());
            }
            Parsed::Sample(s) => self.runs.run(run_id).input.samples.push(s),
            Parsed::ServerSample(s) => self.runs.run(run_id).input.server_samples.push(*s),
            Parsed::Run(r) => {
                let run = self.runs.run(run_id);
                match &run.input.run {
                    Some(first) => repeated_run(first, &r)?,
                    None => run.input.run = Some(r),
                }
            }
            Parsed::End(e) => self.runs.run(run_id).input.end = Some(e),
            Parsed::Unknown(kind) => count_kind(&mut self.set.unknown_kinds, kind),
        }
        Ok(())
    }

    /// Finishes reading: warnings for incomplete runs, and the runs in order.
    pub fn finish(mut self) -> LogSet {
        for run in self.runs.into_runs() {
            let i = &run.input;
            run_warnings(
                &i.run_id,
                i.run.is_some(),
                i.end.as_ref().map(|e| e.spans),
                i.spans.len() as u64,
                &mut self.set.warnings,
            );
            self.set.runs.push(run);
        }
        self.set
    }
}
