//! From a parsed `/metrics` page to a `server_sample`'s normalised fields: each
//! server's names for requests running and waiting, KV cache usage, preemptions,
//! token counters and TTFT/queue-time histograms, one table per dialect. Pure.
//!
//! Series of one name with different labels (several engines, ranks or models)
//! are summed, except KV usage, where the fullest one is taken (the engine that
//! runs out first is the one that limits). Every finite value except histogram
//! buckets and `_created` stamps is kept in `raw` by its series, so an unknown
//! server's page is kept whole and nothing is lost to a name tpscope does not know.

use std::collections::BTreeMap;

use tpscope_model::{HistogramTotals, ServerSampleRecord, Timestamp};

use crate::text::{Exposition, PromSample};

/// The servers whose names tpscope knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerKind {
    /// vLLM V1 and the older V0 names; `tpscope sim` speaks it too.
    Vllm,
    /// SGLang.
    Sglang,
    /// Hugging Face TGI.
    Tgi,
    /// llama.cpp's `llama-server --metrics`.
    LlamaCpp,
    /// Triton with the TensorRT-LLM backend.
    TrtLlm,
}

impl ServerKind {
    /// The name written in the record's `server` field.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerKind::Vllm => "vllm",
            ServerKind::Sglang => "sglang",
            ServerKind::Tgi => "tgi",
            ServerKind::LlamaCpp => "llamacpp",
            ServerKind::TrtLlm => "trtllm",
        }
    }

    /// The dialect whose prefix the page's names carry first, in this order.
    fn detect(page: &Exposition) -> Option<ServerKind> {
        const PREFIXES: [(&str, ServerKind); 5] = [
            ("vllm:", ServerKind::Vllm),
            ("sglang:", ServerKind::Sglang),
            ("tgi_", ServerKind::Tgi),
            ("llamacpp:", ServerKind::LlamaCpp),
            ("nv_trt_llm_", ServerKind::TrtLlm),
        ];
        PREFIXES
            .iter()
            .find(|(p, _)| page.samples.iter().any(|s| s.name.starts_with(p)))
            .map(|(_, d)| *d)
    }
}

/// Names of one dialect, each a list tried in order (newer name first).
struct Names {
    running: &'static [&'static str],
    waiting: &'static [&'static str],
    kv_usage: &'static [&'static str],
    preemptions: &'static [&'static str],
    prompt_tokens: &'static [&'static str],
    generation_tokens: &'static [&'static str],
    /// Histogram families (`_sum` and `_count` are read).
    ttft: &'static [&'static str],
    queue_time: &'static [&'static str],
}

const VLLM: Names = Names {
    running: &["vllm:num_requests_running"],
    waiting: &["vllm:num_requests_waiting"],
    // `gpu_cache_usage_perc` is V0's name (a 0–1 fraction despite `perc`).
    kv_usage: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
    preemptions: &["vllm:num_preemptions_total", "vllm:num_preemptions"],
    prompt_tokens: &["vllm:prompt_tokens_total"],
    generation_tokens: &["vllm:generation_tokens_total"],
    ttft: &["vllm:time_to_first_token_seconds"],
    queue_time: &["vllm:request_queue_time_seconds"],
};

const SGLANG: Names = Names {
    running: &["sglang:num_running_reqs"],
    waiting: &["sglang:num_queue_reqs"],
    kv_usage: &["sglang:token_usage"],
    preemptions: &["sglang:num_retracted_reqs_total"],
    prompt_tokens: &["sglang:prompt_tokens_total"],
    generation_tokens: &["sglang:generation_tokens_total"],
    ttft: &["sglang:time_to_first_token_seconds"],
    queue_time: &["sglang:queue_time_seconds"],
};

/// TGI has no token counters: the sums of its per-request length histograms are
/// (tokens of finished requests).
const TGI: Names = Names {
    running: &["tgi_batch_current_size"],
    waiting: &["tgi_queue_size"],
    kv_usage: &[],
    preemptions: &[],
    prompt_tokens: &["tgi_request_input_length_sum"],
    generation_tokens: &["tgi_request_generated_tokens_sum"],
    ttft: &[],
    queue_time: &["tgi_request_queue_duration"],
};

const LLAMACPP: Names = Names {
    running: &["llamacpp:requests_processing"],
    waiting: &["llamacpp:requests_deferred"],
    kv_usage: &["llamacpp:kv_cache_usage_ratio"],
    preemptions: &[],
    prompt_tokens: &["llamacpp:prompt_tokens_total"],
    generation_tokens: &["llamacpp:tokens_predicted_total"],
    ttft: &[],
    queue_time: &[],
};

/// TensorRT-LLM's request and KV metrics are label-selected: read in [`trtllm`].
const NONE: Names = Names {
    running: &[],
    waiting: &[],
    kv_usage: &[],
    preemptions: &[],
    prompt_tokens: &[],
    generation_tokens: &[],
    ttft: &[],
    queue_time: &[],
};

/// The sum of the finite values of the first name in `names` that the page has.
fn sum_of(page: &Exposition, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| sum_where(page, n, |_| true))
}

/// The sum of the finite values of series `name` that `keep` accepts.
fn sum_where(page: &Exposition, name: &str, keep: impl Fn(&PromSample) -> bool) -> Option<f64> {
    let mut found = None;
    for s in page.samples.iter().filter(|s| s.name == name && keep(s)) {
        if s.value.is_finite() {
            *found.get_or_insert(0.0) += s.value;
        }
    }
    found
}

/// The largest finite value of the first name in `names` that the page has.
fn max_of(page: &Exposition, names: &[&str]) -> Option<f64> {
    names.iter().find_map(|n| {
        page.samples
            .iter()
            .filter(|s| s.name == *n && s.value.is_finite())
            .map(|s| s.value)
            .reduce(f64::max)
    })
}

/// A histogram family's `_sum` and `_count`, summed over its series.
fn histogram(page: &Exposition, families: &[&str]) -> Option<HistogramTotals> {
    families.iter().find_map(|f| {
        let sum = sum_where(page, &format!("{f}_sum"), |_| true)?;
        let count = sum_where(page, &format!("{f}_count"), |_| true)?;
        Some(HistogramTotals { sum, count })
    })
}

/// The key a series is kept under in `raw`: its name, with its labels as written
/// on the page when it has any.
fn series_key(s: &PromSample) -> String {
    if s.labels.is_empty() {
        return s.name.to_string();
    }
    let mut k = s.name.to_string();
    k.push('{');
    for (i, (name, value)) in s.labels.iter().enumerate() {
        if i > 0 {
            k.push(',');
        }
        k.push_str(name);
        k.push_str("=\"");
        for c in value.chars() {
            match c {
                '\\' => k.push_str("\\\\"),
                '"' => k.push_str("\\\""),
                '\n' => k.push_str("\\n"),
                c => k.push(c),
            }
        }
        k.push('"');
    }
    k.push('}');
    k
}

/// Whether a series is a histogram bucket or a `_created` stamp (left out of `raw`:
/// they are most of a page and say nothing a sum and count do not).
fn is_bulk(page: &Exposition, s: &PromSample) -> bool {
    if s.name.ends_with("_created") {
        return true;
    }
    match s.name.strip_suffix("_bucket") {
        Some(family) => s.label("le").is_some() || page.histograms.contains(&family),
        None => false,
    }
}

/// Triton + TensorRT-LLM: running is the requests scheduled this iteration,
/// waiting the active ones not scheduled plus Triton's own pending queue; KV usage
/// is used over max blocks; queue time is Triton's cumulative queue duration over
/// its request count.
fn trtllm(page: &Exposition, out: &mut ServerSampleRecord) {
    let req = |kind: &str| {
        sum_where(page, "nv_trt_llm_request_metrics", |s| {
            s.label("request_type") == Some(kind)
        })
    };
    let blocks = |kind: &str| {
        sum_where(page, "nv_trt_llm_kv_cache_block_metrics", |s| {
            s.label("kv_cache_block_type") == Some(kind)
        })
    };
    let scheduled = req("scheduled");
    out.running = scheduled;
    let pending = sum_of(page, &["nv_inference_pending_request_count"]);
    out.waiting = match (req("active"), scheduled) {
        (Some(a), Some(s)) => Some((a - s).max(0.0) + pending.unwrap_or(0.0)),
        _ => pending,
    };
    out.kv_cache_usage = match (blocks("used"), blocks("max")) {
        (Some(u), Some(m)) if m > 0.0 => Some(u / m),
        _ => None,
    };
    let queued_us = sum_of(page, &["nv_inference_queue_duration_us"]);
    let requests = sum_of(page, &["nv_inference_request_success"]);
    out.queue_time = queued_us.zip(requests).map(|(us, n)| HistogramTotals {
        sum: us / 1e6,
        count: n,
    });
}

/// The normalised view of a page, as a `server_sample` of run `run_id` taken at
/// `at`. An unknown server gets its raw values and no normalised ones.
pub fn normalize(page: &Exposition, run_id: &str, at: Timestamp) -> ServerSampleRecord {
    let dialect = ServerKind::detect(page);
    let names = match dialect {
        Some(ServerKind::Vllm) => &VLLM,
        Some(ServerKind::Sglang) => &SGLANG,
        Some(ServerKind::Tgi) => &TGI,
        Some(ServerKind::LlamaCpp) => &LLAMACPP,
        Some(ServerKind::TrtLlm) | None => &NONE,
    };
    let mut raw = BTreeMap::new();
    for s in &page.samples {
        // JSON has no NaN or infinity; such values are left out.
        if s.value.is_finite() && !is_bulk(page, s) {
            raw.insert(series_key(s), s.value);
        }
    }
    let mut out = ServerSampleRecord {
        run_id: run_id.to_string(),
        at,
        server: dialect.map(|d| d.as_str().to_string()),
        running: sum_of(page, names.running),
        waiting: sum_of(page, names.waiting),
        kv_cache_usage: max_of(page, names.kv_usage),
        preemptions_total: sum_of(page, names.preemptions),
        prompt_tokens_total: sum_of(page, names.prompt_tokens),
        generation_tokens_total: sum_of(page, names.generation_tokens),
        ttft: histogram(page, names.ttft),
        queue_time: histogram(page, names.queue_time),
        raw,
        gpus: Vec::new(),
    };
    if dialect == Some(ServerKind::TrtLlm) {
        trtllm(page, &mut out);
    }
    if dialect.is_none() && crate::dcgm::is_dcgm(page) {
        out.server = Some("dcgm".to_string());
        out.gpus = crate::dcgm::gpus(page);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse;

    fn view(page: &str) -> ServerSampleRecord {
        normalize(&parse(page), "r", Timestamp::from_unix_nanos(0))
    }

    #[test]
    fn engines_are_summed_and_the_fullest_kv_cache_is_taken() {
        let v = view(
            "vllm:num_requests_running{engine=\"0\"} 3\nvllm:num_requests_running{engine=\"1\"} 4\n\
             vllm:kv_cache_usage_perc{engine=\"0\"} 0.5\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.9\n",
        );
        assert_eq!(v.server.as_deref(), Some("vllm"));
        assert_eq!((v.running, v.kv_cache_usage), (Some(7.0), Some(0.9)));
        assert_eq!(v.waiting, None);
    }

    #[test]
    fn vllm_v0_cache_name_is_read_when_the_v1_name_is_absent() {
        let v = view("vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25\n");
        assert_eq!(v.kv_cache_usage, Some(0.25));
    }

    #[test]
    fn an_unknown_server_keeps_its_raw_values_and_no_normalised_ones() {
        let v = view(
            "# TYPE lat histogram\nlat_bucket{le=\"1\"} 2\nlat_sum 3\nqueue_len 4\nx_created 1\nbad NaN\n",
        );
        assert_eq!(v.server, None);
        assert_eq!((v.running, v.waiting), (None, None));
        let keys: Vec<&str> = v.raw.keys().map(String::as_str).collect();
        assert_eq!(keys, ["lat_sum", "queue_len"]);
    }

    #[test]
    fn raw_keys_keep_labels_escaped() {
        let v = view("m{a=\"x\\\"y\",b=\"z\"} 1\n");
        assert_eq!(v.raw.keys().next().unwrap(), "m{a=\"x\\\"y\",b=\"z\"}");
    }
}
