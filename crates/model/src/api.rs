//! The API kind a request is sent to: one enum ([`Api`]) for the client's `--api`,
//! the request body's shape, the path (and the API of a path the proxy sees), and
//! the name written in run records; and what a run record's `target.api` holds
//! ([`TargetApi`]: one of those, the proxy's mix, or another tool's name). The wire
//! format of a response is the stream layer's `Dialect`, chosen from the [`Api`].

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Which API to call: OpenAI-compatible chat, completions or Responses, or
/// Anthropic Messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Api {
    /// `POST {base}/chat/completions` with `messages`.
    #[default]
    Chat,
    /// `POST {base}/completions` (legacy) with `prompt`.
    Completions,
    /// `POST {base}/messages` (Anthropic Messages) with `messages` and `system`;
    /// the key goes in `x-api-key`, with `anthropic-version`.
    Anthropic,
    /// `POST {base}/responses` (OpenAI Responses) with `input` and
    /// `max_output_tokens`; usage comes with `response.completed` unasked.
    Responses,
}

impl Api {
    /// Every API, in the order a path is matched against them (chat before
    /// completions: `/chat/completions` also ends with `/completions`).
    pub const ALL: [Api; 4] = [Api::Chat, Api::Completions, Api::Anthropic, Api::Responses];

    /// The API a request path calls (the last segments are the API's [`Api::path`],
    /// a trailing `/` ignored), or `None`: `/v1/chat/completions` is chat,
    /// `/v1/responses/{id}` (retrieving one) none.
    pub fn of_path(path: &str) -> Option<Api> {
        let p = path.trim_end_matches('/');
        Api::ALL.into_iter().find(|a| p.ends_with(a.path()))
    }

    /// The path appended to the base URL (`/chat/completions`, `/completions`,
    /// `/messages` or `/responses`).
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "/chat/completions",
            Api::Completions => "/completions",
            Api::Anthropic => "/messages",
            Api::Responses => "/responses",
        }
    }

    /// The name used in run records and by `--api` (`chat`, `completions`,
    /// `anthropic` or `responses`).
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Completions => "completions",
            Api::Anthropic => "anthropic",
            Api::Responses => "responses",
        }
    }
}

/// An `--api` value that names no [`Api`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an API (expected chat, completions, anthropic or responses)")]
pub struct BadApi(pub String);

impl std::str::FromStr for Api {
    type Err = BadApi;

    // The names are `as_str`'s, so a new API is named in one place.
    fn from_str(s: &str) -> Result<Self, BadApi> {
        Api::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| BadApi(s.to_string()))
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a run record's `target.api` says the run's requests called: an API tpscope
/// speaks, whatever a recording proxy relayed, or another tool's name for it (an
/// importer's, a program's own). Written as the name each stands for (`chat`,
/// `proxy`, `llmperf`, …), so every log reads back as it was written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TargetApi {
    /// One API tpscope calls (written as [`Api::as_str`]).
    Known(Api),
    /// The APIs a recording proxy relayed, each request's its own (written `proxy`).
    Proxied,
    /// Another producer's name: an importer's tool (`llmperf`,
    /// `vllm-bench:openai-chat`), an OTLP operation (`text_completion`), a
    /// program's own; never one of the names above.
    Other(String),
}

impl TargetApi {
    /// The name written in the run record.
    const PROXIED: &'static str = "proxy";

    /// The name as written in the run record.
    pub fn as_str(&self) -> &str {
        match self {
            TargetApi::Known(a) => a.as_str(),
            TargetApi::Proxied => TargetApi::PROXIED,
            TargetApi::Other(s) => s,
        }
    }

    /// The API tpscope speaks that this names, if one.
    pub fn known(&self) -> Option<Api> {
        match self {
            TargetApi::Known(a) => Some(*a),
            _ => None,
        }
    }
}

impl From<Api> for TargetApi {
    fn from(a: Api) -> TargetApi {
        TargetApi::Known(a)
    }
}

impl From<&str> for TargetApi {
    /// The name as a run record holds it: a known name is that variant, so a name
    /// read back is the value written.
    fn from(s: &str) -> TargetApi {
        match s.parse::<Api>() {
            Ok(a) => TargetApi::Known(a),
            Err(_) if s == TargetApi::PROXIED => TargetApi::Proxied,
            Err(_) => TargetApi::Other(s.to_string()),
        }
    }
}

impl From<String> for TargetApi {
    fn from(s: String) -> TargetApi {
        match TargetApi::from(s.as_str()) {
            TargetApi::Other(_) => TargetApi::Other(s),
            known => known,
        }
    }
}

impl fmt::Display for TargetApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for TargetApi {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for TargetApi {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TargetApi, D::Error> {
        String::deserialize(d).map(TargetApi::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_written_today_reads_back_as_written() {
        // The names producers wrote before `target.api` was typed: the bench's
        // APIs, the proxy's, importers' tools, an OTLP operation.
        for (name, want) in [
            ("chat", TargetApi::Known(Api::Chat)),
            ("completions", TargetApi::Known(Api::Completions)),
            ("anthropic", TargetApi::Known(Api::Anthropic)),
            ("responses", TargetApi::Known(Api::Responses)),
            ("proxy", TargetApi::Proxied),
            ("llmperf", TargetApi::Other("llmperf".into())),
            (
                "vllm-bench:openai-chat",
                TargetApi::Other("vllm-bench:openai-chat".into()),
            ),
            (
                "text_completion",
                TargetApi::Other("text_completion".into()),
            ),
            ("", TargetApi::Other(String::new())),
        ] {
            let json = serde_json::to_string(name).unwrap();
            let read: TargetApi = serde_json::from_str(&json).unwrap();
            assert_eq!(read, want, "{name}");
            assert_eq!(serde_json::to_string(&read).unwrap(), json, "{name}");
            assert_eq!(TargetApi::from(name.to_string()), want, "{name}");
        }
    }

    #[test]
    fn a_path_names_its_api_chat_before_completions() {
        for (path, want) in [
            ("/v1/chat/completions", Some(Api::Chat)),
            ("/v1/chat/completions/", Some(Api::Chat)),
            ("/v1/completions", Some(Api::Completions)),
            ("/v1/messages", Some(Api::Anthropic)),
            ("/v1/responses", Some(Api::Responses)),
            ("/v1/responses/resp_1/cancel", None),
            ("/v1/embeddings", None),
        ] {
            assert_eq!(Api::of_path(path), want, "{path}");
        }
        for a in Api::ALL {
            assert_eq!(Api::of_path(a.path()), Some(a));
            assert_eq!(a.as_str().parse::<Api>(), Ok(a));
        }
    }
}
