//! The fast chunk scanner's own tests (its agreement with serde is
//! `tests/chunk_parsers_agree.rs`).
use super::*;
use tpscope_json::unescape_into as append_unescaped;

use crate::openai::chunk::OutputSeen;

fn text_of(data: &str) -> (String, OutputSeen) {
    let c = parse_chunk(data.as_bytes()).unwrap();
    let mut s = String::new();
    let seen = c.collect_output(Some(&mut s));
    (s, seen)
}

#[test]
fn unescapes_json_strings() {
    let c = parse_chunk(
        br#"{"choices":[{"delta":{"content":"a\n\"b\"\\ \u00e9 \ud83d\ude00 \/ \t"}}]}"#,
    )
    .unwrap();
    let mut s = String::new();
    c.collect_output(Some(&mut s));
    assert_eq!(s, "a\n\"b\"\\ é 😀 / \t");
    let mut s = String::new();
    append_unescaped(r"\ud800x\udc00", &mut s);
    assert_eq!(s, "\u{FFFD}x\u{FFFD}");
}

#[test]
fn role_only_first_chunk_is_not_output() {
    let (s, seen) = text_of(
        r#"{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
    );
    assert_eq!(s, "");
    assert!(!seen.any());
}

#[test]
fn chunk_fields_are_the_fields_the_scanner_reads() {
    // A field the scanner reads is refused twice; one it skips is not.
    for f in CHUNK_FIELDS {
        let f = String::from_utf8_lossy(f);
        let twice = format!(r#"{{"{f}":null,"{f}":null}}"#);
        assert!(parse_chunk(twice.as_bytes()).is_err(), "{twice}");
    }
    assert!(parse_chunk(br#"{"obfuscation":null,"obfuscation":null}"#).is_ok());
}

#[test]
fn skipped_members_accept_what_a_whole_parse_accepts() {
    let head = r#"{"choices":[{"delta":{"content":"a"}}],"usage":null"#;
    let deep = format!(r#","x":{}1{}}}"#, "[".repeat(200), "]".repeat(200));
    for (tail, skipped) in [
        ("}", true),
        (r#","obfuscation":"Zq3"}"#, true),
        (
            r#","bench":{"seq":1,"l":[1,-2.5e3,{"b":null}],"t":true}}"#,
            true,
        ),
        ("\t, \"x\" : \"y\\n\" }\n", true),
        (r#","x":1,"x":2}"#, true),
        (r#","x":}"#, false),
        (r#","x":1,}"#, false),
        (r#","x":1"#, false),
        (r#","x":1}x"#, false),
        (r#","x":"\u12"}"#, false),
        (r#","x":tru}"#, false),
        (&deep, false),
        (r#","id":"c2"}"#, false),
        (r#","usage":{"completion_tokens":1}}"#, false),
        (r#","\u0069d":"c2"}"#, false),
    ] {
        let data = format!("{head}{tail}");
        let b = data.as_bytes();
        assert_eq!(skipped_members(b, head.len()), skipped, "{data}");
        if skipped {
            assert!(parse_chunk(b).is_ok(), "{data}");
        }
    }
}

#[test]
fn non_string_content_is_rejected() {
    assert!(parse_chunk(br#"{"choices":[{"delta":{"content":5}}]}"#).is_err());
    assert!(parse_chunk(b"not json").is_err());
    assert!(parse_chunk(b"{\"choices\":[{\"delta\":{\"content\":\"cut").is_err());
}
