//! Checks that a model's reply is a cleanup of the chunk and not something else: small local
//! models drift into chatter, repetition or answering the transcript, and a cut-off reply
//! would silently drop the end of the narration.

use super::CleanupMode;
use std::collections::HashSet;

fn content_words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .collect()
}

/// Why a reply is not usable as the cleaned text of `original`, if it is not.
pub fn unusable_reply(
    mode: CleanupMode,
    original: &str,
    reply: &str,
    finish_reason: Option<&str>,
) -> Option<String> {
    if reply.trim().is_empty() {
        return Some("the model replied with no text".into());
    }
    if finish_reason == Some("length") {
        return Some("the reply was cut off at its token budget".into());
    }
    let (max_growth, min_shared) = match mode {
        CleanupMode::Cleanup => (1.5, 0.6),
        CleanupMode::Rewrite => (2.5, 0.3),
    };
    let growth = reply.chars().count() as f64 / original.chars().count().max(1) as f64;
    if growth > max_growth {
        return Some(format!(
            "the reply is {growth:.1}× as long as the input, more than a {} would be",
            if mode == CleanupMode::Cleanup {
                "cleanup"
            } else {
                "rewrite"
            }
        ));
    }
    let reply_words = content_words(reply);
    if reply_words.is_empty() {
        return None;
    }
    let original_words = content_words(original);
    let shared =
        reply_words.intersection(&original_words).count() as f64 / reply_words.len() as f64;
    if shared < min_shared {
        return Some(format!(
            "only {:.0}% of the reply's words come from the input; the model did not keep to the text",
            shared * 100.0
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const INPUT: &str = "um so the the meeting is, uh, on tuesday at ten in the big room";

    #[test]
    fn a_faithful_cleanup_passes() {
        let reply = "So the meeting is on Tuesday at ten in the big room.";
        assert_eq!(
            unusable_reply(CleanupMode::Cleanup, INPUT, reply, Some("stop")),
            None
        );
    }

    #[test]
    fn chatter_and_repetition_are_caught() {
        let chatter = "I'm so glad to have you on the show. I'm so glad to have you on the show.";
        let why = unusable_reply(CleanupMode::Cleanup, INPUT, chatter, Some("stop")).unwrap();
        assert!(why.contains("words come from the input"), "{why}");
        let long = format!("{INPUT} {INPUT} {INPUT}");
        let why = unusable_reply(CleanupMode::Cleanup, INPUT, &long, Some("stop")).unwrap();
        assert!(why.contains("as long as the input"), "{why}");
    }

    #[test]
    fn truncated_or_empty_replies_are_caught() {
        assert!(unusable_reply(
            CleanupMode::Cleanup,
            INPUT,
            "So the meeting",
            Some("length")
        )
        .is_some());
        assert!(unusable_reply(CleanupMode::Cleanup, INPUT, "  ", Some("stop")).is_some());
    }

    #[test]
    fn a_rewrite_may_reword_more_than_a_cleanup() {
        let reply = "The meeting takes place on Tuesday at ten o'clock, in the big room.";
        assert_eq!(
            unusable_reply(CleanupMode::Rewrite, INPUT, reply, Some("stop")),
            None
        );
    }
}
