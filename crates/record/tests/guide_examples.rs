//! docs/recording.md says it shows "the whole of" the Rust and Python examples that CI
//! runs: hold it to that, so an edit of either example cannot leave the guide showing
//! code that no longer runs.

/// The body of the first fenced block in `doc` whose language is `lang` and whose
/// first line is `first_line`.
fn block<'a>(doc: &'a str, lang: &str, first_line: &str) -> Option<&'a str> {
    let opening = format!("```{lang}\n{first_line}\n");
    let start = doc.find(&opening)? + "```".len() + lang.len() + 1;
    let len = doc[start..].find("\n```")? + 1;
    Some(&doc[start..start + len])
}

fn assert_shown_whole(lang: &str, example: &str, path: &str) {
    let doc = include_str!("../../../docs/recording.md");
    let first_line = example.lines().next().expect("the example is not empty");
    let shown = block(doc, lang, first_line)
        .unwrap_or_else(|| panic!("docs/recording.md has no ```{lang} block starting like {path}"));
    assert_eq!(
        shown, example,
        "docs/recording.md shows another version of {path}"
    );
}

#[test]
fn the_guide_shows_the_whole_rust_example() {
    assert_shown_whole(
        "rust",
        include_str!("../examples/pipeline.rs"),
        "crates/record/examples/pipeline.rs",
    );
}

#[test]
fn the_guide_shows_the_whole_python_example() {
    assert_shown_whole(
        "python",
        include_str!("../../../python/examples/pipeline.py"),
        "python/examples/pipeline.py",
    );
}
