//! A run's report as renderer-neutral sections — a heading, then tables,
//! sentences, lists and charts — built once from the report ([`run_sections`])
//! and laid out by the text, markdown and HTML renderers alike, as each lays out
//! a table or a sentence its own way. A new section is a function returning a
//! [`Section`] and one entry of [`run_sections`], with its snapshot.

use tpscope_analysis::RunReport;
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
    },
    /// A sentence, lower case and without its final stop (each format adds them).
    Sentence(String),
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

    /// The same with a table.
    pub fn table<H: ToString>(self, heads: &[H], rows: Vec<Vec<String>>) -> Section<'a> {
        self.with(Block::Table {
            heads: heads.iter().map(ToString::to_string).collect(),
            rows,
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
        // A heading that introduces a list ends with a colon.
        let colon = if matches!(self.blocks.first(), Some(Block::Items(_))) {
            ":"
        } else {
            ""
        };
        let mut o = format!("\n  {}{colon}\n", self.heading());
        for b in &self.blocks {
            match b {
                Block::Table { heads, rows } => text_table(&mut o, heads, rows),
                Block::Sentence(s) => o.push_str(&format!("  {s}\n")),
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

    /// The section as markdown.
    pub fn markdown(&self) -> String {
        let title = capitalised(&self.title);
        if let Some(s) = self.run_in() {
            return format!("**{title}.** {}.\n\n", capitalised(s));
        }
        let gloss = self
            .gloss
            .as_ref()
            .map(|g| format!(": {g}"))
            .unwrap_or_default();
        let mut o = format!("**{title}**{gloss}\n\n");
        for b in &self.blocks {
            match b {
                Block::Table { heads, rows } => md_table(&mut o, heads, rows),
                Block::Sentence(s) => o.push_str(&format!("\n{}.\n\n", capitalised(s))),
                Block::Items(lines) => {
                    for l in lines {
                        o.push_str(&format!("- {l}\n"));
                    }
                }
                Block::Chart(_) => {}
            }
        }
        o
    }
}

/// The sections every format shows after a run's diagnosis, in order; a run
/// lacks those it has nothing for.
pub fn run_sections(r: &RunReport) -> Vec<Section<'_>> {
    [
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
        assert_eq!(s.markdown(), "**Quality**\n\n- x\n- y\n");
        let g = Section::new("k", "sessions").gloss("TTFT by turn");
        assert_eq!(g.text(), "\n  sessions: TTFT by turn\n");
        assert_eq!(g.markdown(), "**Sessions**: TTFT by turn\n\n");
    }
}
