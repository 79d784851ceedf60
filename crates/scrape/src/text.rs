//! The Prometheus text exposition format (0.0.4, and the OpenMetrics text that
//! servers send in its place): lines in, samples out. Pure. A line that does not
//! parse is skipped with a warning naming its number; nothing here panics on input.

use std::borrow::Cow;

/// One sample line: a series (name and labels) and its value, borrowed from the
/// page (a label value is copied only when it holds an escape).
#[derive(Clone, Debug, PartialEq)]
pub struct PromSample<'a> {
    /// The metric name, `:` included (`vllm:num_requests_running`).
    pub name: &'a str,
    /// Label pairs in the order given, values unescaped.
    pub labels: Vec<(&'a str, Cow<'a, str>)>,
    /// The value (`NaN` and `±Inf` included).
    pub value: f64,
}

impl PromSample<'_> {
    /// The value of label `name`, when present.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_ref())
    }
}

/// A parsed page: its samples, the metric families declared histograms, and a
/// warning per line that did not parse.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition<'a> {
    /// Every sample, in page order.
    pub samples: Vec<PromSample<'a>>,
    /// Families declared `# TYPE … histogram` (their `_bucket` series are buckets).
    pub histograms: Vec<&'a str>,
    /// One line per malformed line, at most [`MAX_WARNINGS`] (then a count).
    pub warnings: Vec<String>,
    /// Lines skipped as malformed.
    pub malformed: usize,
}

/// Malformed lines described one by one before the rest are only counted.
pub const MAX_WARNINGS: usize = 5;

/// Parses a page. Never fails: what cannot be read is reported in `warnings`.
pub fn parse(page: &str) -> Exposition<'_> {
    let mut out = Exposition::default();
    let mut bad = 0usize;
    for (i, line) in page.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let mut words = rest.split_whitespace();
            if words.next() == Some("TYPE")
                && let (Some(name), Some("histogram" | "gaugehistogram")) =
                    (words.next(), words.next())
            {
                out.histograms.push(name);
            }
            continue;
        }
        match sample_line(line) {
            Ok(s) => out.samples.push(s),
            Err(why) => {
                bad += 1;
                if bad <= MAX_WARNINGS {
                    let shown: String = line.chars().take(80).collect();
                    out.warnings
                        .push(format!("line {}: {why} (`{shown}`)", i + 1));
                }
            }
        }
    }
    out.malformed = bad;
    if bad > MAX_WARNINGS {
        out.warnings.push(format!(
            "{} more malformed lines skipped",
            bad - MAX_WARNINGS
        ));
    }
    out
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

fn is_name_char(c: u8) -> bool {
    is_name_start(c) || c.is_ascii_digit()
}

/// One `name{labels} value [timestamp]` line.
fn sample_line(line: &str) -> Result<PromSample<'_>, &'static str> {
    let b = line.as_bytes();
    if !b.first().is_some_and(|&c| is_name_start(c)) {
        return Err("expected a metric name");
    }
    let end = b.iter().position(|&c| !is_name_char(c)).unwrap_or(b.len());
    let name = &line[..end];
    let mut rest = &line[end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = label_set(after, &mut labels)?;
    }
    let mut words = rest.split_whitespace();
    let value = words.next().ok_or("no value")?;
    let value = parse_value(value).ok_or("the value is not a number")?;
    if let Some(ts) = words.next()
        && ts.parse::<f64>().is_err()
    {
        return Err("the timestamp is not a number");
    }
    if words.next().is_some() {
        return Err("text after the timestamp");
    }
    Ok(PromSample {
        name,
        labels,
        value,
    })
}

/// Reads `k="v",…}` and returns what follows the `}`.
fn label_set<'a>(
    mut s: &'a str,
    labels: &mut Vec<(&'a str, Cow<'a, str>)>,
) -> Result<&'a str, &'static str> {
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let b = s.as_bytes();
        if !b.first().is_some_and(|&c| is_name_start(c) && c != b':') {
            return Err("expected a label name");
        }
        let end = b
            .iter()
            .position(|&c| !(is_name_char(c) && c != b':'))
            .unwrap_or(b.len());
        let key = &s[..end];
        s = s[end..].trim_start();
        s = s
            .strip_prefix('=')
            .ok_or("expected `=` after a label name")?;
        s = s.trim_start();
        s = s.strip_prefix('"').ok_or("expected a quoted label value")?;
        let (value, close) = label_value(s)?;
        labels.push((key, value));
        s = s[close + 1..].trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err("expected `,` or `}` after a label");
        }
    }
}

/// A quoted label value's content (after the opening quote) and the index of its
/// closing quote; borrowed unless it holds an escape.
fn label_value(s: &str) -> Result<(Cow<'_, str>, usize), &'static str> {
    let b = s.as_bytes();
    let stop = b
        .iter()
        .position(|&c| c == b'"' || c == b'\\')
        .ok_or("unterminated label value")?;
    if b[stop] == b'"' {
        return Ok((Cow::Borrowed(&s[..stop]), stop));
    }
    let mut value = String::from(&s[..stop]);
    let mut chars = s[stop..].char_indices();
    loop {
        match chars.next() {
            None => return Err("unterminated label value"),
            Some((i, '"')) => return Ok((Cow::Owned(value), stop + i)),
            Some((_, '\\')) => match chars.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, c)) => value.push(c),
                None => return Err("unterminated label value"),
            },
            Some((_, c)) => value.push(c),
        }
    }
}

/// A Go-style float: `NaN`, `+Inf`, `-Inf`, or a decimal.
fn parse_value(v: &str) -> Option<f64> {
    match v {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => v.parse::<f64>().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_with_colons_labels_with_escapes_and_special_values_parse() {
        let page = "# HELP vllm:x help\n# TYPE vllm:ttft histogram\n\
            vllm:num_requests_running{engine=\"0\",model_name=\"a \\\"b\\\"\\\\c\"} 16.0\n\
            vllm:ttft_bucket{le=\"+Inf\"} 3 1700000000000\n\
            nan_metric NaN\nneg -Inf\nplain 2.5e+09\nempty_labels{} 1\ntrailing{a=\"1\",} 2\n";
        let e = parse(page);
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        assert_eq!(e.histograms, ["vllm:ttft"]);
        let s = &e.samples[0];
        assert_eq!(s.name, "vllm:num_requests_running");
        assert_eq!(s.label("model_name"), Some("a \"b\"\\c"));
        assert_eq!(s.value, 16.0);
        assert_eq!(e.samples[1].label("le"), Some("+Inf"));
        assert!(e.samples[2].value.is_nan());
        assert_eq!(e.samples[3].value, f64::NEG_INFINITY);
        assert_eq!(e.samples[4].value, 2.5e9);
        assert_eq!(e.samples.len(), 7);
    }

    #[test]
    fn malformed_lines_are_warned_about_and_skipped() {
        let e = parse("ok 1\n{nolabel} 2\nx{a=1} 3\ny{a=\"1\" 4\nz abc\nw 1 2 3\nfine 2\n");
        assert_eq!(e.samples.len(), 2);
        assert_eq!(e.warnings.len(), 5);
        assert!(e.warnings[0].starts_with("line 2:"), "{:?}", e.warnings);
        let many: String = (0..20).map(|_| "?\n").collect();
        let e = parse(&many);
        assert_eq!(e.warnings.len(), MAX_WARNINGS + 1);
        assert!(e.warnings.last().unwrap().starts_with("15 more"));
    }

    proptest! {
        /// Any text, valid or not: no panic, and every line is either a sample or
        /// counted in a warning.
        #[test]
        fn any_text_parses_without_panicking(page in "(?s).{0,400}") {
            let e = parse(&page);
            prop_assert!(e.warnings.len() <= MAX_WARNINGS + 1);
        }

        /// Pages made of valid-looking pieces with random damage.
        #[test]
        fn damaged_pages_keep_their_good_lines(
            lines in proptest::collection::vec(
                ("[a-z_:][a-z0-9_:]{0,8}", proptest::option::of(("[a-z_][a-z0-9_]{0,5}", "[ -~]{0,6}")), -1e6f64..1e6, any::<bool>()),
                0..30,
            ),
        ) {
            let mut page = String::new();
            let mut good = 0;
            for (name, label, v, damage) in &lines {
                let labels = label.as_ref().map(|(k, val)| {
                    let val = val.replace('\\', "\\\\").replace('"', "\\\"");
                    format!("{{{k}=\"{val}\"}}")
                }).unwrap_or_default();
                if *damage {
                    page.push_str(&format!("{name}{labels} {v}{{\n"));
                } else {
                    good += 1;
                    page.push_str(&format!("{name}{labels} {v}\n"));
                }
            }
            let e = parse(&page);
            prop_assert_eq!(e.samples.len(), good);
        }
    }
}
