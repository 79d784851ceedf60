//! What the proxy's `end` record adds to a run's counts, and its stop: how many
//! completions stated their queue time (`x-tpscope-queued-at`; none means the
//! pipeline's own queue was unseen and the report infers it), and the requests
//! still open when the drain ended, cut and written as cancelled spans with
//! the tokens relayed so far.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use tokio::sync::Notify;
use tpscope_record::ProxyEnd;

/// The counts of the `end` record, and whether the proxy is cutting.
#[derive(Default)]
pub(crate) struct EndTally {
    stated: AtomicU64,
    cutting: AtomicBool,
    cut: AtomicU64,
    model: OnceLock<String>,
}

impl EndTally {
    /// A completion stated when it was queued.
    pub fn stated(&self) {
        self.stated.fetch_add(1, Relaxed);
    }

    /// From now on, requests that end unfinished were cut by the stop.
    pub fn start_cutting(&self) {
        self.cutting.store(true, Relaxed);
    }

    /// A request ends unfinished: whether the stop cut it (then counted).
    pub fn cut_one(&self) -> bool {
        let cutting = self.cutting.load(Relaxed);
        if cutting {
            self.cut.fetch_add(1, Relaxed);
        }
        cutting
    }

    /// A response named its model (the first one named is the run's).
    pub fn model(&self, model: &str) {
        if self.model.get().is_none() {
            let _ = self.model.set(model.to_string());
        }
    }

    /// What the `end` record says.
    pub fn end(&self) -> ProxyEnd {
        ProxyEnd {
            queued_at_stated: self.stated.load(Relaxed),
            cut_at_stop: self.cut.load(Relaxed),
            model: self.model.get().cloned(),
        }
    }
}

/// Ends the drain of a stopping proxy at once (a second signal): the requests
/// still open are cut, written as cancelled.
#[derive(Clone, Default)]
pub struct CutNow(pub(crate) Arc<Notify>);

impl CutNow {
    /// Cuts now (before or during the drain).
    pub fn cut(&self) {
        self.0.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_ended_after_the_cut_began_are_counted_cut_and_the_first_model_kept() {
        let t = EndTally::default();
        t.stated();
        assert!(!t.cut_one(), "a client going away before the stop");
        t.model("m");
        t.model("other");
        t.start_cutting();
        assert!(t.cut_one());
        assert!(t.cut_one());
        assert_eq!(
            t.end(),
            ProxyEnd {
                queued_at_stated: 1,
                cut_at_stop: 2,
                model: Some("m".into()),
            }
        );
    }
}
