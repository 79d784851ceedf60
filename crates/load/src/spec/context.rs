//! Fitting a workload to the model's context (`max_model_len`, which vLLM lists
//! per model in `/v1/models`): default lengths are shortened to fit, with a note;
//! lengths the user gave that cannot fit are an error naming the flags. Without
//! this, a 4k-context vLLM answered 31 of 320 default requests with HTTP 400.

use crate::azure::azure_lengths;
use crate::dist::{Column, LengthDist};
use crate::workload::Workload;

use super::{BenchSpec, SpecError};

/// What fitting the workload to a context decided.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextFit {
    /// The most tokens (prompt + output) a request may ask for; `None` when every
    /// request fits as it is.
    pub limit: Option<u32>,
    /// What the user is told, when requests are shortened.
    pub note: Option<String>,
}

/// The tokens of a context of `max_model_len` that requests may fill: the rest is
/// kept free for the chat template and for the model's tokenizer counting the
/// prompt differently from the one that wrote it. A tenth is kept (at least 64
/// tokens); with a stand-in tokenizer (the default `o200k_base`, `own` false) only
/// two thirds of the rest are filled, since the model's tokenizer may count the
/// same prompt half as long again: tpscope's prompts of 1,000 and 3,000
/// `o200k_base` tokens are 1,416–1,451 and 4,281–4,310 tokens to the tiny Llama's
/// tokenizer (×1.42–1.45), and against real vLLM 2 of 40 default requests, fitted
/// with only a tenth kept, failed with HTTP 400.
pub fn usable(max_model_len: u32, own: bool) -> u32 {
    let rest = max_model_len
        .saturating_sub((max_model_len / 10).max(64))
        .max(2);
    if own { rest } else { (rest / 3 * 2).max(2) }
}

/// A request's lengths shortened to fit `limit`: the output first to at most half
/// of it, then the prompt to the rest (each at least 1 token).
pub fn fit(n_in: u32, n_out: u32, limit: Option<u32>) -> (u32, u32) {
    match limit {
        Some(l) if u64::from(n_in) + u64::from(n_out) > u64::from(l) => {
            let out = n_out.min(l / 2).max(1);
            (n_in.min(l.saturating_sub(out)).max(1), out)
        }
        _ => (n_in, n_out),
    }
}

/// The least and the most a distribution gives (`None`: no bound).
fn bounds(d: &LengthDist) -> (u32, Option<u32>) {
    match d {
        LengthDist::Fixed(n) => (*n, Some(*n)),
        LengthDist::Uniform { lo, hi } => (*lo, Some(*hi)),
        LengthDist::Azure(col) => {
            let pick = |p: &(u32, u32)| match col {
                Column::Input => p.0,
                Column::Output => p.1,
            };
            let t = azure_lengths();
            (
                t.iter().map(pick).min().unwrap_or(1),
                t.iter().map(pick).max(),
            )
        }
        _ => (1, None),
    }
}

impl BenchSpec {
    /// Fits the workload to a model context of `max_model_len` tokens.
    pub fn context_fit(&self, max_model_len: u32) -> Result<ContextFit, SpecError> {
        // Lengths the user gave are kept as asked (a tenth of room); only the
        // default lengths are fitted with a stand-in tokenizer's wider margin.
        let own =
            matches!(self.flags.tokenizer, tpscope_tokens::Tokenizer::Hf(_)) || self.lengths_given;
        let limit = usable(max_model_len, own);
        let (least, most) = match &*self.workload {
            Workload::Synthetic { input, output } => {
                let (i, o) = (bounds(input), bounds(output));
                (
                    u64::from(i.0) + u64::from(o.0),
                    i.1.zip(o.1).map(|(a, b)| u64::from(a) + u64::from(b)),
                )
            }
            Workload::SharedPrefix {
                len, input, output, ..
            } => {
                let (i, o) = (bounds(input), bounds(output));
                let fixed = u64::from(*len);
                (
                    fixed + u64::from(i.0) + u64::from(o.0),
                    i.1.zip(o.1)
                        .map(|(a, b)| fixed + u64::from(a) + u64::from(b)),
                )
            }
            Workload::AzureChat => {
                let t = azure_lengths();
                let m = t.iter().map(|(a, b)| u64::from(*a) + u64::from(*b));
                (m.clone().min().unwrap_or(2), m.max())
            }
            Workload::Trace { entries, .. } => {
                let m = entries
                    .iter()
                    .map(|e| u64::from(e.input) + u64::from(e.output));
                (m.clone().min().unwrap_or(2), m.max())
            }
            // Prompt files: their lengths are the server's to judge.
            Workload::Prompts { .. } => return Ok(ContextFit::default()),
        };
        if most.is_some_and(|m| m <= u64::from(limit)) {
            return Ok(ContextFit::default());
        }
        if self.lengths_given && least > u64::from(limit) {
            return Err(SpecError::ContextTooSmall {
                asked: least,
                max_model_len,
                limit,
            });
        }
        let what = if self.lengths_given {
            "--input-tokens/--output-tokens"
        } else {
            "the default lengths"
        };
        Ok(ContextFit {
            limit: Some(limit),
            note: Some(format!(
                "the model's context is {max_model_len} tokens (max_model_len): requests of \
                 {what} longer than {limit} tokens (prompt + output) are shortened to fit, \
                 leaving room for the chat template{}",
                if own {
                    ""
                } else {
                    " and for the model's tokenizer counting more tokens than o200k_base \
                     (--tokenizer hf:PATH with the model's tokenizer.json fits more closely)"
                }
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortened_requests_fit_and_keep_what_fits() {
        assert_eq!(fit(100, 50, Some(1000)), (100, 50));
        assert_eq!(fit(5000, 300, Some(3600)), (3300, 300));
        assert_eq!(fit(5000, 3000, Some(3600)), (1800, 1800));
        assert_eq!(fit(5000, 3000, None), (5000, 3000));
        assert_eq!(usable(4096, true), 3687);
        assert_eq!(usable(100, true), 36);
    }

    #[test]
    fn a_stand_in_tokenizer_leaves_room_for_a_model_tokenizer_that_counts_more() {
        // What broke: prompts o200k_base counted at about 3,000 tokens were more
        // than the tiny Llama's 4,096-token context in its own tokens (HTTP 400):
        // it counts them ×1.42–1.45.
        let limit = usable(4096, false);
        assert_eq!(limit, 2458);
        assert!(f64::from(limit) * 1.45 < 4096.0 - 64.0);
        assert_eq!(usable(100, false), 24);
    }
}
