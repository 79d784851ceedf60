//! A run's report as renderer-neutral sections — a heading, then tables,
//! sentences, lists and charts — built once from the report ([`run_sections`])
//! and laid out by the text, markdown and HTML renderers alike, as each lays out
//! a table or a sentence its own way. A new section is a function returning a
//! [`Section`] and one entry of [`run_sections`], with its snapshot.

use tpscope_analysis::RunReport;
use tpscope_analysis::server::ServerVsClient;
use tpscope_analysis::sessions::SessionReport;

use crate::fmt::{capitalised, md_table, text_table};

/// One section of a run's report.
#[derive(Clone, Debug, PartialEq)]
pub struct Section<'a> {
    /// Names the section's charts in a page (`{run}-{key}`).
    pub key: &'static str,
    /// The heading, lower case (`ramp: how throughput followed the load`).
    pub title: String,
    /// What the section shows, after the heading (`TTFT by turn (…)`).
    pub gloss: Option<String>,
    /// What follows the heading, in order.
    pub blocks: Vec<Block<'a>>,
}

/// A part of a section.
#[derive(Clone, Debug, PartialEq)]
pub enum Block<'a> {
    /// A table: its heads and rows of cells.
    Table {
        /// The heads.
        heads: Vec<String>,
        /// The rows.
        rows: Vec<Vec<String>>,
        /// How many of the last columns are words, not figures (`what it is`):
        /// text sets them left-aligned after the figures, a page as notes.
        prose: usize,
        /// How many of the last columns text leaves out (long words that the
        /// section's other blocks already say; markdown and a page show them).
        brief: usize,
    },
    /// The section's conclusion, a whole sentence, set right after the heading
    /// (text and markdown run it in; a page sets it in bold).
    Lead(String),
    /// A sentence, lower case and without its final stop (each format adds them).
    Sentence(String),
    /// A remark in small print (what a figure covers), written like a sentence.
    Note(String),
    /// Sentences that each stand on their own (causes, what fixing gains),
    /// without their final stops: a line each in text, a list elsewhere.
    Findings(Vec<String>),
    /// A list of lines.
    Items(Vec<String>),
    /// A chart (only a page draws one).
    Chart(Chart<'a>),
}

/// The charts a section can hold, drawn by [`crate::html`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Chart<'a> {
    /// TTFT p50 and p90 by turn.
    TtftByTurn(&'a SessionReport),
    /// The server's running, waiting and KV usage beside the client's in flight.
    Server(&'a ServerVsClient),
}

impl<'a> Section<'a> {
    /// A section with a heading and nothing under it yet.
    pub fn new(key: &'static str, title: impl Into<String>) -> Section<'a> {
        Section {
            key,
            title: title.into(),
            gloss: None,
            blocks: Vec::new(),
        }
    }

    /// The same with a gloss after the heading.
    pub fn gloss(mut self, gloss: impl Into<String>) -> Section<'a> {
        self.gloss = Some(gloss.into());
        self
    }

    /// The same with one more block.
    pub fn with(mut self, block: Block<'a>) -> Section<'a> {
        self.blocks.push(block);
        self
    }

    /// The same with a table of figures.
    pub fn table<H: ToString>(self, heads: &[H], rows: Vec<Vec<String>>) -> Section<'a> {
        self.prose_table(heads, rows, 0, 0)
    }

    /// The same with a table whose last `prose` columns are words, of which
    /// text leaves out the last `brief`.
    pub fn prose_table<H: ToString>(
        self,
        heads: &[H],
        rows: Vec<Vec<String>>,
        prose: usize,
        brief: usize,
    ) -> Section<'a> {
        self.with(Block::Table {
            heads: heads.iter().map(ToString::to_string).collect(),
            rows,
            prose,
            brief,
        })
    }

    /// A section that is one sentence, set after its heading (`count check: …`).
    fn run_in(&self) -> Option<&str> {
        match self.blocks.as_slice() {
            [Block::Sentence(s)] => Some(s),
            _ => None,
        }
    }

    /// The heading with its gloss, as text has it.
    fn heading(&self) -> String {
        match &self.gloss {
            Some(g) => format!("{}: {g}", self.title),
            None => self.title.clone(),
        }
    }

    /// The section as terminal text (indented like the rest of a run).
    pub fn text(&self) -> String {
        if let Some(s) = self.run_in() {
            return format!("\n  {}: {s}\n", self.heading());
        }
        // A heading that introduces a list or a conclusion ends with a colon.
        let colon = if matches!(self.blocks.first(), Some(Block::Items(_) | Block::Lead(_))) {
            ":"
        } else {
            ""
        };
        let mut o = format!("\n  {}{colon}\n", self.heading());
        for b in &self.blocks {
            match b {
                Block::Table {
                    heads,
                    rows,
                    prose,
                    brief,
                } => prose_text_table(&mut o, heads, rows, *prose, *brief),
                Block::Lead(s) => o.push_str(&format!("    {s}\n")),
                Block::Sentence(s) | Block::Note(s) => o.push_str(&format!("  {s}\n")),
                Block::Findings(lines) => {
                    for l in lines {
                        o.push_str(&format!("  {}.\n", capitalised(l)));
                    }
                }
                Block::Items(lines) => {
                    for l in lines {
                        o.push_str(&format!("    {l}\n"));
                    }
                }
                Block::Chart(_) => {}
            }
        }
        o
    }

    /// The section as markdown, ending with a blank line.
    pub fn markdown(&self) -> String {
        let title = capitalised(&self.title);
        if let Some(s) = self.run_in() {
            return format!("**{title}.** {}.\n\n", capitalised(s));
        }
        let mut blocks = self.blocks.as_slice();
        let mut o = match blocks {
            [Block::Lead(s), rest @ ..] => {
                blocks = rest;
                format!("**{title}:** {s}\n\n")
            }
            _ => {
                let gloss = self
                    .gloss
                    .as_ref()
                    .map(|g| format!(": {g}"))
                    .unwrap_or_default();
                format!("**{title}**{gloss}\n\n")
            }
        };
        for b in blocks {
            match b {
                Block::Table { heads, rows, .. } => md_table(&mut o, heads, rows),
                Block::Lead(s) => o.push_str(&format!("**{s}**\n\n")),
                Block::Sentence(s) | Block::Note(s) => {
                    o.push_str(&format!("\n{}.\n\n", capitalised(s)))
                }
                Block::Findings(lines) => {
                    for l in lines {
                        o.push_str(&format!("- {}.\n", capitalised(l)));
                    }
                }
                Block::Items(lines) => {
                    for l in lines {
                        o.push_str(&format!("- {l}\n"));
                    }
                }
                Block::Chart(_) => {}
            }
        }
        // A table or a list right before the next heading would run into it.
        if !o.ends_with("\n\n") {
            o.push('\n');
        }
        o
    }
}

/// Appends a table as text: the figures as [`text_table`] sets them, then the
/// `prose` columns left-aligned after them, less the last `brief` columns.
fn prose_text_table(
    o: &mut String,
    heads: &[String],
    rows: &[Vec<String>],
    prose: usize,
    brief: usize,
) {
    let shown = heads.len().saturating_sub(brief);
    let figures = heads.len().saturating_sub(prose).min(shown);
    let cut = |r: &[String], a: usize, b: usize| r[a.min(r.len())..b.min(r.len())].to_vec();
    let mut table = String::new();
    let figure_rows: Vec<Vec<String>> = rows.iter().map(|r| cut(r, 0, figures)).collect();
    text_table(&mut table, &heads[..figures], &figure_rows);
    if figures == shown {
        o.push_str(&table);
        return;
    }
    let words: Vec<Vec<String>> = std::iter::once(cut(heads, figures, shown))
        .chain(rows.iter().map(|r| cut(r, figures, shown)))
        .collect();
    let mut width = vec![0; shown - figures];
    for w in &words {
        for (i, c) in w.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let left = table.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    for (line, cells) in table.lines().zip(&words) {
        let mut l = format!("{line}{}", " ".repeat(left - line.chars().count()));
        for (c, w) in cells.iter().zip(&width) {
            l.push_str(&format!("   {c:<w$}"));
        }
        o.push_str(l.trim_end());
        o.push('\n');
    }
}

/// The sections every format shows after a run's summary and distributions,
/// in order; a run lacks those it has nothing for.
pub fn run_sections(r: &RunReport) -> Vec<Section<'_>> {
    [
        crate::quality::section(r),
        crate::diagnosis::section(r),
        crate::diagnosis::server_section(r),
        crate::ledger::section(r),
        crate::energy::section(r),
        crate::ramp::section(r),
        crate::sessions::section(r),
        crate::count_check::section(r),
    ]
    .into_iter()
    .flatten()
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_section() -> Section<'static> {
        Section::new("k", "ramp: how it went")
            .table(&["a", "bb"], vec![vec!["1".into(), "22".into()]])
            .with(Block::Sentence("it went well".into()))
    }

    #[test]
    fn a_table_and_a_sentence_in_each_format() {
        let s = table_section();
        assert_eq!(
            s.text(),
            "\n  ramp: how it went\n  a  bb\n  1  22\n  it went well\n"
        );
        assert_eq!(
            s.markdown(),
            "**Ramp: how it went**\n\n| a | bb |\n|---|---:|\n| 1 | 22 |\n\nIt went well.\n\n"
        );
    }

    #[test]
    fn one_sentence_runs_in_after_its_heading() {
        let s = Section::new("k", "count check").with(Block::Sentence("all agree".into()));
        assert_eq!(s.text(), "\n  count check: all agree\n");
        assert_eq!(s.markdown(), "**Count check.** All agree.\n\n");
    }

    #[test]
    fn a_list_follows_a_heading_with_a_colon_and_a_gloss_follows_the_title() {
        let s = Section::new("k", "quality").with(Block::Items(vec!["x".into(), "y".into()]));
        assert_eq!(s.text(), "\n  quality:\n    x\n    y\n");
        assert_eq!(s.markdown(), "**Quality**\n\n- x\n- y\n\n");
        let g = Section::new("k", "sessions").gloss("TTFT by turn");
        assert_eq!(g.text(), "\n  sessions: TTFT by turn\n");
        assert_eq!(g.markdown(), "**Sessions**: TTFT by turn\n\n");
    }

    #[test]
    fn prose_columns_follow_the_figures_and_text_leaves_out_the_brief_ones() {
        let rows = vec![
            vec!["a".into(), "1.5".into(), "short".into(), "do x".into()],
            vec![
                "bbb".into(),
                "22".into(),
                "a longer one".into(),
                "do y".into(),
            ],
        ];
        let s = Section::new("k", "why").prose_table(&["part", "n", "what", "next"], rows, 2, 1);
        assert_eq!(
            s.text(),
            "\n  why\n  part    n   what\n  a     1.5   short\n  bbb    22   a longer one\n"
        );
        // Markdown keeps every column.
        assert!(
            s.markdown().contains("| a | 1.5 | short | do x |"),
            "{}",
            s.markdown()
        );
    }

    #[test]
    fn a_lead_runs_in_and_notes_and_findings_close_the_section() {
        let s = Section::new("k", "diagnosis")
            .with(Block::Lead("It was the cap.".into()))
            .with(Block::Note("slot-time 2 s".into()))
            .with(Block::Findings(vec![
                "held back 1 s".into(),
                "Gains 2×".into(),
            ]));
        assert_eq!(
            s.text(),
            "\n  diagnosis:\n    It was the cap.\n  slot-time 2 s\n  Held back 1 s.\n  Gains 2×.\n"
        );
        assert_eq!(
            s.markdown(),
            "**Diagnosis:** It was the cap.\n\n\nSlot-time 2 s.\n\n- Held back 1 s.\n- Gains 2×.\n\n"
        );
    }
}
