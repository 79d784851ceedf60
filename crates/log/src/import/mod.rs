//! Importers (docs/design.md §16): other benchmark tools' per-request outputs and OTLP/JSON
//! traces turned into tpscope's `run` and `span` records. One pure module per format
//! (bytes in, records out, no I/O); [`Format::sniff`] guesses the format from the
//! content. Each importer maps what the tool measured and leaves absent what it lacks.

pub mod aiperf;
mod build;
mod files;
pub mod genai_bench;
pub mod guidellm;
pub mod inference_perf;
mod lanes;
pub mod llmperf;
pub mod otlp;
mod otlp_console;
pub mod otlp_encode;
pub mod otlp_names;
pub mod vllm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tpscope_model::{EndRecord, Record, RunRecord, Span, StatusCounts};

pub use build::content_run_id;
pub use files::{LoadError, import_files, load_imported};
pub use tpscope_model::import_format::{Format, UnknownFormat};

/// Guessing a file's format from its content (the importers know what each tool
/// writes; the format's names are the model's).
pub trait Sniff: Sized {
    /// Guesses the format of a file from its first bytes (`None`: none matched).
    fn sniff(bytes: &[u8]) -> Option<Self>;
}

impl Sniff for Format {
    fn sniff(bytes: &[u8]) -> Option<Format> {
        let head = &bytes[..bytes.len().min(64 * 1024)];
        let has = |needle: &str| memchr::memmem::find(head, needle.as_bytes()).is_some();
        if has("\"resourceSpans\"") || (has("\"trace_id\"") && otlp_console::is_console(head)) {
            // OTLP/JSON, or the Python SDK's console output of spans.
            Some(Format::Otlp)
        } else if has("\"ttfts\"") && has("\"itls\"") {
            Some(Format::Vllm)
        } else if has("\"credit_issued_ns\"")
            || (has("\"metadata\"") && has("\"request_start_ns\""))
            || (has("\"metadata\"") && has("\"record_processor_id\""))
        {
            Some(Format::Aiperf)
        } else if has("\"benchmarks\"") && (has("\"guidellm") || has("\"requests\"")) {
            Some(Format::Guidellm)
        } else if (head.starts_with(b"benchmarks:") || has("\nbenchmarks:"))
            && (has("guidellm") || has("type_: generative_benchmark"))
        {
            // GuideLLM's YAML (`--output kind=yaml`): top-level keys unquoted. Before
            // 0.4 it names no `guidellm` anywhere, only its benchmark type.
            Some(Format::Guidellm)
        } else if has("\"aggregated_metrics\"") && has("\"individual_request_metrics\"") {
            Some(Format::GenaiBench)
        } else if has("\"start_time\"") && has("\"end_time\"") && has("\"response_metrics\"") {
            Some(Format::InferencePerf)
        } else if has("\"end_to_end_latency_s\"") && has("\"ttft_s\"") {
            Some(Format::Llmperf)
        } else if has("\"mean_ttft_ms\"") && has("\"p99_ttft_ms\"") && has("\"backend\"") {
            // vLLM's figures without its per-request columns: named vLLM, so the
            // import says which flag saves them.
            Some(Format::Vllm)
        } else {
            None
        }
    }
}

/// How to import.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportOptions {
    /// Skip records that cannot be mapped (counted by reason) instead of failing.
    pub skip_invalid: bool,
    /// The run id to give the imported run (default: `FORMAT:DIGEST`, from the
    /// file's content).
    pub run_id: Option<String>,
    /// Concurrent clients, for formats whose per-request file does not say (LLMPerf
    /// keeps it in the `*_summary.json` beside it, AIPerf in the
    /// `profile_export_aiperf.json` beside it: there it is the run's cap).
    pub clients: Option<u32>,
    /// Keep the requests a tool leaves out of its own metrics (GuideLLM's warm-up
    /// and cool-down) instead of leaving them out.
    pub keep_transient: bool,
}

/// An error importing a file.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file is not what the format expects at the top level.
    #[error("{file}: not {format} output: {problem}")]
    NotFormat {
        /// The file.
        file: PathBuf,
        /// The format asked for.
        format: Format,
        /// What was expected and what was found.
        problem: String,
    },
    /// One record of the file cannot be mapped.
    #[error("{file}: {record}: {}{problem}", field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
    Record {
        /// The file.
        file: PathBuf,
        /// Which record: `line 12`, `request 3`, `span 7`.
        record: String,
        /// The field expected or at fault, when one is.
        field: Option<String>,
        /// What was wrong and what was expected.
        problem: String,
    },
    /// `auto` found no format that fits.
    #[error(
        "{file}: cannot tell which tool wrote this file; name it with --from (vllm, aiperf, guidellm, genai-bench, inference-perf, llmperf, otlp)"
    )]
    Unrecognised {
        /// The file.
        file: PathBuf,
    },
}

/// What one file imports into.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    /// The format it was read as.
    pub format: Format,
    /// The run record (tool, target, cap, token source, load settings, labels).
    pub run: RunRecord,
    /// One span per request record, in the file's order.
    pub spans: Vec<Span>,
    /// Records skipped (with `skip_invalid`), by reason.
    pub skipped: BTreeMap<String, u64>,
    /// What the reader should know (placement assumptions, missing fields).
    pub warnings: Vec<String>,
}

impl Imported {
    /// The run as span-log records: `run`, the spans, `end`.
    pub fn records(&self) -> impl Iterator<Item = Record> + '_ {
        let mut status = StatusCounts::default();
        self.spans.iter().for_each(|s| status.add(s.status));
        let ended_at = self
            .spans
            .iter()
            .map(|s| s.released_at)
            .max()
            .unwrap_or(self.run.started_at);
        let end = EndRecord {
            run_id: self.run.run_id.clone(),
            ended_at,
            spans: self.spans.len() as u64,
            status,
            samples: 0,
            schedule_late_max: None,
            queued_at_stated: None,
            cut_at_stop: None,
            model: None,
        };
        std::iter::once(Record::Run(self.run.clone()))
            .chain(self.spans.iter().cloned().map(Record::Span))
            .chain(std::iter::once(Record::End(end)))
    }
}

/// Imports one file's bytes as `format` (`None`: sniffed). `file` names it in errors
/// and in the default run id.
pub fn import(
    format: Option<Format>,
    file: &Path,
    bytes: &[u8],
    opts: &ImportOptions,
) -> Result<Imported, ImportError> {
    let format = match format {
        Some(f) => f,
        None => Format::sniff(bytes).ok_or_else(|| ImportError::Unrecognised {
            file: file.to_path_buf(),
        })?,
    };
    let mut cx = build::Cx::new(format, file, bytes, opts);
    match format {
        Format::Vllm => {
            let docs = vllm::documents(bytes);
            vllm::import(&mut cx, docs[0])?;
            if docs.len() > 1 {
                cx.warnings.push(format!(
                    "{}: the file holds {} results (--append-result); imported the first \
                     (import_runs reads all)",
                    file.display(),
                    docs.len()
                ));
            }
            Ok(())
        }
        Format::Aiperf => aiperf::import(&mut cx, bytes, opts.clients),
        Format::Guidellm => {
            let doc = guidellm::parse(&cx, bytes)?;
            let n = guidellm::count(&doc);
            guidellm::import(&mut cx, &doc, 0)?;
            if n > 1 {
                cx.warnings.push(format!(
                    "{}: the file holds {n} benchmarks; imported the first (import_runs reads all)",
                    file.display()
                ));
            }
            Ok(())
        }
        Format::GenaiBench => genai_bench::import(&mut cx, bytes),
        Format::InferencePerf => inference_perf::import(&mut cx, bytes),
        Format::Llmperf => llmperf::import(&mut cx, bytes, opts.clients),
        Format::Otlp => otlp::import(&mut cx, bytes),
    }?;
    Ok(cx.finish())
}

/// Imports every run a file holds: one per benchmark of a GuideLLM sweep and one per
/// line of a vLLM file `--append-result` wrote (run ids `RUN-ID#1`…`#N`, where RUN-ID
/// is `opts.run_id` or `FORMAT:DIGEST`), the one run of [`import`] for every other
/// file.
pub fn import_runs(
    format: Option<Format>,
    file: &Path,
    bytes: &[u8],
    opts: &ImportOptions,
) -> Result<Vec<Imported>, ImportError> {
    let format = match format {
        Some(f) => f,
        None => Format::sniff(bytes).ok_or_else(|| ImportError::Unrecognised {
            file: file.to_path_buf(),
        })?,
    };
    let numbered = |i: usize, n: usize| {
        let mut each = opts.clone();
        if n > 1 {
            let base = build::Cx::new(format, file, bytes, opts).run.run_id;
            each.run_id = Some(format!("{base}#{}", i + 1));
        }
        each
    };
    if format == Format::Vllm {
        let docs = vllm::documents(bytes);
        return docs
            .iter()
            .enumerate()
            .map(|(i, doc)| {
                let each = numbered(i, docs.len());
                let mut cx = build::Cx::new(format, file, bytes, &each);
                vllm::import(&mut cx, doc)?;
                Ok(cx.finish())
            })
            .collect();
    }
    if format != Format::Guidellm {
        return Ok(vec![import(Some(format), file, bytes, opts)?]);
    }
    let doc = guidellm::parse(&build::Cx::new(format, file, bytes, opts), bytes)?;
    let n = guidellm::count(&doc);
    if n == 0 {
        return Err(
            build::Cx::new(format, file, bytes, opts).not_format("the `benchmarks` array is empty")
        );
    }
    (0..n)
        .map(|i| {
            let each = numbered(i, n);
            let mut cx = build::Cx::new(format, file, bytes, &each);
            guidellm::import(&mut cx, &doc, i)?;
            Ok(cx.finish())
        })
        .collect()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod regressions;

#[cfg(test)]
mod regressions_otel;
