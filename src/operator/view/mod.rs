//! What commands print: one typed view per output shape, rendered either as the human
//! table/text or as one line of `--json` — the same value both ways — and the JSON Schema of
//! each shape (published under docs/schema/ by `operator::schemas`, checked against the types by a test).
//!
//! Conventions every view keeps: times are RFC 3339 strings (`…_at`, `at`, `since`),
//! durations are seconds (`…_s`); human tables take their widths from their content and
//! escape untrusted text (src/text.rs).

pub mod ci;
pub mod config;
pub mod locks;
pub mod nodes;
pub mod setup;
pub mod wave;
pub mod workers;

use schemars::JsonSchema;
use serde::Serialize;

/// A view that `--json` prints as one line and whose schema is published.
pub trait View: Serialize + JsonSchema {
    /// The schema file's stem: docs/schema/<NAME>.json.
    const NAME: &'static str;
}

/// Prints `view` as one line of JSON on stdout.
pub fn print_json<V: View>(view: &V) {
    println!(
        "{}",
        serde_json::to_string(view).expect("views serialise to JSON")
    );
}

/// An RFC 3339 time (UTC, milliseconds) from epoch milliseconds.
pub fn at(ms: i64) -> String {
    crate::store::fmt_ms(ms)
}

/// "1 repository", "2 repositories".
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Whole seconds between two epoch-millisecond times (never negative).
pub fn secs_between(from_ms: i64, to_ms: i64) -> u64 {
    ((to_ms - from_ms).max(0) / 1000) as u64
}

/// Seconds, to the millisecond, from milliseconds.
pub fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// A human duration: its two largest units, "3d 4h", "2h 5m", "5m 3s", "45s".
pub fn human_duration(secs: u64) -> String {
    let units = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let Some(first) = units.iter().position(|(n, _)| secs >= *n) else {
        return "0s".into();
    };
    let (n, u) = units[first];
    let mut out = format!("{}{u}", secs / n);
    if let Some((m, v)) = units.get(first + 1) {
        let rest = (secs % n) / m;
        if rest > 0 {
            out.push_str(&format!(" {rest}{v}"));
        }
    }
    out
}

/// A human duration from milliseconds ("0s" below a second).
pub fn human_ms(ms: u64) -> String {
    human_duration(ms / 1000)
}

/// A table whose column widths follow its content: no borders, two spaces between columns,
/// the header bold only on a terminal without NO_COLOR (plain text into files and pipes).
pub struct Table {
    inner: comfy_table::Table,
}

impl Table {
    pub fn new<const N: usize>(header: [&str; N]) -> Self {
        Table::with_header(&header)
    }

    /// [`Table::new`] with columns chosen at run time.
    pub fn with_header(header: &[&str]) -> Self {
        let mut inner = comfy_table::Table::new();
        inner
            .load_style(comfy_table::presets::NOTHING)
            .set_content_arrangement(comfy_table::ContentArrangement::Disabled);
        let styled = std::io::IsTerminal::is_terminal(&std::io::stdout())
            && std::env::var_os("NO_COLOR").is_none();
        if styled {
            inner.enforce_styling();
        } else {
            inner.force_no_tty();
        }
        inner.set_header(header.iter().map(|h| {
            let c = comfy_table::Cell::new(h);
            if styled {
                c.add_attribute(comfy_table::Attribute::Bold)
            } else {
                c
            }
        }));
        Table { inner }
    }

    /// Adds a row; right-aligned columns are set with [`Table::right`].
    pub fn row<I, S>(&mut self, cells: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.inner
            .add_row(cells.into_iter().map(|c| c.into()).collect::<Vec<String>>());
        self
    }

    /// Right-aligns column `i` (numbers, durations).
    pub fn right(&mut self, i: usize) -> &mut Self {
        if let Some(c) = self.inner.column_mut(i) {
            c.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
        self
    }

    /// The table's lines, without trailing blanks.
    pub fn render(&mut self) -> String {
        let n = self.inner.column_count();
        for (i, c) in self.inner.column_iter_mut().enumerate() {
            c.set_padding((0, if i + 1 == n { 0 } else { 2 }));
        }
        let mut out = String::new();
        for line in self.inner.lines() {
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A line of sessions/alerts.jsonl (the type lives with the alerts, which write it).
#[derive(Serialize, JsonSchema)]
#[serde(transparent)]
pub struct AlertLineView(pub crate::alerts::AlertLine);

impl View for AlertLineView {
    const NAME: &'static str = "alert-line";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_show_their_two_largest_units() {
        assert_eq!(human_duration(0), "0s");
        assert_eq!(human_duration(45), "45s");
        assert_eq!(human_duration(60), "1m");
        assert_eq!(human_duration(303), "5m 3s");
        assert_eq!(human_duration(2 * 3600 + 5 * 60 + 9), "2h 5m");
        assert_eq!(human_duration(720 * 3600), "30d");
        assert_eq!(human_duration(3 * 86_400 + 4 * 3600 + 59), "3d 4h");
    }

    #[test]
    fn table_widths_follow_the_content() {
        let mut t = Table::new(["WORKER", "AGE"]);
        t.row(["a-very-long-worker-name-indeed", "5m"]);
        t.row(["w", "3d 4h"]);
        t.right(1);
        let text = t.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        // The second column starts at the same place on every line, after the longest name.
        let col = "a-very-long-worker-name-indeed".len() + 2;
        assert!(
            lines[1].starts_with("a-very-long-worker-name-indeed  "),
            "{text}"
        );
        assert_eq!(&lines[2][col..].trim_start(), &"3d 4h", "{text}");
        assert_eq!(lines[2].len(), lines[1].len(), "{text}");
        assert!(lines[0].starts_with("WORKER"), "{text}");
    }
}
