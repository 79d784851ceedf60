//! The continuous-batching scheduler (pure, no I/O, no clock): a running batch
//! bounded by max sequences and a paged KV cache, FCFS admission, chunked prefill
//! under a per-step token budget, preemption by recompute, and the step time of
//! each scheduled step by [`Roofline`].
//!
//! A step is two calls: [`Engine::schedule`] decides what runs and how long it
//! takes; [`Engine::complete`] applies it (every sequence whose computed tokens
//! reach its length samples one token). The driver sleeps between the two.

use std::collections::VecDeque;
use std::time::Duration;

use crate::config::BLOCK_SIZE;
use crate::prefix_cache::PrefixCache;
use crate::roofline::{Roofline, StepWork};

/// Limits of the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most sequences in the running batch.
    pub max_num_seqs: usize,
    /// Most tokens computed in one step (decodes plus prefill chunks).
    pub max_num_batched_tokens: u32,
    /// KV cache blocks of [`BLOCK_SIZE`] tokens.
    pub num_blocks: u64,
}

/// A request as the engine sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqSpec {
    /// Caller's identifier (unique among live sequences).
    pub id: u64,
    /// Prompt tokens (≥ 1 is expected; 0 is treated as 1 so a step can sample).
    pub prompt_tokens: u32,
    /// Output tokens to generate before finishing (≥ 1).
    pub output_tokens: u32,
}

/// What happened to a sequence, reported through the callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Scheduled for the first time (it left the queue): during `schedule`.
    FirstScheduled,
    /// Preempted: its KV blocks were freed and it went back to the front of the
    /// queue, to be recomputed (prompt plus output so far): during `schedule`.
    Preempted,
    /// Sampled its `count`-th output token (1-based); `finished` when that was the
    /// last one (its blocks are freed and it leaves the engine): during `complete`.
    Token {
        /// Output tokens generated so far, this one included.
        count: u32,
        /// Whether this was the last token.
        finished: bool,
    },
}

/// What one scheduled step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StepPlan {
    /// Simulated duration of the step.
    pub duration: Duration,
    /// What it computes (sequences, tokens, KV read, attention pairs).
    pub work: StepWork,
    /// Of the tokens computed, prefill (prompt or recompute) tokens.
    pub prefill_tokens: u64,
    /// Sequences preempted while scheduling this step.
    pub preempted: u32,
}

struct Seq<T> {
    spec: SeqSpec,
    output: u32,
    computed: u32,
    blocks: u32,
    scheduled: u32,
    started: bool,
    /// Chained hashes of the full blocks of prompt plus output (prefix caching).
    hashes: Vec<u64>,
    /// Whether the prefix cache was consulted since the sequence last (re)started.
    looked_up: bool,
    /// Whether its prompt blocks were entered into the prefix cache.
    prompt_cached: bool,
    data: T,
}

impl<T> Seq<T> {
    /// Tokens that make up the sequence now: prompt plus sampled output.
    fn len(&self) -> u32 {
        self.spec.prompt_tokens.max(1) + self.output
    }
}

fn blocks_for(tokens: u32) -> u32 {
    tokens.div_ceil(BLOCK_SIZE)
}

/// The scheduler. `T` is the caller's per-sequence data, handed to the callback.
pub struct Engine<T> {
    limits: Limits,
    roofline: Roofline,
    running: Vec<Seq<T>>,
    waiting: VecDeque<Seq<T>>,
    free_blocks: u64,
    preemptions: u64,
    cache: Option<PrefixCache>,
}

impl<T> Engine<T> {
    /// An empty engine.
    pub fn new(limits: Limits, roofline: Roofline) -> Self {
        Engine {
            limits,
            roofline,
            running: Vec::with_capacity(limits.max_num_seqs.min(4096)),
            waiting: VecDeque::new(),
            free_blocks: limits.num_blocks,
            preemptions: 0,
            cache: None,
        }
    }

    /// Turns automatic prefix caching on, holding at most as many blocks as the
    /// KV cache.
    pub fn with_prefix_cache(mut self) -> Self {
        self.cache = Some(PrefixCache::new(self.limits.num_blocks));
        self
    }

    /// The prefix cache, when on.
    pub fn prefix_cache(&self) -> Option<&PrefixCache> {
        self.cache.as_ref()
    }

    /// Queues a request at the back of the waiting queue.
    pub fn add(&mut self, spec: SeqSpec, data: T) {
        self.add_hashed(spec, data, Vec::new());
    }

    /// Queues a request with the chained hashes of its blocks (prompt, then
    /// output), so that it can use and fill the prefix cache.
    pub fn add_hashed(&mut self, spec: SeqSpec, data: T, hashes: Vec<u64>) {
        self.waiting.push_back(Seq {
            spec: SeqSpec {
                output_tokens: spec.output_tokens.max(1),
                ..spec
            },
            output: 0,
            computed: 0,
            blocks: 0,
            scheduled: 0,
            started: false,
            hashes,
            looked_up: false,
            prompt_cached: false,
            data,
        });
    }

    /// Removes a sequence wherever it is (freeing its blocks) and returns its data.
    /// Must not be called between `schedule` and `complete`.
    pub fn abort(&mut self, id: u64) -> Option<T> {
        if let Some(i) = self.running.iter().position(|s| s.spec.id == id) {
            let s = self.running.remove(i);
            self.free_blocks += u64::from(s.blocks);
            return Some(s.data);
        }
        let i = self.waiting.iter().position(|s| s.spec.id == id)?;
        self.waiting.remove(i).map(|s| s.data)
    }

    /// Removes every sequence, returning their data (running first, then waiting).
    pub fn drain(&mut self) -> Vec<T> {
        self.free_blocks = self.limits.num_blocks;
        let mut out: Vec<T> = self.running.drain(..).map(|s| s.data).collect();
        out.extend(self.waiting.drain(..).map(|s| s.data));
        out
    }

    /// No sequence running or waiting.
    pub fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty()
    }

    /// Sequences in the running batch.
    pub fn num_running(&self) -> usize {
        self.running.len()
    }

    /// Sequences waiting (never scheduled, or preempted).
    pub fn num_waiting(&self) -> usize {
        self.waiting.len()
    }

    /// KV blocks in use.
    pub fn used_blocks(&self) -> u64 {
        self.limits.num_blocks - self.free_blocks
    }

    /// KV blocks in all.
    pub fn total_blocks(&self) -> u64 {
        self.limits.num_blocks
    }

    /// Preemptions since the engine started.
    pub fn preemptions(&self) -> u64 {
        self.preemptions
    }

    /// The step-time model.
    pub fn roofline(&self) -> &Roofline {
        &self.roofline
    }

    /// Decides the next step: running sequences first, in admission order, each
    /// asking for the tokens it has not computed (1 when decoding, the rest of its
    /// prompt in chunks when prefilling) within the step's token budget; when blocks
    /// run out, the last-admitted running sequence is preempted (recompute). Then,
    /// if nothing was preempted, waiting sequences are admitted first-come-first-
    /// served while the batch, the budget and the free blocks allow (the head of the
    /// queue blocks the rest). Returns `None` when nothing can run.
    pub fn schedule(&mut self, on: &mut impl FnMut(&mut T, Event)) -> Option<StepPlan> {
        let mut budget = self.limits.max_num_batched_tokens;
        let mut plan = StepPlan::default();
        let mut i = 0;
        while i < self.running.len() {
            if budget == 0 {
                self.running[i].scheduled = 0;
                i += 1;
                continue;
            }
            let (want, need_blocks) = {
                let s = &self.running[i];
                let want = (s.len() - s.computed).min(budget);
                (want, blocks_for(s.computed + want).saturating_sub(s.blocks))
            };
            let mut self_preempted = false;
            while self.free_blocks < u64::from(need_blocks) {
                let victim_is_self = self.running.len() - 1 == i;
                let mut v = self.running.pop().expect("running is not empty");
                self.free_blocks += u64::from(v.blocks);
                v.blocks = 0;
                v.computed = 0;
                v.scheduled = 0;
                v.looked_up = false;
                on(&mut v.data, Event::Preempted);
                self.waiting.push_front(v);
                self.preemptions += 1;
                plan.preempted += 1;
                if victim_is_self {
                    self_preempted = true;
                    break;
                }
            }
            if self_preempted {
                break;
            }
            let s = &mut self.running[i];
            self.free_blocks -= u64::from(need_blocks);
            s.blocks += need_blocks;
            s.scheduled = want;
            budget -= want;
            plan.add(s.computed, want, s.len());
            i += 1;
        }
        if plan.preempted == 0 {
            while self.running.len() < self.limits.max_num_seqs && budget > 0 {
                let Some(w) = self.waiting.front_mut() else {
                    break;
                };
                // Once per (re)start: the cached prefix is computed already.
                if !w.looked_up {
                    w.looked_up = true;
                    if let Some(c) = &mut self.cache
                        && w.computed == 0
                    {
                        w.computed = c.lookup(&w.hashes, w.spec.prompt_tokens.max(1));
                    }
                }
                let want = (w.len() - w.computed).min(budget);
                let need = blocks_for(w.computed + want).saturating_sub(w.blocks);
                if self.free_blocks < u64::from(need) {
                    break;
                }
                let mut s = self.waiting.pop_front().expect("front exists");
                self.free_blocks -= u64::from(need);
                s.blocks += need;
                s.scheduled = want;
                budget -= want;
                plan.add(s.computed, want, s.len());
                if !s.started {
                    s.started = true;
                    on(&mut s.data, Event::FirstScheduled);
                }
                self.running.push(s);
            }
        }
        if plan.work.tokens == 0 {
            return None;
        }
        plan.duration = self.roofline.step(&plan.work);
        Some(plan)
    }

    /// Applies the scheduled step: each scheduled sequence gains its computed
    /// tokens; one whose computed tokens reach its length samples a token; one that
    /// reaches its output length finishes and leaves (blocks freed).
    pub fn complete(&mut self, on: &mut impl FnMut(&mut T, Event)) {
        let free = &mut self.free_blocks;
        let cache = &mut self.cache;
        self.running.retain_mut(|s| {
            if s.scheduled == 0 {
                return true;
            }
            s.computed += s.scheduled;
            s.scheduled = 0;
            if let Some(c) = cache.as_mut()
                && !s.prompt_cached
                && s.computed >= s.spec.prompt_tokens
            {
                // The prompt's full blocks are computed: later requests share them.
                s.prompt_cached = true;
                let n = (s.spec.prompt_tokens / BLOCK_SIZE) as usize;
                c.insert(&s.hashes[..n.min(s.hashes.len())]);
            }
            if s.computed < s.len() {
                return true;
            }
            s.output += 1;
            let finished = s.output >= s.spec.output_tokens;
            on(
                &mut s.data,
                Event::Token {
                    count: s.output,
                    finished,
                },
            );
            if finished {
                *free += u64::from(s.blocks);
                if let Some(c) = cache.as_mut() {
                    // Output blocks too: the next turn of a conversation carries them.
                    let n = (s.len().saturating_sub(1) / BLOCK_SIZE) as usize;
                    c.insert(&s.hashes[..n.min(s.hashes.len())]);
                }
            }
            !finished
        });
    }
}

impl StepPlan {
    fn add(&mut self, computed: u32, want: u32, len: u32) {
        self.work
            .add(u64::from(computed), u64::from(want), u64::from(len));
        // A sequence still short of its full length after this chunk, or starting
        // from nothing, is prefilling; one computing its single newest token decodes.
        if computed + want < len || want > 1 || computed == 0 {
            self.prefill_tokens += u64::from(want);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SimConfig;

    fn engine(seqs: usize, budget: u32, blocks: u64) -> Engine<u64> {
        Engine::new(
            Limits {
                max_num_seqs: seqs,
                max_num_batched_tokens: budget,
                num_blocks: blocks,
            },
            Roofline::new(&SimConfig::default()),
        )
    }

    /// Runs one step, returning the events as (id, event).
    fn step(e: &mut Engine<u64>) -> (Option<StepPlan>, Vec<(u64, Event)>) {
        let mut ev = Vec::new();
        let plan = e.schedule(&mut |id: &mut u64, x| ev.push((*id, x)));
        if plan.is_some() {
            e.complete(&mut |id: &mut u64, x| ev.push((*id, x)));
        }
        (plan, ev)
    }

    fn add(e: &mut Engine<u64>, id: u64, prompt: u32, out: u32) {
        e.add(
            SeqSpec {
                id,
                prompt_tokens: prompt,
                output_tokens: out,
            },
            id,
        );
    }

    #[test]
    fn all_running_sequences_advance_one_token_per_decode_step() {
        let mut e = engine(8, 1000, 1000);
        for id in 0..4 {
            add(&mut e, id, 10, 3);
        }
        // Step 1: four prefills of 10, each samples its first token.
        let (plan, ev) = step(&mut e);
        let plan = plan.unwrap();
        assert_eq!(
            (plan.work.seqs, plan.work.tokens, plan.prefill_tokens),
            (4, 40, 40)
        );
        let firsts = ev
            .iter()
            .filter(|(_, x)| *x == Event::FirstScheduled)
            .count();
        assert_eq!(firsts, 4);
        assert_eq!(
            ev.iter()
                .filter(|(_, x)| matches!(x, Event::Token { count: 1, .. }))
                .count(),
            4
        );
        // Step 2: four decodes of one token, reading 11 tokens of KV each.
        let (plan, ev) = step(&mut e);
        let plan = plan.unwrap();
        assert_eq!(
            (plan.work.tokens, plan.prefill_tokens, plan.work.kv_tokens),
            (4, 0, 44)
        );
        assert_eq!(ev.len(), 4);
        // Step 3: the last token of each; all finish and free their blocks.
        let (_, ev) = step(&mut e);
        assert!(ev.iter().all(|(_, x)| *x
            == Event::Token {
                count: 3,
                finished: true
            }));
        assert!(e.is_idle());
        assert_eq!(e.used_blocks(), 0);
        assert_eq!(step(&mut e).0, None);
    }

    #[test]
    fn batch_is_bounded_by_max_num_seqs_and_admission_is_fcfs() {
        let mut e = engine(2, 1000, 1000);
        for id in 0..3 {
            add(&mut e, id, 4, 2);
        }
        let (_, ev) = step(&mut e);
        let started: Vec<u64> = ev
            .iter()
            .filter(|(_, x)| *x == Event::FirstScheduled)
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(started, vec![0, 1]);
        assert_eq!((e.num_running(), e.num_waiting()), (2, 1));
        step(&mut e); // 0 and 1 finish
        let (_, ev) = step(&mut e);
        assert_eq!(ev[0], (2, Event::FirstScheduled));
    }

    #[test]
    fn chunked_prefill_respects_the_token_budget() {
        let mut e = engine(8, 16, 1000);
        add(&mut e, 0, 40, 1);
        add(&mut e, 1, 4, 1);
        // 40-token prompt with a 16-token budget: chunks of 16, 16, 8; the second
        // request waits for budget left over in the third step.
        let (p, ev) = step(&mut e);
        assert_eq!(p.unwrap().work.tokens, 16);
        assert_eq!(ev, vec![(0, Event::FirstScheduled)]);
        let (p, _) = step(&mut e);
        assert_eq!(p.unwrap().work.tokens, 16);
        let (p, ev) = step(&mut e);
        assert_eq!(p.unwrap().work.tokens, 12);
        assert!(ev.contains(&(
            0,
            Event::Token {
                count: 1,
                finished: true
            }
        )));
        assert!(ev.contains(&(
            1,
            Event::Token {
                count: 1,
                finished: true
            }
        )));
    }

    #[test]
    fn kv_blocks_are_paged_in_sixteen_token_blocks() {
        let mut e = engine(8, 1000, 100);
        add(&mut e, 0, 16, 3);
        step(&mut e); // 16 tokens computed: 1 block
        assert_eq!(e.used_blocks(), 1);
        step(&mut e); // token 17 computed: a second block
        assert_eq!(e.used_blocks(), 2);
        step(&mut e);
        assert_eq!(e.used_blocks(), 0);
    }

    #[test]
    fn preemption_recomputes_the_last_admitted_sequence() {
        // 4 blocks = 64 tokens. Two sequences of 32-token prompts fill it exactly;
        // the first decode needs a third block each, so the later one is preempted.
        let mut e = engine(8, 1000, 4);
        add(&mut e, 0, 32, 20);
        add(&mut e, 1, 32, 20);
        let (_, ev) = step(&mut e);
        assert_eq!(
            ev.iter()
                .filter(|(_, x)| matches!(x, Event::Token { .. }))
                .count(),
            2
        );
        assert_eq!(e.used_blocks(), 4);
        let (plan, ev) = step(&mut e);
        assert_eq!(plan.unwrap().preempted, 1);
        assert_eq!(ev[0], (1, Event::Preempted));
        assert_eq!(e.preemptions(), 1);
        assert_eq!((e.num_running(), e.num_waiting()), (1, 1));
        // Sequence 0 runs to the end; then 1 is recomputed (32 prompt + 1 output)
        // and continues at its second token, not its first.
        let mut next_of_1 = None;
        for _ in 0..40 {
            let (_, ev) = step(&mut e);
            if let Some((_, Event::Token { count, .. })) = ev.iter().find(|(id, _)| *id == 1) {
                next_of_1 = Some(*count);
                break;
            }
        }
        assert_eq!(next_of_1, Some(2));
        assert!(!runs_to_idle_with_a_second_first_schedule(&mut e));
    }

    /// Runs the engine dry; whether any sequence was "first scheduled" again.
    fn runs_to_idle_with_a_second_first_schedule(e: &mut Engine<u64>) -> bool {
        let mut n = 0;
        for _ in 0..100 {
            let (p, ev) = step(e);
            n += ev
                .iter()
                .filter(|(_, x)| *x == Event::FirstScheduled)
                .count();
            if p.is_none() {
                break;
            }
        }
        n > 0
    }

    #[test]
    fn abort_frees_blocks_and_forgets_the_sequence() {
        let mut e = engine(8, 1000, 100);
        add(&mut e, 7, 40, 50);
        add(&mut e, 8, 4, 50);
        step(&mut e);
        assert_eq!(e.used_blocks(), 4);
        assert_eq!(e.abort(7), Some(7));
        assert_eq!(e.used_blocks(), 1);
        assert_eq!(e.abort(7), None);
        assert_eq!(e.drain(), vec![8]);
        assert!(e.is_idle());
    }

    #[test]
    fn step_time_comes_from_the_roofline() {
        let mut e = engine(8, 1000, 1000);
        add(&mut e, 0, 100, 5);
        let (p, _) = step(&mut e);
        let p = p.unwrap();
        assert_eq!(p.duration, e.roofline().step(&StepWork::prefill(100)));
        let (p, _) = step(&mut e);
        assert_eq!(p.unwrap().duration, e.roofline().decode_step(1, 101));
    }
}
