//! The filler words speech adds to writing ("um", "uh", "hmm"): one list, for the cleanup
//! rules that drop them and the recognizer that listens for the ones Whisper leaves out.

/// Single-word fillers, lower case, as recognizers spell them ("ugh" is how Whisper often
/// writes a drawn-out "uh").
pub const FILLER_WORDS: &[&str] = &[
    "um", "umm", "ummm", "uh", "uhh", "uhm", "ugh", "er", "erm", "ah", "ahh", "hmm", "hmmm", "mm",
];

/// Whether `word` (a bare word, any case, no punctuation) is a filler.
pub fn is_filler_word(word: &str) -> bool {
    FILLER_WORDS.iter().any(|f| f.eq_ignore_ascii_case(word))
}

/// `text` (a word as a recognizer writes it, punctuation attached: "Um," or "uh...") with its
/// leading and trailing punctuation taken off.
pub fn bare_word(text: &str) -> &str {
    text.trim_matches(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fillers_are_known_in_any_case_and_other_words_are_not() {
        assert!(is_filler_word("um"));
        assert!(is_filler_word("Uh"));
        assert!(is_filler_word(bare_word("Hmm...")));
        assert!(!is_filler_word("umbrella"));
        assert!(!is_filler_word(bare_word("the,")));
        assert_eq!(bare_word("\"Um,\""), "Um");
        assert_eq!(bare_word("don't."), "don't");
    }
}
