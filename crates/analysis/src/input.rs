//! The analysis input: one run's metadata with compact per-span facts and samples.
//! Readers and library callers build it; every metric is computed from it.

use std::num::{NonZeroU32, NonZeroU64};
use std::time::Duration;

use tpscope_model::{
    Cause, ChunkMark, EndRecord, Lifecycle, RunRecord, SampleRecord, ServerSampleRecord, Span,
    Status, Timestamp, TokenSource,
};

use crate::count_check::CountTally;
use crate::errors::ErrorMessages;
use crate::session_ids::SessionIds;

/// What the analysis needs of one span, without ids, text or attempt details
/// (136 bytes, held by a test, so a million spans fit in memory comfortably;
/// how exactly the client stamped it is kept apart, [`RunInput::client_stamps`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SpanFacts {
    /// How the request ended.
    pub status: Status,
    /// The failure cause of a non-ok span.
    pub error_cause: Option<Cause>,
    /// Entered the admission queue.
    pub queued_at: Timestamp,
    /// Took a slot (`None`: never admitted).
    pub admitted_at: Option<Timestamp>,
    /// First output chunk.
    pub first_token_at: Option<Timestamp>,
    /// Last output chunk.
    pub last_token_at: Option<Timestamp>,
    /// Gave the slot back (or left the queue).
    pub released_at: Timestamp,
    /// Output tokens of the final attempt.
    pub output_tokens: u64,
    /// Prompt tokens, when known.
    pub input_tokens: Option<u64>,
    /// Attempts after the first.
    pub retry_count: u32,
    /// The cause of each retried attempt (boxed: 8 bytes less per span than a Vec).
    pub retry_causes: Box<[Cause]>,
    /// Tokens received by attempts that did not end ok.
    pub wasted_tokens: u64,
    /// Per-chunk arrivals, when recorded.
    pub chunks: Option<Box<[ChunkMark]>>,
    /// The end marker's arrival and the connect time (from its attempts),
    /// which metrics and the ledger read per span.
    pub client: ClientTimes,
    /// Its place in a multi-turn session (`session_id` and `turn` both given).
    pub session: Option<SessionTurn>,
}

/// How well the client measured one span, from its attempts' `end_at`,
/// `client_lag_s`, `reads`, `traced_chunks`, `inexact_chunks`,
/// `first_token_exact`, `resends` and `connect_s` (docs/design.md §13); empty for spans
/// whose producer did not say. Readers gather it attempt by attempt; a run
/// keeps its [`ClientTimes`] in the span's facts and its [`ClientStamps`] apart
/// ([`RunInput::push_measured_span`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientFacts {
    /// What the metrics and the ledger read per span.
    pub times: ClientTimes,
    /// What only measurement quality reads.
    pub stamps: ClientStamps,
}

impl ClientFacts {
    /// Adds the next attempt's facts (`a`, one attempt's worth): the last
    /// attempt's end and first token decide, counts add up, lags and connect
    /// times take the worst.
    pub fn add(&mut self, a: ClientFacts) {
        let (t, s) = (&mut self.times, &mut self.stamps);
        t.end_at = a.times.end_at;
        t.connect = t.connect.max(a.times.connect);
        if a.stamps.first_token_exact.is_some() {
            s.first_token_exact = a.stamps.first_token_exact;
        }
        s.traced_chunks = s.traced_chunks.saturating_add(a.stamps.traced_chunks);
        s.inexact_chunks = s.inexact_chunks.saturating_add(a.stamps.inexact_chunks);
        s.reads = s.reads.saturating_add(a.stamps.reads);
        s.lag = s.lag.max(a.stamps.lag);
        s.resends = s.resends.saturating_add(a.stamps.resends);
    }

    /// The facts of a span's attempts, in order.
    pub fn of_attempts(attempts: &[tpscope_model::Attempt]) -> ClientFacts {
        attempts.iter().fold(ClientFacts::default(), |mut c, a| {
            c.add(ClientFacts::of_attempt(a));
            c
        })
    }

    /// One attempt's facts.
    pub fn of_attempt(a: &tpscope_model::Attempt) -> ClientFacts {
        ClientFacts {
            times: ClientTimes {
                end_at: a.end_at,
                connect: a.connect_time.map(Nanos::from),
            },
            stamps: ClientStamps {
                first_token_exact: a.first_token_exact,
                traced_chunks: saturate(a.traced_chunks.unwrap_or(0)),
                inexact_chunks: saturate(a.inexact_chunks.unwrap_or(0)),
                reads: saturate(a.reads.unwrap_or(0)),
                lag: a.client_lag,
                resends: a.resends,
            },
        }
    }
}

/// The part of [`ClientFacts`] that per-span metrics (`t_post` ends at the end
/// marker's arrival) and the capacity ledger (connect time) read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientTimes {
    /// The kernel arrival of the last attempt's end marker.
    pub end_at: Option<Timestamp>,
    /// The longest connect time of its attempts.
    pub connect: Option<Nanos>,
}

/// A duration in 8 bytes, its `Option` too (whole nanoseconds up to 584 years,
/// longer saturating), for a per-span duration that every pass walks past.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Nanos(NonZeroU64);

impl Nanos {
    /// The duration.
    pub fn get(self) -> Duration {
        Duration::from_nanos(self.0.get() - 1)
    }
}

impl From<Duration> for Nanos {
    fn from(d: Duration) -> Nanos {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Nanos(NonZeroU64::MIN.saturating_add(ns.min(u64::MAX - 1)))
    }
}

/// The part of [`ClientFacts`] that only measurement quality reads, kept apart
/// from the span facts that every pass over the spans reads (40 bytes a span
/// fewer to walk; a log whose producer says none keeps none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStamps {
    /// Whether the last attempt's first token was stamped exactly.
    pub first_token_exact: Option<bool>,
    /// Content chunks whose reads were traced (u32, saturating: the facts of a
    /// million spans stay under docs/design.md §12's 300 bytes each).
    pub traced_chunks: u32,
    /// Of which stamped only as an upper bound.
    pub inexact_chunks: u32,
    /// Socket reads traced.
    pub reads: u32,
    /// The client's worst lag (kernel arrival to the attempt's task).
    pub lag: Option<Duration>,
    /// Keep-alive resends.
    pub resends: u32,
}

/// The time between a span's attempts: from each attempt's end to the next's
/// start (the back-off its slot was held for).
pub fn between_attempts(attempts: &[tpscope_model::Attempt]) -> Duration {
    attempts
        .windows(2)
        .filter_map(|w| w[1].started_at.since(w[0].ended_at))
        .sum()
}

/// A count as the facts keep it.
pub fn saturate(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A span's place in a multi-turn session: the session as a number (readers
/// number a run's `session_id`s, [`SessionIds`], so that the facts hold no
/// string) and the turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionTurn {
    /// The session's number within its run.
    pub session: u32,
    /// The turn (from 1; non-zero so that an absent session costs no more
    /// room than a present one).
    pub turn: NonZeroU32,
}

impl SpanFacts {
    /// An ok span of `output_tokens` at these instants, with nothing else known
    /// (no retries, input tokens, chunks, client facts or session): what the
    /// proxy's live metrics and hand-made inputs need.
    pub fn ok(
        queued_at: Timestamp,
        admitted_at: Option<Timestamp>,
        first_token_at: Option<Timestamp>,
        last_token_at: Option<Timestamp>,
        released_at: Timestamp,
        output_tokens: u64,
    ) -> SpanFacts {
        SpanFacts {
            status: Status::Ok,
            error_cause: None,
            queued_at,
            admitted_at,
            first_token_at,
            last_token_at,
            released_at,
            output_tokens,
            input_tokens: None,
            retry_count: 0,
            retry_causes: Box::default(),
            wasted_tokens: 0,
            chunks: None,
            client: ClientTimes::default(),
            session: None,
        }
    }

    /// The facts of a full span (its session, if any, numbered by `sessions`; a
    /// turn 0, which readers reject, places it in none).
    pub fn of(span: &Span, sessions: &mut SessionIds) -> SpanFacts {
        SpanFacts {
            status: span.status,
            error_cause: span.error.as_ref().map(|e| e.cause),
            queued_at: span.queued_at,
            admitted_at: span.admitted_at,
            first_token_at: span.first_token_at,
            last_token_at: span.last_token_at,
            released_at: span.released_at,
            output_tokens: span.output_tokens,
            input_tokens: span.input_tokens,
            retry_count: span.retry_count,
            retry_causes: span.retry_causes.clone().into(),
            wasted_tokens: span.wasted_tokens(),
            chunks: span.chunks.as_ref().map(|c| c.clone().into_boxed_slice()),
            client: ClientFacts::of_attempts(&span.attempts).times,
            session: match (&span.session_id, span.turn.and_then(NonZeroU32::new)) {
                (Some(id), Some(turn)) => Some(SessionTurn {
                    session: sessions.number(id),
                    turn,
                }),
                _ => None,
            },
        }
    }

    /// The fields [`tpscope_model::check_lifecycle`] judges (an error is present
    /// when the facts name a cause).
    pub fn lifecycle(&self) -> Lifecycle {
        Lifecycle {
            status: self.status,
            queued_at: self.queued_at,
            admitted_at: self.admitted_at,
            first_token_at: self.first_token_at,
            last_token_at: self.last_token_at,
            released_at: self.released_at,
            output_tokens: self.output_tokens,
            has_error: self.error_cause.is_some(),
        }
    }

    /// Whether the span is backlog left when the run stopped: cancelled before it
    /// was ever admitted (never sent, so not a failure).
    pub fn is_backlog_left(&self) -> bool {
        self.status == Status::Cancelled && self.admitted_at.is_none()
    }

    /// The instant the span left the queue: admission, or release if never admitted.
    pub fn dequeued_at(&self) -> Timestamp {
        self.admitted_at.unwrap_or(self.released_at)
    }
}

/// Strings of a span that the analysis does not use, kept by readers only when
/// asked (per-span output: CSV), apart from [`SpanFacts`] so those stay small.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpanText {
    /// The server's response id, when recorded.
    pub request_id: Option<Box<str>>,
    /// The token source the span names (`None`: the run's default).
    pub token_source: Option<Box<str>>,
    /// The failure message of a non-ok span.
    pub error_message: Option<Box<str>>,
}

/// One fixed-cadence sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleFacts {
    /// When it was taken.
    pub at: Timestamp,
    /// Requests holding a slot.
    pub in_flight: u32,
    /// Requests waiting for a slot.
    pub queue_depth: u32,
    /// The cap the sample states, if it states one.
    pub cap: Option<u32>,
}

impl From<&SampleRecord> for SampleFacts {
    fn from(s: &SampleRecord) -> Self {
        SampleFacts {
            at: s.at,
            in_flight: s.in_flight,
            queue_depth: s.queue_depth,
            cap: s.cap,
        }
    }
}

/// Everything known about one run, ready for [`crate::analyze()`].
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RunInput {
    /// The run's id.
    pub run_id: String,
    /// The `run` record, when the log had one.
    pub run: Option<RunRecord>,
    /// The `end` record, when the log had one (a run without it may be incomplete).
    pub end: Option<EndRecord>,
    /// One entry per span, in log order.
    pub spans: Vec<SpanFacts>,
    /// Token sources the ok spans named, with counts; `None` counts spans that named
    /// none (they use the run's default, see [`RunInput::effective_token_sources`]).
    pub token_sources: Vec<(Option<TokenSource>, u64)>,
    /// Token sources named by spans that did not succeed but received tokens: they
    /// decide the run's source only when no span succeeded (docs/design.md §4).
    pub failed_token_sources: Vec<(Option<TokenSource>, u64)>,
    /// The samples, in log order.
    pub samples: Vec<SampleFacts>,
    /// The failure messages of the non-ok spans, by cause (bounded).
    pub error_messages: ErrorMessages,
    /// For each span that made several attempts (few), its index in `spans` and
    /// when its last attempt started: before that, its slot went to failed
    /// attempts and back-off, not to waiting for the first token.
    pub last_attempts: Vec<(usize, Timestamp)>,
    /// For each span that made several attempts, its index in `spans` and the
    /// time between its attempts (each failed attempt's end to the next's
    /// start: back-off while holding the slot), for the capacity ledger.
    pub retry_waits: Vec<(usize, Duration)>,
    /// Scrapes of the server's own metrics, in log order (empty when none were taken).
    pub server_samples: Vec<ServerSampleRecord>,
    /// The numbers given to the spans' `session_id`s ([`SpanFacts::session`]).
    pub session_ids: SessionIds,
    /// The count check's sums over the spans, added as they are read (the
    /// tokenizer's own count is not kept per span).
    pub count_tally: CountTally,
    /// How exactly the client stamped each span, by index in `spans`; a span
    /// past its end has none (empty when no span says, as in most importers'
    /// logs). Only measurement quality reads them, so they are kept out of the
    /// facts every pass walks ([`RunInput::client_stamps_of`]).
    pub client_stamps: Vec<ClientStamps>,
}

impl RunInput {
    /// An input from full records, as a library caller holds them.
    pub fn from_records(run: RunRecord, spans: &[Span], samples: &[SampleRecord]) -> RunInput {
        let mut input = RunInput {
            run_id: run.run_id.clone(),
            run: Some(run),
            ..RunInput::default()
        };
        for s in spans {
            let facts = SpanFacts::of(s, &mut input.session_ids);
            if let Some(e) = &s.error {
                input.add_error_message(&facts, &e.message);
            }
            if let [_, .., last] = s.attempts.as_slice() {
                input
                    .last_attempts
                    .push((input.spans.len(), last.started_at));
                input
                    .retry_waits
                    .push((input.spans.len(), between_attempts(&s.attempts)));
            }
            input.count_tally.add(
                s.output_tokens,
                s.token_source.as_ref(),
                s.tokenizer_output_tokens,
            );
            let client = ClientFacts::of_attempts(&s.attempts);
            input.push_measured_span(facts, client, s.token_source.as_ref());
        }
        input.samples = samples.iter().map(SampleFacts::from).collect();
        input
    }

    /// Adds a span, counting the token source it names. The run's source is decided
    /// by its ok spans; a failed or cancelled span counts only if it received tokens,
    /// and only towards [`RunInput::failed_token_sources`], so that a failure does
    /// not make a run mixed (docs/design.md §4).
    // Inlined, as is `push_stamped_span`, so that a reader's facts are moved
    // into the vector once, not copied at each call on the way.
    #[inline]
    pub fn push_span(&mut self, facts: SpanFacts, source: Option<&TokenSource>) {
        let received = facts.output_tokens > 0 || facts.first_token_at.is_some();
        let tally = match facts.status {
            Status::Ok => Some(&mut self.token_sources),
            _ if received => Some(&mut self.failed_token_sources),
            _ => None,
        };
        if let Some(tally) = tally {
            match tally.iter_mut().find(|(s, _)| s.as_ref() == source) {
                Some((_, n)) => *n += 1,
                None => tally.push((source.cloned(), 1)),
            }
        }
        self.spans.push(facts);
    }

    /// [`RunInput::push_span`] for a span whose client said how it measured
    /// it: its times go into its facts, its stamps into
    /// [`RunInput::client_stamps`] (kept only from the first span that has any).
    pub fn push_measured_span(
        &mut self,
        mut facts: SpanFacts,
        client: ClientFacts,
        source: Option<&TokenSource>,
    ) {
        facts.client = client.times;
        self.push_stamped_span(facts, client.stamps, source);
    }

    /// [`RunInput::push_span`] with how exactly the client stamped the span
    /// (its facts hold its [`ClientTimes`] already).
    #[inline]
    pub fn push_stamped_span(
        &mut self,
        facts: SpanFacts,
        stamps: ClientStamps,
        source: Option<&TokenSource>,
    ) {
        if stamps != ClientStamps::default() {
            self.client_stamps
                .resize(self.spans.len(), ClientStamps::default());
            self.client_stamps.push(stamps);
        }
        self.push_span(facts, source);
    }

    /// How exactly the client stamped span `i` (empty when it did not say).
    pub fn client_stamps_of(&self, i: usize) -> ClientStamps {
        self.client_stamps.get(i).copied().unwrap_or_default()
    }

    /// Counts the failure message of a non-ok span (the backlog left at the end is
    /// not a failure and is not counted).
    pub fn add_error_message(&mut self, facts: &SpanFacts, message: &str) {
        if let Some(cause) = facts.error_cause
            && !facts.is_backlog_left()
        {
            self.error_messages.add(cause, message);
        }
    }

    /// Token sources with span counts, spans that named none counted under the run's
    /// default (or left out when the run names none either), most used first: those
    /// of the ok spans, or where none succeeded, of the spans that received tokens.
    pub fn effective_token_sources(&self) -> Vec<(TokenSource, u64)> {
        let default = self.run.as_ref().and_then(|r| r.token_source.clone());
        let mut out: Vec<(TokenSource, u64)> = Vec::new();
        let tally = if self.token_sources.is_empty() {
            &self.failed_token_sources
        } else {
            &self.token_sources
        };
        for (src, n) in tally {
            let Some(src) = src.clone().or_else(|| default.clone()) else {
                continue;
            };
            match out.iter_mut().find(|(s, _)| *s == src) {
                Some((_, m)) => *m += n,
                None => out.push((src, *n)),
            }
        }
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.preference().cmp(&b.0.preference())));
        out
    }

    /// The cap from the run record (`None`: uncapped or unknown).
    pub fn run_cap(&self) -> Option<u32> {
        self.run.as_ref().and_then(|r| r.cap)
    }

    /// The run's start: the run record's `started_at`, else the first `queued_at`.
    pub fn origin(&self) -> Option<Timestamp> {
        self.run
            .as_ref()
            .map(|r| r.started_at)
            .or_else(|| self.spans.iter().map(|s| s.queued_at).min())
    }

    /// Whether the run record says the run was a closed loop (every request ready
    /// at the start, so its queue time is the client's own backlog). Multi-turn
    /// sessions are not: a turn is ready only after the reply before it (and the
    /// think time), so its wait for a slot is a real queue.
    pub fn closed_loop(&self) -> bool {
        self.load_field("mode").and_then(|m| m.as_str()) == Some("closed_loop")
            && self.load_field("sessions").is_none()
    }

    /// A field of the run record's free-form `load` settings.
    pub fn load_field(&self, key: &str) -> Option<&serde_json::Value> {
        self.run.as_ref().and_then(|r| r.load.get(key))
    }

    /// What the run measured: its run record's target, with the model the
    /// `end` record names when the run record names none (a proxy learns it
    /// from the responses).
    pub fn target(&self) -> tpscope_model::Target {
        let mut t = self
            .run
            .as_ref()
            .map(|r| r.target.clone())
            .unwrap_or_default();
        if t.model.is_none() {
            t.model = self.end.as_ref().and_then(|e| e.model.clone());
        }
        t
    }

    /// The sample cadence from the run record.
    pub fn sample_interval(&self) -> Option<Duration> {
        self.run.as_ref().and_then(|r| r.sample_interval)
    }

    /// The longest a sample held when nothing changed (`None`: one per tick).
    pub fn sample_heartbeat(&self) -> Option<Duration> {
        self.run.as_ref().and_then(|r| r.sample_heartbeat)
    }
}

#[cfg(test)]
mod tests {
    use crate::test_support::capped_run;

    /// Real vLLM, 8 sessions through 4 slots: the report called the turns' waits
    /// "the client's own backlog, every request ready at the start", which a turn
    /// waiting for the reply before it is not.
    #[test]
    fn multi_turn_sessions_are_not_called_a_closed_loop() {
        let mut input = capped_run(4);
        input.run.as_mut().unwrap().load = serde_json::json!({"mode": "closed_loop"});
        assert!(input.closed_loop());
        let mut input = capped_run(4);
        input.run.as_mut().unwrap().load =
            serde_json::json!({"mode": "closed_loop", "sessions": {"count": 8, "turns": "4"}});
        assert!(!input.closed_loop());
    }
}

#[cfg(test)]
mod size {
    /// docs/design.md §12's 300 bytes per span (reader peak) went to 313 when the session
    /// fields came; the facts are the bulk of it, so their size is held here.
    /// Connect times went from 16 bytes to 8 in the span facts: every value a
    /// reader can meet keeps its nanoseconds and its order.
    #[test]
    fn nanos_keep_a_durations_value_and_order_in_8_bytes() {
        use super::Nanos;
        use std::time::Duration;
        assert_eq!(std::mem::size_of::<Option<Nanos>>(), 8);
        for d in [0, 1, 999, 1_500_000, u64::MAX - 1].map(Duration::from_nanos) {
            assert_eq!(Nanos::from(d).get(), d);
        }
        let far = Duration::from_secs(u64::MAX);
        assert_eq!(Nanos::from(far).get(), Duration::from_nanos(u64::MAX - 1));
        let (a, b) = (Duration::from_micros(300), Duration::from_secs(1));
        assert!(Nanos::from(a) < Nanos::from(b));
    }

    #[test]
    fn span_facts_stay_small_enough_for_300_bytes_per_span() {
        let size = std::mem::size_of::<super::SpanFacts>();
        assert!(size <= 136, "SpanFacts is {size} bytes");
    }
}
