//! Whether two runs are comparable (docs/design.md §4): the token source kinds,
//! tokenizers and model each run states.

use tpscope_model::TokenSource;

use super::Mismatch;
use crate::input::RunInput;

/// The token source kinds, tokenizer names and model a run states.
struct Identity {
    kinds: Vec<&'static str>,
    sources: Vec<String>,
    tokenizers: Vec<String>,
    model: Option<String>,
}

fn identity(input: &RunInput) -> Identity {
    let sources = input.effective_token_sources();
    let mut kinds: Vec<&'static str> = sources
        .iter()
        .map(|(s, _)| match s {
            TokenSource::Usage => "usage",
            TokenSource::Tokenizer(_) => "tokenizer",
            TokenSource::Chunks => "chunks",
        })
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let run = input.run.as_ref();
    let mut tokenizers: Vec<String> = sources
        .iter()
        .filter_map(|(s, _)| match s {
            TokenSource::Tokenizer(n) => Some(n.clone()),
            _ => None,
        })
        .chain(run.and_then(|r| r.tokenizer.clone()))
        .collect();
    tokenizers.sort_unstable();
    tokenizers.dedup();
    Identity {
        kinds,
        sources: sources
            .iter()
            .map(|(s, n)| format!("{s} ({n} spans)"))
            .collect(),
        tokenizers,
        model: run.and_then(|r| r.target.model.clone()),
    }
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none stated".to_string()
    } else {
        v.join(", ")
    }
}

/// What makes two runs incomparable (docs/design.md §4): different token source kinds,
/// different tokenizers (named by a `tokenizer:` source or the run record), or
/// different models. A property that one run does not state is not a mismatch.
pub fn check_mismatch(baseline: &RunInput, candidate: &RunInput) -> Vec<Mismatch> {
    let (b, c) = (identity(baseline), identity(candidate));
    let mut out = Vec::new();
    if !b.kinds.is_empty() && !c.kinds.is_empty() && b.kinds != c.kinds {
        out.push(Mismatch {
            what: "token source",
            baseline: or_none(&b.sources),
            candidate: or_none(&c.sources),
        });
    }
    if !b.tokenizers.is_empty() && !c.tokenizers.is_empty() && b.tokenizers != c.tokenizers {
        out.push(Mismatch {
            what: "tokenizer",
            baseline: or_none(&b.tokenizers),
            candidate: or_none(&c.tokenizers),
        });
    }
    if let (Some(bm), Some(cm)) = (&b.model, &c.model)
        && bm != cm
    {
        out.push(Mismatch {
            what: "model",
            baseline: bm.clone(),
            candidate: cm.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpscope_model::RunRecord;

    fn input(load: serde_json::Value, tokenizer: &str) -> RunInput {
        let run: RunRecord = serde_json::from_value(serde_json::json!({
            "kind": "run", "run_id": "r", "schema": tpscope_model::SCHEMA,
            "started_at": "2026-01-01T00:00:00Z", "target": {"model": "m"},
            "tokenizer": tokenizer, "load": load,
        }))
        .unwrap();
        RunInput {
            run: Some(run),
            ..RunInput::default()
        }
    }

    #[test]
    fn differing_session_settings_are_no_mismatch_like_every_other_load_setting() {
        let single = input(serde_json::json!({"concurrency": 4}), "o200k_base");
        let sessions = input(
            serde_json::json!({"concurrency": 8, "sessions": {"count": 6, "turns": "3", "think_time": null}}),
            "o200k_base",
        );
        assert!(check_mismatch(&single, &sessions).is_empty());
        let other = input(serde_json::json!({"concurrency": 4}), "cl100k_base");
        assert_eq!(check_mismatch(&single, &other)[0].what, "tokenizer");
    }
}
