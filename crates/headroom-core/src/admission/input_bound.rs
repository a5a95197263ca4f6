//! Bounded input: refuse, before anything goes upstream, text that cannot fit the model.

use super::RejectReason;
use super::{Gate, Refusal, RequestShape};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Tokens a chat template adds around each message (role markers, separators).
const PER_MESSAGE_OVERHEAD_TOKENS: u32 = 8;
/// Tokens the template adds to prime the reply.
const REPLY_PRIMING_TOKENS: u32 = 4;

/// A conservative token count for text we have not tokenized: one token per 3 bytes of UTF-8.
///
/// English BPE vocabularies average about 4 characters a token, CJK about one character
/// (3 bytes) a token, so this over-counts English by about a third and never badly
/// under-counts; refusing a little early is cheaper than a 400 from the server after the
/// request has taken a slot.
pub fn estimate_tokens(text: &str) -> u32 {
    u32::try_from(text.len().div_ceil(3)).unwrap_or(u32::MAX)
}

/// Estimated prompt tokens for a chat made of these message texts.
pub fn estimate_chat_tokens<'a>(messages: impl IntoIterator<Item = &'a str>) -> u32 {
    messages
        .into_iter()
        .map(|m| estimate_tokens(m).saturating_add(PER_MESSAGE_OVERHEAD_TOKENS))
        .fold(REPLY_PRIMING_TOKENS, u32::saturating_add)
}

/// The model's context length, shared so that discovery from the server can update it.
#[derive(Clone, Debug)]
pub struct ContextWindow(Arc<AtomicU32>);

impl ContextWindow {
    pub fn new(tokens: u32) -> Self {
        ContextWindow(Arc::new(AtomicU32::new(tokens)))
    }
    pub fn tokens(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
    pub fn set(&self, tokens: u32) {
        self.0.store(tokens, Ordering::Relaxed)
    }
}

/// Refuses input over a character bound, or whose estimated prompt plus the reply budget
/// (`max_tokens`) exceeds the context window.
pub struct InputBound {
    pub max_chars: usize,
    pub context: ContextWindow,
}

impl Gate for InputBound {
    fn name(&self) -> &'static str {
        "input_bound"
    }

    fn check(&self, shape: &RequestShape) -> Result<(), Refusal> {
        if shape.chars > self.max_chars {
            return Err(Refusal::new(
                RejectReason::InputTooLong,
                format!(
                    "{} characters; the limit is {}",
                    shape.chars, self.max_chars
                ),
            ));
        }
        let context = self.context.tokens();
        let needed = shape.estimated_tokens.saturating_add(shape.max_tokens);
        if needed > context {
            return Err(Refusal::new(
                RejectReason::InputTooLong,
                format!(
                    "about {} prompt tokens plus {} reserved for the reply exceed the model's \
                     context of {} tokens",
                    shape.estimated_tokens, shape.max_tokens, context
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(max_chars: usize, context: u32) -> InputBound {
        InputBound {
            max_chars,
            context: ContextWindow::new(context),
        }
    }

    #[test]
    fn estimate_over_counts_english_and_counts_cjk_per_character() {
        let english = "The quick brown fox jumps over the lazy dog near the river bank.";
        // A real BPE tokenizer gives about 14 tokens for this sentence.
        assert!(estimate_tokens(english) >= 14);
        assert_eq!(estimate_tokens("音声合成"), 4);
        assert_eq!(estimate_tokens(""), 0);
    }

    #[test]
    fn chat_estimate_adds_template_overhead() {
        assert_eq!(
            estimate_chat_tokens(["abc", "abcdef"]),
            4 + (1 + 8) + (2 + 8)
        );
    }

    #[test]
    fn refuses_too_many_characters() {
        let shape = RequestShape {
            chars: 101,
            estimated_tokens: 10,
            max_tokens: 10,
        };
        let refusal = bound(100, 4096).check(&shape).unwrap_err();
        assert_eq!(refusal.reason, RejectReason::InputTooLong);
        assert!(refusal.detail.contains("101 characters; the limit is 100"));
    }

    #[test]
    fn leaves_room_for_the_reply() {
        let fits = RequestShape {
            chars: 10,
            estimated_tokens: 3584,
            max_tokens: 512,
        };
        assert!(bound(100_000, 4096).check(&fits).is_ok());
        let over = RequestShape {
            max_tokens: 513,
            ..fits
        };
        let refusal = bound(100_000, 4096).check(&over).unwrap_err();
        assert!(
            refusal.detail.contains("context of 4096 tokens"),
            "{}",
            refusal.detail
        );
    }

    #[test]
    fn discovered_context_applies_to_later_checks() {
        let gate = bound(100_000, 4096);
        let shape = RequestShape {
            chars: 10,
            estimated_tokens: 3000,
            max_tokens: 512,
        };
        assert!(gate.check(&shape).is_ok());
        gate.context.set(2048);
        assert!(gate.check(&shape).is_err());
    }
}
