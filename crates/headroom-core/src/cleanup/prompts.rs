//! The instructions sent with each chunk. Every task forbids adding content: the text goes back
//! into the audio workflow and must say what the speaker said. Narration adds a length hint, so
//! the text fits the time its segment had.

use headroom_base::language::Language;
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

const TRANSLATE: &str = "You translate spoken transcripts into {language}, to be read aloud. Keep \
the meaning, every name exactly as written, and every number as digits. Use natural spoken \
{language} in complete sentences; remove filler words. Do not add, explain or comment, and do \
not leave anything out. Reply with the {language} translation only.";

/// What the text model is asked to do with the text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TextTask {
    /// Clean up or rewrite, in the text's own language.
    Edit(CleanupMode),
    /// Translate into another language.
    Translate { to: Language },
}

impl From<CleanupMode> for TextTask {
    fn from(mode: CleanupMode) -> Self {
        TextTask::Edit(mode)
    }
}

/// How long the result may be: the time its segment had, and the words that fit in it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct LengthHint {
    pub seconds: f64,
    pub words: u32,
}

impl LengthHint {
    /// The words of `language` that fit `seconds`.
    pub fn for_slot(seconds: f64, language: &Language) -> LengthHint {
        LengthHint {
            seconds,
            words: language.words_in(seconds),
        }
    }

    /// The share of this hint a chunk of the text gets (by its share of the characters).
    pub fn share(self, part_chars: usize, total_chars: usize) -> LengthHint {
        let share = part_chars as f64 / total_chars.max(1) as f64;
        LengthHint {
            seconds: self.seconds * share,
            words: ((self.words as f64 * share).round() as u32).max(1),
        }
    }
}

impl TextTask {
    /// The system prompt, with the length hint when there is one.
    pub fn system_prompt(self, hint: Option<LengthHint>) -> String {
        let mut prompt = match self {
            TextTask::Edit(CleanupMode::Cleanup) => CLEANUP.to_string(),
            TextTask::Edit(CleanupMode::Rewrite) => REWRITE.to_string(),
            TextTask::Translate { to } => TRANSLATE.replace("{language}", to.name),
        };
        if let Some(hint) = hint {
            prompt.push_str(&format!(
                " It will be spoken in {:.1} seconds: use about {} words, no more than {}.",
                hint.seconds,
                hint.words,
                hint.words + hint.words.div_ceil(5)
            ));
        }
        prompt
    }

    /// Replies in quarters of the input: cleanup only shortens, a rewrite may grow a little, a
    /// translation may take more tokens than the English it came from.
    fn reply_quarters(self) -> u32 {
        match self {
            TextTask::Edit(CleanupMode::Cleanup) => 5,
            TextTask::Edit(CleanupMode::Rewrite) => 6,
            TextTask::Translate { .. } => 8,
        }
    }

    /// The reply budget for a chunk of `input_tokens`.
    pub fn reply_budget(self, input_tokens: u32) -> u32 {
        (input_tokens.saturating_mul(self.reply_quarters()) / 4).saturating_add(32)
    }

    /// The largest chunk (in estimated tokens) whose prompt (with a length hint) and reply fit
    /// `context`.
    pub fn chunk_budget(self, context: u32) -> u32 {
        let longest_prompt = self.system_prompt(Some(LengthHint {
            seconds: 9999.9,
            words: 99_999,
        }));
        let fixed = crate::admission::estimate_chat_tokens([longest_prompt.as_str(), ""]) + 32;
        let available = context.saturating_sub(fixed);
        // chunk + reply_budget(chunk) <= available, reply_budget ~ factor * chunk
        (available.saturating_mul(4) / (4 + self.reply_quarters())).max(16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{estimate_chat_tokens, estimate_tokens};

    #[test]
    fn a_chunk_at_the_budget_fits_with_its_reply() {
        let tasks = [
            TextTask::Edit(CleanupMode::Cleanup),
            TextTask::Edit(CleanupMode::Rewrite),
            TextTask::Translate {
                to: Language::find("de").unwrap(),
            },
        ];
        for mode in tasks {
            for context in [2048, 4096, 32768] {
                let budget = mode.chunk_budget(context);
                let chunk = "abc".repeat(budget as usize);
                assert_eq!(estimate_tokens(&chunk), budget);
                let hint = LengthHint {
                    seconds: 12.5,
                    words: 31,
                };
                let system = mode.system_prompt(Some(hint));
                let prompt = estimate_chat_tokens([system.as_str(), chunk.as_str()]);
                assert!(
                    prompt + mode.reply_budget(budget) <= context,
                    "{mode:?} {context}: {prompt} + {}",
                    mode.reply_budget(budget)
                );
            }
        }
    }

    #[test]
    fn a_translation_names_its_language_and_the_hint_its_words() {
        let french = Language::find("fr").unwrap();
        let hint = LengthHint::for_slot(4.0, &french);
        let prompt = TextTask::Translate { to: french }.system_prompt(Some(hint));
        assert!(prompt.contains("into French") && prompt.contains("French translation only"));
        assert!(prompt.contains("every number as digits") && prompt.contains("every name"));
        assert!(prompt.contains("4.0 seconds: use about 11 words, no more than 14"));
        let half = hint.share(50, 100);
        assert_eq!((half.seconds, half.words), (2.0, 6));
        assert!(!TextTask::from(CleanupMode::Cleanup)
            .system_prompt(None)
            .contains("seconds"));
    }

    #[test]
    fn modes_parse() {
        assert_eq!("rewrite".parse::<CleanupMode>(), Ok(CleanupMode::Rewrite));
        assert!("shout".parse::<CleanupMode>().is_err());
    }
}
