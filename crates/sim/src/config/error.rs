//! Errors of the configuration: [`ConfigError`] (a value out of range, a TOML file
//! that does not parse or read), and [`Invalid`], what is wrong with one value
//! (the message after the flag's name).

use std::path::PathBuf;

use super::presets::{GpuSpec, ModelSpec};
use super::values::{ParseOutputLenError, ParseSpeedError};

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value is out of range or inconsistent.
    #[error("invalid {flag} (config key `{field}`): {problem}")]
    Invalid {
        /// The TOML key (`max_num_seqs`).
        field: String,
        /// The command-line flag (`--max-num-seqs`).
        flag: String,
        /// What was wrong and what was expected.
        problem: Invalid,
    },
    /// A TOML configuration file does not parse.
    #[error("config file {}: {error}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The parser's error (its message has the line and column). Not a
        /// `source`: the message already says it, and a chain would repeat it.
        error: toml::de::Error,
    },
    /// A TOML configuration file cannot be read.
    #[error("reading config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl ConfigError {
    /// An invalid value of the knob `field` (its TOML key); the flag is derived.
    pub(crate) fn invalid(field: &str, problem: Invalid) -> ConfigError {
        ConfigError::Invalid {
            field: field.to_string(),
            flag: format!("--{}", flag_of(field)),
            problem,
        }
    }
}

/// The flag name of a knob's key, without dashes (`max_num_seqs` → `max-num-seqs`).
pub(crate) fn flag_of(key: &str) -> String {
    key.replace('_', "-")
}

/// What is wrong with one configuration value.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    /// Not a finite number above 0.
    #[error("must be a finite number > 0, got {0}")]
    NotPositive(f64),
    /// 0 where at least 1 is needed.
    #[error("must be at least 1, got 0")]
    Zero,
    /// Not in (0, 1].
    #[error("must be in (0, 1], got {0}")]
    NotFraction(f64),
    /// Not a probability.
    #[error("must be a probability in [0, 1], got {0}")]
    NotProbability(f64),
    /// A tensor-parallel degree outside 1..=64.
    #[error("must be between 1 and 64, got {0}")]
    TpRange(u32),
    /// A speed factor that is not above 0.
    #[error("must be a factor > 0, got {0}")]
    SpeedFactor(f64),
    /// An empty or overlong served model name.
    #[error("must be 1 to 256 characters")]
    NameLength,
    /// Fault probabilities whose sum exceeds 1.
    #[error("fault probabilities add up to {0}, more than 1 (at most one fault hits a request)")]
    FaultSum(f64),
    /// Fewer parameters than the embedding and the output layer hold.
    #[error(
        "{params_b} billion parameters cannot hold the embedding and output layer \
         (2 × vocab_size × hidden_size = {embedding_b:.3} billion); raise --params-b or \
         lower --vocab-size / --hidden-size"
    )]
    ParamsBelowEmbedding {
        /// The parameters, in billions.
        params_b: f64,
        /// The embedding and output layer's, in billions.
        embedding_b: f64,
    },
    /// The weights leave no memory for a KV cache.
    #[error(
        "the weights ({weights_gib:.1} GiB per GPU with tp={tp}) leave no room for a KV cache \
         in {memory_gib:.1} GiB × {utilization}; raise --tp or --gpu-memory-utilization"
    )]
    NoKvRoom {
        /// Weight GiB on one GPU.
        weights_gib: f64,
        /// Tensor-parallel degree.
        tp: u32,
        /// GPU memory in GiB.
        memory_gib: f64,
        /// `gpu_memory_utilization`.
        utilization: f64,
    },
    /// The KV cache holds less than one sequence of `max_model_len`.
    #[error(
        "the KV cache holds {cap} tokens ({blocks} blocks of {block}), fewer than one sequence \
         of max_model_len = {max_model_len}; lower --max-model-len or raise --tp, \
         --gpu-memory-utilization or --num-kv-blocks"
    )]
    KvTooSmall {
        /// Tokens the cache holds.
        cap: u64,
        /// KV blocks.
        blocks: u64,
        /// Tokens per block.
        block: u32,
        /// The model's longest sequence.
        max_model_len: u32,
    },
    /// No model preset of this name.
    #[error("unknown model preset `{0}` (expected one of {presets})", presets = ModelSpec::PRESETS.join(", "))]
    UnknownModel(String),
    /// No GPU preset of this name.
    #[error("unknown GPU preset `{0}` (expected one of {presets})", presets = GpuSpec::PRESETS.join(", "))]
    UnknownGpu(String),
    /// Not a speed.
    #[error(transparent)]
    Speed(#[from] ParseSpeedError),
    /// Not an output-length distribution.
    #[error(transparent)]
    OutputLen(#[from] ParseOutputLenError),
    /// Not a tokenizer.
    #[error(transparent)]
    Tokenizer(#[from] tpscope_tokens::UnknownTokenizer),
}
