//! Validation of a [`SimConfig`]: every knob in range and the whole consistent
//! (the fault probabilities sum to at most 1, the KV cache holds one sequence);
//! each error names the flag and TOML key at fault.

use super::error::{ConfigError, Invalid};
use super::presets::GIB;
use super::sim_config::{BLOCK_SIZE, SimConfig};
use super::values::Speed;

impl SimConfig {
    /// Checks every knob; the error names the flag (and TOML key) at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let m = &self.model;
        let g = &self.gpu;
        pos_f(m.params, "params_b")?;
        pos_u(m.layers, "layers")?;
        pos_u(m.kv_heads, "kv_heads")?;
        pos_u(m.head_dim, "head_dim")?;
        pos_u(m.heads, "heads")?;
        pos_u(m.hidden, "hidden_size")?;
        pos_u(m.vocab, "vocab_size")?;
        if m.params <= 2.0 * m.embedding_params() {
            return Err(ConfigError::invalid(
                "params_b",
                Invalid::ParamsBelowEmbedding {
                    params_b: m.params / 1e9,
                    embedding_b: 2.0 * m.embedding_params() / 1e9,
                },
            ));
        }
        pos_f(m.weight_bytes_per_param, "weight_bytes_per_param")?;
        pos_f(m.kv_bytes_per_elem, "kv_bytes_per_elem")?;
        pos_u(m.max_model_len, "max_model_len")?;
        pos_f(g.memory_bytes, "gpu_memory_gib")?;
        pos_f(g.hbm_bytes_per_sec, "hbm_gb_per_s")?;
        pos_f(g.flops, "tflops")?;
        if !(1..=64).contains(&self.tp) {
            return Err(ConfigError::invalid("tp", Invalid::TpRange(self.tp)));
        }
        pos_u(self.max_num_seqs, "max_num_seqs")?;
        pos_u(self.max_num_batched_tokens, "max_num_batched_tokens")?;
        fraction(self.gpu_memory_utilization, "gpu_memory_utilization")?;
        fraction(self.mem_efficiency, "mem_efficiency")?;
        fraction(self.compute_efficiency, "compute_efficiency")?;
        if let Speed::Scaled(f) = self.speed
            && !(f.is_finite() && f > 0.0)
        {
            return Err(ConfigError::invalid("speed", Invalid::SpeedFactor(f)));
        }
        pos_f(
            self.header_read_timeout.as_secs_f64(),
            "header_read_timeout",
        )?;
        if let Some(name) = &self.served_model_name
            && (name.is_empty() || name.len() > 256)
        {
            return Err(ConfigError::invalid(
                "served_model_name",
                Invalid::NameLength,
            ));
        }
        let mut sum = 0.0;
        for (key, p) in self.faults.table() {
            if !(0.0..=1.0).contains(&p) {
                return Err(ConfigError::invalid(key, Invalid::NotProbability(p)));
            }
            sum += p;
        }
        if sum > 1.0 + 1e-9 {
            return Err(ConfigError::invalid("fault_429", Invalid::FaultSum(sum)));
        }
        let blocks = self.kv_blocks();
        if blocks == 0 {
            return Err(ConfigError::invalid(
                "gpu_memory_utilization",
                Invalid::NoKvRoom {
                    weights_gib: self.weight_bytes_per_gpu() / GIB,
                    tp: self.tp,
                    memory_gib: g.memory_bytes / GIB,
                    utilization: self.gpu_memory_utilization,
                },
            ));
        }
        let cap = blocks.saturating_mul(u64::from(BLOCK_SIZE));
        if cap < u64::from(m.max_model_len) {
            return Err(ConfigError::invalid(
                "max_model_len",
                Invalid::KvTooSmall {
                    cap,
                    blocks,
                    block: BLOCK_SIZE,
                    max_model_len: m.max_model_len,
                },
            ));
        }
        Ok(())
    }
}

fn pos_f(v: f64, field: &str) -> Result<(), ConfigError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(ConfigError::invalid(field, Invalid::NotPositive(v)))
    }
}

fn pos_u(v: u32, field: &str) -> Result<(), ConfigError> {
    if v > 0 {
        Ok(())
    } else {
        Err(ConfigError::invalid(field, Invalid::Zero))
    }
}

fn fraction(v: f64, field: &str) -> Result<(), ConfigError> {
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(())
    } else {
        Err(ConfigError::invalid(field, Invalid::NotFraction(v)))
    }
}
