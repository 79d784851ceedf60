//! The server's token counts, in a dialect-neutral shape: each decoder maps its
//! wire fields onto it (OpenAI `usage`; Anthropic `message_start`/`message_delta`
//! usage, see [`crate::anthropic`]).

/// The server's token counts. Each is `None` when the server omitted it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub prompt_tokens: Option<u64>,
    /// Completion (output) tokens, reasoning tokens included.
    pub completion_tokens: Option<u64>,
    /// Reasoning tokens (part of `completion_tokens`).
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens served from a prefix cache (part of `prompt_tokens`).
    pub cached_tokens: Option<u64>,
}

impl Usage {
    /// `self` with the fields `newer` has replaced by newer values (a server that
    /// sends usage several times: the last value of each field wins).
    pub fn merged(self, newer: Usage) -> Usage {
        Usage {
            prompt_tokens: newer.prompt_tokens.or(self.prompt_tokens),
            completion_tokens: newer.completion_tokens.or(self.completion_tokens),
            reasoning_tokens: newer.reasoning_tokens.or(self.reasoning_tokens),
            cached_tokens: newer.cached_tokens.or(self.cached_tokens),
        }
    }
}
