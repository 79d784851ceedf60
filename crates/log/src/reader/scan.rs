//! Scanning one line into its fields, loosely typed (a [`Line`]), so that the
//! parsers can name the field whose value is wrong. The analysis only validates
//! the fields it does not use; a scan for whole records keeps their JSON text too
//! ([`Extras`]), so that the analysis pays nothing for them.

use crate::json::{JsonResult, KeyTable, Scanner, key_word};
use crate::scalar::Scalar;

/// One line of a span log, every field optional and loosely typed so that a wrong
/// type is reported with the field's name. Filled by [`scan_line`].
#[derive(Default)]
pub(super) struct Line<'a> {
    /// The whole line (a `server_sample` is read from it with serde).
    pub(super) text: &'a str,
    pub(super) kind: Option<Scalar<'a>>,
    pub(super) run_id: Option<Scalar<'a>>,
    pub(super) span_id: Option<Scalar<'a>>,
    pub(super) status: Option<Scalar<'a>>,
    pub(super) queued_at: Option<Scalar<'a>>,
    pub(super) admitted_at: Option<Scalar<'a>>,
    pub(super) first_token_at: Option<Scalar<'a>>,
    pub(super) last_token_at: Option<Scalar<'a>>,
    pub(super) released_at: Option<Scalar<'a>>,
    pub(super) output_tokens: Option<Scalar<'a>>,
    pub(super) input_tokens: Option<Scalar<'a>>,
    pub(super) token_source: Option<Scalar<'a>>,
    pub(super) retry_count: Option<Scalar<'a>>,
    pub(super) retry_causes: Option<Nested<Vec<Scalar<'a>>>>,
    pub(super) attempts: Option<Nested<Vec<RawAttempt<'a>>>>,
    /// A span's `{cause, message}` object, or an end record's count.
    pub(super) error: Option<Nested<Option<Scalar<'a>>>>,
    pub(super) chunks: Option<&'a str>,
    // sample
    pub(super) at: Option<Scalar<'a>>,
    pub(super) in_flight: Option<Scalar<'a>>,
    pub(super) queue_depth: Option<Scalar<'a>>,
    pub(super) cap: Option<Scalar<'a>>,
    // run
    pub(super) schema: Option<Scalar<'a>>,
    pub(super) tool: Option<Scalar<'a>>,
    pub(super) started_at: Option<Scalar<'a>>,
    pub(super) target: Option<&'a str>,
    pub(super) tokenizer: Option<Scalar<'a>>,
    pub(super) sample_interval_s: Option<Scalar<'a>>,
    pub(super) sample_heartbeat_s: Option<Scalar<'a>>,
    pub(super) load: Option<&'a str>,
    pub(super) labels: Option<&'a str>,
    pub(super) queue_times: Option<Scalar<'a>>,
    // end
    pub(super) ended_at: Option<Scalar<'a>>,
    pub(super) spans: Option<Scalar<'a>>,
    pub(super) ok: Option<Scalar<'a>>,
    pub(super) cancelled: Option<Scalar<'a>>,
    pub(super) samples: Option<Scalar<'a>>,
    pub(super) schedule_late_max_s: Option<Scalar<'a>>,
    pub(super) queued_at_stated: Option<Scalar<'a>>,
    pub(super) cut_at_stop: Option<Scalar<'a>>,
    pub(super) model: Option<Scalar<'a>>,
    /// The first known field given twice.
    pub(super) duplicate: Option<&'static str>,
    /// What only whole records read (filled by [`scan_whole_line`]).
    pub(super) extras: Extras<'a>,
}

/// The fields of a span that only whole records read, as JSON text.
#[derive(Default)]
pub(super) struct Extras<'a> {
    pub(super) request_id: Option<&'a str>,
    /// Multi-turn workloads' `session_id` and `turn` (read by both scans).
    pub(super) session_id: Option<&'a str>,
    pub(super) turn: Option<&'a str>,
    /// The count check's `tokenizer_output_tokens` (read by both scans).
    pub(super) tokenizer_output_tokens: Option<&'a str>,
    /// The final attempt's `finish_reason` (whole records only).
    pub(super) finish_reason: Option<&'a str>,
    /// The `message` of a span's `error` (read by both scans).
    pub(super) error_message: Option<&'a str>,
    /// Per element of `attempts`, in order.
    pub(super) attempts: Vec<AttemptExtras<'a>>,
}

/// The fields of an attempt that only whole records read, as JSON text.
#[derive(Default)]
pub(super) struct AttemptExtras<'a> {
    pub(super) first_byte_at: Option<&'a str>,
    pub(super) first_token_at: Option<&'a str>,
    pub(super) http_status: Option<&'a str>,
    pub(super) connection_reused: Option<&'a str>,
    pub(super) connect_s: Option<&'a str>,
    pub(super) backoff_s: Option<&'a str>,
    pub(super) end_at: Option<&'a str>,
    pub(super) client_lag_s: Option<&'a str>,
    pub(super) reads: Option<&'a str>,
    pub(super) traced_chunks: Option<&'a str>,
    pub(super) inexact_chunks: Option<&'a str>,
    pub(super) first_token_exact: Option<&'a str>,
    pub(super) resends: Option<&'a str>,
}

impl<'a> AttemptExtras<'a> {
    /// Where the text of `key` goes; `None` for the keys [`RawAttempt`] reads.
    fn slot(&mut self, key: AttemptKey) -> Option<&mut Option<&'a str>> {
        match key {
            AttemptKey::started_at
            | AttemptKey::ended_at
            | AttemptKey::cause
            | AttemptKey::tokens => None,
            AttemptKey::first_byte_at => Some(&mut self.first_byte_at),
            AttemptKey::first_token_at => Some(&mut self.first_token_at),
            AttemptKey::http_status => Some(&mut self.http_status),
            AttemptKey::connection_reused => Some(&mut self.connection_reused),
            AttemptKey::connect_time => Some(&mut self.connect_s),
            AttemptKey::backoff => Some(&mut self.backoff_s),
            AttemptKey::end_at => Some(&mut self.end_at),
            AttemptKey::client_lag => Some(&mut self.client_lag_s),
            AttemptKey::reads => Some(&mut self.reads),
            AttemptKey::traced_chunks => Some(&mut self.traced_chunks),
            AttemptKey::inexact_chunks => Some(&mut self.inexact_chunks),
            AttemptKey::first_token_exact => Some(&mut self.first_token_exact),
            AttemptKey::resends => Some(&mut self.resends),
        }
    }
}

/// A field that holds an array or object: its content, or the scalar found instead
/// (`null` included), kept for the message.
pub(super) enum Nested<T> {
    Value(T),
    Scalar(Scalar<'static>),
}

/// One element of `attempts`: the fields the analysis reads.
#[derive(Default)]
pub(super) struct RawAttempt<'a> {
    pub(super) started_at: Option<Scalar<'a>>,
    pub(super) ended_at: Option<Scalar<'a>>,
    pub(super) cause: Option<Scalar<'a>>,
    pub(super) tokens: Option<Scalar<'a>>,
    /// The client facts (docs/design.md §13), by key.
    pub(super) client: ClientKeys<'a>,
    /// Set when the element is not an object.
    pub(super) not_object: Option<Scalar<'static>>,
}

/// The attempt fields the analysis reads for measurement quality.
#[derive(Default)]
pub(super) struct ClientKeys<'a> {
    pub(super) end_at: Option<Scalar<'a>>,
    pub(super) connect_s: Option<Scalar<'a>>,
    pub(super) client_lag_s: Option<Scalar<'a>>,
    pub(super) reads: Option<Scalar<'a>>,
    pub(super) traced_chunks: Option<Scalar<'a>>,
    pub(super) inexact_chunks: Option<Scalar<'a>>,
    pub(super) first_token_exact: Option<Scalar<'a>>,
    pub(super) resends: Option<Scalar<'a>>,
}

impl<'a> ClientKeys<'a> {
    fn slot(&mut self, key: AttemptKey) -> Option<&mut Option<Scalar<'a>>> {
        Some(match key {
            AttemptKey::end_at => &mut self.end_at,
            AttemptKey::connect_time => &mut self.connect_s,
            AttemptKey::client_lag => &mut self.client_lag_s,
            AttemptKey::reads => &mut self.reads,
            AttemptKey::traced_chunks => &mut self.traced_chunks,
            AttemptKey::inexact_chunks => &mut self.inexact_chunks,
            AttemptKey::first_token_exact => &mut self.first_token_exact,
            AttemptKey::resends => &mut self.resends,
            _ => return None,
        })
    }
}

/// A scalar's shape without its borrowed text (for messages about a wrong type).
fn detach(v: Scalar<'_>) -> Scalar<'static> {
    match v {
        Scalar::Str(s) => Scalar::Str(std::borrow::Cow::Owned(s.into_owned())),
        Scalar::U(n) => Scalar::U(n),
        Scalar::I(n) => Scalar::I(n),
        Scalar::F(f) => Scalar::F(f),
        Scalar::Bool(b) => Scalar::Bool(b),
        Scalar::Null => Scalar::Null,
        Scalar::Other(w) => Scalar::Other(w),
    }
}

/// Stores a field's value, remembering the first field given twice.
fn set<T>(slot: &mut Option<T>, v: T, name: &'static str, duplicate: &mut Option<&'static str>) {
    if slot.is_some() && duplicate.is_none() {
        *duplicate = Some(name);
    }
    *slot = Some(v);
}

/// Declares the keys a record may have, in the order tpscope writes them (the
/// scanner predicts keys from it), and an enum to dispatch on (a variant is named
/// after its model field; `as "key"` gives a key written under another name).
macro_rules! keys {
    ($table:ident, $enum:ident: $($key:ident $(as $name:literal)?),* $(,)?) => {
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy)]
        enum $enum { $($key),* }
        impl $enum {
            const ALL: &[$enum] = &[$($enum::$key),*];
        }
        const $table: &KeyTable = &KeyTable {
            names: &[$(tpscope_model::field_key!($key $(as $name)?)),*],
            words: &[$(key_word(tpscope_model::field_key!($key $(as $name)?))),*],
        };
    };
}

/// Declares [`LINE_KEYS`] with the span's keys from the model's one list
/// ([`tpscope_model::span_fields!`]), then those of the other records.
macro_rules! line_keys {
    ([] $($(#[$attr:meta])* $span_key:ident $(as $name:literal)?: $ty:ty,)*) => {
        keys!(LINE_KEYS, Key:
            // every record
            kind,
            // span, in the order tpscope writes it (run_id first: every record has one)
            $($span_key $(as $name)?,)*
            // sample
            at, in_flight, queue_depth, cap,
            // run
            schema, tool, started_at, target, tokenizer, sample_interval_s, sample_heartbeat_s,
            load, labels, queue_times,
            // end
            ended_at, spans, ok, cancelled, samples, schedule_late_max_s,
            queued_at_stated, cut_at_stop, model,
        );
    };
}

tpscope_model::span_fields!(line_keys);

/// Declares [`ATTEMPT_KEYS`] from the model's one list of an attempt's fields
/// ([`tpscope_model::attempt_fields!`]).
macro_rules! attempt_keys {
    ([] $($(#[$attr:meta])* $field:ident $(as $name:literal)?: $ty:ty,)*) => {
        keys!(ATTEMPT_KEYS, AttemptKey: $($field $(as $name)?),*);
    };
}

tpscope_model::attempt_fields!(attempt_keys);

/// Scans one line into a [`Line`]: every field the analysis reads is read
/// (descending into `attempts`, `retry_causes` and a span's `error`), everything
/// else is validated and skipped.
#[inline(always)] // into the analysis reader's one call, as before the split
pub(super) fn scan_line<'a>(text: &'a str, line: &mut Line<'a>) -> JsonResult<()> {
    scan::<false>(text, line)
}

/// Scans one line into a [`Line`] for a whole record: as [`scan_line`], and the
/// [`Extras`] too.
pub(super) fn scan_whole_line<'a>(text: &'a str, line: &mut Line<'a>) -> JsonResult<()> {
    scan::<true>(text, line)
}

#[inline(always)]
fn scan<'a, const WHOLE: bool>(text: &'a str, line: &mut Line<'a>) -> JsonResult<()> {
    let mut sc = Scanner::new(text);
    line.text = text;
    let mut dup = None;
    sc.object_keyed(LINE_KEYS, |index, _, sc| {
        let Some(key) = index.map(|i| Key::ALL[i]) else {
            sc.raw()?;
            return Ok(());
        };
        macro_rules! scalar {
            ($field:ident) => {
                set(&mut line.$field, sc.scalar()?, stringify!($field), &mut dup)
            };
        }
        macro_rules! raw {
            ($field:ident) => {
                set(&mut line.$field, sc.raw()?, stringify!($field), &mut dup)
            };
        }
        match key {
            Key::kind => scalar!(kind),
            Key::run_id => scalar!(run_id),
            Key::span_id => scalar!(span_id),
            // Not checked for duplicates: the analysis never reads it (CSV
            // output does, so both scans keep it).
            Key::request_id => line.extras.request_id = Some(sc.raw()?),
            // Multi-turn fields: both scans keep them (the analysis groups by them).
            Key::session_id => line.extras.session_id = Some(sc.raw()?),
            Key::turn => line.extras.turn = Some(sc.raw()?),
            // Both scans keep it: the analysis adds it to the run's count check.
            Key::tokenizer_output_tokens => line.extras.tokenizer_output_tokens = Some(sc.raw()?),
            // Not checked for duplicates: the analysis never reads it.
            Key::finish_reason => line.extras.finish_reason = Some(sc.raw()?),
            Key::status => scalar!(status),
            Key::queued_at => scalar!(queued_at),
            Key::admitted_at => scalar!(admitted_at),
            Key::first_token_at => scalar!(first_token_at),
            Key::last_token_at => scalar!(last_token_at),
            Key::released_at => scalar!(released_at),
            Key::output_tokens => scalar!(output_tokens),
            Key::input_tokens => scalar!(input_tokens),
            Key::token_source => scalar!(token_source),
            Key::retry_count => scalar!(retry_count),
            Key::retry_causes => {
                let v = if sc.peek() == Some(b'[') {
                    let mut list = Vec::new();
                    sc.array(|sc| sc.scalar().map(|v| list.push(v)))?;
                    Nested::Value(list)
                } else {
                    Nested::Scalar(detach(sc.scalar()?))
                };
                set(&mut line.retry_causes, v, "retry_causes", &mut dup);
            }
            Key::attempts => {
                let v = if sc.peek() == Some(b'[') {
                    let mut list = Vec::with_capacity(2);
                    let extras = &mut line.extras.attempts;
                    if WHOLE {
                        extras.clear();
                    }
                    sc.array(|sc| {
                        list.push(scan_attempt::<WHOLE>(sc, extras)?);
                        Ok(())
                    })?;
                    Nested::Value(list)
                } else {
                    Nested::Scalar(detach(sc.scalar()?))
                };
                set(&mut line.attempts, v, "attempts", &mut dup);
            }
            Key::error => {
                let v = if sc.peek() == Some(b'{') {
                    let mut cause = None;
                    let message = &mut line.extras.error_message;
                    sc.object(|key, sc| {
                        if key == "cause" {
                            cause = Some(sc.scalar()?);
                        } else {
                            let v = sc.raw()?;
                            // Kept by the analysis too: the report lists the
                            // most frequent messages per cause.
                            if key == "message" {
                                *message = Some(v);
                            }
                        }
                        Ok(())
                    })?;
                    Nested::Value(cause)
                } else {
                    Nested::Scalar(detach(sc.scalar()?))
                };
                set(&mut line.error, v, "error", &mut dup);
            }
            Key::chunks => raw!(chunks),
            Key::at => scalar!(at),
            Key::in_flight => scalar!(in_flight),
            Key::queue_depth => scalar!(queue_depth),
            Key::cap => scalar!(cap),
            Key::schema => scalar!(schema),
            Key::tool => scalar!(tool),
            Key::started_at => scalar!(started_at),
            Key::target => raw!(target),
            Key::tokenizer => scalar!(tokenizer),
            Key::sample_interval_s => scalar!(sample_interval_s),
            Key::sample_heartbeat_s => scalar!(sample_heartbeat_s),
            Key::load => raw!(load),
            Key::labels => raw!(labels),
            Key::queue_times => scalar!(queue_times),
            Key::ended_at => scalar!(ended_at),
            Key::spans => scalar!(spans),
            Key::ok => scalar!(ok),
            Key::cancelled => scalar!(cancelled),
            Key::samples => scalar!(samples),
            Key::schedule_late_max_s => scalar!(schedule_late_max_s),
            Key::queued_at_stated => scalar!(queued_at_stated),
            Key::cut_at_stop => scalar!(cut_at_stop),
            Key::model => scalar!(model),
        }
        Ok(())
    })?;
    sc.end()?;
    line.duplicate = dup;
    Ok(())
}

/// Scans one element of `attempts`: the fields the analysis reads, or what was
/// found instead of an object; for whole records, its [`AttemptExtras`] too (one
/// per element, to stay aligned).
fn scan_attempt<'a, const WHOLE: bool>(
    sc: &mut Scanner<'a>,
    extras: &mut Vec<AttemptExtras<'a>>,
) -> JsonResult<RawAttempt<'a>> {
    let mut a = RawAttempt::default();
    let mut more = AttemptExtras::default();
    if sc.peek() != Some(b'{') {
        a.not_object = Some(detach(sc.scalar()?));
    } else {
        sc.object_keyed(ATTEMPT_KEYS, |index, _, sc| {
            match index.map(|i| AttemptKey::ALL[i]) {
                Some(AttemptKey::started_at) => a.started_at = Some(sc.scalar()?),
                Some(AttemptKey::ended_at) => a.ended_at = Some(sc.scalar()?),
                Some(AttemptKey::cause) => a.cause = Some(sc.scalar()?),
                Some(AttemptKey::tokens) => a.tokens = Some(sc.scalar()?),
                Some(key) if !WHOLE && a.client.slot(key).is_some() => {
                    if let Some(slot) = a.client.slot(key) {
                        *slot = Some(sc.scalar()?);
                    }
                }
                Some(key) if WHOLE => {
                    let v = sc.raw()?;
                    if let Some(slot) = a.client.slot(key) {
                        *slot = Some(Scanner::new(v).scalar()?);
                    }
                    if let Some(slot) = more.slot(key) {
                        *slot = Some(v);
                    }
                }
                _ => {
                    sc.raw()?;
                }
            }
            Ok(())
        })?;
    }
    if WHOLE {
        extras.push(more);
    }
    Ok(a)
}
