//! The foreign formats tpscope can import, by the name `--from` (and Python's
//! `from_`) takes; the importers themselves are `tpscope_log::import`.

use std::fmt;
use std::str::FromStr;

/// A foreign format tpscope can import.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// `vllm bench serve --save-result --save-detailed` JSON.
    Vllm,
    /// NVIDIA AIPerf `profile_export.jsonl`.
    Aiperf,
    /// GuideLLM benchmarks JSON or YAML.
    Guidellm,
    /// genai-bench experiment JSON.
    GenaiBench,
    /// inference-perf per-request lifecycle JSON.
    InferencePerf,
    /// LLMPerf `*_individual_responses.json`.
    Llmperf,
    /// OTLP/JSON trace export with `gen_ai.*` attributes.
    Otlp,
}

impl Format {
    /// Every format, in the order the docs list them.
    pub const ALL: [Format; 7] = [
        Format::Vllm,
        Format::Aiperf,
        Format::Guidellm,
        Format::GenaiBench,
        Format::InferencePerf,
        Format::Llmperf,
        Format::Otlp,
    ];

    /// The name `--from` takes.
    pub fn name(self) -> &'static str {
        match self {
            Format::Vllm => "vllm",
            Format::Aiperf => "aiperf",
            Format::Guidellm => "guidellm",
            Format::GenaiBench => "genai-bench",
            Format::InferencePerf => "inference-perf",
            Format::Llmperf => "llmperf",
            Format::Otlp => "otlp",
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--from` value that names no format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown format `{0}` (expected auto, vllm, aiperf, guidellm, genai-bench, inference-perf, llmperf or otlp)"
)]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFormat(s.to_string()))
    }
}
