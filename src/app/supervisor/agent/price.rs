//! What Claude's tokens cost, for a run stopped before its `result` event (which alone
//! carries Claude Code's own dollar figure): the per-model prices Claude Code itself charges
//! with, in dollars per million tokens, read from Claude Code 2.1.197's price table (its model
//! name match included: the family and version as a substring of the model id). A model it
//! does not know is priced as Claude Code prices one: at Opus 4.5's rates.

use crate::store::usage::Tokens;

/// Dollars per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Prompt cache writes (the 5-minute cache; Claude Code's stream does not split out the
    /// 1-hour writes it prices higher).
    pub cache_write: f64,
    pub cache_read: f64,
}

const fn price(input: f64, output: f64, cache_write: f64, cache_read: f64) -> Price {
    Price {
        input,
        output,
        cache_write,
        cache_read,
    }
}

const HAIKU_3_5: Price = price(0.8, 4.0, 1.0, 0.08);
const HAIKU_4_5: Price = price(1.0, 5.0, 1.25, 0.1);
const SONNET: Price = price(3.0, 15.0, 3.75, 0.3);
const OPUS_4_0: Price = price(15.0, 75.0, 18.75, 1.5);
const OPUS_4_5: Price = price(5.0, 25.0, 6.25, 0.5);
const FABLE_MYTHOS_5: Price = price(10.0, 50.0, 12.5, 1.0);

/// The price of `model` (a model id as Claude's messages name it, e.g.
/// `claude-sonnet-4-5-20250929`), in the order Claude Code matches them.
pub fn claude(model: &str) -> Price {
    let m = model.to_ascii_lowercase();
    let has = |s: &str| m.contains(s);
    if has("claude-fable-5") || has("claude-mythos-5") {
        FABLE_MYTHOS_5
    } else if [
        "claude-opus-4-8",
        "claude-opus-4-7",
        "claude-opus-4-6",
        "claude-opus-4-5",
    ]
    .iter()
    .any(|s| has(s))
    {
        OPUS_4_5
    } else if has("claude-opus-4") {
        OPUS_4_0 // 4, 4.1
    } else if has("claude-sonnet") || has("claude-3-5-sonnet") || has("claude-3-7-sonnet") {
        SONNET
    } else if has("claude-haiku-4-5") {
        HAIKU_4_5
    } else if has("claude-3-5-haiku") {
        HAIKU_3_5
    } else {
        OPUS_4_5
    }
}

impl Price {
    /// What `t` costs at this price, in dollars.
    pub fn cost(&self, t: &Tokens) -> f64 {
        (t.input as f64 * self.input
            + t.output as f64 * self.output
            + t.cache_write as f64 * self.cache_write
            + t.cache_read as f64 * self.cache_read)
            / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_priced_as_claude_code_prices_them() {
        let t = Tokens {
            input: 1_000_000,
            output: 100_000,
            cache_read: 1_000_000,
            cache_write: 1_000_000,
        };
        // 3 + 1.5 + 0.3 + 3.75
        assert!((claude("claude-sonnet-4-5-20250929").cost(&t) - 8.55).abs() < 1e-9);
        assert_eq!(claude("claude-opus-4-1-20250805"), OPUS_4_0);
        assert_eq!(claude("claude-opus-4-20250514"), OPUS_4_0);
        assert_eq!(claude("claude-opus-4-6"), OPUS_4_5);
        assert_eq!(claude("claude-haiku-4-5-20251001"), HAIKU_4_5);
        assert_eq!(claude("claude-3-5-haiku-20241022"), HAIKU_3_5);
        assert_eq!(claude("some-gateway-model"), OPUS_4_5);
    }
}
