//! The diagnosis (docs/design.md §14): whose capacity was idle. A pass over the
//! client's occupancy (the gap steps' segments), the server's samples (step
//! functions: each scrape holds until the next) and the intervals when the
//! measuring client lagged partitions the window into states, by precedence:
//!
//! 1. *client-bound*: the client lagged (its own sampler was descheduled);
//! 2. *KV-bound*: server KV cache usage ≥ 95 %, or a preemption between two scrapes,
//!    or work waiting at the server while its KV usage is ≥ 80 % (the next request
//!    does not fit: a memory queue, not a batch-slot one);
//! 3. *server queue*: the server's own queue holds work (waiting > 0);
//!    *server busy*: at the cap with work waiting, but the server's gauges are
//!    stale (the client holds requests in flight that the server counts neither
//!    as running nor waiting, or its generation counter stalled): the requests
//!    are in the server's hands, whatever its last gauges said;
//! 4. *demand-bound*: no work waits at the client (queue depth = 0);
//! 5. *pipeline gap*: work waits while the client is below its cap (the gap);
//! 6. *client cap*: at the cap with work waiting, the server with an empty queue
//!    and KV room (raising the cap adds throughput); without a known server state
//!    this is *at cap* (server unknown).
//!
//! The limit is the state with the largest share. Pure: no I/O.

use std::time::Duration;

use serde::Serialize;
use tpscope_model::time::duration_secs;
use tpscope_model::{Occupancy, Timestamp};

use crate::input::{RunInput, SampleFacts};
use crate::server::sorted_samples;
use crate::stats::ratio;
use crate::steps::{Integrals, Steps};

/// KV cache usage from which the server counts as KV-bound.
pub const KV_BOUND: f64 = 0.95;
/// KV cache usage from which a server with work waiting counts as KV-bound.
pub const KV_QUEUE: f64 = 0.80;
/// A gap between two client samples longer than this many sample intervals (and
/// than [`LAG_MIN`]) means the client was descheduled: client-bound.
pub const LAG_INTERVALS: u32 = 5;
/// The shortest stretch that counts as client lag.
pub const LAG_MIN: Duration = Duration::from_millis(50);

/// A named state of the window's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// The measuring client lagged.
    ClientBound,
    /// The server's KV cache was full or it preempted.
    KvBound,
    /// The server's own queue held work.
    ServerQueue,
    /// At the cap with work waiting, the server busy behind stale gauges.
    ServerBusy,
    /// No work waited at the client.
    DemandBound,
    /// Work waited while the client was below its cap.
    PipelineGap,
    /// At the cap with work waiting; the server had room.
    ClientCap,
    /// At the cap with work waiting; the server's state unknown.
    AtCap,
}

/// A state's words: its name, meaning, next step, and the sentence that names it
/// as the limit (`{p}` stands for its share in percent).
#[derive(Clone, Copy, Debug)]
pub struct StateWords {
    /// The state.
    pub state: State,
    /// Its name as the report prints it.
    pub name: &'static str,
    /// What it means.
    pub meaning: &'static str,
    /// What to try next.
    pub next_step: &'static str,
    /// The sentence naming it as the limit.
    pub limit: &'static str,
}

/// Every state in precedence order (indexed by `State as usize`), with its words.
pub const STATES: [StateWords; 8] = [
    StateWords {
        state: State::ClientBound,
        name: "client-bound",
        meaning: "the measuring client itself lagged (its sampler ran late), so it delayed work and its stamps",
        next_step: "give the client more CPU, fewer streams per process, or run it on another host",
        limit: "The measuring client itself was the limit: it lagged {p} % of the window",
    },
    StateWords {
        state: State::KvBound,
        name: "KV-bound",
        meaning: "the server's KV cache was ≥ 95 % full, it preempted requests, or work waited at it with the cache ≥ 80 % full",
        next_step: "more KV memory (fewer max sequences, shorter contexts, a smaller model or more GPUs)",
        limit: "The server's KV cache was the limit: full or preempting {p} % of the window",
    },
    StateWords {
        state: State::ServerQueue,
        name: "server queue",
        meaning: "requests waited in the server's own queue: the server was the limit",
        next_step: "a faster or larger deployment, or a larger server batch (max sequences) if memory allows",
        limit: "The server was the limit: requests waited in its own queue {p} % of the window",
    },
    StateWords {
        state: State::ServerBusy,
        name: "server busy",
        meaning: "at the cap with work waiting, the server held requests its gauges counted neither as running nor waiting, or generated nothing between scrapes: its gauges were stale (updated at step end) and it was busy",
        next_step: "a faster or larger deployment; raising the client's cap would only queue more at the server",
        limit: "The server was the limit: busy with the client's requests {p} % of the window, though its gauges showed room (they update at step end)",
    },
    StateWords {
        state: State::DemandBound,
        name: "demand-bound",
        meaning: "no work waited at the client: capacity was there for more load",
        next_step: "offer more load (higher rate or more work) to use the idle capacity",
        limit: "Demand was the limit: no work waited {p} % of the window",
    },
    StateWords {
        state: State::PipelineGap,
        name: "pipeline gap",
        meaning: "work waited while the client was below its cap (the gap): the pipeline held it back",
        next_step: "dispatch work as soon as a slot frees (work-conserving), not in waves or batches",
        limit: "The client's pipeline was the limit: work waited while slots were free {p} % of the window",
    },
    StateWords {
        state: State::ClientCap,
        name: "client cap",
        meaning: "the client was at its cap with work waiting while the server had free batch slots and an empty queue",
        next_step: "raise the client's cap: it adds throughput",
        limit: "The client's cap was the limit: at the cap with work waiting and the server with room {p} % of the window",
    },
    StateWords {
        state: State::AtCap,
        name: "at cap (server unknown)",
        meaning: "the client was at its cap with work waiting; without server metrics the server's side is unknown",
        next_step: "scrape the server's /metrics (--server-metrics) to tell the cap from the server",
        limit: "The client was at its cap with work waiting {p} % of the window; without server metrics the cap and the server cannot be told apart",
    },
];

/// One state's share of the window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StateShare {
    /// The state.
    pub state: State,
    /// Its name as the report prints it.
    pub name: &'static str,
    /// Time in the state.
    #[serde(rename = "time_s", serialize_with = "duration_secs::serialize")]
    pub time: Duration,
    /// time / window.
    pub share: f64,
    /// What it means.
    pub meaning: &'static str,
    /// What to try next.
    pub next_step: &'static str,
}

/// The diagnosis of a window.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diagnosis {
    /// Whether server samples took part.
    pub with_server: bool,
    /// The states with time in them, in precedence order.
    pub states: Vec<StateShare>,
    /// The state with the largest share.
    pub limit: Option<State>,
    /// One sentence naming the limit.
    pub sentence: String,
    /// How to read it (server samples as step functions, what the client alone shows).
    pub notes: Vec<String>,
}

/// The server's state over one stretch between scrapes.
#[derive(Clone, Copy, Debug)]
struct ServerStep {
    start: Timestamp,
    waiting: Option<f64>,
    running: Option<f64>,
    kv: Option<f64>,
    preempting: bool,
    /// The generation counter did not rise by the next scrape.
    stalled: bool,
}

/// Requests in flight at the client beyond what the server counts (running +
/// waiting) from which its gauges are taken as stale: two, or a tenth of the
/// client's in flight (requests on the wire or in post-processing are neither).
fn stale_gauges(in_flight: u32, s: &ServerStep) -> bool {
    let (Some(run), Some(wait)) = (s.running, s.waiting) else {
        return false;
    };
    let f = f64::from(in_flight);
    f - (run + wait) >= (0.1 * f).max(2.0)
}

impl ServerStep {
    fn known(&self) -> bool {
        self.waiting.is_some() || self.kv.is_some()
    }
}

/// The state of one stretch.
fn classify(occ: Occupancy, server: Option<&ServerStep>, lagging: bool) -> State {
    if lagging {
        return State::ClientBound;
    }
    let server = server.filter(|s| s.known());
    if let Some(s) = server {
        let waiting = s.waiting.is_some_and(|w| w > 0.0);
        let kv = s.kv.unwrap_or(0.0);
        if s.preempting || kv >= KV_BOUND || (waiting && kv >= KV_QUEUE) {
            return State::KvBound;
        }
        if waiting {
            return State::ServerQueue;
        }
    }
    if !occ.is_backlog() {
        State::DemandBound
    } else if occ.is_gap() {
        State::PipelineGap
    } else if let Some(s) = server {
        // "Raise the cap" needs evidence that the server had room.
        if s.stalled || stale_gauges(occ.in_flight, s) {
            State::ServerBusy
        } else {
            State::ClientCap
        }
    } else {
        State::AtCap
    }
}

/// Stretches when the client's own sampler ran late: a gap between consecutive
/// `sample` records longer than max([`LAG_INTERVALS`] × interval, [`LAG_MIN`]),
/// counted from one interval after the earlier sample. With a `heartbeat` (samples
/// written on a change and at least that often) a gap up to the heartbeat is
/// expected, so it is added to the limit and the lag counted from a heartbeat
/// after the earlier sample. Empty without an interval.
/// (Per-read lag measured by the client can be added to this list.)
pub fn client_lag_from_samples(
    samples: &[SampleFacts],
    interval: Option<Duration>,
    heartbeat: Option<Duration>,
) -> Vec<(Timestamp, Timestamp)> {
    let Some(interval) = interval.filter(|i| !i.is_zero()) else {
        return Vec::new();
    };
    let limit = (interval * LAG_INTERVALS).max(LAG_MIN) + heartbeat.unwrap_or_default();
    let expected = heartbeat.unwrap_or(interval);
    let mut at: Vec<Timestamp> = samples.iter().map(|s| s.at).collect();
    at.sort_unstable();
    at.windows(2)
        .filter(|w| w[1].since(w[0]).is_some_and(|d| d > limit))
        .map(|w| (w[0].after(expected), w[1]))
        .collect()
}

/// Sorts and merges overlapping intervals.
fn merged(mut v: Vec<(Timestamp, Timestamp)>) -> Vec<(Timestamp, Timestamp)> {
    v.retain(|(a, b)| b > a);
    v.sort_unstable();
    let mut out: Vec<(Timestamp, Timestamp)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Diagnoses `[w0, w1)` of a run: `occupancy` is the run's gap steps, `client_lag` the
/// intervals when the measuring client lagged (any order, may overlap).
pub fn diagnose(
    input: &RunInput,
    occupancy: &Steps,
    window: (Timestamp, Timestamp),
    client_lag: Vec<(Timestamp, Timestamp)>,
) -> Diagnosis {
    diagnose_with(input, occupancy, window, client_lag, None)
}

/// [`diagnose`], given the steps' integrals over the window when another stage
/// has them ([`Steps::integrate`]'s): without server steps or lag, each state is
/// then one of them, and the steps need no walk of their own.
pub(crate) fn diagnose_with(
    input: &RunInput,
    occupancy: &Steps,
    window: (Timestamp, Timestamp),
    client_lag: Vec<(Timestamp, Timestamp)>,
    integrals: Option<&Integrals>,
) -> Diagnosis {
    let (w0, w1) = window;
    let samples = sorted_samples(input);
    let steps: Vec<ServerStep> = samples
        .iter()
        .enumerate()
        .map(|(i, s)| ServerStep {
            start: s.at,
            waiting: s.waiting,
            running: s.running,
            kv: s.kv_cache_usage,
            preempting: samples
                .get(i + 1)
                .and_then(|n| n.preemptions_total.zip(s.preemptions_total))
                .is_some_and(|(next, this)| next > this),
            stalled: samples
                .get(i + 1)
                .and_then(|n| n.generation_tokens_total.zip(s.generation_tokens_total))
                .is_some_and(|(next, this)| next <= this),
        })
        .collect();
    let with_server = steps.iter().any(ServerStep::known);
    let lag = merged(client_lag);
    let mut time = [0i64; STATES.len()];
    let (mut si, mut li) = (0usize, 0usize);
    let mut covered = 0i64;
    // Without server steps or lag a stretch's state is its occupancy's: the
    // gap, the rest of the backlog (at the cap), and the time without work
    // waiting (added below with the time no segment covers).
    let whole = integrals.filter(|_| steps.is_empty() && lag.is_empty());
    if let Some(i) = whole {
        time[State::PipelineGap as usize] = i.gap_ns;
        time[State::AtCap as usize] = i.backlog_ns - i.gap_ns;
        covered = i.backlog_ns;
    }
    for seg in occupancy.segments().take_while(|_| whole.is_none()) {
        if seg.end <= w0 {
            continue;
        }
        if seg.start >= w1 {
            break;
        }
        let b = seg.end.min(w1);
        let mut a = seg.start.max(w0);
        // Without server steps or lag, a segment is one state throughout.
        if steps.is_empty() && lag.is_empty() && a < b {
            let ns = b.signed_nanos_since(a);
            time[classify(seg.occupancy(), None, false) as usize] += ns;
            covered += ns;
            continue;
        }
        while a < b {
            while steps.get(si + 1).is_some_and(|n| n.start <= a) {
                si += 1;
            }
            let server = steps.get(si).filter(|s| s.start <= a);
            let next_server = match server {
                Some(_) => steps.get(si + 1).map(|n| n.start),
                None => steps.first().map(|s| s.start),
            };
            while lag.get(li).is_some_and(|l| l.1 <= a) {
                li += 1;
            }
            let (lagging, next_lag) = match lag.get(li) {
                Some(&(s, e)) if s <= a => (true, Some(e)),
                Some(&(s, _)) => (false, Some(s)),
                None => (false, None),
            };
            let end = [Some(b), next_server, next_lag]
                .into_iter()
                .flatten()
                .filter(|&t| t > a)
                .min()
                .unwrap_or(b);
            let ns = end.signed_nanos_since(a);
            time[classify(seg.occupancy(), server, lagging) as usize] += ns;
            covered += ns;
            a = end;
        }
    }
    // Window time no segment covers had nothing queued or in flight.
    let win_ns = w1.signed_nanos_since(w0).max(0);
    time[State::DemandBound as usize] += (win_ns - covered).max(0);
    let states: Vec<StateShare> = STATES
        .iter()
        .zip(time)
        .filter(|(_, ns)| *ns > 0)
        .map(|(w, ns)| StateShare {
            state: w.state,
            name: w.name,
            time: Duration::from_nanos(ns as u64),
            share: ratio(ns as f64, win_ns as f64).unwrap_or(0.0),
            meaning: w.meaning,
            next_step: w.next_step,
        })
        .collect();
    // The largest share; of equal shares, the earlier in precedence.
    let limit = states.iter().rev().max_by_key(|s| s.time).map(|s| s.state);
    let share = |s: State| {
        states
            .iter()
            .find(|x| x.state == s)
            .map_or(0.0, |x| x.share * 100.0)
    };
    let sentence = match limit {
        None => "Nothing to diagnose: the window is empty.".to_string(),
        Some(s) => {
            let w = &STATES[s as usize];
            let lead = w.limit.replace("{p}", &format!("{:.0}", share(s)));
            format!("{lead} — next: {}.", w.next_step)
        }
    };
    let mut notes = Vec::new();
    if with_server {
        notes.push(
            "Server samples are step functions: each scrape's values hold until the next \
             scrape; before the first scrape the server's state is unknown."
                .to_string(),
        );
    } else {
        notes.push(
            "No server samples: from the client side alone, time at the cap with work \
             waiting is 'at cap' — the server queue, KV-bound and client-cap states need \
             the server's /metrics."
                .to_string(),
        );
    }
    if input.sample_interval().is_none() {
        notes.push(
            "The run states no sample interval, so the client's own lag is not measured."
                .to_string(),
        );
    }
    Diagnosis {
        with_server,
        states,
        limit,
        sentence,
        notes,
    }
}

/// A level of a load sweep above the sweep's knee (`knee`): more load gave no
/// more throughput there, so "raise the cap" is never said — the client-cap
/// time is the server's, and the sentence says so when it names the limit.
pub fn above_knee(d: &mut Diagnosis, level: f64, knee: f64) {
    let Some(i) = d.states.iter().position(|s| s.state == State::ClientCap) else {
        return;
    };
    let words = &STATES[State::ServerBusy as usize];
    let s = &mut d.states[i];
    s.state = State::ServerBusy;
    s.name = words.name;
    s.meaning = "at the cap with work waiting at a load above the sweep's knee: more load gave no more throughput, so the server was busy";
    s.next_step = words.next_step;
    if d.limit == Some(State::ClientCap) {
        d.limit = Some(State::ServerBusy);
        d.sentence = format!(
            "The server was the limit: at the cap with work waiting {:.0} % of the window, \
             and this level ({level}) is above the sweep's knee ({knee}), where more load \
             gave no more throughput — next: {}.",
            s.share * 100.0,
            words.next_step
        );
    }
    d.notes.push(format!(
        "Level {level} is above the sweep's knee ({knee}): raising the cap is not advised."
    ));
}

#[cfg(test)]
mod tests;
