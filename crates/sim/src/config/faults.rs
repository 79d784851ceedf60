//! Fault injection settings ([`Faults`]): per-request probabilities, in draw
//! order, and their parameters.

use std::time::Duration;

/// Fault probabilities (per request) and their parameters. At most one fault hits a
/// request: one uniform draw per request is compared against the cumulative
/// probabilities in the order 429, 500, 503, cut, stall, malformed, slow first token,
/// so each fault appears at exactly its own rate and their sum must be ≤ 1.
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    /// Probability of an immediate 429 with `Retry-After`.
    pub p429: f64,
    /// The `Retry-After` value sent with a 429 (whole seconds, rounded up).
    pub retry_after: Duration,
    /// Probability of an immediate 500.
    pub p500: f64,
    /// Probability of an immediate 503.
    pub p503: f64,
    /// Probability that the response is cut (connection closed) after `cut_after`
    /// output tokens, with no finish chunk and no `[DONE]`.
    pub cut: f64,
    /// Output tokens delivered before a cut.
    pub cut_after: u32,
    /// Probability of a stall: no bytes for `stall_for` after `stall_after` tokens.
    pub stall: f64,
    /// Length of a stall (wall time, whatever the speed).
    pub stall_for: Duration,
    /// Output tokens delivered before a stall.
    pub stall_after: u32,
    /// Probability of one malformed SSE event (a `data:` line that is not JSON),
    /// inserted after `malformed_after` tokens; the stream then goes on normally.
    pub malformed: f64,
    /// Output tokens delivered before the malformed event.
    pub malformed_after: u32,
    /// Probability that the first token is held back by `slow_first_token_delay`.
    pub slow_first_token: f64,
    /// Extra wait before the first token (wall time, whatever the speed).
    pub slow_first_token_delay: Duration,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            p429: 0.0,
            retry_after: Duration::from_secs(1),
            p500: 0.0,
            p503: 0.0,
            cut: 0.0,
            cut_after: 8,
            stall: 0.0,
            stall_for: Duration::from_secs(2),
            stall_after: 8,
            malformed: 0.0,
            malformed_after: 1,
            slow_first_token: 0.0,
            slow_first_token_delay: Duration::from_secs(2),
        }
    }
}

impl Faults {
    /// The probabilities with their knobs' TOML keys, in draw order.
    pub(crate) fn table(&self) -> [(&'static str, f64); 7] {
        [
            ("fault_429", self.p429),
            ("fault_500", self.p500),
            ("fault_503", self.p503),
            ("fault_cut", self.cut),
            ("fault_stall", self.stall),
            ("fault_malformed", self.malformed),
            ("fault_slow_first_token", self.slow_first_token),
        ]
    }
}
