//! The workload flags that need more than a value: the one workload source the
//! flags name, vLLM's `--dataset-name` mapped onto tpscope's own sources, `--sessions`/`--conversations` as a session
//! plan, and the body fields that make a fixed output length exact.

use std::sync::Arc;

use tpscope_client::Api;

use super::{DatasetName, Flags, RANDOM_INPUT_LEN, RANDOM_OUTPUT_LEN, SpecError};
use crate::dist::{Column, LengthDist};
use crate::workload::prompts::{read_prompts_jsonl, read_sharegpt};
use crate::workload::sessions::{SessionPlan, SessionSource, read_conversations};
use crate::workload::trace::TraceEntry;
use crate::workload::{Prompt, Workload};

/// `--sessions`, `--turns`, `--think-time` and `--conversations` as a session plan.
pub(super) fn session_plan(a: &Flags) -> Result<Option<Arc<SessionPlan>>, SpecError> {
    if a.sessions == Some(0) {
        return Err(SpecError::ZeroSessions);
    }
    let source = match (&a.conversations, a.sessions) {
        (Some(p), n) => {
            let items = read_conversations(p).map_err(SpecError::Conversations)?;
            if a.turns.is_some() {
                return Err(SpecError::TurnsWithoutSessions);
            }
            SessionSource::Conversations {
                source: p.display().to_string(),
                sessions: n.unwrap_or(items.len() as u64),
                items: Arc::new(items),
            }
        }
        (None, Some(n)) => SessionSource::Synthetic {
            sessions: n,
            turns: a.turns.clone().unwrap_or(LengthDist::Fixed(3)),
        },
        (None, None) => {
            if a.turns.is_some() || a.think_time.is_some() {
                return Err(SpecError::TurnsWithoutSessions);
            }
            return Ok(None);
        }
    };
    Ok(Some(Arc::new(SessionPlan {
        source,
        think_time: a.think_time,
    })))
}

/// vLLM's `--dataset-name`/`--dataset-path` as tpscope's own workload flags.
pub(super) fn dataset_name(a: &mut Flags) -> Result<(), SpecError> {
    let Some(name) = a.dataset_name else {
        return match &a.dataset_path {
            Some(_) => Err(SpecError::DatasetPathWithoutName),
            None => Ok(()),
        };
    };
    if a.dataset.is_some() || a.sharegpt.is_some() || a.trace.is_some() {
        return Err(SpecError::Sources);
    }
    match (name, a.dataset_path.take()) {
        (DatasetName::Random, Some(_)) => Err(SpecError::DatasetPathWithRandom),
        (DatasetName::Random, None) => {
            a.input_tokens
                .get_or_insert(LengthDist::Fixed(RANDOM_INPUT_LEN));
            a.output_tokens
                .get_or_insert(LengthDist::Fixed(RANDOM_OUTPUT_LEN));
            Ok(())
        }
        (DatasetName::ShareGpt, Some(p)) => {
            a.sharegpt = Some(p);
            Ok(())
        }
        (DatasetName::Custom, Some(p)) => {
            a.dataset = Some(p);
            Ok(())
        }
        (_, None) => Err(SpecError::DatasetNameWithoutPath),
    }
}

/// Makes a fixed `--output-tokens N` exact: `ignore_eos: true` (unless
/// `--no-ignore-eos`), and `min_tokens: N` when every request asks for exactly N.
/// Keys the user's `--extra-body` sets are left as given. Returns what is sent.
pub(super) fn exact_lengths(
    body: &mut serde_json::Map<String, serde_json::Value>,
    flag: Option<bool>,
    output: Option<&LengthDist>,
    workload: &Workload,
) -> (bool, Option<u32>) {
    let fixed = match output {
        Some(LengthDist::Fixed(n)) => Some(*n),
        _ => None,
    };
    if flag.unwrap_or(fixed.is_some()) {
        body.entry("ignore_eos")
            .or_insert(serde_json::Value::Bool(true));
        if let Some(n) = fixed.filter(|_| workload.every_max_tokens_given_by_output()) {
            body.entry("min_tokens").or_insert(n.into());
        }
    }
    let ignore_eos = body.get("ignore_eos") == Some(&serde_json::Value::Bool(true));
    let min_tokens = body
        .get("min_tokens")
        .and_then(serde_json::Value::as_u64)
        .and_then(|n| u32::try_from(n).ok());
    (ignore_eos, min_tokens)
}

/// What requests ask for: the one workload source the flags name (a prompts file,
/// ShareGPT, a trace, shared prefixes, synthetic lengths or the Azure pairs), and
/// a trace's entries when it is replayed.
pub(super) fn workload_of(
    a: &Flags,
    api: Api,
    notes: &mut Vec<String>,
) -> Result<(Workload, Option<Vec<TraceEntry>>), SpecError> {
    let sources = [a.dataset.is_some(), a.sharegpt.is_some(), a.trace.is_some()]
        .iter()
        .filter(|b| **b)
        .count();
    if sources > 1 {
        return Err(SpecError::Sources);
    }
    if a.input_tokens.is_some() && sources > 0 {
        return Err(SpecError::InputWithFile);
    }
    // Lengths not given are drawn from the Azure trace's column.
    let input = || {
        a.input_tokens
            .clone()
            .unwrap_or(LengthDist::Azure(Column::Input))
    };
    let output = || {
        a.output_tokens
            .clone()
            .unwrap_or(LengthDist::Azure(Column::Output))
    };
    let mut trace: Option<Vec<TraceEntry>> = None;
    let workload = if let Some(p) = &a.dataset {
        let items = read_prompts_jsonl(p).map_err(SpecError::Dataset)?;
        if api == Api::Completions
            && let Some(i) = items
                .iter()
                .position(|i| matches!(i.prompt, Prompt::Messages(_)))
        {
            notes.push(format!(
                "--dataset {}: prompt {} holds chat messages; with --api completions their contents are joined into one prompt",
                p.display(),
                i + 1
            ));
        }
        Workload::Prompts {
            source: p.display().to_string(),
            items: Arc::new(items),
            output: output(),
        }
    } else if let Some(p) = &a.sharegpt {
        let items = read_sharegpt(p, a.tokenizer).map_err(SpecError::ShareGpt)?;
        Workload::Prompts {
            source: p.display().to_string(),
            items: Arc::new(items),
            output: output(),
        }
    } else if let Some((fmt, p)) = &a.trace {
        if a.output_tokens.is_some() {
            return Err(SpecError::OutputWithTrace);
        }
        let entries = fmt.read(p).map_err(SpecError::Trace)?;
        trace = Some(entries.clone());
        Workload::Trace {
            source: format!("{}:{}", fmt.name(), p.display()),
            entries: Arc::new(entries),
        }
    } else if let Some(len) = a.prefix_len {
        let (count, share) = (a.prefix_count.unwrap_or(1), a.prefix_share.unwrap_or(1.0));
        if count == 0 || !(0.0..=1.0).contains(&share) {
            return Err(SpecError::PrefixRange);
        }
        Workload::SharedPrefix {
            count,
            len,
            share,
            input: input(),
            output: output(),
        }
    } else if a.input_tokens.is_none() && a.output_tokens.is_none() {
        Workload::AzureChat
    } else {
        Workload::Synthetic {
            input: input(),
            output: output(),
        }
    };

    if (a.prefix_count.is_some() || a.prefix_share.is_some()) && a.prefix_len.is_none()
        || a.prefix_len.is_some() && sources > 0
    {
        return Err(SpecError::PrefixFlags);
    }
    Ok((workload, trace))
}
