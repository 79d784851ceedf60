//! GuideLLM sweeps and YAML, on a real 2-benchmark sweep (`--profile kind=concurrent
//! --override profile.streams 2,4`, saved as both JSON and YAML by the same run):
//! one run per benchmark, each with its own concurrency, and the YAML read into the
//! same spans as the JSON.

use std::path::{Path, PathBuf};

use tpscope_log::import::{Format, ImportOptions, Imported, content_run_id, import, import_runs};
use tpscope_model::Timestamp;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import/guidellm")
        .join(rel)
}

fn runs(format: Option<Format>, rel: &str) -> Vec<Imported> {
    let path = data(rel);
    let bytes = std::fs::read(&path).unwrap();
    import_runs(format, &path, &bytes, &ImportOptions::default()).unwrap()
}

#[test]
fn a_sweep_imports_as_one_run_per_benchmark_with_its_concurrency() {
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data("sweep.json")).unwrap()).unwrap();
    let benches = doc["benchmarks"].as_array().unwrap();
    let runs = runs(Some(Format::Guidellm), "sweep.json");
    assert_eq!(runs.len(), benches.len());
    assert_eq!(runs.len(), 2);
    for (i, (run, b)) in runs.iter().zip(benches).enumerate() {
        let base = content_run_id(
            Format::Guidellm,
            &std::fs::read(data("sweep.json")).unwrap(),
        );
        assert_eq!(run.run.run_id, format!("{base}#{}", i + 1));
        let streams = b["config"]["strategy"]["streams"].as_u64().unwrap() as u32;
        assert_eq!(run.run.cap, Some(streams));
        assert_eq!(run.run.load["benchmark"], i + 1);
        let n = b["requests"]["successful"].as_array().unwrap().len();
        assert_eq!(run.spans.len(), n);
        assert!(run.spans.iter().all(|s| s.run_id == run.run.run_id));
        assert!(run.warnings.is_empty(), "{:?}", run.warnings);
    }
    assert_eq!(
        runs.iter().map(|r| r.run.cap).collect::<Vec<_>>(),
        [Some(2), Some(4)]
    );
}

#[test]
fn yaml_gives_the_same_spans_as_json() {
    let from_json = runs(Some(Format::Guidellm), "sweep.json");
    // `auto` sniffs the YAML.
    let from_yaml = runs(None, "sweep.yaml");
    assert_eq!(from_yaml.len(), from_json.len());
    for (y, j) in from_yaml.iter().zip(&from_json) {
        assert_eq!(y.format, Format::Guidellm);
        assert_eq!(y.spans.len(), j.spans.len());
        for (ys, js) in y.spans.iter().zip(&j.spans) {
            // The same decimal text, parsed by two parsers: serde_json's default float
            // parsing may land one f64 step (about 240 ns at today's Unix seconds) from
            // the correctly rounded value the YAML parser gives.
            let near = |a: Option<Timestamp>, b: Option<Timestamp>| match (a, b) {
                (Some(a), Some(b)) => (a.unix_nanos() - b.unix_nanos()).abs() < 1_000,
                (a, b) => a.is_none() && b.is_none(),
            };
            assert!(
                near(Some(ys.queued_at), Some(js.queued_at)),
                "{ys:?} {js:?}"
            );
            assert!(near(ys.admitted_at, js.admitted_at), "{ys:?} {js:?}");
            assert!(near(ys.first_token_at, js.first_token_at), "{ys:?} {js:?}");
            assert!(near(ys.last_token_at, js.last_token_at), "{ys:?} {js:?}");
            assert!(
                near(Some(ys.released_at), Some(js.released_at)),
                "{ys:?} {js:?}"
            );
            let mut ys = ys.clone();
            (ys.run_id, ys.queued_at, ys.admitted_at) =
                (js.run_id.clone(), js.queued_at, js.admitted_at);
            (ys.first_token_at, ys.last_token_at, ys.released_at) =
                (js.first_token_at, js.last_token_at, js.released_at);
            assert_eq!(&ys, js);
        }
        assert_eq!(y.run.cap, j.run.cap);
        assert_eq!(y.run.tool, j.run.tool);
    }
}

#[test]
fn the_single_run_import_of_a_sweep_takes_the_first_and_warns() {
    let path = data("sweep.yaml");
    let bytes = std::fs::read(&path).unwrap();
    let one = import(None, &path, &bytes, &ImportOptions::default()).unwrap();
    assert_eq!(one.run.run_id, content_run_id(Format::Guidellm, &bytes));
    assert_eq!(one.run.cap, Some(2));
    assert!(
        one.warnings.iter().any(|w| w.contains("2 benchmarks")),
        "{:?}",
        one.warnings
    );
}

#[test]
fn a_one_benchmark_file_keeps_its_plain_run_id() {
    let runs = runs(None, "benchmarks.json");
    assert_eq!(runs.len(), 1);
    let bytes = std::fs::read(data("benchmarks.json")).unwrap();
    assert_eq!(runs[0].run.run_id, content_run_id(Format::Guidellm, &bytes));
}
