//! Text from outside orch, made safe to print and to locate: control characters escaped
//! before they reach a terminal, and the position of the first byte that is not UTF-8.
//!
//! Pure: plain strings and bytes in, plain strings and positions out.

use std::borrow::Cow;

/// Does `c` need escaping before it is printed to a terminal? C0 controls (newline and tab
/// included: a table row is one line), DEL, C1 controls (U+0080..U+009F, `\u{9b}` is CSI on
/// many terminals), and the invisible characters that reorder or break lines (bidi
/// overrides and isolates, the line and paragraph separators).
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `s` with every control character escaped (`\n`, `\r`, `\t`, `\x1b`, `\x7f`, `\u{9b}`,
/// `\u{202e}`), so that whatever a worker wrote prints as visible text on one line and
/// never as a terminal command. Borrowed when nothing needs escaping.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if needs_escape(c) && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Where the first invalid UTF-8 sequence of a file starts: 1-based line and column
/// (columns count characters), and the 0-based byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadUtf8 {
    pub line: u64,
    pub column: u64,
    pub offset: usize,
}

impl BadUtf8 {
    /// What to tell the user about the file's encoding.
    pub fn describe(&self, bytes: &[u8]) -> String {
        let utf16 = bytes.starts_with(&[0xff, 0xfe]) || bytes.starts_with(&[0xfe, 0xff]);
        let hint = if utf16 {
            " (the file looks like UTF-16; save it as UTF-8)"
        } else {
            ""
        };
        let bad = bytes
            .get(self.offset)
            .map(|b| format!(": byte 0x{b:02x}"))
            .unwrap_or_default();
        format!("not valid UTF-8 at byte offset {}{bad}{hint}", self.offset)
    }
}

/// `bytes` as text, or where its first invalid UTF-8 sequence is.
pub fn utf8(bytes: &[u8]) -> Result<&str, BadUtf8> {
    std::str::from_utf8(bytes).map_err(|e| {
        let offset = e.valid_up_to();
        // Valid up to `offset`, by definition.
        let before = std::str::from_utf8(&bytes[..offset]).unwrap_or("");
        let line = before.matches('\n').count() as u64 + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let column = before[line_start..].chars().count() as u64 + 1;
        BadUtf8 {
            line,
            column,
            offset,
        }
    })
}

/// The largest task text orch accepts, in bytes. A task reaches its worker in the environment
/// (`ORCH_TASK`) and in the prompt; the kernel refuses one environment string over 128 KiB
/// (`E2BIG` at the worker's start, long after the spawn said yes), and a task this long is a
/// document: it belongs in a file of the repository or the plan, which the task can name.
pub const MAX_TASK_BYTES: usize = 32 * 1024;

/// Why `task` is refused for its size, if it is.
pub fn task_too_long(task: &str) -> Option<String> {
    (task.len() > MAX_TASK_BYTES).then(|| {
        format!(
            "the task text is {} bytes; at most {MAX_TASK_BYTES} are accepted (it reaches the worker in its environment): put the details in a file (the plan, or one in the repository) and name it in the task",
            task.len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed() {
        assert!(matches!(escape("fix the build — ok"), Cow::Borrowed(_)));
    }

    #[test]
    fn controls_are_escaped_visibly() {
        assert_eq!(escape("a\x1b[31mred\x1b[0m"), "a\\x1b[31mred\\x1b[0m");
        assert_eq!(escape("l1\nl2\r\tx"), "l1\\nl2\\r\\tx");
        assert_eq!(escape("\x07\x00\x7f"), "\\x07\\x00\\x7f");
        assert_eq!(escape("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escape("abc\u{202e}cba"), "abc\\u{202e}cba");
        assert_eq!(escape("ünïcödé ✓"), "ünïcödé ✓");
    }

    #[test]
    fn escaped_text_has_no_control_left() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        let e = escape(&all);
        assert!(!e.chars().any(needs_escape), "{e}");
    }

    #[test]
    fn bad_utf8_is_located() {
        assert_eq!(utf8(b"ok").unwrap(), "ok");
        let e = utf8(b"repos:\n  caf\xc3\xa9: {}\n  b\xffd: {}\n").unwrap_err();
        assert_eq!((e.line, e.column, e.offset), (3, 4, 22));
        let e = utf8(b"\xff\xfer\x00").unwrap_err();
        assert_eq!((e.line, e.column, e.offset), (1, 1, 0));
        assert!(e.describe(b"\xff\xfer\x00").contains("UTF-16"));
        assert!(e.describe(b"\xff\xfer\x00").contains("0xff"));
    }

    #[test]
    fn a_task_over_the_limit_is_refused_with_its_size() {
        assert_eq!(task_too_long(&"x".repeat(MAX_TASK_BYTES)), None);
        let why = task_too_long(&"x".repeat(MAX_TASK_BYTES + 1)).unwrap();
        assert!(
            why.contains(&format!("{} bytes", MAX_TASK_BYTES + 1)),
            "{why}"
        );
    }
}
