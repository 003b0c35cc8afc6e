//! Milestone lines: finding `WORKING:`, `PUSHED_TO_CI:`, … and permission denials in a
//! worker's output, and the commit a `PUSHED_TO_CI:` line names.

use super::Milestone;

/// A milestone found in an output line, with the text after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineSignal {
    Milestone {
        milestone: Milestone,
        rest: String,
    },
    /// `DECISION: <what and why>`: a decision the worker made (no milestone).
    Decision(String),
    PermissionDenial,
}

/// Finds a milestone marker (`WORKING:`, `PUSHED_TO_CI:`, …) anywhere in `line`, or a
/// permission-denial pattern. A marker must not be glued to a preceding word character
/// (`NOT_DONE:` is not `DONE:`). The earliest marker wins.
pub fn parse_line(line: &str, permission_patterns: &[String]) -> Option<LineSignal> {
    const MARKERS: [(&str, Milestone); 6] = [
        ("BLOCKED_PERMISSION:", Milestone::BlockedPermission),
        ("PUSHED_TO_CI:", Milestone::PushedToCi),
        ("FIXING_CI:", Milestone::FixingCi),
        ("WORKING:", Milestone::Working),
        ("BLOCKED:", Milestone::Blocked),
        ("DONE:", Milestone::Done),
    ];
    let mut best: Option<(usize, Milestone, usize)> = None;
    for (marker, m) in MARKERS {
        if let Some(at) = marker_at(line, marker)
            && best.is_none_or(|(b, _, _)| at < b)
        {
            best = Some((at, m, marker.len()));
        }
    }
    if let Some((at, milestone, len)) = best {
        return Some(LineSignal::Milestone {
            milestone,
            rest: line[at + len..].trim().to_string(),
        });
    }
    if let Some(at) = marker_at(line, "DECISION:") {
        let text = line[at + "DECISION:".len()..].trim();
        if !text.is_empty() {
            return Some(LineSignal::Decision(text.to_string()));
        }
    }
    permission_patterns
        .iter()
        .any(|p| line.contains(p.as_str()))
        .then_some(LineSignal::PermissionDenial)
}

/// Where `marker` first stands in `line` not glued to a preceding word character.
fn marker_at(line: &str, marker: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = line[from..].find(marker) {
        let at = from + i;
        let glued = line[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !glued {
            return Some(at);
        }
        from = at + marker.len();
    }
    None
}

/// The commit a `PUSHED_TO_CI:` line names: the hex word after "commit", else the first
/// 7–64 character hex word.
pub fn sha_in(text: &str) -> Option<String> {
    let words: Vec<&str> = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let is_sha = |w: &str| {
        (7..=64).contains(&w.len())
            && w.chars().all(|c| c.is_ascii_hexdigit())
            && w.chars()
                .any(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
    };
    if let Some(i) = words.iter().position(|w| w.eq_ignore_ascii_case("commit"))
        && let Some(w) = words.get(i + 1)
        && is_sha(w)
    {
        return Some(w.to_ascii_lowercase());
    }
    words
        .into_iter()
        .find(|w| is_sha(w))
        .map(str::to_ascii_lowercase)
}
