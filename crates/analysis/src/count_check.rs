//! The count check (pure): on spans that carry both the server's `usage` count
//! (`output_tokens`, source `usage`) and the run tokenizer's count of the same text
//! (`tokenizer_output_tokens`), how far they agree — the "tokenizer/model
//! mismatch" failure mode made visible. A warning above [`WARN_ABOVE`]. Readers
//! add each span to a run's [`CountTally`] as they meet it (the analysis keeps no
//! per-span count); [`count_check`] does the same over whole spans.

use serde::Serialize;
use tpscope_model::{Span, TokenSource};

/// The disagreement above which the report warns (2 %).
pub const WARN_ABOVE: f64 = 0.02;

/// The agreement of two counts of the same replies.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CountCheck {
    /// Spans counted both ways.
    pub spans: u64,
    /// Σ output tokens by `usage`.
    pub usage_tokens: u64,
    /// Σ output tokens by the tokenizer.
    pub tokenizer_tokens: u64,
    /// (tokenizer − usage) / usage; `None` when usage counted nothing.
    pub difference: Option<f64>,
    /// Spans whose two counts differ.
    pub spans_differing: u64,
    /// The warning, with likely causes, when the difference is above 2 %.
    pub warning: Option<String>,
}

/// The check's running sums over one run, added span by span as a reader meets
/// them: a few counters per run, nothing per span (the span facts stay small).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CountTally {
    /// Spans counted both ways.
    pub spans: u64,
    /// Σ output tokens by `usage` of those spans.
    pub usage_tokens: u64,
    /// Σ output tokens by the tokenizer of those spans.
    pub tokenizer_tokens: u64,
    /// Spans whose two counts differ.
    pub spans_differing: u64,
}

impl CountTally {
    /// Adds one span: its `output_tokens`, the token source it names (`None`: the
    /// run's default) and its `tokenizer_output_tokens`. Only a span counted by the
    /// tokenizer whose own count is `usage` (or names none) takes part.
    pub fn add(
        &mut self,
        output_tokens: u64,
        source: Option<&TokenSource>,
        tokenizer_tokens: Option<u64>,
    ) {
        let Some(counted) = tokenizer_tokens else {
            return;
        };
        if !matches!(source, None | Some(TokenSource::Usage)) {
            return;
        }
        // Saturating: the counts are the log's, and a log may say anything.
        self.spans += 1;
        self.usage_tokens = self.usage_tokens.saturating_add(output_tokens);
        self.tokenizer_tokens = self.tokenizer_tokens.saturating_add(counted);
        self.spans_differing += u64::from(counted != output_tokens);
    }

    /// The check, named after the run's `tokenizer` in its warning; `None` when
    /// no span was counted both ways. (No context: see [`CountTally::finish_in`].)
    pub fn finish(&self, tokenizer: Option<&str>) -> Option<CountCheck> {
        self.finish_in(tokenizer, CheckContext::default())
    }

    /// The check, its warning leading with the cause the run's `context` points at.
    pub fn finish_in(&self, tokenizer: Option<&str>, context: CheckContext) -> Option<CountCheck> {
        let CountTally {
            spans: n,
            usage_tokens: u,
            tokenizer_tokens: t,
            spans_differing: differ,
        } = *self;
        if n == 0 {
            return None;
        }
        let difference = (u > 0).then(|| (t as f64 - u as f64) / u as f64);
        let warning = difference
            .filter(|d| d.abs() > WARN_ABOVE)
            .map(|d| warning(d, n, tokenizer, context));
        Some(CountCheck {
            spans: n,
            usage_tokens: u,
            tokenizer_tokens: t,
            difference,
            spans_differing: differ,
            warning,
        })
    }
}

/// What the run says about a disagreement's likely cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckContext {
    /// The tokenizer is known to be the model's (see [`models_tokenizer`]).
    pub models_tokenizer: bool,
    /// The run has no `end` record: it was cut off (killed) or is still running.
    pub cut: bool,
}

/// The context of a run's check: whether its tokenizer is the model's, and whether
/// it was cut off (a run record without an end record).
pub fn context_of(input: &crate::RunInput) -> CheckContext {
    let run = input.run.as_ref();
    CheckContext {
        models_tokenizer: run.is_some_and(|r| {
            r.tokenizer.as_deref().is_some_and(|t| {
                models_tokenizer(
                    t,
                    r.target.model.as_deref(),
                    r.labels.get(MODEL_ROOT_LABEL).map(String::as_str),
                )
            })
        }),
        cut: run.is_some() && input.end.is_none(),
    }
}

/// The run label holding the path the server says it loaded the model from
/// (vLLM's `root` in `/v1/models`), which `bench` records when the server names it.
pub const MODEL_ROOT_LABEL: &str = "model_root";

/// Whether a Hugging Face tokenizer (`hf:<directory>@<hash>`) was loaded from the
/// model's own directory: the directory's name is the last part of the model the
/// run names, or of the path the server says it loaded (`model_root`, vLLM's
/// `root` in its model list). The built-in tokenizers are nobody's own.
pub fn models_tokenizer(tokenizer: &str, model: Option<&str>, model_root: Option<&str>) -> bool {
    let Some(dir) = tokenizer
        .strip_prefix("hf:")
        .and_then(|t| t.rsplit_once('@'))
        .map(|(d, _)| d)
        .filter(|d| !d.is_empty())
    else {
        return false;
    };
    let last = |p: &str| {
        p.trim_end_matches(['/', '\\'])
            .rsplit(['/', '\\'])
            .next()
            .map(str::to_owned)
    };
    [model_root, model]
        .into_iter()
        .flatten()
        .filter_map(last)
        .any(|m| m.eq_ignore_ascii_case(dir))
}

fn warning(d: f64, n: u64, tokenizer: Option<&str>, context: CheckContext) -> String {
    let name = tokenizer.unwrap_or("the run's tokenizer");
    let pct = d * 100.0;
    let head = format!(
        "the tokenizer's counts differ from the server's usage by {pct:+.1} % over {n} spans"
    );
    if context.models_tokenizer && !context.cut {
        // The tokenizer is the model's: suggesting another one misleads.
        let cause = if d > 0.0 {
            "the replies re-encode to more tokens than the server generated (byte-level or \
             non-canonical tokens: a small, random or undertrained model emits them)"
        } else {
            "the server counts tokens the text does not show (an end-of-turn or other \
             special token, reasoning that was not streamed, chat-template tokens)"
        };
        return format!(
            "{head}: {cause}; the tokenizer is the model's ({name}), so the server's usage \
             counts are the ones to trust"
        );
    }
    let cause = if d > 0.0 {
        "the tokenizer splits the text into more tokens than the model does: with the \
         model's own tokenizer, its replies are token sequences that re-encode longer (a \
         small, random or undertrained model emits such sequences; the tiny random Llama \
         served by vLLM re-encodes +10.6 % longer)"
    } else {
        "the server counts tokens the text does not show (an end-of-turn or other \
         special token, reasoning that was not streamed), or the model's tokenizer \
         merges more"
    };
    let likely = format!(
        "likely a tokenizer that is not the model's ({name}; give --tokenizer hf:PATH to \
         the model's tokenizer.json), chat-template tokens, or a server that counts \
         differently; {cause}"
    );
    if context.cut {
        format!(
            "{head}: the run has no end record (it was cut off, e.g. killed, or is still \
             running), so the last spans' text or usage may be incomplete; if it ended \
             normally: {likely}"
        )
    } else {
        format!("{head}: {likely}")
    }
}

/// The check over `spans`, or `None` when no span was counted both ways.
pub fn count_check<'a>(
    spans: impl IntoIterator<Item = &'a Span>,
    tokenizer: Option<&str>,
) -> Option<CountCheck> {
    let mut tally = CountTally::default();
    for s in spans {
        tally.add(
            s.output_tokens,
            s.token_source.as_ref(),
            s.tokenizer_output_tokens,
        );
    }
    tally.finish(tokenizer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tpscope_model::{Status, Timestamp};

    fn span(usage: u64, counted: Option<u64>) -> Span {
        let t = Timestamp::from_unix_nanos(1_767_225_600_000_000_000);
        Span {
            run_id: "r".into(),
            span_id: "1".into(),
            request_id: None,
            status: Status::Ok,
            queued_at: t,
            admitted_at: Some(t),
            first_token_at: Some(t),
            last_token_at: Some(t),
            released_at: t,
            output_tokens: usage,
            input_tokens: None,
            token_source: Some(TokenSource::Usage),
            retry_count: 0,
            retry_causes: vec![],
            attempts: vec![],
            error: None,
            chunks: None,
            session_id: None,
            turn: None,
            tokenizer_output_tokens: counted,
            finish_reason: None,
        }
    }

    #[test]
    fn agreement_within_two_percent_has_no_warning() {
        let spans = [span(100, Some(100)), span(100, Some(101)), span(50, None)];
        let c = count_check(&spans, Some("o200k_base")).unwrap();
        assert_eq!((c.spans, c.usage_tokens, c.tokenizer_tokens), (2, 200, 201));
        assert_eq!(c.spans_differing, 1);
        assert!((c.difference.unwrap() - 0.005).abs() < 1e-12);
        assert!(c.warning.is_none());
        assert!(count_check(&[span(5, None)], None).is_none());
    }

    #[test]
    fn a_mismatch_above_two_percent_warns_with_likely_causes() {
        let spans = [span(100, Some(120))];
        let w = count_check(&spans, Some("o200k_base"))
            .unwrap()
            .warning
            .unwrap();
        assert!(w.contains("+20.0 %"), "{w}");
        assert!(w.contains("not the model's (o200k_base"), "{w}");
        assert!(w.contains("chat-template tokens"), "{w}");
        let under = count_check(&[span(100, Some(90))], None)
            .unwrap()
            .warning
            .unwrap();
        assert!(under.contains("special token"), "{under}");
    }

    /// Real vLLM serving a random tiny Llama: the model's own tokenizer re-encoded
    /// its replies 10.6 % longer, and the warning blamed only the tokenizer choice.
    #[test]
    fn own_tokenizer_counting_more_names_replies_that_re_encode_longer() {
        let w = count_check(&[span(32, Some(35))], Some("hf:tiny-llama"))
            .unwrap()
            .warning
            .unwrap();
        assert!(w.contains("re-encode longer"), "{w}");
    }

    /// Real vLLM with `--tokenizer hf:` at the model's own tokenizer.json: every run
    /// warned "likely a tokenizer that is not the model's" although it was.
    #[test]
    fn the_models_own_tokenizer_was_blamed_as_not_the_models() {
        assert!(models_tokenizer(
            "hf:hf@6e58f0b2",
            Some("tiny-llama"),
            Some("/home/u/realserver/model/hf")
        ));
        assert!(models_tokenizer(
            "hf:tiny-llama@00000001",
            Some("org/Tiny-Llama"),
            None
        ));
        assert!(!models_tokenizer(
            "hf:other@00000001",
            Some("tiny-llama"),
            Some("/m/hf")
        ));
        assert!(!models_tokenizer("o200k_base", Some("o200k_base"), None));
        let ctx = CheckContext {
            models_tokenizer: true,
            cut: false,
        };
        let tally = |u, t| {
            let mut x = CountTally::default();
            x.add(u, None, Some(t));
            x
        };
        let w = tally(100, 110)
            .finish_in(Some("hf:hf@6e58f0b2"), ctx)
            .unwrap()
            .warning
            .unwrap();
        assert!(
            w.contains(
                "+10.0 % over 1 spans: the replies re-encode to more tokens than the \
                 server generated (byte-level or non-canonical tokens"
            ),
            "{w}"
        );
        assert!(w.contains("usage counts are the ones to trust"), "{w}");
        assert!(
            !w.contains("not the model's") && !w.contains("--tokenizer"),
            "{w}"
        );
        let under = tally(100, 90)
            .finish_in(Some("hf:hf@6e58f0b2"), ctx)
            .unwrap()
            .warning
            .unwrap();
        assert!(
            under.contains(": the server counts tokens the text does not show"),
            "{under}"
        );
        assert!(!under.contains("--tokenizer"), "{under}");
    }

    /// A kill -9'd run's report blamed the tokenizer for a mismatch the cut caused.
    #[test]
    fn a_cut_run_blamed_the_tokenizer_for_the_cut() {
        let mut x = CountTally::default();
        x.add(100, None, Some(80));
        for models_tokenizer in [false, true] {
            let ctx = CheckContext {
                models_tokenizer,
                cut: true,
            };
            let w = x.finish_in(Some("hf:hf@1"), ctx).unwrap().warning.unwrap();
            assert!(
                w.contains("-20.0 % over 1 spans: the run has no end record (it was cut off"),
                "{w}"
            );
        }
        // A run that ended names the tokenizer first, as before.
        let w = x.finish(Some("hf:x@1")).unwrap().warning.unwrap();
        assert!(
            w.contains("spans: likely a tokenizer that is not the model's"),
            "{w}"
        );
    }

    #[test]
    fn spans_counted_by_chunks_or_a_tokenizer_are_left_out_and_sums_saturate() {
        let mut tally = CountTally::default();
        tally.add(10, Some(&TokenSource::Chunks), Some(12));
        tally.add(
            10,
            Some(&TokenSource::Tokenizer("o200k_base".into())),
            Some(12),
        );
        assert_eq!(tally.finish(None), None);
        tally.add(10, None, Some(10));
        tally.add(u64::MAX, Some(&TokenSource::Usage), Some(u64::MAX));
        assert_eq!(
            tally,
            CountTally {
                spans: 2,
                usage_tokens: u64::MAX,
                tokenizer_tokens: u64::MAX,
                spans_differing: 0,
            }
        );
        assert_eq!(tally.finish(None).unwrap().difference, Some(0.0));
    }

    /// The report used to carry no check: it was computed apart, from the log
    /// files read a second time, for text output only.
    #[test]
    fn the_run_report_carries_the_check_and_its_warning() {
        let mut run = crate::test_support::capped_run(4).run.unwrap();
        run.tokenizer = Some("cl100k_base".into());
        let spans = [span(100, Some(120)), span(100, None)];
        let mut input = crate::RunInput::from_records(run.clone(), &spans, &[]);
        // A run that ended (one cut off leads with the cut).
        input.end = Some(tpscope_model::EndRecord {
            run_id: run.run_id.clone(),
            ended_at: run.started_at,
            spans: 2,
            status: tpscope_model::StatusCounts {
                ok: 2,
                ..Default::default()
            },
            samples: 0,
            schedule_late_max: None,
            queued_at_stated: None,
            cut_at_stop: None,
            model: None,
        });
        assert_eq!(input.count_tally.spans, 1);
        let report = crate::analyze(&input, &crate::Options::default());
        let c = report.count_check.as_ref().unwrap();
        assert_eq!(Some(c), count_check(&spans, Some("cl100k_base")).as_ref());
        let w = c.warning.as_ref().unwrap();
        assert!(w.contains("(cl100k_base;"), "{w}");
        assert!(report.warnings.contains(w), "{:?}", report.warnings);
        let none = crate::RunInput::from_records(run, &[span(100, None)], &[]);
        let report = crate::analyze(&none, &crate::Options::default());
        assert_eq!(report.count_check, None);
        assert!(
            !report
                .warnings
                .iter()
                .any(|w| w.contains("tokenizer's counts"))
        );
    }
}
