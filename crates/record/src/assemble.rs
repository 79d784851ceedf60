//! Span assembly (pure): one request's attempts and its queue/slot instants become
//! one [`Span`] exactly as docs/design.md §2 defines it.

use tpscope_model::{Cause, Span, SpanError, Status, Timestamp, TokenSource, Usage};

use tpscope_model::AttemptOutcome;

/// Everything a producer knows about a request when it gives its slot back (or
/// leaves the queue without one).
#[derive(Debug)]
pub struct Finished {
    /// Position in the run (0-based); the span id is `seq + 1`.
    pub seq: u64,
    /// When it became ready (its scheduled arrival, or when it joined the backlog).
    pub queued_at: Timestamp,
    /// When it took a slot; `None` if it never did.
    pub admitted_at: Option<Timestamp>,
    /// When it gave the slot back (or left the queue).
    pub released_at: Timestamp,
    /// Every attempt, in order (`backoff` set on those that were retried).
    pub outcomes: Vec<AttemptOutcome>,
    /// Prompt tokens the workload knows (synthetic prompts).
    pub planned_input_tokens: Option<u64>,
    /// Why the request ended without a final attempt verdict of its own: cancelled
    /// in the queue or while backing off (`None` when the last attempt decides).
    pub cancelled: Option<String>,
    /// The multi-turn session it is a turn of (the span's `session_id`).
    pub session_id: Option<String>,
    /// Its turn in that session (0-based).
    pub turn: Option<u32>,
}

/// Text still to be counted by the tokenizer (off the hot path, on the writer).
#[derive(Debug, Default)]
pub struct ToCount {
    /// Per attempt index: the text received, for attempts without usage.
    pub attempts: Vec<(usize, String)>,
    /// Whether the span's `output_tokens` is the final attempt's count.
    pub span_from_final: bool,
    /// The final attempt's text when `usage` counted it too: counted into the span's
    /// `tokenizer_output_tokens` (the count check).
    pub check: Option<String>,
}

/// Spans whose text is counted beside `usage`: the first 64 of a run, then one in
/// 16, so the check costs the writer little at any rate.
fn checked(seq: u64) -> bool {
    seq < 64 || seq.is_multiple_of(16)
}

impl ToCount {
    /// Whether nothing needs counting.
    pub fn is_empty(&self) -> bool {
        self.attempts.is_empty() && self.check.is_none()
    }
}

/// Builds the span. Token counts: the final attempt's `usage` (source `usage`); else
/// its text, counted later by the tokenizer (source `tokenizer:<name>`, returned in
/// [`ToCount`], `output_tokens` provisionally the chunk count); else its content
/// chunks (source `chunks`); none when it received no tokens.
pub fn assemble(run_id: &str, tokenizer_name: &str, f: Finished) -> (Span, ToCount) {
    let mut to_count = ToCount::default();
    let last = f.outcomes.last();
    let (status, error) = match (&f.cancelled, last) {
        (Some(why), _) => (
            Status::Cancelled,
            Some(SpanError {
                cause: Cause::Cancelled,
                message: why.clone(),
            }),
        ),
        (None, None) => (
            Status::Cancelled,
            Some(SpanError {
                cause: Cause::Cancelled,
                message: "ended before any attempt".into(),
            }),
        ),
        (None, Some(o)) => match o.attempt.cause {
            None => (Status::Ok, None),
            Some(Cause::Cancelled) => (
                Status::Cancelled,
                Some(SpanError {
                    cause: Cause::Cancelled,
                    message: o
                        .error_message
                        .clone()
                        .unwrap_or_else(|| "cancelled".into()),
                }),
            ),
            Some(c) => (
                Status::Error,
                Some(SpanError {
                    cause: c,
                    message: o.error_message.clone().unwrap_or_else(|| c.to_string()),
                }),
            ),
        },
    };
    let mut attempts = Vec::with_capacity(f.outcomes.len());
    let mut retry_causes = Vec::new();
    let n = f.outcomes.len();
    let mut output_tokens = 0;
    let mut token_source = None;
    let mut input_tokens = f.planned_input_tokens;
    let mut first_token_at = None;
    let mut last_token_at = None;
    let mut request_id = None;
    let mut chunks = None;
    let mut finish_reason = None;
    for (i, o) in f.outcomes.into_iter().enumerate() {
        let is_final = i + 1 == n;
        let mut a = o.attempt;
        if !is_final && let Some(c) = a.cause {
            retry_causes.push(c);
        }
        // Usage counts the tokens only when it has the output count.
        let usage = o.usage.and_then(Usage::counted);
        let source = match (usage.and_then(|u| u.completion_tokens), o.text) {
            (Some(n), text) => {
                a.tokens = n;
                if is_final && checked(f.seq) && !text.is_empty() {
                    to_count.check = Some(text);
                }
                TokenSource::Usage
            }
            (None, t) if !t.is_empty() => {
                a.tokens = o.content_chunks;
                to_count.attempts.push((i, t));
                TokenSource::Tokenizer(tokenizer_name.to_string())
            }
            (None, _) => {
                a.tokens = o.content_chunks;
                TokenSource::Chunks
            }
        };
        if is_final {
            output_tokens = a.tokens;
            to_count.span_from_final = matches!(source, TokenSource::Tokenizer(_));
            // A span that received no tokens (a failure before the first one) has no
            // source, so that it does not make its run mixed (docs/design.md §4).
            let received = a.tokens > 0 || a.first_token_at.is_some();
            token_source = received.then_some(source);
            if let Some(p) = usage.and_then(|u| u.prompt_tokens) {
                input_tokens = Some(p);
            }
            // Times of the final attempt; an attempt with a first token has a last one.
            first_token_at = a.first_token_at;
            last_token_at = a
                .first_token_at
                .map(|ft| o.last_token_at.unwrap_or(ft).max(ft));
            request_id = o.response_id;
            chunks = o.chunks;
            finish_reason = o.finish_reason;
        }
        attempts.push(a);
    }
    // Retries are the attempts after the first; each retried attempt's cause is listed.
    let retry_count = retry_causes.len() as u32;
    let span = Span {
        run_id: run_id.to_string(),
        span_id: (f.seq + 1).to_string(),
        request_id,
        status,
        queued_at: f.queued_at,
        admitted_at: f.admitted_at,
        first_token_at,
        last_token_at,
        released_at: f.released_at,
        output_tokens,
        input_tokens,
        token_source,
        retry_count,
        retry_causes,
        attempts,
        error,
        chunks,
        session_id: f.session_id,
        turn: f.turn,
        tokenizer_output_tokens: None,
        finish_reason,
    };
    (span, to_count)
}

/// A finished request's span as every producer writes it: [`assemble()`]d, named
/// `request_id` when the caller gave one, and validated once; a span that breaks an
/// invariant (a caller's impossible count) stays in the log as an error span that
/// says why, so that the log remains readable.
pub fn checked_span(
    run_id: &str,
    tokenizer_name: &str,
    request_id: Option<String>,
    f: Finished,
) -> (Span, ToCount) {
    let (mut s, to_count) = assemble(run_id, tokenizer_name, f);
    if request_id.is_some() {
        s.request_id = request_id;
    }
    if let Err(e) = s.validate() {
        s.status = Status::Error;
        s.error = Some(SpanError {
            cause: Cause::Malformed,
            message: format!("the recorder was given an impossible span: {e}"),
        });
        s.output_tokens = 0;
        s.input_tokens = None;
        s.attempts.iter_mut().for_each(|a| a.tokens = 0);
    }
    (s, to_count)
}

/// Fills in tokenizer counts: each listed attempt's `tokens`, and the span's
/// `output_tokens` when it came from the final attempt's text.
pub fn apply_counts(span: &mut Span, counts: &[(usize, u64)], span_from_final: bool) {
    let last = span.attempts.len().saturating_sub(1);
    for &(i, n) in counts {
        if let Some(a) = span.attempts.get_mut(i) {
            a.tokens = n;
        }
        if span_from_final && i == last {
            span.output_tokens = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn t(ms: i64) -> Timestamp {
        Timestamp::from_unix_nanos(1_800_000_000_000_000_000 + ms * 1_000_000)
    }

    fn outcome(
        start: i64,
        cause: Option<Cause>,
        usage: Option<u64>,
        text: Option<&str>,
    ) -> AttemptOutcome {
        let ok = cause.is_none();
        let mut o = AttemptOutcome::started(t(start));
        let a = &mut o.attempt;
        a.first_byte_at = Some(t(start + 5));
        a.first_token_at = ok.then(|| t(start + 10));
        a.ended_at = t(start + 50);
        a.http_status = Some(if ok { 200 } else { 429 });
        a.cause = cause;
        a.connection_reused = Some(true);
        o.last_token_at = ok.then(|| t(start + 49));
        o.usage = usage.map(|n| Usage::new(n, Some(33)));
        o.content_chunks = 4;
        o.text = text.unwrap_or_default().to_string();
        o.error_message = (!ok).then(|| "too many requests".to_string());
        o.response_id = Some("resp-1".into());
        o
    }

    fn finished(outcomes: Vec<AttemptOutcome>) -> Finished {
        Finished {
            seq: 6,
            queued_at: t(0),
            admitted_at: Some(t(2)),
            released_at: t(200),
            outcomes,
            planned_input_tokens: Some(30),
            cancelled: None,
            session_id: None,
            turn: None,
        }
    }

    #[test]
    fn a_retried_request_that_succeeds_is_ok_with_its_attempts_and_causes() {
        let mut first = outcome(2, Some(Cause::Http429), None, None);
        first.attempt.backoff = Some(Duration::from_millis(20));
        let f = finished(vec![first, outcome(72, None, Some(9), Some("hello there"))]);
        let (span, to_count) = assemble("r1", "o200k_base", f);
        span.validate().unwrap();
        assert_eq!(span.status, Status::Ok);
        assert_eq!(span.span_id, "7");
        assert_eq!(
            (span.retry_count, span.retry_causes.clone()),
            (1, vec![Cause::Http429])
        );
        assert_eq!(span.attempts.len(), 2);
        assert_eq!(span.attempts[0].backoff, Some(Duration::from_millis(20)));
        assert_eq!(
            (span.output_tokens, span.token_source.clone()),
            (9, Some(TokenSource::Usage))
        );
        assert_eq!(
            span.input_tokens,
            Some(33),
            "usage wins over the planned count"
        );
        assert_eq!(
            (span.first_token_at, span.last_token_at),
            (Some(t(82)), Some(t(121)))
        );
        // Usage gave the count: nothing to count for it, but its text is kept for
        // the count check (span 1 is among a run's first 64).
        assert!(to_count.attempts.is_empty());
        assert!(to_count.check.is_some());
    }

    #[test]
    fn without_usage_the_text_is_counted_later_and_else_chunks() {
        let (mut span, tc) = assemble(
            "r",
            "o200k_base",
            finished(vec![outcome(2, None, None, Some("Hello, world!"))]),
        );
        assert_eq!(
            span.token_source,
            Some(TokenSource::Tokenizer("o200k_base".into()))
        );
        assert_eq!(span.output_tokens, 4, "provisionally the chunk count");
        assert_eq!(tc.attempts.len(), 1);
        apply_counts(&mut span, &[(0, 4)], tc.span_from_final);
        assert_eq!((span.output_tokens, span.attempts[0].tokens), (4, 4));
        let (span, tc) = assemble(
            "r",
            "o200k_base",
            finished(vec![outcome(2, None, None, None)]),
        );
        assert_eq!(
            (span.output_tokens, span.token_source),
            (4, Some(TokenSource::Chunks))
        );
        assert!(tc.is_empty());
    }

    #[test]
    fn the_client_measured_finish_reason_reaches_the_span() {
        // What broke: load's conversion of the client's outcome dropped it.
        let mut retried = outcome(2, Some(Cause::Http429), None, None);
        retried.finish_reason = Some("abort".into());
        let mut last = outcome(72, None, Some(9), None);
        last.finish_reason = Some("length".into());
        let (span, _) = assemble("r", "o200k_base", finished(vec![retried, last]));
        assert_eq!(span.finish_reason.as_deref(), Some("length"));
        let line = serde_json::to_string(&span).unwrap();
        assert!(line.ends_with(r#","finish_reason":"length"}"#), "{line}");
        let (span, _) = assemble(
            "r",
            "o200k_base",
            finished(vec![outcome(2, None, None, None)]),
        );
        let line = serde_json::to_string(&span).unwrap();
        assert!(
            !line.contains("finish_reason"),
            "absent when not sent: {line}"
        );
    }

    #[test]
    fn a_failed_request_is_an_error_with_cause_and_message() {
        let f = finished(vec![outcome(2, Some(Cause::Http5xx), None, None)]);
        let (span, _) = assemble("r", "o200k_base", f);
        span.validate().unwrap();
        assert_eq!(span.status, Status::Error);
        let e = span.error.unwrap();
        assert_eq!(
            (e.cause, e.message.as_str()),
            (Cause::Http5xx, "too many requests")
        );
        assert_eq!(span.retry_count, 0);
        assert!(span.first_token_at.is_none());
    }

    #[test]
    fn a_request_cancelled_in_the_queue_has_no_admission() {
        let f = Finished {
            admitted_at: None,
            released_at: t(9),
            cancelled: Some("interrupted before admission".into()),
            ..finished(vec![])
        };
        let (span, _) = assemble("r", "o200k_base", f);
        span.validate().unwrap();
        assert_eq!(span.status, Status::Cancelled);
        assert_eq!(span.error.unwrap().cause, Cause::Cancelled);
        assert!(span.attempts.is_empty() && span.admitted_at.is_none());
    }

    #[test]
    fn a_cancelled_attempt_makes_a_cancelled_span() {
        let mut o = outcome(2, Some(Cause::Cancelled), None, Some("par"));
        o.attempt.first_token_at = Some(t(12));
        o.last_token_at = Some(t(30));
        let (span, _) = assemble("r", "o200k_base", finished(vec![o]));
        span.validate().unwrap();
        assert_eq!(span.status, Status::Cancelled);
        assert_eq!(span.first_token_at, Some(t(12)));
    }

    #[test]
    fn a_span_that_received_no_tokens_has_no_token_source() {
        // What broke: failures before the first token were logged with source `chunks`
        // (cancelled ones `usage`), making every run with failures "mixed".
        let mut failed = outcome(2, Some(Cause::Http5xx), None, None);
        failed.content_chunks = 0;
        let (span, _) = assemble("r", "o200k_base", finished(vec![failed]));
        span.validate().unwrap();
        assert_eq!((span.output_tokens, span.token_source), (0, None));

        let mut cancelled = outcome(2, Some(Cause::Cancelled), Some(0), None);
        cancelled.content_chunks = 0;
        let (span, _) = assemble("r", "o200k_base", finished(vec![cancelled]));
        assert_eq!(span.status, Status::Cancelled);
        assert_eq!(span.token_source, None);

        // A failure after tokens arrived keeps the source of its count.
        let mut cut = outcome(2, Some(Cause::Disconnect), None, None);
        cut.attempt.first_token_at = Some(t(12));
        cut.last_token_at = Some(t(30));
        let (span, _) = assemble("r", "o200k_base", finished(vec![cut]));
        assert_eq!(
            (span.output_tokens, span.token_source),
            (4, Some(TokenSource::Chunks))
        );
    }
}
