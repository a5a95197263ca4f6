//! Checks that a model's reply is a cleanup of the chunk and not something else: small local
//! models drift into chatter, repetition or answering the transcript, and a cut-off reply
//! would silently drop the end of the narration.

use super::{CleanupMode, TextTask};
use std::collections::HashSet;

fn content_words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_lowercase)
        .collect()
}

/// The runs of digits in `text`: the numbers a translation must keep.
fn numbers(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|n| !n.is_empty())
        .collect()
}

/// Why a translation of `original` is not usable: it must keep every number, be neither far
/// longer nor far shorter, and not be the text unchanged.
fn unusable_translation(original: &str, reply: &str) -> Option<String> {
    let growth = reply.chars().count() as f64 / original.chars().count().max(1) as f64;
    if growth > 3.0 {
        return Some(format!(
            "the translation is {growth:.1}× as long as the text, more than a translation would be"
        ));
    }
    if growth < 0.3 {
        return Some(format!(
            "the translation is {growth:.1}× as long as the text: it left something out"
        ));
    }
    let kept: HashSet<&str> = numbers(reply).into_iter().collect();
    if let Some(missing) = numbers(original).into_iter().find(|n| !kept.contains(n)) {
        return Some(format!("the translation dropped the number {missing}"));
    }
    let original_words = content_words(original);
    let reply_words = content_words(reply);
    if original_words.len() >= 4 && reply_words == original_words {
        return Some("the reply is the text itself, not a translation".into());
    }
    None
}

/// Why a reply is not usable as the result of `task` on `original`, if it is not.
pub fn unusable_reply(
    task: TextTask,
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
    let mode = match task {
        TextTask::Edit(mode) => mode,
        TextTask::Translate { .. } => return unusable_translation(original, reply),
    };
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

    const CLEANUP: TextTask = TextTask::Edit(CleanupMode::Cleanup);
    const REWRITE: TextTask = TextTask::Edit(CleanupMode::Rewrite);

    fn spanish() -> TextTask {
        TextTask::Translate {
            to: headroom_base::language::Language::find("es").unwrap(),
        }
    }

    #[test]
    fn a_translation_keeps_its_numbers_and_is_not_the_text_itself() {
        let text = "The meeting is on Tuesday at 10 in room 42 with Maria.";
        let good = "La reunión es el martes a las 10 en la sala 42 con Maria.";
        assert_eq!(unusable_reply(spanish(), text, good, Some("stop")), None);
        let dropped = "La reunión es el martes a las 10 con Maria.";
        let why = unusable_reply(spanish(), text, dropped, Some("stop")).unwrap();
        assert!(why.contains("dropped the number 42"), "{why}");
        let why = unusable_reply(spanish(), text, text, Some("stop")).unwrap();
        assert!(why.contains("not a translation"), "{why}");
        let why = unusable_reply(spanish(), text, "Reunión.", Some("stop")).unwrap();
        assert!(why.contains("left something out"), "{why}");
    }

    const INPUT: &str = "um so the the meeting is, uh, on tuesday at ten in the big room";

    #[test]
    fn a_faithful_cleanup_passes() {
        let reply = "So the meeting is on Tuesday at ten in the big room.";
        assert_eq!(unusable_reply(CLEANUP, INPUT, reply, Some("stop")), None);
    }

    #[test]
    fn chatter_and_repetition_are_caught() {
        let chatter = "I'm so glad to have you on the show. I'm so glad to have you on the show.";
        let why = unusable_reply(CLEANUP, INPUT, chatter, Some("stop")).unwrap();
        assert!(why.contains("words come from the input"), "{why}");
        let long = format!("{INPUT} {INPUT} {INPUT}");
        let why = unusable_reply(CLEANUP, INPUT, &long, Some("stop")).unwrap();
        assert!(why.contains("as long as the input"), "{why}");
    }

    #[test]
    fn truncated_or_empty_replies_are_caught() {
        assert!(unusable_reply(CLEANUP, INPUT, "So the meeting", Some("length")).is_some());
        assert!(unusable_reply(CLEANUP, INPUT, "  ", Some("stop")).is_some());
    }

    #[test]
    fn a_rewrite_may_reword_more_than_a_cleanup() {
        let reply = "The meeting takes place on Tuesday at ten o'clock, in the big room.";
        assert_eq!(unusable_reply(REWRITE, INPUT, reply, Some("stop")), None);
    }
}
