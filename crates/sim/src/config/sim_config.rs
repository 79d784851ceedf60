//! The resolved configuration ([`SimConfig`]): model and GPU, engine knobs, time,
//! output lengths and faults, with the figures derived from them (KV capacity,
//! tensor-parallel degree) and vLLM's batch defaults.

use std::path::PathBuf;
use std::time::Duration;

use tpscope_tokens::Tokenizer;

use super::error::{ConfigError, Invalid};
use super::faults::Faults;
use super::presets::{GIB, GpuSpec, ModelSpec};
use super::values::{OutputLen, Speed};

/// Tokens per KV-cache block (vLLM's default block size).
pub const BLOCK_SIZE: u32 = 16;

/// Everything the simulator needs, resolved and (after [`SimConfig::validate`])
/// consistent. Build it with [`SimConfig::default`], [`SimConfig::preset`] or
/// [`SimOverrides::resolve`](super::SimOverrides::resolve).
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// The model served.
    pub model: ModelSpec,
    /// The GPU it runs on (each of `tp` GPUs is one of these).
    pub gpu: GpuSpec,
    /// Tensor-parallel degree: weights, KV heads and FLOPs are split over `tp` GPUs.
    pub tp: u32,
    /// Name listed by `/v1/models` and required in requests; `None` means
    /// `sim-<model name>` (e.g. `sim-llama-3.1-8b`).
    pub served_model_name: Option<String>,
    /// Most sequences in the running batch.
    pub max_num_seqs: u32,
    /// Token budget of one step (decode tokens plus prefill chunks).
    pub max_num_batched_tokens: u32,
    /// Fraction of GPU memory the engine may use (weights plus KV cache).
    pub gpu_memory_utilization: f64,
    /// Number of KV blocks, overriding the figure derived from memory.
    pub num_kv_blocks: Option<u64>,
    /// Fraction of peak HBM bandwidth a step achieves.
    pub mem_efficiency: f64,
    /// Fraction of peak FLOP/s a step achieves.
    pub compute_efficiency: f64,
    /// Fixed time added to every step (kernel launches, small kernels, sampling).
    pub step_overhead: Duration,
    /// Time added to a step per scheduled sequence (per-sequence GPU work that does
    /// not overlap the weight stream).
    pub step_overhead_per_seq: Duration,
    /// Simulated time versus wall time.
    pub speed: Speed,
    /// Catch up after a host stall (back-to-back steps until the deadline is
    /// met) instead of abandoning the deadline: simulated time keeps to the
    /// wall clock however loaded the host is.
    pub keep_schedule: bool,
    /// Seed of every random draw (output lengths, faults, output text).
    pub seed: u64,
    /// Tokenizer counting prompts and defining output tokens.
    pub tokenizer: Tokenizer,
    /// Automatic prefix caching (16-token blocks, LRU).
    pub prefix_caching: bool,
    /// Output lengths of requests that may stop at EOS.
    pub output_len: OutputLen,
    /// Fault injection.
    pub faults: Faults,
    /// Send `Connection: close` on every response (connection churn).
    pub connection_close: bool,
    /// A connection that has not sent a complete request head this long after it
    /// opened (or after its previous response ended) is closed: slow or idle
    /// clients cannot hold sockets forever.
    pub header_read_timeout: Duration,
    /// Where to write the ground-truth JSONL (one line per request).
    pub truth_log: Option<PathBuf>,
}

impl Default for SimConfig {
    /// Llama-3.1-8B on one H100, real time, seed 0, no faults.
    fn default() -> Self {
        SimConfig::preset("llama-3.1-8b", "h100").expect("built-in presets exist")
    }
}

impl SimConfig {
    /// The configuration of a model preset on a GPU preset, with the smallest
    /// power-of-two tensor-parallel degree whose KV cache holds one
    /// `max_model_len` sequence, and vLLM V1's API-server defaults for the batch
    /// (1024 sequences and 8192 tokens per step on ≥70 GiB non-A100 GPUs, else 256
    /// and 2048).
    pub fn preset(model: &str, gpu: &str) -> Result<SimConfig, ConfigError> {
        let model = ModelSpec::preset(model)
            .ok_or_else(|| ConfigError::invalid("model", Invalid::UnknownModel(model.into())))?;
        let gpu = GpuSpec::preset(gpu)
            .ok_or_else(|| ConfigError::invalid("gpu", Invalid::UnknownGpu(gpu.into())))?;
        let (seqs, tokens) = vllm_batch_defaults(&gpu);
        let mut cfg = SimConfig {
            model,
            gpu,
            tp: 1,
            served_model_name: None,
            max_num_seqs: seqs,
            max_num_batched_tokens: tokens,
            gpu_memory_utilization: 0.9,
            num_kv_blocks: None,
            // Fitted to step times measured on an H100 (docs/sim.md, "Fit"): 0.9 of
            // peak bandwidth is the copy bandwidth measured there.
            mem_efficiency: 0.9,
            compute_efficiency: 0.6,
            step_overhead: Duration::from_micros(1500),
            step_overhead_per_seq: Duration::from_micros(10),
            speed: Speed::Realtime,
            keep_schedule: false,
            seed: 0,
            tokenizer: Tokenizer::O200kBase,
            prefix_caching: false,
            output_len: OutputLen::default(),
            faults: Faults::default(),
            connection_close: false,
            header_read_timeout: Duration::from_secs(10),
            truth_log: None,
        };
        cfg.tp = cfg.auto_tp();
        Ok(cfg)
    }

    /// The smallest of 1, 2, 4, 8 GPUs whose KV cache holds `max_model_len` tokens
    /// (8 if none does; validation then says why).
    pub fn auto_tp(&self) -> u32 {
        for tp in [1, 2, 4, 8] {
            let c = SimConfig {
                tp,
                num_kv_blocks: None,
                ..self.clone()
            };
            if c.derived_kv_blocks() * u64::from(BLOCK_SIZE) >= u64::from(self.model.max_model_len)
            {
                return tp;
            }
        }
        8
    }

    /// The model name served and listed by `/v1/models`.
    pub fn model_name(&self) -> String {
        self.served_model_name
            .clone()
            .unwrap_or_else(|| format!("sim-{}", self.model.name))
    }

    /// KV bytes one token occupies on one GPU: 2 (K and V) × layers × KV heads per GPU
    /// (⌈kv_heads / tp⌉, replicated when tp > kv_heads) × head_dim × bytes per element.
    pub fn kv_bytes_per_token_per_gpu(&self) -> f64 {
        let heads = self.model.kv_heads.div_ceil(self.tp.max(1));
        2.0 * f64::from(self.model.layers)
            * f64::from(heads)
            * f64::from(self.model.head_dim)
            * self.model.kv_bytes_per_elem
    }

    /// Weight bytes held by one GPU (weights / tp).
    pub fn weight_bytes_per_gpu(&self) -> f64 {
        self.model.weight_bytes() / f64::from(self.tp.max(1))
    }

    /// KV blocks derived from memory: ⌊(memory × utilisation − weights per GPU) /
    /// (16 × KV bytes per token per GPU)⌋, or 0 when the weights do not fit.
    pub fn derived_kv_blocks(&self) -> u64 {
        let free =
            self.gpu.memory_bytes * self.gpu_memory_utilization - self.weight_bytes_per_gpu();
        let per_block = f64::from(BLOCK_SIZE) * self.kv_bytes_per_token_per_gpu();
        if free <= 0.0 || per_block <= 0.0 {
            0
        } else {
            (free / per_block).floor() as u64
        }
    }

    /// KV blocks in use: the override if given, else [`Self::derived_kv_blocks`].
    pub fn kv_blocks(&self) -> u64 {
        self.num_kv_blocks
            .unwrap_or_else(|| self.derived_kv_blocks())
    }
}

/// vLLM V1's API-server batch defaults for a GPU: (max sequences, tokens per step).
pub(crate) fn vllm_batch_defaults(gpu: &GpuSpec) -> (u32, u32) {
    if gpu.memory_bytes >= 70.0 * GIB && !gpu.name.contains("a100") {
        (1024, 8192)
    } else {
        (256, 2048)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_8b_on_one_h100() {
        let c = SimConfig::default();
        assert_eq!(c.model.name, "llama-3.1-8b");
        assert_eq!(c.gpu.name, "h100");
        assert_eq!(c.tp, 1);
        assert_eq!(c.model_name(), "sim-llama-3.1-8b");
        assert_eq!((c.max_num_seqs, c.max_num_batched_tokens), (1024, 8192));
        c.validate().unwrap();
    }

    #[test]
    fn kv_capacity_matches_hand_computation() {
        let c = SimConfig::default();
        // 2 × 32 layers × 8 heads × 128 × 2 bytes = 131072 bytes per token.
        assert_eq!(c.kv_bytes_per_token_per_gpu(), 131_072.0);
        // (80 GiB × 0.9 − 8.03e9 × 2) / (16 × 131072) = 61.248e9 / 2097152 = 29205.99.
        assert_eq!(c.derived_kv_blocks(), 29_205);
    }

    #[test]
    fn seventy_b_picks_tensor_parallelism() {
        let h100 = SimConfig::preset("llama-3.1-70b", "h100").unwrap();
        assert_eq!(h100.tp, 4);
        h100.validate().unwrap();
        let h200 = SimConfig::preset("llama-3.1-70b", "h200").unwrap();
        assert_eq!(h200.tp, 2);
        let l40s = SimConfig::preset("llama-3.1-8b", "l40s").unwrap();
        assert_eq!((l40s.tp, l40s.max_num_seqs), (1, 256));
    }
}
