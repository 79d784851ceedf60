//! Number formatting shared by the text and markdown renderers.

use std::time::Duration;

use tpscope_analysis::Summary;
use tpscope_analysis::stats::Quantity;

/// `s` with its first letter upper-case (a sentence made of a phrase).
pub fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// A figure or an em dash when absent.
pub fn or_dash(v: Option<String>) -> String {
    v.unwrap_or_else(|| "—".to_string())
}

/// A rate with thousands separators and one decimal (rounded, e.g. 2.97 → 3.0).
pub fn rate(v: f64) -> String {
    let fixed = format!("{:.1}", v.abs());
    let (whole, frac) = fixed.split_once('.').unwrap_or((&fixed, "0"));
    let mut out = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("{}{out}.{frac}", if v < 0.0 { "-" } else { "" })
}

/// A fraction as a percentage with two decimals.
pub fn pct(v: f64) -> String {
    format!("{:.2} %", v * 100.0)
}

/// A duration in seconds with three decimals.
pub fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

/// Whether a duration distribution reads better in seconds (its max is ≥ 10 s).
pub fn duration_unit(s: &Summary<Duration>) -> (&'static str, f64) {
    match s.max {
        Some(m) if m.as_secs_f64() >= 10.0 => ("s", 1.0),
        _ => ("ms", 1000.0),
    }
}

/// One distribution's cells: count, mean, min, p50, p90, p95, p99, p99.9, max,
/// each value multiplied by `scale` and written with `decimals`.
pub fn summary_cells<Q: Quantity>(s: &Summary<Q>, scale: f64, decimals: usize) -> Vec<String> {
    let f = |v: Option<Q>| or_dash(v.map(|q| format!("{:.*}", decimals, q.to_f64() * scale)));
    vec![
        s.count.to_string(),
        f(s.mean),
        f(s.min),
        f(s.p50),
        f(s.p90),
        f(s.p95),
        f(s.p99),
        f(s.p99_9),
        f(s.max),
    ]
}

/// Column heads of [`summary_cells`].
pub const SUMMARY_HEADS: [&str; 9] = [
    "count", "mean", "min", "p50", "p90", "p95", "p99", "p99.9", "max",
];

/// The characters a terminal shows of `s`: ANSI colour sequences (`ESC [ … m`) take
/// no room, so a coloured cell lines up like its plain text.
fn visible_len(s: &str) -> usize {
    let mut n = 0;
    let mut chars = s.chars();
    while let Some(ch) = chars.next() {
        if ch == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            n += 1;
        }
    }
    n
}

/// Appends a plain-text table: the first column left-aligned, the others
/// right-aligned, two spaces between columns, no trailing spaces. Widths count what
/// a terminal shows, so cells may carry ANSI colours.
pub fn text_table<H: AsRef<str>>(out: &mut String, heads: &[H], rows: &[Vec<String>]) {
    use std::fmt::Write;
    let mut width: Vec<usize> = heads.iter().map(|h| visible_len(h.as_ref())).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < width.len() {
                width[i] = width[i].max(visible_len(c));
            }
        }
    }
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        out.push_str("  ");
        for (i, c) in cells.enumerate() {
            let pad = width
                .get(i)
                .copied()
                .unwrap_or(0)
                .saturating_sub(visible_len(c));
            if i == 0 {
                let _ = write!(out, "{c}{}", " ".repeat(pad));
            } else {
                let _ = write!(out, "  {}{c}", " ".repeat(pad));
            }
        }
        while out.ends_with(' ') {
            out.pop();
        }
        out.push('\n');
    };
    line(out, &mut heads.iter().map(|h| h.as_ref()));
    for r in rows {
        line(out, &mut r.iter().map(String::as_str));
    }
}

/// Escapes text for a markdown table cell (backslash, pipe, newline).
pub fn md_escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace('\n', " ")
}

/// Appends a markdown table (first column left-aligned, the others right-aligned),
/// escaping every cell.
pub fn md_table<H: AsRef<str>>(out: &mut String, heads: &[H], rows: &[Vec<String>]) {
    use std::fmt::Write;
    let row = |cells: &mut dyn Iterator<Item = &str>| {
        cells.map(md_escape).collect::<Vec<_>>().join(" | ")
    };
    let _ = writeln!(out, "| {} |", row(&mut heads.iter().map(|h| h.as_ref())));
    let rule: String = (0..heads.len())
        .map(|i| if i == 0 { "---|" } else { "---:|" })
        .collect();
    let _ = writeln!(out, "|{rule}");
    for r in rows {
        let _ = writeln!(out, "| {} |", row(&mut r.iter().map(String::as_str)));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rate_rounds_and_groups_thousands() {
        assert_eq!(super::rate(2.97), "3.0");
        assert_eq!(super::rate(1234567.25), "1,234,567.2");
        assert_eq!(super::rate(999.96), "1,000.0");
        assert_eq!(super::rate(0.0), "0.0");
    }
}
