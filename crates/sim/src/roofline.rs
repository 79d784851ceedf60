//! Step time by roofline (pure): the time of one engine step from the bytes it moves
//! and the FLOPs it does on one of `tp` GPUs, and the `--explain` table built on it.

use std::fmt::Write as _;
use std::time::Duration;

use crate::config::{BLOCK_SIZE, GpuSpec, ModelSpec, SimConfig};

/// What one step computes, as far as its time depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct StepWork {
    /// Sequences scheduled.
    pub seqs: u64,
    /// Tokens computed (decode tokens plus prefill-chunk tokens).
    pub tokens: u64,
    /// Sequences that sample a token at the end of the step (only their last
    /// position goes through the output layer).
    pub sampled: u64,
    /// KV tokens attention reads over all scheduled sequences.
    pub kv_tokens: u64,
    /// Query–key pairs of attention: each computed token attends to every token
    /// before it and to itself, so a prefill's pairs grow with the square of its
    /// length.
    pub attention_pairs: u64,
}

impl StepWork {
    /// Adds one sequence that computes `want` tokens after the `computed` it holds,
    /// reaching `len` tokens in all when it is done prefilling.
    pub fn add(&mut self, computed: u64, want: u64, len: u64) {
        self.seqs += 1;
        self.tokens += want;
        self.kv_tokens += computed + want;
        self.attention_pairs += want * computed + want * (want + 1) / 2;
        if computed + want >= len {
            self.sampled += 1;
        }
    }

    /// A pure decode step: `batch` sequences, each computing its newest token with
    /// `context` tokens of KV (that token included).
    pub fn decode(batch: u64, context: u64) -> StepWork {
        StepWork {
            seqs: batch,
            tokens: batch,
            sampled: batch,
            kv_tokens: batch * context,
            attention_pairs: batch * context,
        }
    }

    /// One whole prompt of `tokens` prefilled in one step, sampling its first token.
    pub fn prefill(tokens: u64) -> StepWork {
        let mut w = StepWork::default();
        w.add(0, tokens, tokens);
        w
    }
}

/// The per-GPU constants of the step-time formula
///
/// ```text
/// t_step    = overhead + per_seq × S + max(t_mem, t_compute)
/// t_mem     = (W' + K × kv) / (HBM bandwidth × mem_efficiency)
/// t_compute = (2·P'·T + 2·V·H·N + 4·heads·head_dim·L·A) / tp / (FLOP/s × compute_efficiency)
/// ```
///
/// with `S` sequences scheduled, `T` tokens computed, `N` sequences sampling, `K` KV
/// tokens read and `A` attention query–key pairs; `W'` the weight bytes one GPU
/// streams (all but the input embedding, a lookup of a few rows), `P'` the
/// parameters outside the embedding and the output layer, `V·H` those of the output
/// layer (vocabulary × hidden), run only at the position that samples.
///
/// A forward pass streams the weights once whatever the batch, reads the KV cache of
/// every scheduled sequence, and does 2 FLOPs per parameter per token plus the
/// attention products; memory traffic and arithmetic overlap, so the slower of the
/// two bounds the step. What does not overlap is outside the `max`: a fixed cost per
/// step and a cost per sequence (sampling and the per-sequence kernels' work, about
/// 10 µs each on an H100).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roofline {
    /// Weight bytes streamed per step on one GPU.
    pub weight_bytes: f64,
    /// KV bytes per context token on one GPU.
    pub kv_bytes_per_token: f64,
    /// FLOPs per computed token on one GPU outside attention and the output layer.
    pub flops_per_token: f64,
    /// FLOPs of the output layer per sampled token on one GPU.
    pub flops_per_sample: f64,
    /// Attention FLOPs per query–key pair on one GPU (QKᵀ and the weighted sum of V,
    /// over every layer).
    pub flops_per_pair: f64,
    /// Achieved bandwidth in bytes per second (peak × efficiency).
    pub bytes_per_sec: f64,
    /// Achieved FLOP/s (peak × efficiency).
    pub flops_per_sec: f64,
    /// Fixed time per step.
    pub overhead: Duration,
    /// Time per scheduled sequence per step.
    pub per_seq: Duration,
}

impl Roofline {
    /// The constants of a configuration.
    pub fn new(c: &SimConfig) -> Roofline {
        let m = &c.model;
        let tp = f64::from(c.tp.max(1));
        let embedding = m.embedding_params();
        Roofline {
            weight_bytes: (m.params - embedding).max(0.0) * m.weight_bytes_per_param / tp,
            kv_bytes_per_token: c.kv_bytes_per_token_per_gpu(),
            flops_per_token: 2.0 * (m.params - 2.0 * embedding).max(0.0) / tp,
            flops_per_sample: 2.0 * embedding / tp,
            flops_per_pair: 4.0 * f64::from(m.heads) * f64::from(m.head_dim) * f64::from(m.layers)
                / tp,
            bytes_per_sec: c.gpu.hbm_bytes_per_sec * c.mem_efficiency,
            flops_per_sec: c.gpu.flops * c.compute_efficiency,
            overhead: c.step_overhead,
            per_seq: c.step_overhead_per_seq,
        }
    }

    /// Memory time of a step that reads `kv_tokens` tokens of KV cache, in seconds.
    pub fn mem_secs(&self, kv_tokens: u64) -> f64 {
        (self.weight_bytes + kv_tokens as f64 * self.kv_bytes_per_token) / self.bytes_per_sec
    }

    /// Compute time of a step, in seconds.
    pub fn compute_secs(&self, w: &StepWork) -> f64 {
        (self.flops_per_token * w.tokens as f64
            + self.flops_per_sample * w.sampled as f64
            + self.flops_per_pair * w.attention_pairs as f64)
            / self.flops_per_sec
    }

    /// Whether arithmetic, not memory traffic, bounds the step.
    pub fn compute_bound(&self, w: &StepWork) -> bool {
        self.compute_secs(w) > self.mem_secs(w.kv_tokens)
    }

    /// Time of a step; zero for an empty one.
    pub fn step(&self, w: &StepWork) -> Duration {
        if w.tokens == 0 {
            return Duration::ZERO;
        }
        let secs = self.mem_secs(w.kv_tokens).max(self.compute_secs(w));
        self.overhead
            + self
                .per_seq
                .saturating_mul(u32::try_from(w.seqs).unwrap_or(u32::MAX))
            + Duration::from_secs_f64(secs)
    }

    /// A pure decode step of `batch` sequences, each with `context` tokens of KV.
    pub fn decode_step(&self, batch: u64, context: u64) -> Duration {
        self.step(&StepWork::decode(batch, context))
    }
}

/// The `--explain` rows of one configuration (as it stands, overrides included),
/// with the table header.
pub fn explain_config(c: &SimConfig, context: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| model | GPU | tp | KV cache (tokens) | batch | step (ms) | bound | per-seq TPS | system TPS | fits |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---|---:|---:|---|");
    rows(&mut out, c, context);
    out
}

fn rows(out: &mut String, c: &SimConfig, context: u64) {
    let r = Roofline::new(c);
    let blocks = c.kv_blocks();
    let blocks_per_seq = context.div_ceil(u64::from(BLOCK_SIZE));
    for b in EXPLAIN_BATCHES {
        let secs = r.decode_step(b, context).as_secs_f64();
        let bound = if r.compute_bound(&StepWork::decode(b, context)) {
            "compute"
        } else {
            "memory"
        };
        let fits = b * blocks_per_seq <= blocks;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.2} | {} | {:.1} | {:.0} | {} |",
            c.model.label(),
            c.gpu.label(),
            c.tp,
            blocks * u64::from(BLOCK_SIZE),
            b,
            secs * 1e3,
            bound,
            1.0 / secs,
            b as f64 / secs,
            if fits { "yes" } else { "no (preempts)" },
        );
    }
}

/// Batch sizes of the `--explain` table.
pub const EXPLAIN_BATCHES: [u64; 5] = [1, 8, 32, 128, 256];

/// The `--explain` table (Markdown) for every model preset on every GPU preset,
/// using `base`'s efficiencies, overhead and memory utilisation: the decode step
/// time, per-sequence TPS (1 / step) and system TPS (batch / step) at each batch
/// size with `context` tokens of KV per sequence, and whether that batch fits in
/// the KV cache.
pub fn explain(base: &SimConfig, context: u64) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Decode step by roofline (docs/sim.md): t = overhead + B·per_seq + max((W'/tp + \
         B·C·kv/tp) / (BW·{me}), (2·P'·B + 2·V·H·B + 4·heads·head_dim·L·B·C) / tp / \
         (FLOPS·{ce})), overhead = {oh:.2} ms, per_seq = {ps:.1} µs, C = {context} tokens of \
         context per sequence, memory utilisation {mu}.\n",
        me = base.mem_efficiency,
        ce = base.compute_efficiency,
        oh = base.step_overhead.as_secs_f64() * 1e3,
        ps = base.step_overhead_per_seq.as_secs_f64() * 1e6,
        mu = base.gpu_memory_utilization,
    );
    let _ = writeln!(
        out,
        "| model | GPU | tp | KV cache (tokens) | batch | step (ms) | bound | per-seq TPS | system TPS | fits |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---|---:|---:|---|");
    for m in ModelSpec::PRESETS {
        for g in GpuSpec::PRESETS {
            let Ok(mut c) = SimConfig::preset(m, g) else {
                continue;
            };
            c.mem_efficiency = base.mem_efficiency;
            c.compute_efficiency = base.compute_efficiency;
            c.step_overhead = base.step_overhead;
            c.step_overhead_per_seq = base.step_overhead_per_seq;
            c.gpu_memory_utilization = base.gpu_memory_utilization;
            c.tp = c.auto_tp();
            rows(&mut out, &c, context);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn decode_step_of_8b_on_h100_matches_hand_computation() {
        let r = Roofline::new(&SimConfig::default());
        // Streamed weights: (8.03e9 − 128256 × 4096) × 2 bytes = 15.009316352e9 (the
        // input embedding is a lookup, not a stream). Bandwidth 3.35e12 × 0.9.
        let w = (8.03e9 - 525_336_576.0) * 2.0;
        assert!(close(r.weight_bytes, w));
        // Batch 1, 1024 tokens of context: memory-bound; + 1.5 ms + 10 µs.
        let t = r.decode_step(1, 1024).as_secs_f64();
        let mem = (w + 1024.0 * 131_072.0) / 3.015e12;
        assert!(close(t, 0.0015 + 10e-6 + mem), "{t}");
        // Batch 256: 50.4197e9 bytes → memory 16.64 ms; compute: 2 × 6.979e9 × 256
        // + 2 × 0.525e9 × 256 + 4 × 32 × 128 × 32 × 256 × 1024 = 3.977e12 FLOPs at
        // 593.4 TFLOP/s = 6.70 ms, so memory-bound; 256 sequences add 2.56 ms.
        let t = r.decode_step(256, 1024).as_secs_f64();
        let mem = (w + 256.0 * 1024.0 * 131_072.0) / 3.015e12;
        assert!(!r.compute_bound(&StepWork::decode(256, 1024)));
        assert!(close(t, 0.0015 + 256.0 * 10e-6 + mem), "{t}");
    }

    #[test]
    fn prefill_counts_attention_and_one_output_layer() {
        let r = Roofline::new(&SimConfig::default());
        // 8192 prompt tokens: 2 × (8.03e9 − 2 × 525336576) × 8192 for the layers,
        // 2 × 525336576 for the one sampled position, and 4 × 32 × 128 × 32 ×
        // 8192 × 8193 / 2 query–key pairs of attention, at 989e12 × 0.6.
        let w = StepWork::prefill(8192);
        assert_eq!(w.attention_pairs, 8192 * 8193 / 2);
        assert_eq!((w.seqs, w.sampled, w.kv_tokens), (1, 1, 8192));
        let flops = 2.0 * (8.03e9 - 2.0 * 525_336_576.0) * 8192.0
            + 2.0 * 525_336_576.0
            + 4.0 * 32.0 * 128.0 * 32.0 * (8192.0 * 8193.0 / 2.0);
        let t = r.step(&w).as_secs_f64();
        assert!(close(t, 0.0015 + 10e-6 + flops / (989e12 * 0.6)), "{t}");
        assert!(r.compute_bound(&w));
        // Attention is quadratic: doubling the prompt more than doubles its FLOPs.
        let short = r.compute_secs(&StepWork::prefill(4096));
        assert!(r.compute_secs(&w) > 2.0 * short);
        assert_eq!(r.step(&StepWork::default()), Duration::ZERO);
    }

    #[test]
    fn a_chunk_after_context_attends_to_it() {
        // 100 tokens computed after 50 held, reaching 150: 100 × 50 + 100 × 101 / 2.
        let mut w = StepWork::default();
        w.add(50, 100, 150);
        assert_eq!(w.attention_pairs, 5000 + 5050);
        assert_eq!((w.sampled, w.kv_tokens), (1, 150));
        // A chunk short of the prompt's end samples nothing.
        w.add(0, 16, 40);
        assert_eq!((w.seqs, w.sampled, w.tokens), (2, 1, 116));
    }

    #[test]
    fn tensor_parallel_splits_weights_kv_and_flops() {
        let c = SimConfig::preset("llama-3.1-70b", "h100").unwrap();
        let r = Roofline::new(&c);
        assert_eq!(c.tp, 4);
        let embedding = 128_256.0 * 8192.0;
        assert!(close(r.weight_bytes, (70.55e9 - embedding) * 2.0 / 4.0));
        // 2 × 80 layers × (8/4) heads × 128 × 2 bytes = 81920.
        assert!(close(r.kv_bytes_per_token, 81_920.0));
        assert!(close(
            r.flops_per_token,
            2.0 * (70.55e9 - 2.0 * embedding) / 4.0
        ));
        assert!(close(r.flops_per_sample, 2.0 * embedding / 4.0));
        assert!(close(r.flops_per_pair, 4.0 * 64.0 * 128.0 * 80.0 / 4.0));
    }

    #[test]
    fn explain_names_a_model_whose_shape_was_overridden() {
        let mut c = SimConfig::default();
        assert_eq!(c.model.label(), "llama-3.1-8b");
        c.model.layers = 40;
        c.gpu.hbm_bytes_per_sec = 4.0e12;
        let t = explain_config(&c, 1024);
        assert!(
            t.contains(
                "| custom (llama-3.1-8b with layers 40) | custom (h100 with hbm_gb_per_s 4000) |"
            ),
            "{t}"
        );
    }

    #[test]
    fn explain_lists_every_preset_and_batch() {
        let t = explain(&SimConfig::default(), 1024);
        let rows = t.lines().filter(|l| l.starts_with("| llama")).count();
        assert_eq!(rows, 2 * 4 * EXPLAIN_BATCHES.len());
        assert!(t.contains("| llama-3.1-8b | h100 | 1 |"));
    }
}
