//! The vLLM flags `tpscope bench` takes, those it refuses, and how each is read.

/// How a vLLM flag is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Take {
    /// tpscope has the flag (or an alias) with vLLM's meaning.
    Native,
    /// Rewritten here, with a value.
    Value,
    /// Rewritten here, without a value.
    Switch,
    /// Read here as vLLM's nargs: the values up to the next flag.
    Values,
}

/// The vLLM flags `tpscope bench` takes: the flag, how, and what it does here.
pub const ACCEPTED: &[(&str, &str)] = &[
    ("--base-url", "the server's base URL (same as --url)"),
    (
        "--host",
        "the server's host (with --port: --url http://HOST:PORT/v1)",
    ),
    ("--port", "the server's port (default 8000)"),
    ("--endpoint", "the API's path, e.g. /v1/completions"),
    (
        "--backend",
        "openai or vllm (/v1/completions), openai-chat (/v1/chat/completions)",
    ),
    ("--endpoint-type", "as --backend"),
    ("--model", "the model requested"),
    (
        "--served-model-name",
        "the model name requested (vLLM's --model then names the tokenizer)",
    ),
    (
        "--tokenizer",
        "a tokenizer.json or model directory (hf: is added)",
    ),
    ("--dataset-name", "random, sharegpt or custom"),
    ("--dataset-path", "the file of sharegpt or custom"),
    ("--num-prompts", "requests (same as --requests)"),
    (
        "--max-concurrency",
        "the in-flight cap (same as --concurrency)",
    ),
    ("--request-rate", "requests per second; inf: all at once"),
    ("--burstiness", "the gamma shape of arrivals (1: Poisson)"),
    (
        "--ramp-up-strategy",
        "linear or exponential, with --ramp-up-start-rps and --ramp-up-end-rps",
    ),
    ("--ramp-up-start-rps", "the ramp's first rate"),
    ("--ramp-up-end-rps", "the ramp's last rate"),
    (
        "--random-input-len",
        "prompt tokens (same as --input-tokens)",
    ),
    (
        "--random-output-len",
        "output tokens (same as --output-tokens)",
    ),
    ("--input-len", "as --random-input-len"),
    ("--output-len", "as --random-output-len"),
    (
        "--random-range-ratio",
        "lengths uniform in [len·(1−r), len·(1+r)]",
    ),
    (
        "--prefix-repetition-prefix-len",
        "shared prefix tokens (same as --prefix-len)",
    ),
    (
        "--prefix-repetition-num-prefixes",
        "distinct prefixes (same as --prefix-count)",
    ),
    ("--ignore-eos", "every reply runs to its max_tokens"),
    ("--seed", "the seed of lengths, prompts and arrivals"),
    (
        "--num-warmups",
        "warm-up requests, not recorded (same as --warmup N)",
    ),
    (
        "--temperature",
        "sampling: sent in every request body (tpscope's own flag)",
    ),
    ("--top-p", "sampling: sent in every request body"),
    ("--top-k", "sampling: sent in every request body"),
    ("--min-p", "sampling: sent in every request body"),
    (
        "--frequency-penalty",
        "sampling: sent in every request body",
    ),
    ("--presence-penalty", "sampling: sent in every request body"),
    (
        "--repetition-penalty",
        "sampling: sent in every request body",
    ),
    ("--extra-body", "JSON merged into every request body"),
    ("--header", "an extra request header"),
    (
        "--goodput",
        "goals, e.g. ttft:500 tpot:50 e2el:10000 (milliseconds)",
    ),
    (
        "--percentile-metrics",
        "which of ttft,tpot,itl,e2el the result file summarises",
    ),
    ("--metric-percentiles", "which percentiles, e.g. 50,90,99"),
    (
        "--save-result",
        "write vLLM's result JSON beside the span log",
    ),
    (
        "--save-detailed",
        "with per-request arrays (ttfts, itls, …)",
    ),
    ("--result-dir", "the result file's directory"),
    ("--result-filename", "the result file's name"),
    (
        "--label",
        "the result's label (tpscope's own --label takes K=V)",
    ),
    (
        "--metadata",
        "KEY=VALUE pairs, into the result and the run's labels",
    ),
    (
        "--disable-tqdm",
        "accepted; tpscope's progress line goes to standard error",
    ),
    ("--trust-remote-code", "accepted; tokenizers load offline"),
];

/// vLLM flags tpscope does not take (named so the refusal lists what it does).
pub(super) const REFUSED: &[&str] = &[
    "--append-result",
    "--custom-output-len",
    "--custom-skip-chat-template",
    "--hf-output-len",
    "--hf-split",
    "--hf-subset",
    "--logprobs",
    "--lora-modules",
    "--no-stream",
    "--plot-timeline",
    "--prefix-repetition-output-len",
    "--prefix-repetition-suffix-len",
    "--profile",
    "--random-batch-size",
    "--random-prefix-len",
    "--ready-check-timeout-sec",
    "--request-id-prefix",
    "--sharegpt-output-len",
    "--skip-tokenizer-init",
    "--sonnet-input-len",
    "--sonnet-output-len",
    "--sonnet-prefix-len",
    "--tokenizer-mode",
    "--use-beam-search",
];

/// How each accepted flag is read here (flags not named are [`Take::Native`]).
pub(super) fn take(flag: &str) -> Take {
    match flag {
        "--save-result" | "--save-detailed" | "--disable-tqdm" | "--trust-remote-code" => {
            Take::Switch
        }
        "--goodput" | "--metadata" => Take::Values,
        "--host"
        | "--port"
        | "--backend"
        | "--endpoint-type"
        | "--served-model-name"
        | "--tokenizer"
        | "--random-range-ratio"
        | "--num-warmups"
        | "--top-p"
        | "--top-k"
        | "--min-p"
        | "--frequency-penalty"
        | "--presence-penalty"
        | "--repetition-penalty"
        | "--extra-body"
        | "--percentile-metrics"
        | "--metric-percentiles"
        | "--result-dir"
        | "--result-filename"
        | "--label"
        | "--input-len"
        | "--output-len" => Take::Value,
        _ => Take::Native,
    }
}
