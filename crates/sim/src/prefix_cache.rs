//! The simulator's automatic prefix cache (pure), as vLLM's: a sequence's tokens in
//! full blocks of [`BLOCK_SIZE`], each block known by a hash chained over every
//! token before it; a new request skips the prefill of its longest cached prefix;
//! least-recently-used blocks are evicted once the cache holds as many blocks as
//! the KV cache; hits and queries are counted in tokens
//! (`vllm:prefix_cache_hits_total` / `vllm:prefix_cache_queries_total`).
//!
//! Simplification: the cache bounds its own size by the KV cache's block count, but
//! a running sequence's blocks are not shared with another's (memory is counted per
//! sequence, as without caching); only the prefill work is saved.

use std::collections::{BTreeMap, HashMap};

use tpscope_tokens::mix;

use crate::config::BLOCK_SIZE;

/// Chained hashes of the full blocks of `units` (token ids, or stand-ins that are
/// equal exactly when the tokens are): block k's hash covers units `0..16(k+1)`.
pub fn block_hashes(units: &[u32]) -> Vec<u64> {
    let mut out = Vec::with_capacity(units.len() / BLOCK_SIZE as usize);
    let mut h = 0x0C0F_FEE0_u64;
    for block in units.chunks_exact(BLOCK_SIZE as usize) {
        for &u in block {
            h = mix(h ^ u64::from(u));
        }
        out.push(h);
    }
    out
}

/// The cache: which block hashes are held, in least-recently-used order.
#[derive(Debug)]
pub struct PrefixCache {
    capacity: usize,
    /// hash → the tick it was last used.
    used: HashMap<u64, u64>,
    /// tick → hash, oldest first.
    lru: BTreeMap<u64, u64>,
    tick: u64,
    queries: u64,
    hits: u64,
}

impl PrefixCache {
    /// A cache of at most `capacity` blocks.
    pub fn new(capacity: u64) -> Self {
        PrefixCache {
            capacity: usize::try_from(capacity).unwrap_or(usize::MAX).max(1),
            used: HashMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
            queries: 0,
            hits: 0,
        }
    }

    fn touch(&mut self, h: u64) {
        self.tick += 1;
        if let Some(old) = self.used.insert(h, self.tick) {
            self.lru.remove(&old);
        }
        self.lru.insert(self.tick, h);
    }

    /// Tokens of a `prompt_tokens`-long prompt whose KV is cached: the longest run
    /// of leading blocks found, leaving at least the last prompt token to compute
    /// (it must be run to sample the first output token, as in vLLM). Counts the
    /// query and the hit; the blocks found become the most recently used.
    pub fn lookup(&mut self, hashes: &[u64], prompt_tokens: u32) -> u32 {
        let usable = (prompt_tokens.saturating_sub(1) / BLOCK_SIZE) as usize;
        let found = hashes
            .iter()
            .take(usable)
            .take_while(|h| self.used.contains_key(h))
            .count();
        for &h in &hashes[..found] {
            self.touch(h);
        }
        let hit = found as u32 * BLOCK_SIZE;
        self.queries += u64::from(prompt_tokens);
        self.hits += u64::from(hit);
        hit
    }

    /// Records that the KV of these blocks is computed; evicts the least recently
    /// used blocks beyond the capacity.
    pub fn insert(&mut self, hashes: &[u64]) {
        for &h in hashes {
            self.touch(h);
        }
        while self.used.len() > self.capacity {
            let Some((_, h)) = self.lru.pop_first() else {
                break;
            };
            self.used.remove(&h);
        }
    }

    /// Prompt tokens looked up so far.
    pub fn queries(&self) -> u64 {
        self.queries
    }

    /// Of those, tokens found cached.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Blocks held.
    pub fn len(&self) -> usize {
        self.used.len()
    }

    /// Whether no block is held.
    pub fn is_empty(&self) -> bool {
        self.used.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(seed: u32, n: u32) -> Vec<u32> {
        (0..n).map(|i| seed * 100_000 + i).collect()
    }

    #[test]
    fn a_shared_prefix_hits_whole_blocks_and_leaves_the_last_token() {
        let mut c = PrefixCache::new(100);
        let a = units(1, 100);
        c.insert(&block_hashes(&a));
        // The same 64 tokens, then others: 4 blocks hit.
        let mut b = a[..64].to_vec();
        b.extend(units(2, 40));
        assert_eq!(c.lookup(&block_hashes(&b), 104), 64);
        // The whole of `a` again: 6 full blocks, but the last token (index 95 of a
        // 96-token prompt) must be computed, so 5 blocks.
        assert_eq!(c.lookup(&block_hashes(&a[..96]), 96), 80);
        assert_eq!(c.queries(), 200);
        assert_eq!(c.hits(), 144);
        // A different first token changes every chained hash after it.
        let mut d = a.clone();
        d[0] = 7;
        assert_eq!(c.lookup(&block_hashes(&d), 100), 0);
    }

    #[test]
    fn least_recently_used_blocks_are_evicted_first() {
        let mut c = PrefixCache::new(4);
        let a = block_hashes(&units(1, 64)); // 4 blocks
        let b = block_hashes(&units(2, 32)); // 2 blocks
        c.insert(&a);
        c.insert(&b);
        assert_eq!(c.len(), 4);
        // a's first two blocks were the oldest: gone, so a finds nothing.
        assert_eq!(c.lookup(&a, 65), 0);
        assert_eq!(c.lookup(&b, 33), 32);
    }

    /// Simulated time from adding a sequence to its first token, alone in the engine.
    fn ttft(
        e: &mut crate::engine::Engine<u64>,
        id: u64,
        units: &[u32],
        prompt: u32,
        out: u32,
    ) -> f64 {
        use crate::engine::{Event, SeqSpec};
        e.add_hashed(
            SeqSpec {
                id,
                prompt_tokens: prompt,
                output_tokens: out,
            },
            id,
            block_hashes(units),
        );
        let (mut t, mut first) = (0.0, None);
        while let Some(plan) = e.schedule(&mut |_: &mut u64, _| {}) {
            t += plan.duration.as_secs_f64();
            e.complete(&mut |_: &mut u64, ev| {
                if matches!(ev, Event::Token { count: 1, .. }) {
                    first.get_or_insert(t);
                }
            });
        }
        first.unwrap()
    }

    /// Prefill time of prompt tokens `from..to` in chunks of the step budget.
    fn prefill(r: &crate::roofline::Roofline, budget: u32, from: u32, to: u32) -> f64 {
        let (mut t, mut c) = (0.0, from);
        while c < to {
            let want = (to - c).min(budget);
            let mut w = crate::roofline::StepWork::default();
            w.add(u64::from(c), u64::from(want), u64::from(to));
            t += r.step(&w).as_secs_f64();
            c += want;
        }
        t
    }

    #[test]
    fn a_later_turn_is_faster_by_the_ratio_its_cached_prefix_predicts() {
        use crate::config::SimConfig;
        use crate::engine::{Engine, Limits};
        use crate::roofline::Roofline;
        let cfg = SimConfig::default();
        let limits = Limits {
            max_num_seqs: 8,
            max_num_batched_tokens: cfg.max_num_batched_tokens,
            num_blocks: 10_000,
        };
        let mut e = Engine::new(limits, Roofline::new(&cfg)).with_prefix_cache();
        // Turn 1: a 3000-token prompt, a 40-token reply; turn 2 carries both plus
        // 100 new tokens.
        let (p1, o1, new) = (3000u32, 40u32, 100u32);
        let turn1: Vec<u32> = (0..p1 + o1).collect();
        let t1 = ttft(&mut e, 1, &turn1, p1, o1);
        let mut turn2 = turn1.clone();
        turn2.extend(100_000..100_000 + new);
        let p2 = p1 + o1 + new;
        let t2 = ttft(&mut e, 2, &turn2, p2, 5);
        let cached = (p1 + o1 - 1) / BLOCK_SIZE * BLOCK_SIZE;
        let r = Roofline::new(&cfg);
        let budget = cfg.max_num_batched_tokens;
        let predicted = prefill(&r, budget, cached, p2) / prefill(&r, budget, 0, p1);
        let measured = t2 / t1;
        assert!(measured < 0.5, "turn 2 must be much faster: {t2} vs {t1}");
        assert!(
            (measured / predicted - 1.0).abs() <= 0.2,
            "measured {measured:.4} vs predicted {predicted:.4}"
        );
        // Without the cache, turn 2 prefills everything and is slower than turn 1.
        let mut cold = Engine::new(limits, Roofline::new(&cfg));
        assert!(ttft(&mut cold, 2, &turn2, p2, 5) > t1);
    }
}
