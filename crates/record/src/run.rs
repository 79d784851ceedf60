//! A run's metadata: what a producer says about the run it records ([`RunInfo`]),
//! turned into the log's `run` record with a fresh id, the schema and the clock's
//! anchor; run ids and the compact UTC form of file names; URLs stripped of
//! credentials before they are written.

use std::collections::BTreeMap;
use std::time::Duration;

use tpscope_model::{
    QueueTimes, RunClock, RunRecord, SCHEMA, Target, TargetApi, Timestamp, TokenSource,
};
use tpscope_tokens::mix;

/// The producer written in `run` records: this tool and its version.
pub const TOOL: &str = concat!("tpscope ", env!("CARGO_PKG_VERSION"));

/// What a producer says about a run; [`RunInfo::record`] adds the id, schema and start.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunInfo {
    /// The producer and its version (usually [`TOOL`]).
    pub tool: String,
    /// What is measured (its URL passed through [`redact_url`]).
    pub target: Target,
    /// The in-flight cap, when there is one.
    pub cap: Option<u32>,
    /// The token source spans use unless they say otherwise.
    pub token_source: Option<TokenSource>,
    /// The tokenizer of synthetic prompts or counting, when any.
    pub tokenizer: Option<String>,
    /// The cadence of `sample` records, when sampled.
    pub sample_interval: Option<Duration>,
    /// When set, samples are written on a change of state and at least this
    /// often, not on every tick (the `run` record says so).
    pub sample_heartbeat: Option<Duration>,
    /// The producer's load settings (free-form object; `Null` for none).
    pub load: serde_json::Value,
    /// Free-form labels.
    pub labels: BTreeMap<String, String>,
}

impl RunInfo {
    /// A run produced by this tool ([`TOOL`]) with nothing else said yet; the
    /// builder methods below add to it.
    pub fn new() -> RunInfo {
        RunInfo {
            tool: TOOL.into(),
            ..RunInfo::default()
        }
    }

    /// With this in-flight cap.
    pub fn cap(mut self, cap: u32) -> RunInfo {
        self.cap = Some(cap);
        self
    }

    /// With the label `key` = `value` (a later one with the same key wins).
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> RunInfo {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// With this target URL (credentials and query string are removed).
    pub fn url(mut self, url: &str) -> RunInfo {
        self.target.url = Some(redact_url(url));
        self
    }

    /// With this model name.
    pub fn model(mut self, model: impl Into<String>) -> RunInfo {
        self.target.model = Some(model.into());
        self
    }

    /// With this API (an [`tpscope_model::Api`], or a name: `chat`, `completions`,
    /// …, or the producer's own).
    pub fn api(mut self, api: impl Into<TargetApi>) -> RunInfo {
        self.target.api = Some(api.into());
        self
    }

    /// Sampled at this cadence instead of the default.
    pub fn sample_interval(mut self, every: Duration) -> RunInfo {
        self.sample_interval = Some(every);
        self
    }

    /// Written on a change and at least this often, instead of every tick
    /// (sessions default to [`crate::DEFAULT_SAMPLE_HEARTBEAT`]).
    pub fn sample_heartbeat(mut self, every: Duration) -> RunInfo {
        self.sample_heartbeat = Some(every);
        self
    }

    /// With these load settings (a free-form JSON object).
    pub fn load(mut self, load: serde_json::Value) -> RunInfo {
        self.load = load;
        self
    }

    /// The `run` record of run `run_id`, started at `clock`'s anchor.
    pub fn record(self, run_id: String, clock: &RunClock) -> RunRecord {
        RunRecord {
            run_id,
            schema: SCHEMA.into(),
            tool: self.tool,
            started_at: clock.anchor_wall(),
            target: self.target,
            cap: self.cap,
            token_source: self.token_source,
            tokenizer: self.tokenizer,
            sample_interval: self.sample_interval,
            sample_heartbeat: self.sample_heartbeat,
            load: self.load,
            labels: self.labels,
            // The recorder is handed each request's queue time (or stamps it).
            queue_times: QueueTimes::Measured,
        }
    }
}

/// A new run id: the UTC time and 24 bits salted by the process and `seq` (so the
/// runs of one sweep, started in the same second, differ).
pub fn new_run_id(seq: usize) -> String {
    let now = Timestamp::now_wall();
    let salt = mix(now.unix_nanos() as u64 ^ (u64::from(std::process::id()) << 32) ^ seq as u64);
    format!("{}-{:06x}", utc_compact(now), salt & 0xff_ffff)
}

/// `2026-11-21T14:05:12.123Z` → `20261121T140512Z`.
pub fn utc_compact(t: Timestamp) -> String {
    let s = t.to_string();
    let mut out: String = s
        .chars()
        .take(19)
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    out.push('Z');
    out
}

/// The URL without user:password and without query string (which may hold keys).
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if scheme.is_empty() {
        format!("{host}{path}")
    } else {
        format!("{scheme}://{host}{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_credentials_and_queries() {
        assert_eq!(
            redact_url("https://user:pw@host:8/v1?key=x"),
            "https://host:8/v1"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:8000/v1"),
            "http://127.0.0.1:8000/v1"
        );
    }

    #[test]
    fn compact_utc_names() {
        let t = Timestamp::parse_rfc3339("2026-11-21T14:05:12.5Z").unwrap();
        assert_eq!(utc_compact(t), "20261121T140512Z");
    }
}
