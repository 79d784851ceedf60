//! The command line a run was made with, rebuilt from its run record's
//! `load.flags_given` (written by `tpscope bench`, secrets already redacted) so the
//! report says how to make the run again.

use serde_json::Value;

/// `tpscope bench` with the flags given, each value quoted for a POSIX shell where
/// it needs it; `None` when the record carries no flags (older logs, imports, the
/// proxy, a library recording) or they are not in the expected shape.
pub fn command(flags_given: Option<&Value>) -> Option<String> {
    let flags = flags_given?.as_array()?;
    let mut out = String::from("tpscope bench");
    for f in flags {
        let name = f.get("flag")?.as_str()?;
        out.push(' ');
        out.push_str(&quoted(name));
        for v in f.get("values")?.as_array()? {
            out.push(' ');
            out.push_str(&quoted(v.as_str()?));
        }
    }
    Some(out)
}

/// `s` as one shell word: as it is when it holds only characters no shell
/// treats specially, else in single quotes.
fn quoted(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_flags_given_read_back_as_one_shell_line() {
        let given = json!([
            {"flag": "--concurrency", "values": ["4", "8"]},
            {"flag": "--record-chunks", "values": []},
            {"flag": "--extra-body", "values": ["{\"top_k\": 1}"]},
            {"flag": "--label", "values": ["who=it's me"]},
            {"flag": "--header", "values": ["X-Key: [redacted]"]},
        ]);
        assert_eq!(
            command(Some(&given)).unwrap(),
            "tpscope bench --concurrency 4 8 --record-chunks --extra-body '{\"top_k\": 1}' \
             --label 'who=it'\\''s me' --header 'X-Key: [redacted]'"
        );
    }

    #[test]
    fn a_record_without_flags_or_of_another_shape_has_no_command() {
        assert_eq!(command(None), None);
        assert_eq!(command(Some(&json!({"flag": "--x"}))), None);
        assert_eq!(command(Some(&json!([{"flag": 3, "values": []}]))), None);
        assert_eq!(command(Some(&json!([]))).as_deref(), Some("tpscope bench"));
    }
}
