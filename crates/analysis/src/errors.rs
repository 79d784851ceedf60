//! The most frequent failure messages per cause: a bounded tally kept while a log
//! is read (the reason behind "http_4xx 3" is in the message: "HTTP 400:
//! `stream_options` is only allowed when `stream` is true"), and its top entries
//! in the report. Messages are normalised so that the same failure with another
//! number (a length, a request id) counts once.

use std::collections::BTreeMap;

use serde::Serialize;
use tpscope_model::Cause;

/// Distinct messages held per cause; later new ones are only counted (`other`),
/// so a run of a million different messages holds no more than this.
pub const KEPT_PER_CAUSE: usize = 64;

/// Messages shown per cause in a report.
pub const SHOWN_PER_CAUSE: usize = 3;

/// Characters of a message kept (the rest is cut, with `…`).
const MAX_CHARS: usize = 240;

/// The tally of failure messages of one run, by cause.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorMessages {
    by_cause: BTreeMap<Cause, Tally>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Tally {
    entries: Vec<Entry>,
    other: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    key: String,
    example: String,
    count: u64,
}

/// One message and how many failures said it (or one like it, numbers aside).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MessageCount {
    /// The first message seen of its kind, whitespace collapsed and cut to 240
    /// characters.
    pub message: String,
    /// Failures with this message (numbers in it aside).
    pub count: u64,
}

/// The most frequent messages of one cause.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CauseMessages {
    /// The cause.
    pub cause: Cause,
    /// Its most frequent messages, most frequent first (at most
    /// [`SHOWN_PER_CAUSE`]).
    pub messages: Vec<MessageCount>,
    /// Failures of this cause with other messages than those listed.
    pub other: u64,
}

impl ErrorMessages {
    /// Counts one failure of `cause` that said `message`.
    pub fn add(&mut self, cause: Cause, message: &str) {
        let shown = tidy(message);
        let key = key_of(&shown);
        let tally = self.by_cause.entry(cause).or_default();
        if let Some(e) = tally.entries.iter_mut().find(|e| e.key == key) {
            e.count += 1;
        } else if tally.entries.len() < KEPT_PER_CAUSE {
            tally.entries.push(Entry {
                key,
                example: shown,
                count: 1,
            });
        } else {
            tally.other += 1;
        }
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.by_cause.is_empty()
    }

    /// The `n` most frequent messages of each cause (ties: first seen first), in
    /// the order of [`Cause::ALL`].
    pub fn top(&self, n: usize) -> Vec<CauseMessages> {
        let mut out = Vec::new();
        for cause in Cause::ALL {
            let Some(t) = self.by_cause.get(&cause) else {
                continue;
            };
            let mut entries: Vec<&Entry> = t.entries.iter().collect();
            // Stable: equal counts keep the order they were first seen in.
            entries.sort_by_key(|e| std::cmp::Reverse(e.count));
            let shown = entries.len().min(n);
            out.push(CauseMessages {
                cause,
                messages: entries[..shown]
                    .iter()
                    .map(|e| MessageCount {
                        message: e.example.clone(),
                        count: e.count,
                    })
                    .collect(),
                other: t.other + entries[shown..].iter().map(|e| e.count).sum::<u64>(),
            });
        }
        out
    }
}

/// Whitespace runs made one space, trimmed, cut to [`MAX_CHARS`] characters.
fn tidy(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_CHARS + 4));
    for (i, word) in message.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(word);
    }
    if out.is_empty() {
        return "(no message)".into();
    }
    if let Some((cut, _)) = out.char_indices().nth(MAX_CHARS) {
        out.truncate(cut);
        out.push('…');
    }
    out
}

/// The message with every run of digits made `#` (one failure with another
/// length, port or id is the same failure), except an HTTP status it starts
/// with (`HTTP 404: …` and `HTTP 413: …` differ).
fn key_of(shown: &str) -> String {
    let keep = if shown.starts_with("HTTP ") {
        shown.len().min(8)
    } else {
        0
    };
    let mut key = String::with_capacity(shown.len());
    key.push_str(&shown[..keep]);
    let mut in_digits = false;
    for c in shown[keep..].chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                key.push('#');
            }
            in_digits = true;
        } else {
            key.push(c);
            in_digits = false;
        }
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_behind_a_cause_count_is_kept_most_frequent_first() {
        let mut m = ErrorMessages::default();
        for _ in 0..2 {
            m.add(Cause::Http4xx, "HTTP 404: The model `nope` does not exist.");
        }
        for len in [5000, 6000, 7000] {
            m.add(
                Cause::Http4xx,
                &format!("HTTP 400: maximum context length is 4096 tokens, you asked for {len}"),
            );
        }
        m.add(Cause::Disconnect, "  the stream\n ended   early ");
        let top = m.top(SHOWN_PER_CAUSE);
        assert_eq!(top.len(), 2);
        assert_eq!(top[0].cause, Cause::Http4xx);
        assert_eq!(
            top[0].messages[0],
            MessageCount {
                message: "HTTP 400: maximum context length is 4096 tokens, you asked for 5000"
                    .into(),
                count: 3
            }
        );
        assert_eq!(top[0].messages[1].count, 2);
        assert_eq!(top[1].messages[0].message, "the stream ended early");
        assert_eq!(top.iter().map(|c| c.other).sum::<u64>(), 0);
    }

    #[test]
    fn a_flood_of_distinct_messages_stays_bounded_and_counted() {
        let mut m = ErrorMessages::default();
        for i in 0..1000 {
            // Letters, not digits: each one is distinct.
            let word: String = i
                .to_string()
                .bytes()
                .map(|d| (b'g' + (d - b'0')) as char)
                .collect();
            m.add(Cause::Http5xx, &format!("boom {word}"));
        }
        m.add(Cause::Http5xx, "");
        m.add(Cause::Http5xx, &"x".repeat(1000));
        let top = m.top(2);
        let t = &top[0];
        assert_eq!(t.messages.len(), 2);
        let held = m.by_cause[&Cause::Http5xx].entries.len();
        assert_eq!(held, KEPT_PER_CAUSE);
        assert_eq!(
            t.messages.iter().map(|c| c.count).sum::<u64>() + t.other,
            1002
        );
    }

    #[test]
    fn long_messages_are_cut_and_http_statuses_kept_apart() {
        assert_eq!(tidy(&"é".repeat(300)).chars().count(), MAX_CHARS + 1);
        assert_eq!(tidy(" \n"), "(no message)");
        assert_ne!(key_of("HTTP 404: gone"), key_of("HTTP 413: gone"));
        assert_eq!(key_of("took 12 ms of 300"), "took # ms of #");
    }
}
