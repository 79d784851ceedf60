//! Why a benchmark's flags do not make a spec: one variant per rule, each message
//! naming the flag it is about.

use crate::workload::FileError;

/// Flags that do not make a benchmark.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// `--url` is not an HTTP(S) URL.
    #[error("--url: `{0}` must start with http:// or https://")]
    Url(String),
    /// `--time-scale` is not a positive number.
    #[error("--time-scale: `{0}` must be a number > 0")]
    TimeScale(f64),
    /// `--endpoint` is not an API tpscope calls.
    #[error(
        "--endpoint: `{0}` is not a completions API (expected a path ending in /chat/completions, /completions, /messages or /responses, e.g. /v1/chat/completions)"
    )]
    Endpoint(String),
    /// `--endpoint` and `--api` disagree.
    #[error("--endpoint {endpoint} and --api {api} name different APIs: give one")]
    EndpointApi {
        /// The endpoint.
        endpoint: String,
        /// The API.
        api: &'static str,
    },
    /// More than one workload file.
    #[error("--dataset, --sharegpt, --trace and --dataset-name are alternatives: give one")]
    Sources,
    /// `--dataset-path` alone.
    #[error("--dataset-path needs --dataset-name sharegpt or custom (the file's format)")]
    DatasetPathWithoutName,
    /// `--dataset-path` with `--dataset-name random`.
    #[error(
        "--dataset-path: --dataset-name random makes its own prompts; give sharegpt or custom to read a file"
    )]
    DatasetPathWithRandom,
    /// `--dataset-name sharegpt|custom` without a file.
    #[error("--dataset-name sharegpt and custom read a file: give --dataset-path")]
    DatasetNameWithoutPath,
    /// `--input-tokens` with a file of prompts.
    #[error("--input-tokens applies to synthetic prompts; the prompts come from the file here")]
    InputWithFile,
    /// The `--dataset` file cannot be used.
    #[error("--dataset: {0}")]
    Dataset(FileError),
    /// The `--sharegpt` file cannot be used.
    #[error("--sharegpt: {0}")]
    ShareGpt(FileError),
    /// `--output-tokens` with a trace.
    #[error("--output-tokens: a trace gives each request's output length")]
    OutputWithTrace,
    /// The `--trace` file cannot be used.
    #[error("--trace: {0}")]
    Trace(FileError),
    /// `inf` and rates in one `--rate` list.
    #[error("--rate: `inf` (closed loop) cannot be mixed with rates in one sweep")]
    RateMix,
    /// `--arrival` or `--burstiness` without a rate.
    #[error("--arrival/--burstiness shape an open loop: give --rate too")]
    ArrivalWithoutRate,
    /// Two lists.
    #[error("--rate and --concurrency cannot both be swept: give a list to one of them")]
    TwoSweeps,
    /// `--time-scale` without a trace.
    #[error("--time-scale applies to --trace replay")]
    TimeScaleWithoutTrace,
    /// A concurrency level given twice.
    #[error("--concurrency: levels must be distinct")]
    RepeatedLevel,
    /// `--duration 0`.
    #[error("--duration must be longer than 0")]
    ZeroDuration,
    /// The `--conversations` file cannot be used.
    #[error("--conversations: {0}")]
    Conversations(FileError),
    /// Sessions with an open loop or a trace.
    #[error(
        "--sessions/--conversations run each session's turns in order as replies arrive (a closed loop): --rate and --trace do not apply"
    )]
    SessionsOpenLoop,
    /// `--turns` or `--think-time` without sessions.
    #[error(
        "--turns and --think-time shape multi-turn sessions: give --sessions N or --conversations FILE"
    )]
    TurnsWithoutSessions,
    /// `--sessions 0`.
    #[error("--sessions must be at least 1")]
    ZeroSessions,
    /// A shared-prefix flag without `--prefix-len`, or with a file workload.
    #[error(
        "--prefix-len L (with --prefix-count and --prefix-share) makes synthetic prompts with shared prefixes; it cannot be combined with a file or trace, and --prefix-count/--prefix-share need it"
    )]
    PrefixFlags,
    /// `--prefix-share` outside 0..=1 or `--prefix-count 0`.
    #[error("--prefix-share must be in 0..=1 and --prefix-count at least 1")]
    PrefixRange,
    /// `--ramp-up` with something it cannot ramp.
    #[error("--ramp-up: {0}")]
    Ramp(String),
    /// Waves without a cap.
    #[error("--dispatch waves needs a cap: give --concurrency")]
    WavesWithoutCap,
    /// Lengths the user gave that no request can fit in the model's context.
    #[error(
        "--input-tokens/--output-tokens: every request asks for at least {asked} tokens (prompt + output), \
         but the model's context is {max_model_len} (max_model_len from the server's /models; \
         {limit} after room for the chat template): give shorter lengths"
    )]
    ContextTooSmall {
        /// The fewest tokens a request asks for.
        asked: u64,
        /// The server's `max_model_len`.
        max_model_len: u32,
        /// What is usable of it.
        limit: u32,
    },
}
