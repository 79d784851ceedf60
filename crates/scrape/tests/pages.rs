//! The normaliser on real `/metrics` captures (vLLM) and on the documented pages of
//! SGLang, TGI, llama.cpp and Triton/TensorRT-LLM (`tests/data/README.md`).

use tpscope_model::{HistogramTotals, ServerSampleRecord, Timestamp};
use tpscope_scrape::{normalize, parse};

fn page(name: &str) -> ServerSampleRecord {
    let path = format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("test page");
    let e = parse(&text);
    assert!(e.warnings.is_empty(), "{name}: {:?}", e.warnings);
    normalize(&e, "r", Timestamp::from_unix_nanos(0))
}

#[test]
fn vllm_under_load_shows_its_16_running_and_16_waiting() {
    let v = page("vllm-0.32.0-cpu-under-load.prom");
    assert_eq!(v.server.as_deref(), Some("vllm"));
    assert_eq!((v.running, v.waiting), (Some(16.0), Some(16.0)));
    assert_eq!(v.kv_cache_usage, Some(0.0019533634476864847));
    assert_eq!(v.preemptions_total, Some(0.0));
    assert_eq!(v.prompt_tokens_total, Some(13672.0));
    assert_eq!(v.generation_tokens_total, Some(11464.0));
    assert_eq!(
        v.ttft,
        Some(HistogramTotals {
            sum: 67.2974488735199,
            count: 128.0
        })
    );
    assert_eq!(
        v.queue_time,
        Some(HistogramTotals {
            sum: 47.476767425991056,
            count: 112.0
        })
    );
    // Everything else by series; no buckets, no `_created` stamps.
    assert_eq!(
        v.raw.get("process_open_fds"),
        Some(&66.0),
        "raw keeps unknown series"
    );
    assert!(
        v.raw
            .keys()
            .all(|k| !k.contains("_bucket{") && !k.contains("_created"))
    );
    assert!(v.raw.contains_key(
        "vllm:num_requests_waiting_by_reason{engine=\"0\",model_name=\"tiny-llama\",reason=\"capacity\"}"
    ));
}

#[test]
fn vllm_idle_has_nothing_running_or_waiting() {
    let v = page("vllm-0.32.0-cpu-idle.prom");
    assert_eq!((v.running, v.waiting), (Some(0.0), Some(0.0)));
    assert!(v.generation_tokens_total.is_some_and(|g| g > 0.0));
}

#[test]
fn sglang_names_are_normalised() {
    let v = page("sglang.prom");
    assert_eq!(v.server.as_deref(), Some("sglang"));
    assert_eq!((v.running, v.waiting), (Some(162.0), Some(2826.0)));
    assert_eq!(v.kv_cache_usage, Some(0.28));
    assert_eq!(v.generation_tokens_total, Some(7.557572e6));
    assert_eq!(v.ttft.map(|h| h.count), Some(11008.0));
    assert_eq!(v.queue_time.map(|h| h.sum), Some(2.5e5));
}

#[test]
fn tgi_token_totals_come_from_its_length_histograms() {
    let v = page("tgi.prom");
    assert_eq!(v.server.as_deref(), Some("tgi"));
    assert_eq!((v.running, v.waiting), (Some(12.0), Some(3.0)));
    assert_eq!(v.prompt_tokens_total, Some(50000.0));
    assert_eq!(v.generation_tokens_total, Some(32000.0));
    assert_eq!(
        v.queue_time,
        Some(HistogramTotals {
            sum: 12.5,
            count: 250.0
        })
    );
    assert_eq!((v.kv_cache_usage, v.ttft), (None, None));
}

#[test]
fn llamacpp_processing_and_deferred_are_running_and_waiting() {
    let v = page("llamacpp.prom");
    assert_eq!(v.server.as_deref(), Some("llamacpp"));
    assert_eq!((v.running, v.waiting), (Some(4.0), Some(2.0)));
    assert_eq!(v.kv_cache_usage, Some(0.42));
    assert_eq!(v.prompt_tokens_total, Some(4096.0));
    assert_eq!(v.generation_tokens_total, Some(2048.0));
}

#[test]
fn triton_trtllm_request_types_and_kv_blocks_are_read_by_label() {
    let v = page("triton-trtllm.prom");
    assert_eq!(v.server.as_deref(), Some("trtllm"));
    // scheduled 6; active 10 − scheduled 6 + Triton's pending 1.
    assert_eq!((v.running, v.waiting), (Some(6.0), Some(5.0)));
    assert_eq!(v.kv_cache_usage, Some(0.75));
    assert_eq!(
        v.queue_time,
        Some(HistogramTotals {
            sum: 5.0,
            count: 200.0
        })
    );
}

proptest::proptest! {
    /// A real page cut and spliced at random places: parsing and normalising never
    /// panic, every kept value is finite (JSON-safe), and a cut inside a sample line
    /// that leaves it unreadable is warned about.
    #[test]
    fn damaged_real_pages_give_warnings_not_panics(
        cuts in proptest::collection::vec((0usize..54_000, 0usize..64, "[{}\"=, a-z0-9\n]{0,4}"), 1..6),
    ) {
        let path = format!("{}/tests/data/vllm-0.32.0-cpu-under-load.prom", env!("CARGO_MANIFEST_DIR"));
        let mut text = std::fs::read_to_string(path).unwrap();
        for (at, len, insert) in &cuts {
            let mut at = (*at).min(text.len());
            while !text.is_char_boundary(at) { at -= 1; }
            let mut end = (at + len).min(text.len());
            while !text.is_char_boundary(end) { end -= 1; }
            text.replace_range(at..end, insert);
        }
        let e = parse(&text);
        let v = normalize(&e, "r", Timestamp::from_unix_nanos(0));
        proptest::prop_assert!(v.raw.values().all(|x| x.is_finite()));
        for f in [v.running, v.waiting, v.kv_cache_usage, v.generation_tokens_total].into_iter().flatten() {
            proptest::prop_assert!(f.is_finite());
        }
        // Every line is a sample, a comment, blank, or warned about.
        let lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .count();
        proptest::prop_assert_eq!(e.samples.len() + e.malformed, lines);
        proptest::prop_assert_eq!(e.malformed > 0, !e.warnings.is_empty());
    }
}

#[test]
fn dcgm_exporter_readme_page_is_a_gpu_page_whose_blank_field_is_no_reading() {
    let v = page("dcgm-exporter-readme.prom");
    assert_eq!(v.server.as_deref(), Some("dcgm"));
    // Clocks and a blank temperature: none of the fields tpscope reads.
    assert!(v.gpus.is_empty());
    assert_eq!(
        v.raw.get(
            "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52\"}"
        ),
        Some(&139.0)
    );
}

#[test]
fn dcgm_a100_page_gives_one_device_and_leaves_its_mig_instance_out() {
    let v = page("dcgm-a100-mig.prom");
    assert_eq!(v.server.as_deref(), Some("dcgm"));
    assert_eq!((v.running, v.waiting), (None, None));
    assert_eq!(v.gpus.len(), 1);
    let g = &v.gpus[0];
    assert_eq!(g.host.as_deref(), Some("ub20-a100-k8s"));
    assert_eq!(g.gpu, "GPU-34319582-d595-d1c7-d1d2-179bcfa61660");
    assert_eq!(g.power_w, Some(409.692));
    assert_eq!(g.energy_j, Some(319159.391));
    assert_eq!(g.fb_used_bytes, Some(4845.0 * 1024.0 * 1024.0));
    // This page exports no GPU_UTIL (profiling fields instead).
    assert_eq!(g.util, None);
}
