//! Step time by roofline (pure): the time of one engine step from the bytes it moves
//! and the FLOPs it does on one of `tp` GPUs, and the `--explain` table built on it.

use std::fmt::Write as _;
use std::time::Duration;

use crate::config::{BLOCK_SIZE, GpuSpec, ModelSpec, SimConfig};

/// The per-GPU constants of the step-time formula
///
/// ```text
/// t_step = overhead + max(t_mem, t_compute)
/// t_mem     = (weight bytes / tp + KV tokens read × KV bytes per token per GPU)
///             / (HBM bandwidth × mem_efficiency)
/// t_compute = 2 × params / tp × tokens computed / (FLOP/s × compute_efficiency)
/// ```
///
/// A forward pass streams the weights once whatever the batch, reads the KV cache of
/// every scheduled sequence, and does 2 FLOPs per parameter per token; memory traffic
/// and arithmetic overlap, so the slower of the two bounds the step. A pure decode
/// step is memory-bound until the batch is large; a prefill chunk is compute-bound.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roofline {
    /// Weight bytes streamed per step on one GPU.
    pub weight_bytes: f64,
    /// KV bytes per context token on one GPU.
    pub kv_bytes_per_token: f64,
    /// FLOPs per computed token on one GPU (2 × params / tp).
    pub flops_per_token: f64,
    /// Achieved bandwidth in bytes per second (peak × efficiency).
    pub bytes_per_sec: f64,
    /// Achieved FLOP/s (peak × efficiency).
    pub flops_per_sec: f64,
    /// Fixed time per step.
    pub overhead: Duration,
}

impl Roofline {
    /// The constants of a configuration.
    pub fn new(c: &SimConfig) -> Roofline {
        Roofline {
            weight_bytes: c.weight_bytes_per_gpu(),
            kv_bytes_per_token: c.kv_bytes_per_token_per_gpu(),
            flops_per_token: 2.0 * c.model.params / f64::from(c.tp.max(1)),
            bytes_per_sec: c.gpu.hbm_bytes_per_sec * c.mem_efficiency,
            flops_per_sec: c.gpu.flops * c.compute_efficiency,
            overhead: c.step_overhead,
        }
    }

    /// Memory time of a step that reads `kv_tokens` tokens of KV cache, in seconds.
    pub fn mem_secs(&self, kv_tokens: u64) -> f64 {
        (self.weight_bytes + kv_tokens as f64 * self.kv_bytes_per_token) / self.bytes_per_sec
    }

    /// Compute time of a step that computes `tokens` tokens, in seconds.
    pub fn compute_secs(&self, tokens: u64) -> f64 {
        self.flops_per_token * tokens as f64 / self.flops_per_sec
    }

    /// Time of a step computing `tokens` tokens (decodes plus prefill chunk tokens)
    /// whose attention reads `kv_tokens` tokens of context in total. Zero for an
    /// empty step.
    pub fn step(&self, tokens: u64, kv_tokens: u64) -> Duration {
        if tokens == 0 {
            return Duration::ZERO;
        }
        let secs = self.mem_secs(kv_tokens).max(self.compute_secs(tokens));
        self.overhead + Duration::from_secs_f64(secs)
    }

    /// A pure decode step of `batch` sequences, each with `context` tokens of KV.
    pub fn decode_step(&self, batch: u64, context: u64) -> Duration {
        self.step(batch, batch * context)
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
        let bound = if r.compute_secs(b) > r.mem_secs(b * context) {
            "compute"
        } else {
            "memory"
        };
        let fits = b * blocks_per_seq <= blocks;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.2} | {} | {:.1} | {:.0} | {} |",
            c.model.name,
            c.gpu.name,
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
        "Decode step by roofline: t = overhead + max((W/tp + B·C·kv/tp) / (BW·{me}), \
         2·P/tp·B / (FLOPS·{ce})), overhead = {oh:.2} ms, C = {context} tokens of context per \
         sequence, memory utilisation {mu}.\n",
        me = base.mem_efficiency,
        ce = base.compute_efficiency,
        oh = base.step_overhead.as_secs_f64() * 1e3,
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
        // Batch 1, 1024 tokens of context:
        // bytes = 16.06e9 + 1024 × 131072 = 16.194217728e9
        // t_mem = 16.194217728e9 / (3.35e12 × 0.8) = 6.04262 ms; + 0.5 ms overhead.
        let t = r.decode_step(1, 1024).as_secs_f64();
        assert!(close(t, 0.0005 + 16.194_217_728e9 / 2.68e12), "{t}");
        // Batch 256: bytes = 16.06e9 + 256 × 1024 × 131072 = 50.4197e9 → 18.8133 ms;
        // compute 2 × 8.03e9 × 256 / (989e12 × 0.6) = 6.929 ms, so memory-bound.
        let t = r.decode_step(256, 1024).as_secs_f64();
        let mem = (16.06e9 + 256.0 * 1024.0 * 131_072.0) / 2.68e12;
        assert!(close(t, 0.0005 + mem), "{t}");
    }

    #[test]
    fn prefill_is_compute_bound() {
        let r = Roofline::new(&SimConfig::default());
        // 8192 prompt tokens: 2 × 8.03e9 × 8192 / (593.4e12) = 221.71 ms.
        let t = r.step(8192, 8192).as_secs_f64();
        let compute = 2.0 * 8.03e9 * 8192.0 / (989e12 * 0.6);
        assert!(close(t, 0.0005 + compute), "{t}");
        assert!(r.compute_secs(8192) > r.mem_secs(8192));
        assert_eq!(r.step(0, 0), Duration::ZERO);
    }

    #[test]
    fn tensor_parallel_splits_weights_kv_and_flops() {
        let c = SimConfig::preset("llama-3.1-70b", "h100").unwrap();
        let r = Roofline::new(&c);
        assert_eq!(c.tp, 4);
        assert!(close(r.weight_bytes, 70.55e9 * 2.0 / 4.0));
        // 2 × 80 layers × (8/4) heads × 128 × 2 bytes = 81920.
        assert!(close(r.kv_bytes_per_token, 81_920.0));
        assert!(close(r.flops_per_token, 2.0 * 70.55e9 / 4.0));
    }

    #[test]
    fn explain_lists_every_preset_and_batch() {
        let t = explain(&SimConfig::default(), 1024);
        let rows = t.lines().filter(|l| l.starts_with("| llama")).count();
        assert_eq!(rows, 2 * 4 * EXPLAIN_BATCHES.len());
        assert!(t.contains("| llama-3.1-8b | h100 | 1 |"));
    }
}
