//! Forgejo's `rule_name` matching (`ProtectedBranch.Match`, `models/git/protected_branch.go`):
//! a name without a glob character (`* ? [ ] { } \`, gobwas/glob's `syntax.Special`) is a plain
//! branch name compared case-insensitively (`strings.EqualFold`); any other is a gobwas/glob
//! v0.2.3 pattern with `/` as the separator, case-sensitive, and one that does not compile is
//! the literal name (`glob.QuoteMeta`). The lexer and parser below follow gobwas/glob's
//! `syntax/lexer/lexer.go` and `syntax/ast/parser.go` token by token, so the same strings are
//! patterns, lists, ranges and alternatives, and the same ones are errors:
//!
//! - `*` any run of characters but `/`; `**` any run at all; `?` one character but `/`;
//! - `[abc]`, `[!abc]`, `[a-z]`, `[!a-z]`: one character, `/` included (a list and a range
//!   cannot be mixed: `[a-zA-Z]` does not compile);
//! - `{a,b}`: alternatives, nestable (one left open is closed at the end);
//! - `\x`: `x` itself; `]`, `}` and `,` outside a class or alternatives are plain text.

/// What a pattern is made of (gobwas/glob's AST).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Text(Vec<char>),
    Any,
    Super,
    Single,
    List {
        chars: Vec<char>,
        not: bool,
    },
    Range {
        lo: char,
        hi: char,
        not: bool,
    },
    /// Alternatives, each a sequence.
    AnyOf(Vec<Vec<Node>>),
}

const SEPARATOR: char = '/';
const SPECIALS: [char; 7] = ['*', '?', '\\', '[', ']', '{', '}'];

/// Whether `rule` matches the branch `name`, as Forgejo decides it.
pub fn rule_matches(rule: &str, name: &str) -> bool {
    if !is_glob(rule) {
        return equal_fold(rule, name);
    }
    match parse(rule) {
        Ok(nodes) => {
            let name: Vec<char> = name.chars().collect();
            matches(&nodes, &name, Some(SEPARATOR))
        }
        // `glob.MustCompile(glob.QuoteMeta(rule), '/')`: the name itself, case-sensitive.
        Err(()) => rule == name,
    }
}

/// `IsRuleNameSpecial`: the rule is a glob (else a plain branch name).
pub fn is_glob(rule: &str) -> bool {
    rule.chars().any(|c| SPECIALS.contains(&c))
}

/// `strings.EqualFold`, close enough for branch names: equal under simple case folding.
fn equal_fold(a: &str, b: &str) -> bool {
    a.chars().count() == b.chars().count()
        && a.chars().zip(b.chars()).all(|(x, y)| {
            x == y || x.to_lowercase().eq(y.to_lowercase()) || x.to_uppercase().eq(y.to_uppercase())
        })
}

/// A compiled pattern `pattern` matched against `name` with the separator `sep` (gobwas takes
/// any; Forgejo gives `/`). `None` when the pattern does not compile.
#[cfg(test)]
pub(super) fn glob_with(pattern: &str, name: &str, sep: Option<char>) -> Option<bool> {
    let nodes = parse(pattern).ok()?;
    let name: Vec<char> = name.chars().collect();
    Some(matches(&nodes, &name, sep))
}

fn matches(nodes: &[Node], s: &[char], sep: Option<char>) -> bool {
    let Some((first, rest)) = nodes.split_first() else {
        return s.is_empty();
    };
    let one = |ok: &dyn Fn(char) -> bool| {
        s.first().is_some_and(|c| ok(*c)) && matches(rest, &s[1..], sep)
    };
    match first {
        Node::Text(t) => s.starts_with(t) && matches(rest, &s[t.len()..], sep),
        Node::Single => one(&|c| Some(c) != sep),
        Node::List { chars, not } => one(&|c| chars.contains(&c) != *not),
        Node::Range { lo, hi, not } => one(&|c| (*lo <= c && c <= *hi) != *not),
        Node::Any => {
            for n in 0..=s.len() {
                if matches(rest, &s[n..], sep) {
                    return true;
                }
                if s.get(n).is_some_and(|c| Some(*c) == sep) {
                    break;
                }
            }
            false
        }
        Node::Super => (0..=s.len()).any(|n| matches(rest, &s[n..], sep)),
        Node::AnyOf(alternatives) => alternatives.iter().any(|alt| {
            let mut seq = alt.clone();
            seq.extend_from_slice(rest);
            matches(&seq, s, sep)
        }),
    }
}

// ---- the lexer (gobwas/glob v0.2.3 `syntax/lexer/lexer.go`) ---------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Text(Vec<char>),
    Any,
    Super,
    Single,
    RangeOpen,
    Not,
    RangeLo(char),
    RangeBetween,
    RangeHi(char),
    RangeClose,
    TermsOpen,
    Separator,
    TermsClose,
}

struct Lexer {
    data: Vec<char>,
    pos: usize,
    terms_level: usize,
    tokens: Vec<Token>,
    /// The last rune read (`None`: the end), for `unread`.
    last: Option<char>,
    last_size: usize,
    has_rune: bool,
    error: bool,
}

impl Lexer {
    fn peek(&self) -> Option<char> {
        self.data.get(self.pos).copied()
    }

    fn read(&mut self) -> Option<char> {
        if self.has_rune {
            self.has_rune = false;
            self.pos += self.last_size;
            return self.last;
        }
        let r = self.peek();
        let size = usize::from(r.is_some());
        self.pos += size;
        self.last = r;
        self.last_size = size;
        r
    }

    fn unread(&mut self) {
        if self.has_rune {
            self.error = true;
            return;
        }
        self.pos -= self.last_size;
        self.has_rune = true;
    }

    fn in_terms(&self) -> bool {
        self.terms_level > 0
    }

    /// Every token, or `Err` when the lexer failed (gobwas: an `Error` token).
    fn run(mut self) -> Result<Vec<Token>, ()> {
        loop {
            let r = self.read();
            match r {
                None => return if self.error { Err(()) } else { Ok(self.tokens) },
                Some('{') => {
                    self.terms_level += 1;
                    self.tokens.push(Token::TermsOpen);
                }
                Some(',') if self.in_terms() => self.tokens.push(Token::Separator),
                Some('}') if self.in_terms() => {
                    self.tokens.push(Token::TermsClose);
                    self.terms_level -= 1;
                }
                Some('[') => {
                    self.tokens.push(Token::RangeOpen);
                    self.fetch_range();
                }
                Some('?') => self.tokens.push(Token::Single),
                Some('*') => {
                    if self.read() == Some('*') {
                        self.tokens.push(Token::Super);
                    } else {
                        self.unread();
                        self.tokens.push(Token::Any);
                    }
                }
                Some(_) => {
                    self.unread();
                    let breakers: &[char] = if self.in_terms() {
                        &['?', '*', '[', '{', '}', ',']
                    } else {
                        &['?', '*', '[', '{']
                    };
                    self.fetch_text(breakers);
                }
            }
            if self.error {
                return Err(());
            }
        }
    }

    fn fetch_range(&mut self) {
        let mut want_hi = false;
        let mut want_close = false;
        let mut seen_not = false;
        loop {
            let Some(r) = self.read() else {
                self.error = true; // "unexpected end of input"
                return;
            };
            if want_close {
                if r == ']' {
                    self.tokens.push(Token::RangeClose);
                } else {
                    self.error = true; // "expected close range character"
                }
                return;
            }
            if want_hi {
                self.tokens.push(Token::RangeHi(r));
                want_close = true;
                continue;
            }
            if !seen_not && r == '!' {
                self.tokens.push(Token::Not);
                seen_not = true;
                continue;
            }
            if self.peek() == Some('-') {
                self.pos += 1;
                self.tokens.push(Token::RangeLo(r));
                self.tokens.push(Token::RangeBetween);
                want_hi = true;
                continue;
            }
            self.unread();
            self.fetch_text(&[']']);
            want_close = true;
        }
    }

    fn fetch_text(&mut self, breakers: &[char]) {
        let mut data = Vec::new();
        let mut escaped = false;
        while let Some(r) = self.read() {
            if !escaped {
                if r == '\\' {
                    escaped = true;
                    continue;
                }
                if breakers.contains(&r) {
                    self.unread();
                    break;
                }
            }
            escaped = false;
            data.push(r);
        }
        if !data.is_empty() {
            self.tokens.push(Token::Text(data));
        }
    }
}

// ---- the parser (gobwas/glob v0.2.3 `syntax/ast/parser.go`) --------------------------------

/// A node under construction: a pattern (sequence) or alternatives, with its parent.
enum Open {
    Pattern(Vec<Node>),
    AnyOf(Vec<Vec<Node>>),
}

fn parse(pattern: &str) -> Result<Vec<Node>, ()> {
    let tokens = Lexer {
        data: pattern.chars().collect(),
        pos: 0,
        terms_level: 0,
        tokens: Vec::new(),
        last: None,
        last_size: 0,
        has_rune: false,
        error: false,
    }
    .run()?;
    // The path from the root pattern to the one being filled: Pattern, AnyOf, Pattern, …
    let mut stack = vec![Open::Pattern(Vec::new())];
    let mut tokens = tokens.into_iter();
    while let Some(token) = tokens.next() {
        match token {
            Token::Text(t) => push(&mut stack, Node::Text(t)),
            Token::Any => push(&mut stack, Node::Any),
            Token::Super => push(&mut stack, Node::Super),
            Token::Single => push(&mut stack, Node::Single),
            Token::RangeOpen => {
                let node = parse_range(&mut tokens)?;
                push(&mut stack, node);
            }
            Token::TermsOpen => {
                stack.push(Open::AnyOf(Vec::new()));
                stack.push(Open::Pattern(Vec::new()));
            }
            Token::Separator => {
                let done = pop_pattern(&mut stack);
                match stack.last_mut() {
                    Some(Open::AnyOf(alts)) => alts.push(done),
                    _ => return Err(()),
                }
                stack.push(Open::Pattern(Vec::new()));
            }
            Token::TermsClose => close_terms(&mut stack)?,
            _ => return Err(()), // "unexpected token"
        }
    }
    // The end inside alternatives closes them (gobwas returns the tree as it is).
    while stack.len() > 1 {
        close_terms(&mut stack)?;
    }
    match stack.pop() {
        Some(Open::Pattern(nodes)) => Ok(nodes),
        _ => Err(()),
    }
}

fn push(stack: &mut [Open], node: Node) {
    if let Some(Open::Pattern(nodes)) = stack.last_mut() {
        nodes.push(node);
    }
}

fn pop_pattern(stack: &mut Vec<Open>) -> Vec<Node> {
    match stack.pop() {
        Some(Open::Pattern(nodes)) => nodes,
        Some(other) => {
            stack.push(other);
            Vec::new()
        }
        None => Vec::new(),
    }
}

fn close_terms(stack: &mut Vec<Open>) -> Result<(), ()> {
    let last = pop_pattern(stack);
    let Some(Open::AnyOf(mut alts)) = stack.pop() else {
        return Err(());
    };
    alts.push(last);
    push(stack, Node::AnyOf(alts));
    Ok(())
}

fn parse_range(tokens: &mut impl Iterator<Item = Token>) -> Result<Node, ()> {
    let mut not = false;
    let mut lo = None;
    let mut hi = None;
    let mut chars = Vec::new();
    for token in tokens.by_ref() {
        match token {
            Token::Not => not = true,
            Token::RangeLo(c) => lo = Some(c),
            Token::RangeBetween => {}
            Token::RangeHi(c) => {
                if lo.is_some_and(|lo| c < lo) {
                    return Err(()); // "hi character … should be greater than lo …"
                }
                hi = Some(c);
            }
            Token::Text(t) => chars = t,
            Token::RangeClose => {
                // gobwas tests `lo != 0 && hi != 0`: a NUL bound is no bound.
                let range = match (lo, hi) {
                    (Some(lo), Some(hi)) if lo != '\0' && hi != '\0' => Some((lo, hi)),
                    _ => None,
                };
                return match (range, chars.is_empty()) {
                    (Some((lo, hi)), true) => Ok(Node::Range { lo, hi, not }),
                    (None, false) => Ok(Node::List { chars, not }),
                    _ => Err(()), // "could not parse range"
                };
            }
            _ => return Err(()),
        }
    }
    Err(()) // "unexpected end"
}
