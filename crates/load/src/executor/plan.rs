//! What a run is told before it starts ([`RunPlan`]), what may stop it from outside
//! ([`Control`]), and how it ended ([`RunSummary`]).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tpscope_model::{Span, Status, StatusCounts};
use tpscope_record::Dispatch;
use tpscope_tokens::Tokenizer;

use crate::retry::RetryPolicy;
use crate::schedule::Schedule;
use crate::workload::Workload;
use crate::workload::sessions::SessionPlan;

/// Everything one run needs to know.
#[derive(Clone, Debug)]
pub struct RunPlan {
    /// The run's id (every record carries it).
    pub run_id: String,
    /// When requests become ready.
    pub schedule: Schedule,
    /// Stop creating requests after this many (`None`: no limit).
    pub requests: Option<u64>,
    /// Stop admitting this long after the start (`None`: no limit).
    pub duration: Option<Duration>,
    /// The in-flight cap (`None`: none; a closed loop needs one).
    pub cap: Option<u32>,
    /// How the queue is let through the cap.
    pub dispatch: Dispatch,
    /// What requests ask for.
    pub workload: Arc<Workload>,
    /// Multi-turn sessions (`None`: independent requests). With sessions, the
    /// schedule is a backlog of sessions and `requests` is not used.
    pub sessions: Option<Arc<SessionPlan>>,
    /// The tokenizer of synthetic prompts and of counting replies without usage.
    pub tokenizer: Tokenizer,
    /// Seed of the schedule, the workload and the retry jitter.
    pub seed: u64,
    /// Mixed into the text of synthetic prompts (0: none), see
    /// [`crate::workload::Workload::request`].
    pub prompt_salt: u64,
    /// The most tokens (prompt + output) a request may ask for: the model's
    /// usable context, when requests had to be shortened to fit it.
    pub context: Option<u32>,
    /// Retries.
    pub retry: RetryPolicy,
    /// Sample cadence (`None`: no samples).
    pub sample_interval: Option<Duration>,
    /// After the run stops admitting (end of `--duration`, Ctrl-C), how long
    /// in-flight requests may take before they are cancelled.
    pub drain_timeout: Duration,
}

/// Signals from outside a run (Ctrl-C).
#[derive(Clone, Debug, Default)]
pub struct Control {
    /// Stop admitting, let in-flight requests finish (bounded), end the run.
    pub stop: CancellationToken,
    /// Cancel in-flight requests too.
    pub cancel: CancellationToken,
}

/// How a run ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Requests that took a slot (whose first attempt was sent).
    pub admitted: u64,
    /// Spans produced (= ok + error + cancelled).
    pub spans: u64,
    /// Of which ok, error and cancelled (cancelled including those that never
    /// left the queue).
    pub status: StatusCounts,
    /// Whether the run was interrupted (Ctrl-C) rather than ending by itself.
    pub interrupted: bool,
    /// Whether in-flight requests were cancelled (second Ctrl-C or drain timeout).
    pub cancelled_in_flight: bool,
    /// The failure messages of the error spans, by cause (bounded), so that the
    /// server's own words reach the user even without a report.
    pub errors: tpscope_analysis::ErrorMessages,
}

impl RunSummary {
    /// Counts one span of the run (its status; an error's cause and message).
    pub(super) fn count(&mut self, span: &Span) {
        self.spans += 1;
        self.status.add(span.status);
        if let (Status::Error, Some(e)) = (span.status, &span.error) {
            self.errors.add(e.cause, &e.message);
        }
    }

    /// The counts of several runs together (a sweep's levels): spans by status.
    pub fn total(runs: &[RunSummary]) -> RunSummary {
        runs.iter().fold(RunSummary::default(), |mut acc, s| {
            acc.spans += s.spans;
            acc.status = acc.status.plus(s.status);
            acc
        })
    }
}
