//! A [`Section`] laid out in a page: its heading, a gloss as a note, tables
//! (their prose columns as notes), a lead in bold, sentences and notes as
//! paragraphs, findings and lists as lists, and its charts.

use super::charts::Series;
use super::page::{Cell, table};
use super::svg::esc;
use crate::fmt::capitalised;
use crate::section::{Block, Chart, Section};

fn list(out: &mut String, lines: impl Iterator<Item = String>) {
    out.push_str("<ul>\n");
    for l in lines {
        out.push_str(&format!("<li>{}</li>\n", esc(&l)));
    }
    out.push_str("</ul>\n");
}

/// The section as HTML; `prefix` names the run, for its charts' ids; `one` is
/// the run's chart data, when it has any.
pub fn html(prefix: &str, s: &Section<'_>, one: &[Series<'_>]) -> String {
    let mut out = format!("<h2>{}</h2>\n", esc(&capitalised(&s.title)));
    if let Some(g) = &s.gloss {
        out.push_str(&format!("<p class=\"note\">{}</p>\n", esc(&capitalised(g))));
    }
    for b in &s.blocks {
        match b {
            Block::Table {
                heads, rows, prose, ..
            } => {
                let words = heads.len().saturating_sub(*prose);
                let rows: Vec<Vec<Cell>> = rows
                    .iter()
                    .map(|row| {
                        row.iter()
                            .enumerate()
                            .map(|(i, c)| {
                                if i >= words {
                                    Cell::Why(c.clone())
                                } else {
                                    Cell::Text(c.clone())
                                }
                            })
                            .collect()
                    })
                    .collect();
                out.push_str(&table(heads, &rows));
            }
            Block::Lead(t) => out.push_str(&format!(
                "<p class=\"limit\"><strong>{}</strong></p>\n",
                esc(t)
            )),
            Block::Sentence(t) => out.push_str(&format!("<p>{}.</p>\n", esc(&capitalised(t)))),
            Block::Note(t) => out.push_str(&format!(
                "<p class=\"note\">{}.</p>\n",
                esc(&capitalised(t))
            )),
            Block::Findings(lines) => list(
                &mut out,
                lines.iter().map(|l| format!("{}.", capitalised(l))),
            ),
            Block::Items(lines) => list(&mut out, lines.iter().cloned()),
            Block::Chart(Chart::TtftByTurn(r)) => {
                out.push_str(&super::sessions::chart(&format!("{prefix}-{}", s.key), r));
            }
            Block::Chart(Chart::Server(sv)) => {
                out.push_str(&super::server::chart(
                    &format!("{prefix}-{}", s.key),
                    sv,
                    one,
                ));
            }
        }
    }
    out
}
