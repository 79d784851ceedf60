//! A [`Section`] laid out in a page: its heading, a gloss as a note, tables,
//! sentences as paragraphs, lists, and its charts.

use super::page::{Cell, table};
use super::svg::esc;
use crate::fmt::capitalised;
use crate::section::{Block, Chart, Section};

/// The section as HTML; `prefix` names the run, for its charts' ids.
pub fn html(prefix: &str, s: &Section<'_>) -> String {
    let mut out = format!("<h2>{}</h2>\n", esc(&capitalised(&s.title)));
    if let Some(g) = &s.gloss {
        out.push_str(&format!("<p class=\"note\">{}</p>\n", esc(&capitalised(g))));
    }
    for b in &s.blocks {
        match b {
            Block::Table { heads, rows } => {
                let rows: Vec<Vec<Cell>> = rows
                    .iter()
                    .map(|row| row.iter().cloned().map(Cell::Text).collect())
                    .collect();
                out.push_str(&table(heads, &rows));
            }
            Block::Sentence(t) => out.push_str(&format!("<p>{}.</p>\n", esc(&capitalised(t)))),
            Block::Items(lines) => {
                out.push_str("<ul>\n");
                for l in lines {
                    out.push_str(&format!("<li>{}</li>\n", esc(l)));
                }
                out.push_str("</ul>\n");
            }
            Block::Chart(Chart::TtftByTurn(r)) => {
                out.push_str(&super::sessions::chart(&format!("{prefix}-{}", s.key), r));
            }
        }
    }
    out
}
