//! The API kind a request is sent to: one enum for the client's `--api`, the
//! request body's shape, the path, and the name written in run records (the wire
//! format of its responses is the stream layer's `Dialect`, chosen from it).

use std::fmt;

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
    /// The path appended to the base URL (`/chat/completions` or `/completions`).
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "/chat/completions",
            Api::Completions => "/completions",
            Api::Anthropic => "/messages",
            Api::Responses => "/responses",
        }
    }

    /// The name used in run records (`chat` or `completions`).
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Completions => "completions",
            Api::Anthropic => "anthropic",
            Api::Responses => "responses",
        }
    }
}

/// An `--api` value that is neither `chat` nor `completions`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an API (expected chat, completions, anthropic or responses)")]
pub struct BadApi(pub String);

impl std::str::FromStr for Api {
    type Err = BadApi;

    // The names are `as_str`'s, so a new API is named in one place.
    fn from_str(s: &str) -> Result<Self, BadApi> {
        [Api::Chat, Api::Completions, Api::Anthropic, Api::Responses]
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
