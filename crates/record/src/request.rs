//! One request's handles in the recording API: [`Queued`] (waiting for a slot) and
//! [`InFlight`] (holding one). They stamp instants on the run's clock and keep the
//! attempts; finishing (or dropping) one hands a [`Finished`] to the writer thread,
//! which assembles and writes the span. A handle dropped unfinished is a cancelled
//! span, never a lost one.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use tpscope_model::{AttemptOutcome, Cause, Timestamp, Usage};

use crate::assemble::Finished;
use crate::session::Session;

/// A request waiting for a slot, from [`crate::Recorder::queued`]. Dropped
/// without [`Queued::admitted`], it is written as cancelled in the queue.
pub struct Queued {
    session: Arc<Session>,
    id: String,
    queued_at: Timestamp,
    done: bool,
}

impl Queued {
    pub(crate) fn new(session: Arc<Session>, id: String) -> Queued {
        let queued_at = session.now();
        Queued {
            session,
            id,
            queued_at,
            done: false,
        }
    }

    /// When it became ready.
    pub fn queued_at(&self) -> Timestamp {
        self.queued_at
    }

    /// It took a slot (`admitted_at` is now, and its first attempt starts).
    pub fn admitted(mut self) -> InFlight {
        self.done = true;
        let now = self.session.now();
        self.session.admit();
        InFlight {
            session: self.session.clone(),
            id: std::mem::take(&mut self.id),
            queued_at: self.queued_at,
            admitted_at: now,
            attempt_start: Cell::new(now),
            first_token_at: Cell::new(None),
            last_token_at: Cell::new(None),
            tokens: Cell::new(0),
            http_status: Cell::new(None),
            text: RefCell::new(None),
            response_id: RefCell::new(None),
            retried: RefCell::new(Vec::new()),
            done: false,
        }
    }

    /// It left the queue without a slot, for the reason given (a cancelled span).
    pub fn cancel(mut self, why: impl Into<String>) {
        self.leave(why.into());
    }

    fn leave(&mut self, why: String) {
        self.done = true;
        let released_at = self.session.now();
        self.session.leave(false);
        let f = finished(self.queued_at, None, released_at, Vec::new());
        let cancelled = Some(why);
        hand_over(&self.session, &mut self.id, Finished { cancelled, ..f });
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        if !self.done {
            self.leave("dropped while queued".into());
        }
    }
}

/// A request holding a slot, from [`Queued::admitted`]. Stamp its tokens as they
/// arrive, then finish it; dropped unfinished, it is written as cancelled.
pub struct InFlight {
    session: Arc<Session>,
    id: String,
    queued_at: Timestamp,
    admitted_at: Timestamp,
    attempt_start: Cell<Timestamp>,
    first_token_at: Cell<Option<Timestamp>>,
    last_token_at: Cell<Option<Timestamp>>,
    tokens: Cell<u64>,
    /// The current attempt's HTTP status, when the caller saw one.
    http_status: Cell<Option<u16>>,
    /// The current attempt's received text, when the caller gave it (counted by the
    /// tokenizer on the writer when no usage came).
    text: RefCell<Option<String>>,
    response_id: RefCell<Option<String>>,
    retried: RefCell<Vec<AttemptOutcome>>,
    done: bool,
}

impl InFlight {
    /// The server's id for the current attempt's response (`chatcmpl-…`): the span's
    /// `request_id` when the request was queued without a name of its own.
    pub fn response_id(&self, id: impl Into<String>) {
        *self.response_id.borrow_mut() = Some(id.into());
    }

    /// The current attempt's HTTP status (the response head's).
    pub fn http_status(&self, status: u16) {
        self.http_status.set(Some(status));
    }

    /// The current attempt's received text, whole: without a `usage` at the finish,
    /// the writer counts it with the offline tokenizer (source `tokenizer:<name>`)
    /// instead of counting chunks.
    pub fn text(&self, text: impl Into<String>) {
        *self.text.borrow_mut() = Some(text.into());
    }

    /// When it took its slot.
    pub fn admitted_at(&self) -> Timestamp {
        self.admitted_at
    }

    /// The current attempt's first output arrived (a no-op after the first).
    pub fn first_token(&self) {
        if self.first_token_at.get().is_none() {
            let now = self.session.now();
            self.first_token_at.set(Some(now));
            self.last_token_at.set(Some(now));
        }
    }

    /// `n` output tokens arrived now (the first call also stamps the first token).
    /// Without a `usage` at the finish, the span's count is the sum of these.
    pub fn tokens(&self, n: u64) {
        let now = self.session.now();
        if self.first_token_at.get().is_none() {
            self.first_token_at.set(Some(now));
        }
        self.last_token_at.set(Some(now));
        self.tokens.set(self.tokens.get() + n);
    }

    /// The current attempt failed with `cause` and the request tries again, keeping
    /// its slot: the attempt is kept with its cause (and any tokens it received, as
    /// wasted), and a new attempt starts now.
    pub fn retry(&self, cause: Cause) {
        let now = self.session.now();
        let failed = self.outcome(now, Some(cause), None, None);
        self.retried.borrow_mut().push(failed);
        self.attempt_start.set(now);
        self.response_id.borrow_mut().take();
        self.text.borrow_mut().take();
        self.http_status.set(None);
        self.first_token_at.set(None);
        self.last_token_at.set(None);
        self.tokens.set(0);
    }

    /// It succeeded. With the server's [`Usage`] the span counts its tokens (source
    /// `usage`); with `None`, those given to [`InFlight::tokens`] (source `chunks`).
    /// A reply whose output arrived at once (not streamed) has its first and last
    /// token now.
    pub fn finish_ok(mut self, usage: impl Into<Option<Usage>>) {
        let usage = usage.into();
        let now = self.session.now();
        if self.first_token_at.get().is_none()
            && (usage.is_some_and(|u| u.completion_tokens.is_some_and(|n| n > 0))
                || self.tokens.get() > 0)
        {
            self.first_token_at.set(Some(now));
            self.last_token_at.set(Some(now));
        }
        self.release(now, None, usage, None);
    }

    /// It failed for good with `cause` (an error span; [`Cause::Cancelled`] makes a
    /// cancelled one) and a message (no prompt text, no credentials).
    pub fn finish_err(mut self, cause: Cause, message: impl Into<String>) {
        let now = self.session.now();
        self.release(now, Some(cause), None, Some(message.into()));
    }

    /// It was abandoned for the reason given (a cancelled span).
    pub fn cancel(mut self, why: impl Into<String>) {
        let now = self.session.now();
        self.release(now, Some(Cause::Cancelled), None, Some(why.into()));
    }

    fn outcome(
        &self,
        ended_at: Timestamp,
        cause: Option<Cause>,
        usage: Option<Usage>,
        error_message: Option<String>,
    ) -> AttemptOutcome {
        let mut o = AttemptOutcome::started(self.attempt_start.get());
        o.attempt.first_token_at = self.first_token_at.get();
        o.attempt.ended_at = ended_at;
        o.attempt.http_status = self.http_status.get();
        o.attempt.cause = cause;
        o.last_token_at = self.last_token_at.get();
        o.usage = usage;
        o.content_chunks = self.tokens.get();
        o.text = self.text.borrow().clone().unwrap_or_default();
        o.error_message = error_message;
        o.response_id = self.response_id.borrow().clone();
        o
    }

    fn release(
        &mut self,
        now: Timestamp,
        cause: Option<Cause>,
        usage: Option<Usage>,
        message: Option<String>,
    ) {
        self.done = true;
        let last = self.outcome(now, cause, usage, message);
        let mut outcomes = std::mem::take(&mut *self.retried.borrow_mut());
        outcomes.push(last);
        self.session.leave(true);
        let f = finished(self.queued_at, Some(self.admitted_at), now, outcomes);
        hand_over(&self.session, &mut self.id, f);
    }
}

/// What the writer needs to assemble the span (its `seq` is set there).
fn finished(
    queued_at: Timestamp,
    admitted_at: Option<Timestamp>,
    released_at: Timestamp,
    outcomes: Vec<AttemptOutcome>,
) -> Finished {
    Finished {
        seq: 0,
        queued_at,
        admitted_at,
        released_at,
        outcomes,
        planned_input_tokens: None,
        cancelled: None,
        session_id: None,
        turn: None,
    }
}

/// Sends a finished request to the writer thread, with the caller's name for it
/// as the span's `request_id` (none if empty).
fn hand_over(session: &Session, id: &mut String, f: Finished) {
    let request_id = (!id.is_empty()).then(|| std::mem::take(id));
    session.finished(request_id, f);
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.done {
            let now = self.session.now();
            let why = Some("dropped without finishing".to_string());
            self.release(now, Some(Cause::Cancelled), None, why);
        }
    }
}
