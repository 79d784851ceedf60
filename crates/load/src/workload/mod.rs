//! Workloads: what each request asks for (prompt and `max_tokens`), from synthetic
//! lengths, the bundled Azure chat lengths, a JSONL file of prompts or messages, a
//! ShareGPT file, or a Mooncake / Azure trace (which also carries arrival times).
//!
//! Request `seq` of a run is a pure function of (workload, seed, seq): runs are
//! reproducible, and prompts are built only when a request is admitted.
//!
//! The files: `prompts.rs` (prompt files), `trace.rs` (traces), `file.rs` (what
//! their readers share).

mod file;
pub mod prompts;
pub mod sessions;
pub mod trace;

use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tpscope_tokens::{Tokenizer, mix};

use crate::azure::azure_lengths;
use crate::dist::LengthDist;
use crate::spec::fit_context;
use trace::prefix_shared_text;

pub use file::FileError;
pub use prompts::PromptItem;
pub use tpscope_client::{Message, Prompt, RequestSpec};
pub use trace::TraceEntry;

/// One request, ready to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// What is sent: the prompt and `max_tokens` (always set).
    pub spec: RequestSpec,
    /// Prompt tokens under the run's tokenizer, when the workload knows them exactly
    /// (synthetic prompts, traces); the server's `usage` wins when it reports them.
    pub input_tokens: Option<u64>,
}

impl Request {
    /// The requested output length.
    pub fn max_tokens(&self) -> u32 {
        self.spec.max_tokens.unwrap_or(0)
    }
}

/// What the requests of a run ask for.
#[derive(Clone, Debug)]
pub enum Workload {
    /// Synthetic prompts of exact token lengths drawn from distributions.
    Synthetic {
        /// Prompt lengths.
        input: LengthDist,
        /// `max_tokens`.
        output: LengthDist,
    },
    /// (input, output) pairs drawn jointly from the bundled Azure conversation trace:
    /// the default, so lengths vary the way real chat traffic does.
    AzureChat,
    /// Prompts from a file, in file order (wrapping around when a run asks for more
    /// requests than the file has); `max_tokens` from the file, else from `output`.
    Prompts {
        /// Where they came from (for the run record).
        source: String,
        /// The prompts.
        items: Arc<Vec<PromptItem>>,
        /// Output lengths for items that do not give one.
        output: LengthDist,
    },
    /// Synthetic prompts that start with one of `count` shared prefixes of `len`
    /// tokens (a share `share` of requests; the others start with a prefix of the
    /// same length of their own), then a suffix of `input` tokens: vLLM's
    /// `prefix_repetition`, inference-perf's `shared_prefix`.
    SharedPrefix {
        /// Distinct shared prefixes.
        count: u32,
        /// Tokens of each prefix.
        len: u32,
        /// The share of requests that start with a shared prefix.
        share: f64,
        /// Suffix lengths.
        input: LengthDist,
        /// `max_tokens`.
        output: LengthDist,
    },
    /// Lengths (and prefix sharing) from a trace, in trace order.
    Trace {
        /// Where it came from (for the run record).
        source: String,
        /// The entries.
        entries: Arc<Vec<TraceEntry>>,
    },
}

impl Workload {
    /// How many distinct requests the workload holds, when it is a file (`None` for
    /// synthetic workloads, which never run out).
    pub fn len(&self) -> Option<usize> {
        match self {
            Workload::Synthetic { .. } | Workload::AzureChat | Workload::SharedPrefix { .. } => {
                None
            }
            Workload::Prompts { items, .. } => Some(items.len()),
            Workload::Trace { entries, .. } => Some(entries.len()),
        }
    }

    /// Whether every request's `max_tokens` is drawn from the output length flag
    /// (synthetic prompts; a prompt file none of whose prompts gives its own).
    pub fn every_max_tokens_given_by_output(&self) -> bool {
        match self {
            Workload::Synthetic { .. } | Workload::SharedPrefix { .. } => true,
            Workload::Prompts { items, .. } => items.iter().all(|i| i.max_tokens.is_none()),
            Workload::AzureChat | Workload::Trace { .. } => false,
        }
    }

    /// Whether the workload is a file with no requests.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// Request `seq` for `seed`, with synthetic text made by `tokenizer`. Lengths
    /// follow `seed` alone; the text of synthetic prompts also follows
    /// `prompt_salt` (0: none), so that a repeated run sends other prompts of the
    /// same lengths and finds nothing of them in the server's prefix cache.
    /// Synthetic and trace requests longer than `context` tokens (prompt +
    /// output) are shortened to fit it (see [`crate::spec::fit_context`]).
    pub fn request(
        &self,
        seq: u64,
        seed: u64,
        prompt_salt: u64,
        tokenizer: Tokenizer,
        context: Option<u32>,
    ) -> Request {
        let req_seed = mix(seed ^ mix(seq.wrapping_add(0x5EED)));
        let mut rng = StdRng::seed_from_u64(req_seed);
        let text_seed = if prompt_salt == 0 {
            req_seed
        } else {
            mix(req_seed ^ prompt_salt)
        };
        match self {
            Workload::Synthetic { input, output } => {
                let n_in = input.sample(&mut rng);
                let n_out = output.sample(&mut rng);
                let (n_in, n_out) = fit_context(n_in, n_out, context);
                synthetic(n_in, n_out, text_seed, tokenizer)
            }
            Workload::SharedPrefix {
                count,
                len,
                share,
                input,
                output,
            } => {
                let n_in = input.sample(&mut rng);
                let n_out = output.sample(&mut rng);
                let shared = rng.random::<f64>() < *share;
                let prefix_seed = if shared {
                    // Prefix k is the same text in every request of the run; the
                    // salt keeps it out of a repeated run (whose requests would
                    // otherwise all hit the cache the last run warmed).
                    mix(seed ^ 0x5AA8_ED00 ^ prompt_salt ^ mix(req_seed % u64::from(*count)))
                } else {
                    mix(text_seed ^ 0x0E1F)
                };
                let mut text = tokenizer.text_with_tokens(*len as usize, prefix_seed);
                text.push_str(&tokenizer.text_with_tokens(n_in as usize, text_seed));
                Request {
                    spec: RequestSpec {
                        prompt: Prompt::Text(text),
                        max_tokens: Some(n_out.max(1)),
                    },
                    input_tokens: Some(u64::from(*len) + u64::from(n_in)),
                }
            }
            Workload::AzureChat => {
                let t = azure_lengths();
                let (i, o) = t[(req_seed % t.len() as u64) as usize];
                let (i, o) = fit_context(i.max(1), o.max(1), context);
                synthetic(i, o, text_seed, tokenizer)
            }
            Workload::Prompts { items, output, .. } => {
                let item = &items[(seq % items.len().max(1) as u64) as usize];
                Request {
                    spec: RequestSpec {
                        prompt: item.prompt.clone(),
                        max_tokens: Some(
                            item.max_tokens.unwrap_or_else(|| output.sample(&mut rng)),
                        ),
                    },
                    input_tokens: None,
                }
            }
            Workload::Trace { entries, .. } => {
                let e = &entries[(seq % entries.len().max(1) as u64) as usize];
                let (n_in, n_out) = fit_context(e.input, e.output.max(1), context);
                let shortened;
                let e = if (n_in, n_out) == (e.input, e.output.max(1)) {
                    e
                } else {
                    shortened = TraceEntry {
                        input: n_in,
                        output: n_out,
                        ..e.clone()
                    };
                    &shortened
                };
                Request {
                    spec: RequestSpec {
                        prompt: Prompt::Text(prefix_shared_text(
                            e,
                            text_seed,
                            prompt_salt,
                            tokenizer,
                        )),
                        max_tokens: Some(e.output.max(1)),
                    },
                    input_tokens: Some(u64::from(e.input)),
                }
            }
        }
    }

    /// What the run record's load settings say about the workload.
    pub fn settings(&self) -> WorkloadSettings<'_> {
        match self {
            Workload::Synthetic { input, output } => WorkloadSettings::Synthetic {
                input_tokens: input.to_string(),
                output_tokens: output.to_string(),
            },
            Workload::SharedPrefix {
                count,
                len,
                share,
                input,
                output,
            } => WorkloadSettings::SharedPrefix {
                prefix_count: *count,
                prefix_len: *len,
                prefix_share: *share,
                input_tokens: input.to_string(),
                output_tokens: output.to_string(),
            },
            Workload::AzureChat => WorkloadSettings::AzureChatLengths {
                source: "Azure LLM inference trace 2023, conversation (bundled)",
            },
            Workload::Prompts {
                source,
                items,
                output,
            } => WorkloadSettings::Prompts {
                source,
                prompts: items.len(),
                output_tokens_default: output.to_string(),
            },
            Workload::Trace { source, entries } => WorkloadSettings::Trace {
                source,
                entries: entries.len(),
            },
        }
    }
}

/// A workload as the run record's load settings describe it (`kind` names the variant).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum WorkloadSettings<'a> {
    /// Lengths from distributions, in their `--input-tokens` syntax.
    Synthetic {
        /// The prompt length distribution.
        input_tokens: String,
        /// The output length distribution.
        output_tokens: String,
    },
    /// Shared prefixes, then synthetic suffixes.
    SharedPrefix {
        /// Distinct shared prefixes.
        prefix_count: u32,
        /// Tokens of each.
        prefix_len: u32,
        /// The share of requests that start with one.
        prefix_share: f64,
        /// Suffix lengths.
        input_tokens: String,
        /// The output length distribution.
        output_tokens: String,
    },
    /// The bundled Azure chat lengths.
    AzureChatLengths {
        /// Where they come from.
        source: &'static str,
    },
    /// Prompts from a file.
    Prompts {
        /// The file.
        source: &'a str,
        /// How many prompts it holds.
        prompts: usize,
        /// Output lengths of prompts that give none.
        output_tokens_default: String,
    },
    /// A trace.
    Trace {
        /// `format:file`.
        source: &'a str,
        /// How many requests it holds.
        entries: usize,
    },
}

/// A synthetic request of `n_in` prompt tokens as the server counts them: as
/// vLLM's random dataset does, the text leaves room for the special tokens (a BOS)
/// the server adds, so the server's prompt is `n_in` tokens, not `n_in + 1`.
fn synthetic(n_in: u32, n_out: u32, seed: u64, tokenizer: Tokenizer) -> Request {
    let added = u32::try_from(tokenizer.added_special_tokens()).unwrap_or(0);
    let text_len = n_in.saturating_sub(added).max(1);
    Request {
        spec: RequestSpec {
            prompt: Prompt::Text(tokenizer.text_with_tokens(text_len as usize, seed)),
            max_tokens: Some(n_out.max(1)),
        },
        input_tokens: Some(u64::from(n_in)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random prompts were one token longer than vLLM's under a tokenizer whose
    /// server adds a BOS: the text now leaves room for it, as vLLM's does.
    #[test]
    fn random_prompts_were_one_token_longer_than_vllms() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tokens/tests/data/llama3/tokenizer.json"
        );
        let tk: Tokenizer = format!("hf:{path}").parse().unwrap();
        assert_eq!(tk.added_special_tokens(), 1);
        let w = Workload::Synthetic {
            input: LengthDist::Fixed(100),
            output: LengthDist::Fixed(10),
        };
        let r = w.request(1, 7, 0, tk, None);
        let Prompt::Text(t) = &r.spec.prompt else {
            panic!("text expected")
        };
        // 99 tokens of text, 100 with the BOS the server adds.
        assert_eq!(tk.count(t), 99);
        assert_eq!(r.input_tokens, Some(100));
    }

    #[test]
    fn synthetic_prompts_have_the_exact_input_length_and_are_reproducible() {
        let w = Workload::Synthetic {
            input: LengthDist::Fixed(300),
            output: LengthDist::Uniform { lo: 10, hi: 20 },
        };
        let tk = Tokenizer::O200kBase;
        let a = w.request(5, 42, 0, tk, None);
        assert_eq!(a, w.request(5, 42, 0, tk, None));
        assert_ne!(a, w.request(6, 42, 0, tk, None));
        let Prompt::Text(t) = &a.spec.prompt else {
            panic!("text expected")
        };
        assert_eq!(tk.count(t), 300);
        assert_eq!(a.input_tokens, Some(300));
        assert!((10..=20).contains(&a.max_tokens()));
    }

    #[test]
    fn a_prompt_salt_changes_the_text_not_the_lengths() {
        // What broke: the same --seed sent identical prompts every run, so a repeat
        // run found them in vLLM's prefix cache (0 → 24,576 cached tokens).
        let w = Workload::Synthetic {
            input: LengthDist::Uniform { lo: 50, hi: 90 },
            output: LengthDist::Uniform { lo: 10, hi: 20 },
        };
        let tk = Tokenizer::O200kBase;
        for seq in 0..5 {
            let (a, b) = (
                w.request(seq, 7, 11, tk, None),
                w.request(seq, 7, 12, tk, None),
            );
            assert_ne!(a.spec.prompt, b.spec.prompt);
            assert_eq!(a.input_tokens, b.input_tokens);
            assert_eq!(a.max_tokens(), b.max_tokens());
            let Prompt::Text(t) = &b.spec.prompt else {
                panic!()
            };
            assert_eq!(tk.count(t) as u64, b.input_tokens.unwrap());
            assert_eq!(
                a,
                w.request(seq, 7, 11, tk, None),
                "reproducible for one salt"
            );
        }
    }

    /// Real vLLM: a repeated shared-prefix run hit 86 % of its prompt tokens where
    /// the share predicts ~58 %: its prefixes (and the unshared requests' own)
    /// were the last run's text, not salted by the run.
    #[test]
    fn shared_prefixes_are_shared_within_a_run_and_salted_across_runs() {
        let w = Workload::SharedPrefix {
            count: 1,
            len: 64,
            share: 1.0,
            input: LengthDist::Fixed(8),
            output: LengthDist::Fixed(4),
        };
        let tk = Tokenizer::O200kBase;
        let text = |seq, salt| match w.request(seq, 7, salt, tk, None).spec.prompt {
            Prompt::Text(t) => t,
            Prompt::Messages(_) => unreachable!(),
        };
        // 64 prefix tokens are well over 100 characters.
        let prefix = |t: &str| t.chars().take(100).collect::<String>();
        assert_eq!(
            prefix(&text(0, 11)),
            prefix(&text(1, 11)),
            "one prefix per run"
        );
        assert_ne!(text(0, 11), text(1, 11), "suffixes differ");
        assert_ne!(
            prefix(&text(0, 11)),
            prefix(&text(0, 12)),
            "salted across runs"
        );
        let unshared = Workload::SharedPrefix {
            count: 1,
            len: 64,
            share: 0.0,
            input: LengthDist::Fixed(8),
            output: LengthDist::Fixed(4),
        };
        let own = |salt| unshared.request(0, 7, salt, tk, None).spec.prompt;
        assert_ne!(own(11), own(12), "an unshared prefix is salted too");
    }

    #[test]
    fn azure_default_lengths_vary() {
        let w = Workload::AzureChat;
        let lens: std::collections::BTreeSet<u32> = (0..50)
            .map(|s| w.request(s, 1, 0, Tokenizer::O200kBase, None).max_tokens())
            .collect();
        assert!(lens.len() > 20, "{lens:?}");
        assert_eq!(azure_lengths().len(), 19_366);
    }
}
