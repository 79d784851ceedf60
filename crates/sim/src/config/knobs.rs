//! The simulator's knobs in one table. A row names a knob (its TOML key; the flag
//! is the key with `-` for `_`), its value type, its help (the doc comment) and how
//! it applies to a [`SimConfig`]. From the table come [`SimOverrides`] (fields,
//! TOML keys, merge and resolve) and [`KNOBS`], from which the command line builds
//! its flags: adding a knob is one row (and a line in `docs/sim.md`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use tpscope_tokens::Tokenizer;

use super::error::{ConfigError, Invalid, flag_of};
use super::presets::GIB;
use super::sim_config::{SimConfig, vllm_batch_defaults};
use super::values::{OutputLen, Speed};

/// The kind of value a knob takes; it picks the flag's parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KnobKind {
    /// A whole number up to 2³² − 1.
    U32,
    /// A whole number up to 2⁶⁴ − 1.
    U64,
    /// A number.
    F64,
    /// Text, parsed (if at all) when the overrides are resolved.
    Text,
    /// A file path.
    Path,
    /// A duration in the one grammar of [`tpscope_model::parse_duration`].
    Duration,
    /// On when given (a flag without a value; `true`/`false` in TOML).
    Switch,
}

/// A knob's value as a flag parser produced it.
#[derive(Clone, Debug, PartialEq)]
pub enum KnobValue {
    /// For [`KnobKind::U32`].
    U32(u32),
    /// For [`KnobKind::U64`].
    U64(u64),
    /// For [`KnobKind::F64`].
    F64(f64),
    /// For [`KnobKind::Text`].
    Text(String),
    /// For [`KnobKind::Path`].
    Path(PathBuf),
    /// For [`KnobKind::Duration`].
    Duration(Duration),
    /// For [`KnobKind::Switch`].
    Switch(bool),
}

/// A value of another kind than the knob's was given to [`Knob::set`].
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("simulator knob `{key}` takes a {kind:?} value, not {value:?}")]
pub struct WrongKind {
    /// The knob.
    pub key: &'static str,
    /// The kind it takes.
    pub kind: KnobKind,
    /// The value given.
    pub value: KnobValue,
}

/// One row of the knob table.
#[derive(Debug)]
pub struct Knob {
    /// TOML key and [`SimOverrides`] field (`max_num_seqs`).
    pub key: &'static str,
    /// The kind of value.
    pub kind: KnobKind,
    /// The help section its flag is listed under (`Engine`).
    pub heading: &'static str,
    /// The value's placeholder in help, when not the key in capitals.
    pub value_name: Option<&'static str>,
    /// The doc comment of the row, lines joined.
    doc: &'static str,
    set: fn(&mut SimOverrides, KnobValue) -> Option<KnobValue>,
}

impl Knob {
    /// The flag's name without dashes or prefix (`max-num-seqs`).
    pub fn flag(&self) -> String {
        flag_of(self.key)
    }

    /// The one-line help: the row's doc comment without its final period (as clap
    /// shows a doc comment).
    pub fn help(&self) -> &'static str {
        let s = self.doc.trim();
        match s.strip_suffix('.') {
            Some(h) if !h.ends_with('.') => h,
            _ => s,
        }
    }

    /// Sets this knob in `overrides`.
    pub fn set(&self, overrides: &mut SimOverrides, value: KnobValue) -> Result<(), WrongKind> {
        match (self.set)(overrides, value) {
            None => Ok(()),
            Some(value) => Err(WrongKind {
                key: self.key,
                kind: self.kind,
                value,
            }),
        }
    }
}

/// The knob of a fault's probability by the fault's name (`429`, `cut`,
/// `slow-first-token`: the key after `fault_`, with `-` for `_`).
pub fn fault_knob(name: &str) -> Option<&'static Knob> {
    KNOBS
        .iter()
        .find(|k| k.key.strip_prefix("fault_") == Some(&name.replace('-', "_")))
}

/// The names [`fault_knob`] takes, in draw order.
pub fn fault_names() -> impl Iterator<Item = String> {
    KNOBS
        .iter()
        .filter_map(|k| k.key.strip_prefix("fault_").map(|n| n.replace('_', "-")))
}

/// A type a knob can hold: its kind, how it comes out of a [`KnobValue`], and how
/// it reads from TOML.
trait KnobType: Sized {
    const KIND: KnobKind;
    fn from_value(v: KnobValue) -> Result<Self, KnobValue>;
    fn deserialize_knob<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error>;
}

macro_rules! knob_types {
    ($($ty:ty => $kind:ident),* $(,)?) => {$(
        impl KnobType for $ty {
            const KIND: KnobKind = KnobKind::$kind;
            fn from_value(v: KnobValue) -> Result<Self, KnobValue> {
                match v {
                    KnobValue::$kind(x) => Ok(x),
                    other => Err(other),
                }
            }
            fn deserialize_knob<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error> {
                Option::<$ty>::deserialize(d)
            }
        }
    )*};
}

knob_types!(u32 => U32, u64 => U64, f64 => F64, String => Text, PathBuf => Path, bool => Switch);

/// A duration in TOML: a number of seconds or a string with a unit.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
enum DurationValue {
    Secs(f64),
    Text(String),
}

impl KnobType for Duration {
    const KIND: KnobKind = KnobKind::Duration;
    fn from_value(v: KnobValue) -> Result<Self, KnobValue> {
        match v {
            KnobValue::Duration(d) => Ok(d),
            other => Err(other),
        }
    }
    fn deserialize_knob<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Self>, D::Error> {
        match Option::<DurationValue>::deserialize(d)? {
            None => Ok(None),
            Some(DurationValue::Secs(v)) => {
                Duration::try_from_secs_f64(v).map(Some).map_err(|_| {
                    serde::de::Error::custom(format!("{v} is not a number of seconds ≥ 0"))
                })
            }
            Some(DurationValue::Text(t)) => tpscope_model::parse_duration(&t)
                .map(Some)
                .map_err(serde::de::Error::custom),
        }
    }
}

fn de_knob<'de, D: Deserializer<'de>, T: KnobType>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize_knob(d)
}

/// The table. A row: doc comment (the flag's help), `key: Type`, optionally
/// `, value_name = "…"`, then `=> |config, value| how it applies` (`?` turns a
/// parse error into the knob's [`Invalid`]); a row without `=>` is applied by
/// [`SimOverrides::resolve`] itself.
macro_rules! knobs {
    ($(
        $heading:literal {
            $(
                $(#[doc = $doc:literal])+
                $key:ident : $ty:ty $(, value_name = $vn:literal)?
                $(=> |$c:ident, $v:ident| $apply:expr)?
            ),* $(,)?
        }
    )*) => {
        /// Optional overrides of every knob, from flags or a TOML file (same names:
        /// flag `--max-num-seqs` is key `max_num_seqs`). [`SimOverrides::merge`]
        /// layers them (flags over file) and [`SimOverrides::resolve`] picks the
        /// presets, applies every override and validates.
        #[derive(Clone, Debug, Default, PartialEq, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct SimOverrides {
            $($(
                $(#[doc = $doc])+
                #[serde(default, deserialize_with = "de_knob")]
                pub $key: Option<$ty>,
            )*)*
        }

        /// Every knob, in the order of `tpscope sim --help`.
        pub const KNOBS: &[Knob] = &[$($(
            Knob {
                key: stringify!($key),
                kind: <$ty as KnobType>::KIND,
                heading: $heading,
                value_name: knobs!(@value_name $($vn)?),
                doc: concat!($($doc),+),
                set: |o, v| match <$ty as KnobType>::from_value(v) {
                    Ok(x) => {
                        o.$key = Some(x);
                        None
                    }
                    Err(v) => Some(v),
                },
            },
        )*)*];

        impl SimOverrides {
            /// `self` with every field that `over` sets replaced by `over`'s value.
            pub fn merge(mut self, over: SimOverrides) -> SimOverrides {
                $($(
                    if over.$key.is_some() {
                        self.$key = over.$key;
                    }
                )*)*
                self
            }

            /// Applies every set knob that has a row action, in table order.
            fn apply(&self, config: &mut SimConfig) -> Result<(), ConfigError> {
                $($($(
                    {
                        fn apply($c: &mut SimConfig, $v: $ty) -> Result<(), Invalid> {
                            $apply;
                            Ok(())
                        }
                        if let Some(v) = &self.$key {
                            apply(config, v.clone())
                                .map_err(|e| ConfigError::invalid(stringify!($key), e))?;
                        }
                    }
                )?)*)*
                Ok(())
            }
        }
    };
    (@value_name) => { None };
    (@value_name $vn:literal) => { Some($vn) };
}

knobs! {
    "Model and GPU" {
        /// Model preset: llama-3.1-8b, llama-3.1-70b.
        model: String,
        /// GPU preset: h100, h200, a100-80gb, l40s.
        gpu: String,
        /// Tensor-parallel degree (default: the smallest power of two whose KV cache holds
        /// one max-length sequence).
        tp: u32 => |c, v| c.tp = v,
        /// Model name served (default `sim-<model>`, e.g. sim-llama-3.1-8b).
        served_model_name: String => |c, v| c.served_model_name = Some(v),
        /// Parameters, in billions.
        params_b: f64 => |c, v| c.model.params = v * 1e9,
        /// Transformer layers.
        layers: u32 => |c, v| c.model.layers = v,
        /// Key/value heads.
        kv_heads: u32 => |c, v| c.model.kv_heads = v,
        /// Attention head dimension.
        head_dim: u32 => |c, v| c.model.head_dim = v,
        /// Query (attention) heads.
        heads: u32 => |c, v| c.model.heads = v,
        /// Hidden size.
        hidden_size: u32 => |c, v| c.model.hidden = v,
        /// Vocabulary size (embedding and untied output layer).
        vocab_size: u32 => |c, v| c.model.vocab = v,
        /// Bytes per weight (2 = BF16, 1 = FP8).
        weight_bytes_per_param: f64 => |c, v| c.model.weight_bytes_per_param = v,
        /// Bytes per KV-cache element.
        kv_bytes_per_elem: f64 => |c, v| c.model.kv_bytes_per_elem = v,
        /// Longest sequence (prompt + output).
        max_model_len: u32 => |c, v| c.model.max_model_len = v,
        /// GPU memory in GiB.
        gpu_memory_gib: f64 => |c, v| c.gpu.memory_bytes = v * GIB,
        /// Peak HBM bandwidth in GB/s.
        hbm_gb_per_s: f64 => |c, v| c.gpu.hbm_bytes_per_sec = v * 1e9,
        /// Peak dense BF16 TFLOP/s.
        tflops: f64 => |c, v| c.gpu.flops = v * 1e12,
    }
    "Engine" {
        /// Fraction of GPU memory for weights plus KV cache.
        gpu_memory_utilization: f64 => |c, v| c.gpu_memory_utilization = v,
        /// KV-cache blocks of 16 tokens (overrides the figure derived from memory).
        num_kv_blocks: u64 => |c, v| c.num_kv_blocks = Some(v),
        /// Most sequences in the running batch.
        max_num_seqs: u32 => |c, v| c.max_num_seqs = v,
        /// Token budget per step (chunked prefill).
        max_num_batched_tokens: u32 => |c, v| c.max_num_batched_tokens = v,
        /// Fraction of peak bandwidth achieved.
        mem_efficiency: f64 => |c, v| c.mem_efficiency = v,
        /// Fraction of peak FLOP/s achieved.
        compute_efficiency: f64 => |c, v| c.compute_efficiency = v,
        /// Fixed time per step (e.g. 1.5ms).
        step_overhead: Duration => |c, v| c.step_overhead = v,
        /// Time per scheduled sequence per step (e.g. 10us).
        step_overhead_per_seq: Duration => |c, v| c.step_overhead_per_seq = v,
        /// realtime, max (no sleeping), or a factor such as 10.
        speed: String => |c, v| c.speed = v.parse::<Speed>()?,
        /// Catch up after the host stalls instead of abandoning the step's
        /// deadline: steps keep to the wall clock (× speed) on a loaded machine.
        keep_schedule: bool => |c, v| c.keep_schedule = v,
        /// Seed of output lengths, text and faults.
        seed: u64 => |c, v| c.seed = v,
        /// Automatic prefix caching: hashed 16-token blocks, LRU eviction, cached
        /// blocks skip prefill (vLLM's default is on; the simulator's is off).
        prefix_caching: bool => |c, v| c.prefix_caching = v,
        /// Tokenizer of prompt counts and output text: o200k_base, cl100k_base, or
        /// hf:PATH (a Hugging Face tokenizer.json or a model directory holding one).
        tokenizer: String => |c, v| c.tokenizer = v.parse::<Tokenizer>()?,
        /// Output lengths when not ignore_eos: fixed:N, uniform:MIN,MAX,
        /// lognormal:MEDIAN,SIGMA, exponential:MEAN (capped by max_tokens).
        output_len: String => |c, v| c.output_len = v.parse::<OutputLen>()?,
        /// Write one JSON line per request (received, first and last token, tokens, fault).
        truth_log: PathBuf, value_name = "FILE" => |c, v| c.truth_log = Some(v),
    }
    "Faults" {
        /// Probability of a 429 with Retry-After.
        fault_429: f64 => |c, v| c.faults.p429 = v,
        /// Retry-After of a 429 (e.g. 1s).
        retry_after: Duration => |c, v| c.faults.retry_after = v,
        /// Probability of a 500.
        fault_500: f64 => |c, v| c.faults.p500 = v,
        /// Probability of a 503.
        fault_503: f64 => |c, v| c.faults.p503 = v,
        /// Probability that a response is cut (connection closed, no `[DONE]`).
        fault_cut: f64 => |c, v| c.faults.cut = v,
        /// Tokens delivered before a cut.
        cut_after: u32 => |c, v| c.faults.cut_after = v,
        /// Probability of a mid-stream stall.
        fault_stall: f64 => |c, v| c.faults.stall = v,
        /// Length of a stall (e.g. 2s).
        stall_for: Duration => |c, v| c.faults.stall_for = v,
        /// Tokens delivered before a stall.
        stall_after: u32 => |c, v| c.faults.stall_after = v,
        /// Probability of one malformed (non-JSON) data: event.
        fault_malformed: f64 => |c, v| c.faults.malformed = v,
        /// Tokens delivered before the malformed event.
        malformed_after: u32 => |c, v| c.faults.malformed_after = v,
        /// Probability of a slow first token.
        fault_slow_first_token: f64 => |c, v| c.faults.slow_first_token = v,
        /// Extra wait before a slow first token (e.g. 2s).
        slow_first_token_delay: Duration => |c, v| c.faults.slow_first_token_delay = v,
        /// Send `Connection: close` on every response (connection churn).
        connection_close: bool => |c, v| c.connection_close = v,
    }
    "Server" {
        /// Close a connection that has not sent a complete request head within this
        /// time of opening or of its previous response (default 10s).
        header_read_timeout: Duration => |c, v| c.header_read_timeout = v,
    }
}

impl SimOverrides {
    /// Parses a TOML file's text; errors name the file and the key or line.
    pub fn from_toml_str(text: &str, path: &Path) -> Result<SimOverrides, ConfigError> {
        toml::from_str(text).map_err(|error| ConfigError::File {
            path: path.to_path_buf(),
            error,
        })
    }

    /// Reads and parses a TOML file.
    pub fn from_toml_file(path: &Path) -> Result<SimOverrides, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml_str(&text, path)
    }

    /// The configuration: presets (default Llama-3.1-8B on H100), then every
    /// override in table order; tp and the batch defaults follow the resolved model
    /// and GPU unless set. Validated.
    pub fn resolve(&self) -> Result<SimConfig, ConfigError> {
        let mut c = SimConfig::preset(
            self.model.as_deref().unwrap_or("llama-3.1-8b"),
            self.gpu.as_deref().unwrap_or("h100"),
        )?;
        self.apply(&mut c)?;
        let (seqs, toks) = vllm_batch_defaults(&c.gpu);
        if self.max_num_seqs.is_none() {
            c.max_num_seqs = seqs;
        }
        if self.max_num_batched_tokens.is_none() {
            c.max_num_batched_tokens = toks;
        }
        if self.tp.is_none() {
            c.tp = c.auto_tp();
        }
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn every_knob_is_a_toml_key_settable_by_its_kind() {
        for k in KNOBS {
            let value = match k.kind {
                KnobKind::U32 => ("7", KnobValue::U32(7)),
                KnobKind::U64 => ("7", KnobValue::U64(7)),
                KnobKind::F64 => ("0.5", KnobValue::F64(0.5)),
                KnobKind::Text => ("\"x\"", KnobValue::Text("x".into())),
                KnobKind::Path => ("\"x\"", KnobValue::Path("x".into())),
                KnobKind::Duration => ("\"2s\"", KnobValue::Duration(Duration::from_secs(2))),
                KnobKind::Switch => ("true", KnobValue::Switch(true)),
            };
            let file =
                SimOverrides::from_toml_str(&format!("{} = {}", k.key, value.0), Path::new("k"))
                    .unwrap();
            let mut set = SimOverrides::default();
            k.set(&mut set, value.1).unwrap();
            assert_ne!(set, SimOverrides::default(), "{}", k.key);
            assert_eq!(set, file, "{}", k.key);
            assert!(
                k.set(&mut set, KnobValue::Switch(false)).is_err() || k.kind == KnobKind::Switch
            );
        }
        // The names `tpscope bench --sim-fault KIND=P` takes.
        let names = fault_names().collect::<Vec<_>>().join(" ");
        assert_eq!(names, "429 500 503 cut stall malformed slow-first-token");
        assert_eq!(
            fault_knob("slow-first-token").unwrap().key,
            "fault_slow_first_token"
        );
        assert!(fault_knob("418").is_none());
    }

    #[test]
    fn every_knob_is_in_the_docs() {
        let docs = include_str!("../../../../docs/sim.md");
        let (_, block) = docs.split_once("```toml\n# Model and GPU\n").unwrap();
        let (block, _) = block.split_once("```").unwrap();
        for k in KNOBS {
            let flag = format!("# --{}", k.flag());
            assert!(
                block
                    .lines()
                    .any(|l| l.starts_with(&format!("{} = ", k.key)) && l.contains(&flag)),
                "docs/sim.md has no TOML line `{} = …  {flag}`",
                k.key
            );
        }
        SimOverrides::from_toml_str(block, Path::new("docs/sim.md"))
            .unwrap()
            .resolve()
            .unwrap();
    }
}
