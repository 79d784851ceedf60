//! The gap's causes, named from the ledger: one sentence per cause that holds a
//! noticeable share of the slot-time, with its evidence and the next step.

use std::time::Duration;

use serde::Serialize;

use super::{Capacity, Part};

/// A share of the slot-time below this is not named as a cause.
pub const NOTICEABLE: f64 = 0.03;

/// One cause of lost capacity.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GapCause {
    /// `blocked_orchestration`, `admission`, `connection_churn`, `stream_tail`,
    /// `downstream_stalls` or `failures`.
    pub cause: &'static str,
    /// Its share of the slot-time.
    pub share: f64,
    /// The evidence and the next step.
    pub sentence: String,
}

/// What the ledger's passes counted besides the parts.
pub(super) struct Evidence {
    /// Admitted spans overlapping the window.
    pub requests: u64,
    /// Of which opened a connection.
    pub new_connections: u64,
    /// Tokens received by failed attempts.
    pub wasted_tokens: u64,
    /// The post time of the spans whose end marker's arrival is known, split at it.
    pub post_split: Option<PostSplit>,
}

/// The time after spans' last tokens, split at their end markers' arrival.
pub(super) struct PostSplit {
    /// Last token → end marker, summed: the server ending its streams.
    pub tail: Duration,
    /// End marker → release, summed: the client holding the slots.
    pub after_end: Duration,
    /// The spans summed (those whose end marker's arrival is known).
    pub spans: u64,
}

fn pct(x: f64) -> String {
    format!("{:.1} %", x * 100.0)
}

/// The causes holding a noticeable share, largest first.
pub(super) fn causes(c: &Capacity, ev: &Evidence) -> Vec<GapCause> {
    let share = |p: Part| c.share(p).unwrap_or(0.0);
    let mut out = Vec::new();
    let mut name = |cause: &'static str, share: f64, sentence: String| {
        if share >= NOTICEABLE {
            out.push(GapCause {
                cause,
                share,
                sentence,
            });
        }
    };
    let refills = c.refills.as_ref();
    let at_once = refills
        .and_then(|r| r.mean_free_slots_in_gap)
        .map_or(String::new(), |n| format!(", {n:.1} slots at once"));
    let held = share(Part::HeldBack);
    let held_wait = refills.and_then(|r| r.held_back.mean_wait_s);
    name(
        "blocked_orchestration",
        held,
        format!(
            "blocked orchestration ({} of slot-time held back): work waited while slots were \
             free for {} at a time{at_once} — the shape of batch-and-wait or a blocked \
             dispatcher: dispatch as slots free",
            pct(held),
            held_wait.map_or("long stretches".into(), |w| format!("{w:.3} s")),
        ),
    );
    let handoff = share(Part::Handoff);
    let handoff_wait = refills.and_then(|r| r.handoff.mean_wait_s);
    name(
        "admission",
        handoff,
        format!(
            "admission ({} of slot-time in hand-offs): each freed slot took {} to refill while \
             work waited — the dispatcher itself is slow: admit the next request in the \
             release path",
            pct(handoff),
            handoff_wait.map_or("a moment".into(), |w| format!("{:.1} ms", w * 1e3)),
        ),
    );
    let connect = share(Part::Connect);
    name(
        "connection_churn",
        connect,
        format!(
            "connection churn ({} of slot-time opening connections): {} new connections for \
             {} requests — keep connections alive and pooled",
            pct(connect),
            ev.new_connections,
            ev.requests
        ),
    );
    // The post part splits at the end marker: before it the server was ending
    // its stream (real vLLM sends its usage chunk and end marker tens of ms after
    // the last token on a busy CPU), after it the client held the slot.
    let post = share(Part::Post);
    let tail_of_post = ev.post_split.as_ref().map_or(0.0, |p| {
        p.tail.as_secs_f64() / (p.tail + p.after_end).as_secs_f64()
    });
    let tail = post * tail_of_post;
    if let Some(p) = &ev.post_split {
        name(
            "stream_tail",
            tail,
            format!(
                "a slow end of stream ({} of slot-time between the last token and the \
                 server's end marker, {:.1} ms a request): the server, not your pipeline, \
                 held the slots after generating (its usage chunk and end marker) — look at \
                 the server's detokenising and output path, not at your post-processing",
                pct(tail),
                p.tail.as_secs_f64() * 1e3 / p.spans.max(1) as f64,
            ),
        );
    }
    let post = post - tail;
    name(
        "downstream_stalls",
        post,
        format!(
            "downstream stalls ({} of slot-time after the stream's end): slots were held \
             between the stream's end and their release — release the slot before \
             post-processing (parsing, tools, storage)",
            pct(post)
        ),
    );
    let (failed, backoff) = (share(Part::Failed), share(Part::Backoff));
    name(
        "failures",
        failed + backoff,
        format!(
            "failures ({} of slot-time in failed attempts, {} in back-off; {} tokens wasted) \
             — fix the failures' cause (see failures by cause) before adding capacity",
            pct(failed),
            pct(backoff),
            ev.wasted_tokens
        ),
    );
    out.sort_by(|a, b| b.share.total_cmp(&a.share));
    out
}
