//! The instructions sent with each chunk. Both modes forbid adding content: the text goes back
//! into the audio workflow and must say what the speaker said.

use serde::{Deserialize, Serialize};

/// What to do with the transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum CleanupMode {
    /// Remove speech noise, keep the words.
    #[default]
    Cleanup,
    /// Rewrite as clear narration for speech synthesis, keeping the meaning.
    Rewrite,
}

impl std::str::FromStr for CleanupMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cleanup" => Ok(CleanupMode::Cleanup),
            "rewrite" => Ok(CleanupMode::Rewrite),
            other => Err(format!("unknown mode {other:?}: use cleanup or rewrite")),
        }
    }
}

const CLEANUP: &str = "You clean up speech transcripts. Remove filler words (um, uh, you know), \
false starts, stutters and accidentally repeated words. Fix punctuation, capitalization and \
spacing. Keep the speaker's own words, order, meaning and language; keep timestamps and speaker \
labels exactly as they are. Do not summarize, answer, explain or add anything. Reply with the \
cleaned text only.";

const REWRITE: &str = "You rewrite spoken transcripts as clear narration to be read aloud. Use \
complete, well-punctuated sentences and plain wording. Keep every fact, name, number and the \
meaning and language of the original; do not add information, opinions or commentary, and do \
not leave anything out. Reply with the narration only.";

impl CleanupMode {
    pub fn system_prompt(self) -> &'static str {
        match self {
            CleanupMode::Cleanup => CLEANUP,
            CleanupMode::Rewrite => REWRITE,
        }
    }

    /// The reply budget for a chunk of `input_tokens`: cleanup only shortens, a rewrite may
    /// grow a little.
    pub fn reply_budget(self, input_tokens: u32) -> u32 {
        let scaled = match self {
            CleanupMode::Cleanup => input_tokens.saturating_mul(5) / 4,
            CleanupMode::Rewrite => input_tokens.saturating_mul(3) / 2,
        };
        scaled.saturating_add(32)
    }

    /// The largest chunk (in estimated tokens) whose prompt and reply fit `context`.
    pub fn chunk_budget(self, context: u32) -> u32 {
        let fixed = crate::admission::estimate_chat_tokens([self.system_prompt(), ""]) + 32;
        let available = context.saturating_sub(fixed);
        // chunk + reply_budget(chunk) <= available, reply_budget ~ factor * chunk
        let per_token = match self {
            CleanupMode::Cleanup => 9,  // 1 + 5/4, in quarters
            CleanupMode::Rewrite => 10, // 1 + 3/2, in quarters
        };
        (available.saturating_mul(4) / per_token).max(16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{estimate_chat_tokens, estimate_tokens};

    #[test]
    fn a_chunk_at_the_budget_fits_with_its_reply() {
        for mode in [CleanupMode::Cleanup, CleanupMode::Rewrite] {
            for context in [2048, 4096, 32768] {
                let budget = mode.chunk_budget(context);
                let chunk = "abc".repeat(budget as usize);
                assert_eq!(estimate_tokens(&chunk), budget);
                let prompt = estimate_chat_tokens([mode.system_prompt(), chunk.as_str()]);
                assert!(
                    prompt + mode.reply_budget(budget) <= context,
                    "{mode:?} {context}: {prompt} + {}",
                    mode.reply_budget(budget)
                );
            }
        }
    }

    #[test]
    fn modes_parse() {
        assert_eq!("rewrite".parse::<CleanupMode>(), Ok(CleanupMode::Rewrite));
        assert!("shout".parse::<CleanupMode>().is_err());
    }
}
