//! The simulator's configuration: model and GPU presets, engine knobs, time, output
//! lengths and faults ([`SimConfig`]); the flag/TOML override layer ([`SimOverrides`])
//! that resolves into it; and validation that names the offending flag.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::Deserialize;
use tpscope_tokens::Tokenizer;

use crate::SimError;

/// Tokens per KV-cache block (vLLM's default block size).
pub const BLOCK_SIZE: u32 = 16;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// A transformer model as the roofline sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSpec {
    /// Preset name (`llama-3.1-8b`), or the name given in the overrides.
    pub name: String,
    /// Parameter count (all weights, e.g. 8.03e9).
    pub params: f64,
    /// Transformer layers.
    pub layers: u32,
    /// Key/value heads (grouped-query attention).
    pub kv_heads: u32,
    /// Dimension of one attention head.
    pub head_dim: u32,
    /// Bytes per weight (2 for BF16, 1 for FP8).
    pub weight_bytes_per_param: f64,
    /// Bytes per KV-cache element (2 for BF16, 1 for FP8).
    pub kv_bytes_per_elem: f64,
    /// Longest sequence (prompt + output) a request may have.
    pub max_model_len: u32,
}

impl ModelSpec {
    /// The preset of a model name (case-insensitive), if known.
    pub fn preset(name: &str) -> Option<ModelSpec> {
        let n = name.to_ascii_lowercase();
        let (params, layers) = match n.as_str() {
            // Llama-3.1-8B: 8.03e9 parameters, 32 layers, 8 KV heads of 128.
            "llama-3.1-8b" | "llama3.1-8b" | "8b" => (8.03e9, 32),
            // Llama-3.1-70B: 70.55e9 parameters, 80 layers, 8 KV heads of 128.
            "llama-3.1-70b" | "llama3.1-70b" | "70b" => (70.55e9, 80),
            _ => return None,
        };
        let canonical = if layers == 32 {
            "llama-3.1-8b"
        } else {
            "llama-3.1-70b"
        };
        Some(ModelSpec {
            name: canonical.to_string(),
            params,
            layers,
            kv_heads: 8,
            head_dim: 128,
            weight_bytes_per_param: 2.0,
            kv_bytes_per_elem: 2.0,
            max_model_len: 131_072,
        })
    }

    /// Names of the model presets.
    pub const PRESETS: [&'static str; 2] = ["llama-3.1-8b", "llama-3.1-70b"];

    /// Bytes of all weights.
    pub fn weight_bytes(&self) -> f64 {
        self.params * self.weight_bytes_per_param
    }
}

/// One GPU as the roofline sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuSpec {
    /// Preset name (`h100`), or the name given in the overrides.
    pub name: String,
    /// Device memory in bytes.
    pub memory_bytes: f64,
    /// Peak HBM bandwidth in bytes per second.
    pub hbm_bytes_per_sec: f64,
    /// Peak dense BF16 tensor FLOP/s (no sparsity).
    pub flops: f64,
}

impl GpuSpec {
    /// The preset of a GPU name (case-insensitive), if known. Figures are NVIDIA's
    /// datasheet peaks (SXM parts where there is a choice), dense BF16.
    pub fn preset(name: &str) -> Option<GpuSpec> {
        let n = name.to_ascii_lowercase();
        // Memory is what the driver reports (80 GiB for the "80 GB" parts, 140 GiB
        // for H200's "141 GB", 45 GiB for L40S's "48 GB").
        let (canonical, mem_gib, bw_tbs, tflops) = match n.as_str() {
            "h100" | "h100-sxm" | "h100-80gb" => ("h100", 80.0, 3.35, 989.0),
            "h200" | "h200-sxm" => ("h200", 140.0, 4.8, 989.0),
            "a100" | "a100-80gb" | "a100-sxm" => ("a100-80gb", 80.0, 2.039, 312.0),
            "l40s" => ("l40s", 45.0, 0.864, 362.0),
            _ => return None,
        };
        Some(GpuSpec {
            name: canonical.to_string(),
            memory_bytes: mem_gib * GIB,
            hbm_bytes_per_sec: bw_tbs * 1e12,
            flops: tflops * 1e12,
        })
    }

    /// Names of the GPU presets.
    pub const PRESETS: [&'static str; 4] = ["h100", "h200", "a100-80gb", "l40s"];
}

/// How simulated time maps to wall time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Speed {
    /// One simulated second per wall second (the engine sleeps each step).
    Realtime,
    /// `factor` simulated seconds per wall second (2.0 = twice as fast).
    Scaled(f64),
    /// No sleeping at all: steps run back to back as fast as the CPU allows.
    Max,
}

impl Speed {
    /// Simulated seconds per wall second, or `None` for [`Speed::Max`].
    pub fn factor(self) -> Option<f64> {
        match self {
            Speed::Realtime => Some(1.0),
            Speed::Scaled(f) => Some(f),
            Speed::Max => None,
        }
    }
}

impl FromStr for Speed {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "realtime" | "real" | "1" | "1x" => Ok(Speed::Realtime),
            "max" => Ok(Speed::Max),
            other => {
                let num = other.strip_suffix('x').unwrap_or(other);
                match num.parse::<f64>() {
                    Ok(f) if f.is_finite() && f > 0.0 => Ok(Speed::Scaled(f)),
                    _ => Err(format!(
                        "`{s}` is not a speed (expected realtime, max, or a factor > 0 such as 10)"
                    )),
                }
            }
        }
    }
}

impl fmt::Display for Speed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Speed::Realtime => f.write_str("realtime"),
            Speed::Scaled(x) => write!(f, "{x}"),
            Speed::Max => f.write_str("max"),
        }
    }
}

/// How many tokens a request generates when it may stop at EOS (no `ignore_eos`).
/// The draw is capped by the request's `max_tokens` and is at least 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OutputLen {
    /// Always `n` tokens.
    Fixed(u32),
    /// Uniform over `min..=max`.
    Uniform {
        /// Smallest length.
        min: u32,
        /// Largest length.
        max: u32,
    },
    /// Log-normal with the given median and shape σ (of the underlying normal).
    LogNormal {
        /// Median length in tokens.
        median: f64,
        /// σ of ln(length).
        sigma: f64,
    },
    /// Exponential with the given mean.
    Exponential {
        /// Mean length in tokens.
        mean: f64,
    },
}

impl Default for OutputLen {
    /// Log-normal, median 200 tokens, σ 0.7 (a chat-like spread: p90 ≈ 490).
    fn default() -> Self {
        OutputLen::LogNormal {
            median: 200.0,
            sigma: 0.7,
        }
    }
}

impl FromStr for OutputLen {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "`{s}` is not an output-length distribution (expected fixed:N, uniform:MIN,MAX, \
                 lognormal:MEDIAN,SIGMA or exponential:MEAN)"
            )
        };
        let (kind, args) = s.split_once(':').ok_or_else(bad)?;
        let nums: Vec<f64> = args
            .split(',')
            .map(|a| a.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        let pos = |x: f64| x.is_finite() && x > 0.0;
        let len = |x: f64| pos(x) && x.fract() == 0.0 && x <= u32::MAX as f64;
        match (kind.trim(), nums.as_slice()) {
            ("fixed", [n]) if len(*n) => Ok(OutputLen::Fixed(*n as u32)),
            ("uniform", [a, b]) if len(*a) && len(*b) && a <= b => Ok(OutputLen::Uniform {
                min: *a as u32,
                max: *b as u32,
            }),
            ("lognormal", [m, sg]) if pos(*m) && sg.is_finite() && *sg >= 0.0 => {
                Ok(OutputLen::LogNormal {
                    median: *m,
                    sigma: *sg,
                })
            }
            ("exponential", [m]) if pos(*m) => Ok(OutputLen::Exponential { mean: *m }),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for OutputLen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputLen::Fixed(n) => write!(f, "fixed:{n}"),
            OutputLen::Uniform { min, max } => write!(f, "uniform:{min},{max}"),
            OutputLen::LogNormal { median, sigma } => write!(f, "lognormal:{median},{sigma}"),
            OutputLen::Exponential { mean } => write!(f, "exponential:{mean}"),
        }
    }
}

/// Fault probabilities (per request) and their parameters. At most one fault hits a
/// request: one uniform draw per request is compared against the cumulative
/// probabilities in the order 429, 500, 503, cut, stall, malformed, slow first token,
/// so each fault appears at exactly its own rate and their sum must be ≤ 1.
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    /// Probability of an immediate 429 with `Retry-After`.
    pub p429: f64,
    /// The `Retry-After` value sent with a 429 (whole seconds, rounded up).
    pub retry_after: Duration,
    /// Probability of an immediate 500.
    pub p500: f64,
    /// Probability of an immediate 503.
    pub p503: f64,
    /// Probability that the response is cut (connection closed) after `cut_after`
    /// output tokens, with no finish chunk and no `[DONE]`.
    pub cut: f64,
    /// Output tokens delivered before a cut.
    pub cut_after: u32,
    /// Probability of a stall: no bytes for `stall_for` after `stall_after` tokens.
    pub stall: f64,
    /// Length of a stall (wall time, whatever the speed).
    pub stall_for: Duration,
    /// Output tokens delivered before a stall.
    pub stall_after: u32,
    /// Probability of one malformed SSE event (a `data:` line that is not JSON),
    /// inserted after `malformed_after` tokens; the stream then goes on normally.
    pub malformed: f64,
    /// Output tokens delivered before the malformed event.
    pub malformed_after: u32,
    /// Probability that the first token is held back by `slow_first_token_delay`.
    pub slow_first_token: f64,
    /// Extra wait before the first token (wall time, whatever the speed).
    pub slow_first_token_delay: Duration,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            p429: 0.0,
            retry_after: Duration::from_secs(1),
            p500: 0.0,
            p503: 0.0,
            cut: 0.0,
            cut_after: 8,
            stall: 0.0,
            stall_for: Duration::from_secs(2),
            stall_after: 8,
            malformed: 0.0,
            malformed_after: 1,
            slow_first_token: 0.0,
            slow_first_token_delay: Duration::from_secs(2),
        }
    }
}

impl Faults {
    /// The probabilities with their flag names, in draw order.
    pub(crate) fn table(&self) -> [(&'static str, f64); 7] {
        [
            ("--fault-429", self.p429),
            ("--fault-500", self.p500),
            ("--fault-503", self.p503),
            ("--fault-cut", self.cut),
            ("--fault-stall", self.stall),
            ("--fault-malformed", self.malformed),
            ("--fault-slow-first-token", self.slow_first_token),
        ]
    }
}

/// Everything the simulator needs, resolved and (after [`SimConfig::validate`])
/// consistent. Build it with [`SimConfig::default`], [`SimConfig::preset`] or
/// [`SimOverrides::resolve`].
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
    /// Fixed time added to every step (scheduling, kernel launches, sampling).
    pub step_overhead: Duration,
    /// Simulated time versus wall time.
    pub speed: Speed,
    /// Seed of every random draw (output lengths, faults, output text).
    pub seed: u64,
    /// Tokenizer counting prompts and defining output tokens.
    pub tokenizer: Tokenizer,
    /// Output lengths of requests that may stop at EOS.
    pub output_len: OutputLen,
    /// Fault injection.
    pub faults: Faults,
    /// Send `Connection: close` on every response (connection churn).
    pub connection_close: bool,
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
    pub fn preset(model: &str, gpu: &str) -> Result<SimConfig, SimError> {
        let model = ModelSpec::preset(model).ok_or_else(|| unknown_model(model))?;
        let gpu = GpuSpec::preset(gpu).ok_or_else(|| unknown_gpu(gpu))?;
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
            mem_efficiency: 0.8,
            compute_efficiency: 0.6,
            step_overhead: Duration::from_micros(500),
            speed: Speed::Realtime,
            seed: 0,
            tokenizer: Tokenizer::O200kBase,
            output_len: OutputLen::default(),
            faults: Faults::default(),
            connection_close: false,
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

    /// Checks every knob; the error names the flag (and TOML key) at fault.
    pub fn validate(&self) -> Result<(), SimError> {
        let m = &self.model;
        let g = &self.gpu;
        pos_f(m.params, "params_b")?;
        pos_u(m.layers, "layers")?;
        pos_u(m.kv_heads, "kv_heads")?;
        pos_u(m.head_dim, "head_dim")?;
        pos_f(m.weight_bytes_per_param, "weight_bytes_per_param")?;
        pos_f(m.kv_bytes_per_elem, "kv_bytes_per_elem")?;
        pos_u(m.max_model_len, "max_model_len")?;
        pos_f(g.memory_bytes, "gpu_memory_gib")?;
        pos_f(g.hbm_bytes_per_sec, "hbm_gb_per_s")?;
        pos_f(g.flops, "tflops")?;
        if !(1..=64).contains(&self.tp) {
            return Err(invalid(
                "tp",
                format!("must be between 1 and 64, got {}", self.tp),
            ));
        }
        pos_u(self.max_num_seqs, "max_num_seqs")?;
        pos_u(self.max_num_batched_tokens, "max_num_batched_tokens")?;
        fraction(self.gpu_memory_utilization, "gpu_memory_utilization")?;
        fraction(self.mem_efficiency, "mem_efficiency")?;
        fraction(self.compute_efficiency, "compute_efficiency")?;
        if let Speed::Scaled(f) = self.speed
            && !(f.is_finite() && f > 0.0)
        {
            return Err(invalid("speed", format!("must be a factor > 0, got {f}")));
        }
        if let Some(name) = &self.served_model_name
            && (name.is_empty() || name.len() > 256)
        {
            return Err(invalid(
                "served_model_name",
                "must be 1 to 256 characters".into(),
            ));
        }
        let mut sum = 0.0;
        for (flag, p) in self.faults.table() {
            if !(0.0..=1.0).contains(&p) {
                return Err(SimError::Config {
                    field: flag.trim_start_matches('-').replace('-', "_"),
                    flag: flag.to_string(),
                    message: format!("must be a probability in [0, 1], got {p}"),
                });
            }
            sum += p;
        }
        if sum > 1.0 + 1e-9 {
            return Err(invalid(
                "fault_429",
                format!(
                    "fault probabilities add up to {sum}, more than 1 (at most one fault hits a \
                     request)"
                ),
            ));
        }
        let blocks = self.kv_blocks();
        if blocks == 0 {
            return Err(invalid(
                "gpu_memory_utilization",
                format!(
                    "the weights ({:.1} GiB per GPU with tp={}) leave no room for a KV cache in \
                     {:.1} GiB × {}; raise --tp or --gpu-memory-utilization",
                    self.weight_bytes_per_gpu() / GIB,
                    self.tp,
                    g.memory_bytes / GIB,
                    self.gpu_memory_utilization
                ),
            ));
        }
        let cap = blocks.saturating_mul(u64::from(BLOCK_SIZE));
        if cap < u64::from(m.max_model_len) {
            return Err(invalid(
                "max_model_len",
                format!(
                    "the KV cache holds {cap} tokens ({blocks} blocks of {BLOCK_SIZE}), fewer than \
                     one sequence of max_model_len = {}; lower --max-model-len or raise --tp, \
                     --gpu-memory-utilization or --num-kv-blocks",
                    m.max_model_len
                ),
            ));
        }
        Ok(())
    }
}

fn vllm_batch_defaults(gpu: &GpuSpec) -> (u32, u32) {
    if gpu.memory_bytes >= 70.0 * GIB && !gpu.name.contains("a100") {
        (1024, 8192)
    } else {
        (256, 2048)
    }
}

fn flag_of(field: &str) -> String {
    format!("--{}", field.replace('_', "-"))
}

fn invalid(field: &str, message: String) -> SimError {
    SimError::Config {
        field: field.to_string(),
        flag: flag_of(field),
        message,
    }
}

fn pos_f(v: f64, field: &str) -> Result<(), SimError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("must be a finite number > 0, got {v}"),
        ))
    }
}

fn pos_u(v: u32, field: &str) -> Result<(), SimError> {
    if v > 0 {
        Ok(())
    } else {
        Err(invalid(field, "must be at least 1, got 0".into()))
    }
}

fn fraction(v: f64, field: &str) -> Result<(), SimError> {
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(())
    } else {
        Err(invalid(field, format!("must be in (0, 1], got {v}")))
    }
}

fn unknown_model(name: &str) -> SimError {
    invalid(
        "model",
        format!(
            "unknown model preset `{name}` (expected one of {})",
            ModelSpec::PRESETS.join(", ")
        ),
    )
}

fn unknown_gpu(name: &str) -> SimError {
    invalid(
        "gpu",
        format!(
            "unknown GPU preset `{name}` (expected one of {})",
            GpuSpec::PRESETS.join(", ")
        ),
    )
}

/// A duration in TOML: a number of seconds or a string with a unit.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
enum DurationValue {
    Secs(f64),
    Text(String),
}

fn de_duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    match Option::<DurationValue>::deserialize(d)? {
        None => Ok(None),
        Some(DurationValue::Secs(v)) => Duration::try_from_secs_f64(v)
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("{v} is not a number of seconds ≥ 0"))),
        Some(DurationValue::Text(t)) => tpscope_model::parse_duration(&t)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// Optional overrides, from flags or a TOML file (same names: flag `--max-num-seqs`
/// is key `max_num_seqs`). [`SimOverrides::merge`] layers them (flags over file) and
/// [`SimOverrides::resolve`] picks the presets, applies every override and validates.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimOverrides {
    /// Model preset (`llama-3.1-8b`, `llama-3.1-70b`).
    pub model: Option<String>,
    /// GPU preset (`h100`, `h200`, `a100-80gb`, `l40s`).
    pub gpu: Option<String>,
    /// Tensor-parallel degree (default: smallest power of two that fits).
    pub tp: Option<u32>,
    /// Served model name.
    pub served_model_name: Option<String>,
    /// Parameters, in billions.
    pub params_b: Option<f64>,
    /// Layers.
    pub layers: Option<u32>,
    /// KV heads.
    pub kv_heads: Option<u32>,
    /// Head dimension.
    pub head_dim: Option<u32>,
    /// Bytes per weight.
    pub weight_bytes_per_param: Option<f64>,
    /// Bytes per KV element.
    pub kv_bytes_per_elem: Option<f64>,
    /// Longest sequence.
    pub max_model_len: Option<u32>,
    /// GPU memory in GiB.
    pub gpu_memory_gib: Option<f64>,
    /// HBM bandwidth in GB/s (10^9 bytes per second).
    pub hbm_gb_per_s: Option<f64>,
    /// Dense BF16 TFLOP/s.
    pub tflops: Option<f64>,
    /// Fraction of GPU memory used.
    pub gpu_memory_utilization: Option<f64>,
    /// KV blocks (overrides the memory-derived figure).
    pub num_kv_blocks: Option<u64>,
    /// Most running sequences.
    pub max_num_seqs: Option<u32>,
    /// Token budget per step.
    pub max_num_batched_tokens: Option<u32>,
    /// Bandwidth efficiency.
    pub mem_efficiency: Option<f64>,
    /// Compute efficiency.
    pub compute_efficiency: Option<f64>,
    /// Fixed per-step overhead.
    #[serde(default, deserialize_with = "de_duration")]
    pub step_overhead: Option<Duration>,
    /// `realtime`, `max` or a factor.
    pub speed: Option<String>,
    /// Seed.
    pub seed: Option<u64>,
    /// `o200k_base` or `cl100k_base`.
    pub tokenizer: Option<String>,
    /// Output-length distribution (`lognormal:200,0.7`, `fixed:128`, …).
    pub output_len: Option<String>,
    /// `Connection: close` on every response.
    pub connection_close: Option<bool>,
    /// Ground-truth JSONL path.
    pub truth_log: Option<PathBuf>,
    /// Probability of a 429.
    pub fault_429: Option<f64>,
    /// `Retry-After` of a 429.
    #[serde(default, deserialize_with = "de_duration")]
    pub retry_after: Option<Duration>,
    /// Probability of a 500.
    pub fault_500: Option<f64>,
    /// Probability of a 503.
    pub fault_503: Option<f64>,
    /// Probability of a cut stream.
    pub fault_cut: Option<f64>,
    /// Tokens before a cut.
    pub cut_after: Option<u32>,
    /// Probability of a stall.
    pub fault_stall: Option<f64>,
    /// Length of a stall.
    #[serde(default, deserialize_with = "de_duration")]
    pub stall_for: Option<Duration>,
    /// Tokens before a stall.
    pub stall_after: Option<u32>,
    /// Probability of a malformed chunk.
    pub fault_malformed: Option<f64>,
    /// Tokens before the malformed chunk.
    pub malformed_after: Option<u32>,
    /// Probability of a slow first token.
    pub fault_slow_first_token: Option<f64>,
    /// Delay of a slow first token.
    #[serde(default, deserialize_with = "de_duration")]
    pub slow_first_token_delay: Option<Duration>,
}

macro_rules! merge_fields {
    ($self:ident, $other:ident; $($f:ident),* $(,)?) => {
        $( if $other.$f.is_some() { $self.$f = $other.$f; } )*
    };
}

impl SimOverrides {
    /// Parses a TOML file's text; errors name the file and the key or line.
    pub fn from_toml_str(text: &str, path: &std::path::Path) -> Result<SimOverrides, SimError> {
        toml::from_str(text).map_err(|e| SimError::ConfigFile {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Reads and parses a TOML file.
    pub fn from_toml_file(path: &std::path::Path) -> Result<SimOverrides, SimError> {
        let text = std::fs::read_to_string(path).map_err(|source| SimError::Io {
            what: format!("reading config file {}", path.display()),
            source,
        })?;
        Self::from_toml_str(&text, path)
    }

    /// `self` with every field that `over` sets replaced by `over`'s value.
    pub fn merge(mut self, over: SimOverrides) -> SimOverrides {
        merge_fields!(self, over;
            model, gpu, tp, served_model_name, params_b, layers, kv_heads, head_dim,
            weight_bytes_per_param, kv_bytes_per_elem, max_model_len, gpu_memory_gib,
            hbm_gb_per_s, tflops, gpu_memory_utilization, num_kv_blocks, max_num_seqs,
            max_num_batched_tokens, mem_efficiency, compute_efficiency, step_overhead, speed,
            seed, tokenizer, output_len, connection_close, truth_log, fault_429, retry_after,
            fault_500, fault_503, fault_cut, cut_after, fault_stall, stall_for, stall_after,
            fault_malformed, malformed_after, fault_slow_first_token, slow_first_token_delay);
        self
    }

    /// The configuration: presets (default Llama-3.1-8B on H100), then every
    /// override; tp and the batch defaults follow the resolved model and GPU unless
    /// set. Validated.
    pub fn resolve(&self) -> Result<SimConfig, SimError> {
        let mut c = SimConfig::preset(
            self.model.as_deref().unwrap_or("llama-3.1-8b"),
            self.gpu.as_deref().unwrap_or("h100"),
        )?;
        let m = &mut c.model;
        if let Some(v) = self.params_b {
            m.params = v * 1e9;
        }
        set(&mut m.layers, self.layers);
        set(&mut m.kv_heads, self.kv_heads);
        set(&mut m.head_dim, self.head_dim);
        set(&mut m.weight_bytes_per_param, self.weight_bytes_per_param);
        set(&mut m.kv_bytes_per_elem, self.kv_bytes_per_elem);
        set(&mut m.max_model_len, self.max_model_len);
        let g = &mut c.gpu;
        if let Some(v) = self.gpu_memory_gib {
            g.memory_bytes = v * GIB;
        }
        if let Some(v) = self.hbm_gb_per_s {
            g.hbm_bytes_per_sec = v * 1e9;
        }
        if let Some(v) = self.tflops {
            g.flops = v * 1e12;
        }
        let (seqs, toks) = vllm_batch_defaults(&c.gpu);
        c.max_num_seqs = self.max_num_seqs.unwrap_or(seqs);
        c.max_num_batched_tokens = self.max_num_batched_tokens.unwrap_or(toks);
        set(&mut c.gpu_memory_utilization, self.gpu_memory_utilization);
        c.num_kv_blocks = self.num_kv_blocks.or(c.num_kv_blocks);
        set(&mut c.mem_efficiency, self.mem_efficiency);
        set(&mut c.compute_efficiency, self.compute_efficiency);
        set(&mut c.step_overhead, self.step_overhead);
        if let Some(s) = &self.speed {
            c.speed = s.parse().map_err(|m| invalid("speed", m))?;
        }
        set(&mut c.seed, self.seed);
        if let Some(t) = &self.tokenizer {
            c.tokenizer = t.parse().map_err(|e: tpscope_tokens::UnknownTokenizer| {
                invalid("tokenizer", e.to_string())
            })?;
        }
        if let Some(o) = &self.output_len {
            c.output_len = o.parse().map_err(|m| invalid("output_len", m))?;
        }
        if self.served_model_name.is_some() {
            c.served_model_name = self.served_model_name.clone();
        }
        set(&mut c.connection_close, self.connection_close);
        if self.truth_log.is_some() {
            c.truth_log = self.truth_log.clone();
        }
        let f = &mut c.faults;
        set(&mut f.p429, self.fault_429);
        set(&mut f.retry_after, self.retry_after);
        set(&mut f.p500, self.fault_500);
        set(&mut f.p503, self.fault_503);
        set(&mut f.cut, self.fault_cut);
        set(&mut f.cut_after, self.cut_after);
        set(&mut f.stall, self.fault_stall);
        set(&mut f.stall_for, self.stall_for);
        set(&mut f.stall_after, self.stall_after);
        set(&mut f.malformed, self.fault_malformed);
        set(&mut f.malformed_after, self.malformed_after);
        set(&mut f.slow_first_token, self.fault_slow_first_token);
        set(&mut f.slow_first_token_delay, self.slow_first_token_delay);
        c.tp = match self.tp {
            Some(tp) => tp,
            None => c.auto_tp(),
        };
        c.validate()?;
        Ok(c)
    }
}

fn set<T: Clone>(dst: &mut T, v: Option<T>) {
    if let Some(v) = v {
        *dst = v;
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

    #[test]
    fn overrides_layer_flags_over_file_and_validate() {
        let file = SimOverrides::from_toml_str(
            "model = \"llama-3.1-70b\"\ngpu = \"h200\"\nmax_num_seqs = 64\nstall_for = \"250ms\"\nretry_after = 3\n",
            std::path::Path::new("x.toml"),
        )
        .unwrap();
        let flags = SimOverrides {
            max_num_seqs: Some(32),
            speed: Some("max".into()),
            ..Default::default()
        };
        let c = file.merge(flags).resolve().unwrap();
        assert_eq!(c.model.name, "llama-3.1-70b");
        assert_eq!(c.max_num_seqs, 32);
        assert_eq!(c.speed, Speed::Max);
        assert_eq!(c.faults.stall_for, Duration::from_millis(250));
        assert_eq!(c.faults.retry_after, Duration::from_secs(3));
    }

    #[test]
    fn bad_values_name_their_flag() {
        let e = SimOverrides {
            fault_cut: Some(1.5),
            ..Default::default()
        }
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("--fault-cut"), "{e}");
        let e = SimOverrides {
            gpu: Some("tpu".into()),
            ..Default::default()
        }
        .resolve()
        .unwrap_err();
        assert!(
            e.to_string().contains("--gpu") && e.to_string().contains("tpu"),
            "{e}"
        );
        let e = SimOverrides {
            model: Some("llama-3.1-70b".into()),
            tp: Some(1),
            ..Default::default()
        }
        .resolve()
        .unwrap_err();
        assert!(e.to_string().contains("--gpu-memory-utilization"), "{e}");
        let e =
            SimOverrides::from_toml_str("max_num_sequences = 3", std::path::Path::new("c.toml"))
                .unwrap_err();
        assert!(e.to_string().contains("c.toml") && e.to_string().contains("max_num_sequences"));
    }

    #[test]
    fn parses_speeds_durations_and_lengths() {
        assert_eq!("max".parse::<Speed>().unwrap(), Speed::Max);
        assert_eq!("10x".parse::<Speed>().unwrap(), Speed::Scaled(10.0));
        assert!("0".parse::<Speed>().is_err());
        // One duration grammar for every flag and key (tpscope_model::units).
        let parse = tpscope_model::parse_duration;
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(
            "fixed:64".parse::<OutputLen>().unwrap(),
            OutputLen::Fixed(64)
        );
        assert!("uniform:9,3".parse::<OutputLen>().is_err());
        assert!("lognormal:200".parse::<OutputLen>().is_err());
    }
}
