//! Multi-turn sessions: conversations whose turns are sent in order, each turn's
//! prompt carrying the whole history with the replies as the server returned them.
//! Where the user turns come from ([`SessionSource`]: synthetic turns drawn from the
//! run's single-turn workload, or a file of conversations — ShareGPT multi-turn or
//! OpenAI chat JSONL), the think time between turns ([`ThinkTime`]), and the reader
//! of conversation files, whose errors name the file, line and field.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use serde_json::Value;
use tpscope_model::units::parse_duration;

use super::file::{FileError, ferr, positive_u32};
use super::prompts::conversation_records;
use crate::dist::LengthDist;
use crate::spec::SessionSettings;

/// One user turn of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserTurn {
    /// What the user says.
    pub content: String,
    /// The output length asked for (`None`: from `--output-tokens`).
    pub max_tokens: Option<u32>,
}

/// A conversation read from a file: an optional system prompt and its user turns
/// (the file's assistant turns are dropped: the server's replies take their place).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversation {
    /// The system prompt, when the conversation starts with one.
    pub system: Option<String>,
    /// The user turns, in order (at least one).
    pub turns: Vec<UserTurn>,
}

/// Where a session's user turns come from.
#[derive(Clone, Debug)]
pub enum SessionSource {
    /// `--sessions N --turns DIST`: each turn's user message is the next request of
    /// the run's single-turn workload (synthetic lengths, a prompt file, …).
    Synthetic {
        /// Sessions in the run.
        sessions: u64,
        /// Turns per session.
        turns: LengthDist,
    },
    /// `--conversations FILE`: one session per conversation (at most `sessions`).
    Conversations {
        /// Where they came from (for the run record).
        source: String,
        /// The conversations.
        items: Arc<Vec<Conversation>>,
        /// How many sessions the run has.
        sessions: u64,
    },
}

/// A multi-turn run: where turns come from and the pause between them.
#[derive(Clone, Debug)]
pub struct SessionPlan {
    /// The turns.
    pub source: SessionSource,
    /// The pause after a reply before the next turn is sent.
    pub think_time: Option<ThinkTime>,
}

impl SessionPlan {
    /// How many sessions the run has.
    pub fn sessions(&self) -> u64 {
        match &self.source {
            SessionSource::Synthetic { sessions, .. }
            | SessionSource::Conversations { sessions, .. } => *sessions,
        }
    }

    /// The plan as the run record's load settings describe it.
    pub fn settings(&self) -> SessionSettings<'_> {
        let (turns, conversations) = match &self.source {
            SessionSource::Synthetic { turns, .. } => (Some(turns.to_string()), None),
            SessionSource::Conversations { source, .. } => (None, Some(source.as_str())),
        };
        SessionSettings {
            count: self.sessions(),
            turns,
            conversations,
            think_time: self.think_time.map(|t| t.to_string()),
        }
    }
}

/// `--think-time`: a duration (`2s`), or `exp:MEAN`, or `uniform:LO..HI`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThinkTime {
    /// Always this long.
    Fixed(Duration),
    /// Exponentially distributed with this mean.
    Exp(Duration),
    /// Uniform between the two.
    Uniform(Duration, Duration),
}

/// A `--think-time` value that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a think time (expected a duration such as 2s, exp:MEAN or uniform:LO..HI)")]
pub struct BadThinkTime(pub String);

impl FromStr for ThinkTime {
    type Err = BadThinkTime;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadThinkTime(s.to_string());
        let d = |t: &str| parse_duration(t.trim()).map_err(|_| bad());
        if let Some(m) = s.strip_prefix("exp:") {
            return Ok(ThinkTime::Exp(d(m)?));
        }
        if let Some(r) = s.strip_prefix("uniform:") {
            let (lo, hi) = r.split_once("..").ok_or_else(bad)?;
            let (lo, hi) = (d(lo)?, d(hi)?);
            if lo > hi {
                return Err(bad());
            }
            return Ok(ThinkTime::Uniform(lo, hi));
        }
        Ok(ThinkTime::Fixed(d(s)?))
    }
}

impl fmt::Display for ThinkTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThinkTime::Fixed(d) => write!(f, "{}s", d.as_secs_f64()),
            ThinkTime::Exp(d) => write!(f, "exp:{}s", d.as_secs_f64()),
            ThinkTime::Uniform(a, b) => {
                write!(f, "uniform:{}s..{}s", a.as_secs_f64(), b.as_secs_f64())
            }
        }
    }
}

impl ThinkTime {
    /// One pause.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        match *self {
            ThinkTime::Fixed(d) => d,
            ThinkTime::Exp(m) => {
                let u: f64 = rng.random_range(f64::EPSILON..1.0);
                m.mul_f64(-u.ln())
            }
            ThinkTime::Uniform(a, b) if a == b => a,
            ThinkTime::Uniform(a, b) => {
                Duration::from_secs_f64(rng.random_range(a.as_secs_f64()..=b.as_secs_f64()))
            }
        }
    }
}

/// The text of a turn: a string, or an array of text parts.
fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts)
            if parts
                .iter()
                .all(|p| p.get("text").is_some_and(Value::is_string)) =>
        {
            Some(
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect(),
            )
        }
        _ => None,
    }
}

/// One conversation record: ShareGPT (`conversations` of `{from, value}`) or
/// OpenAI chat (`messages` of `{role, content}`, or a batch line's `body`).
fn conversation_of(
    rec: &Value,
    path: &Path,
    line: Option<usize>,
    at: &dyn Fn(&str) -> String,
) -> Result<Conversation, FileError> {
    let rec = match rec.get("body") {
        Some(b) if b.is_object() => b,
        _ => rec,
    };
    let (field, arr) = match (
        rec.get("conversations").or_else(|| rec.get("conversation")),
        rec.get("messages"),
    ) {
        (Some(a), _) => ("conversations", a),
        (None, Some(m)) => ("messages", m),
        (None, None) => {
            return Err(ferr(
                path,
                line,
                Some(&at("conversations")),
                "missing: expected `conversations` (ShareGPT) or `messages` (OpenAI chat)",
            ));
        }
    };
    let arr = arr
        .as_array()
        .ok_or_else(|| ferr(path, line, Some(&at(field)), "expected an array of turns"))?;
    let mut conv = Conversation {
        system: None,
        turns: Vec::new(),
    };
    for (i, t) in arr.iter().enumerate() {
        let role = t
            .get("from")
            .or_else(|| t.get("role"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ferr(
                    path,
                    line,
                    Some(&at(&format!("{field}[{i}].role"))),
                    "expected a string (`from` or `role`)",
                )
            })?;
        let text = text_of(t.get("value").or_else(|| t.get("content"))).ok_or_else(|| {
            ferr(
                path,
                line,
                Some(&at(&format!("{field}[{i}].content"))),
                "expected a string (or an array of text parts)",
            )
        })?;
        match role {
            "human" | "user" => conv.turns.push(UserTurn {
                content: text,
                max_tokens: None,
            }),
            "system" if conv.turns.is_empty() => conv.system = Some(text),
            // The reference replies are dropped: the server's own replies are sent.
            _ => {}
        }
    }
    if conv.turns.is_empty() {
        return Err(ferr(
            path,
            line,
            Some(&at(field)),
            "an empty session: expected at least one user (human) turn",
        ));
    }
    if let Some(n) = rec.get("max_tokens").filter(|n| !n.is_null()) {
        let m = positive_u32(n, path, line.unwrap_or(0), "max_tokens")?;
        for t in &mut conv.turns {
            t.max_tokens = Some(m);
        }
    }
    Ok(conv)
}

/// Reads a file of conversations: a JSON array (ShareGPT) or JSON Lines, each
/// record ShareGPT `{"conversations": [{"from": "human", "value": ...}, ...]}` or
/// OpenAI chat `{"messages": [{"role": "user", "content": ...}, ...]}`.
pub fn read_conversations(path: &Path) -> Result<Vec<Conversation>, FileError> {
    let records = conversation_records(path)?;
    let mut out = Vec::with_capacity(records.len());
    for (idx, (line, rec)) in records.iter().enumerate() {
        let at = |field: &str| match line {
            Some(_) => field.to_string(),
            None => format!("[{idx}].{field}"),
        };
        out.push(conversation_of(rec, path, *line, &at)?);
    }
    if out.is_empty() {
        return Err(ferr(path, None, None, "holds no conversations"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::file::testing::temp;
    use super::*;

    #[test]
    fn reads_sharegpt_and_openai_chat_conversations() {
        let f = temp(
            r#"[{"conversations": [{"from": "system", "value": "be kind"}, {"from": "human", "value": "a"}, {"from": "gpt", "value": "x"}, {"from": "human", "value": "b"}]}]"#,
        );
        let c = read_conversations(f.path()).unwrap();
        assert_eq!(c[0].system.as_deref(), Some("be kind"));
        let turns: Vec<&str> = c[0].turns.iter().map(|t| t.content.as_str()).collect();
        assert_eq!(turns, ["a", "b"]);
        let f = temp(
            "{\"messages\": [{\"role\": \"user\", \"content\": \"1\"}, {\"role\": \"assistant\", \"content\": \"r\"}, {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"2\"}]}], \"max_tokens\": 9}\n",
        );
        let c = read_conversations(f.path()).unwrap();
        assert_eq!(c[0].turns.len(), 2);
        assert_eq!(c[0].turns[1].content, "2");
        assert_eq!(c[0].turns[1].max_tokens, Some(9));
    }

    #[test]
    fn a_turn_that_is_not_a_string_is_a_clear_error() {
        let f = temp(
            "{\"messages\": [{\"role\": \"user\", \"content\": \"ok\"}]}\n{\"messages\": [{\"role\": \"user\", \"content\": 5}]}\n",
        );
        let e = read_conversations(f.path()).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert_eq!(e.field.as_deref(), Some("messages[0].content"), "{e}");
        assert!(e.to_string().contains("expected a string"), "{e}");
        let f = temp(r#"[{"conversations": [{"from": "human", "value": ["a"]}]}]"#);
        let e = read_conversations(f.path()).unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("[0].conversations[0].content"),
            "{e}"
        );
    }

    #[test]
    fn an_empty_session_is_a_clear_error() {
        for content in [
            "{\"messages\": []}\n",
            "{\"messages\": [{\"role\": \"assistant\", \"content\": \"only a reply\"}]}\n",
        ] {
            let f = temp(content);
            let e = read_conversations(f.path()).unwrap_err();
            assert!(e.problem.contains("empty session"), "{e}");
            assert_eq!(e.line, Some(1), "{e}");
        }
        let f = temp("{\"prompt\": \"single turn\"}\n");
        let e = read_conversations(f.path()).unwrap_err();
        assert!(e.problem.contains("`messages`"), "{e}");
    }

    #[test]
    fn think_times_parse_and_sample_within_bounds() {
        use rand::SeedableRng;
        assert_eq!(
            "2s".parse::<ThinkTime>().unwrap(),
            ThinkTime::Fixed(Duration::from_secs(2))
        );
        let u: ThinkTime = "uniform:1s..3s".parse().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for _ in 0..100 {
            let d = u.sample(&mut rng);
            assert!((Duration::from_secs(1)..=Duration::from_secs(3)).contains(&d));
        }
        assert!("exp:500ms".parse::<ThinkTime>().is_ok());
        assert!("uniform:3s..1s".parse::<ThinkTime>().is_err());
        assert!("soon".parse::<ThinkTime>().is_err());
    }
}
