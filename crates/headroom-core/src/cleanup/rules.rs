//! Rule-based transcript cleanup: the deterministic fallback when the text model is busy,
//! down or switched off. It removes what speech adds to writing (filler words, stutters,
//! repeated words), and restores writing's surface (spacing, capitals, sentence punctuation),
//! line by line, without touching timestamps or speaker labels.

use headroom_base::fillers::is_filler_word;
use regex::Regex;
use std::sync::OnceLock;

/// Phrases that are fillers only between commas ("it was, you know, fine").
const COMMA_FILLERS: &[&[&str]] = &[&["you", "know"], &["i", "mean"], &["like"], &["sort", "of"]];

/// Words whose doubling is usually deliberate ("had had", "that that", "very very").
const DELIBERATE_DOUBLES: &[&str] = &[
    "had", "that", "very", "really", "no", "yes", "bye", "so", "many", "much", "far", "ha",
];

/// Short prefixes that are real morphemes, not stutters ("re-read", "co-op").
const MORPHEME_PREFIXES: &[&str] = &[
    "re", "co", "de", "ex", "pre", "non", "un", "in", "bi", "sub", "mid", "anti", "self", "e",
];

fn line_prefix() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"^(?:(?:\[[0-9:.,\- >]+\]|\([0-9:.,]+\)|[0-9]{1,2}:[0-9]{2}(?::[0-9]{2})?(?:[.,][0-9]+)?)\s+)?(?:[A-Z][\w'.-]*(?:\s+[A-Z0-9][\w'.-]*){0,2}:\s+)?",
        )
        .expect("valid prefix regex")
    })
}

/// Cleans a whole transcript, keeping its line structure. A line that ends with a comma
/// continues on the next (recognizers break segments mid-sentence), so it gets no full stop
/// and the next line no capital.
pub fn clean_transcript(text: &str) -> String {
    let mut out = Vec::new();
    let mut blank_run = 0;
    let mut continues = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            blank_run += 1;
            continues = false;
            if blank_run == 1 && !out.is_empty() {
                out.push(String::new());
            }
            continue;
        }
        blank_run = 0;
        let (cleaned, open) = clean_line_in_context(line, continues);
        continues = open;
        out.push(cleaned);
    }
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    out.join("\n")
}

/// Cleans one line; a timestamp or speaker label at its start is kept as it is.
pub fn clean_line(line: &str) -> String {
    clean_line_in_context(line, false).0
}

/// Cleans one line that may continue the previous line's sentence; also says whether this
/// line's sentence continues on the next.
fn clean_line_in_context(line: &str, continues: bool) -> (String, bool) {
    let line = line.trim();
    let prefix_len = line_prefix().find(line).map(|m| m.end()).unwrap_or(0);
    let (prefix, body) = line.split_at(prefix_len);
    // A timestamp or speaker label starts a new utterance.
    let starts_sentence = !continues || prefix_len > 0;
    let (body, open) = clean_body(body, starts_sentence);
    if body.is_empty() {
        return (prefix.trim_end().to_string(), false);
    }
    (format!("{prefix}{body}"), open)
}

/// Why the cleanup drops a word: the same judgement cleans a line of text and picks the words
/// to cut from a recording (see [`disfluent_words`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Disfluency {
    /// "um", "uh", "hmm" standing alone.
    Filler,
    /// "you know", "I mean", "like" between commas.
    FillerPhrase,
    /// A word said twice ("the the"); the second goes.
    Repeat,
    /// A word broken off and started again ("th- the", "I- I").
    FalseStart,
}

/// The words of `words` (as a recognizer gave them, one word each, punctuation attached) that
/// the cleanup drops, with why, in order. The rules are [`clean_line`]'s, so cutting these
/// words from the recording removes what cleaning its text removes.
pub fn disfluent_words<S: AsRef<str>>(words: &[S]) -> Vec<(usize, Disfluency)> {
    let (_, dropped) = without_disfluencies(tokens_of(words.iter().map(AsRef::as_ref)));
    dropped
}

/// A whitespace-separated word split into leading punctuation, the word, trailing punctuation.
#[derive(Debug, Clone, PartialEq)]
struct Token {
    lead: String,
    core: String,
    trail: String,
    /// Its place among the words given.
    index: usize,
    /// The word was broken off: it ended in a hyphen ("th-").
    broken_off: bool,
}

impl Token {
    fn parse(raw: &str, index: usize) -> Token {
        let is_word = |c: char| c.is_alphanumeric() || c == '\'' || c == '’' || c == '-';
        let start = raw.find(is_word).unwrap_or(raw.len());
        let end = raw
            .rfind(is_word)
            .map(|i| i + raw[i..].chars().next().map_or(1, char::len_utf8))
            .unwrap_or(start);
        let (core, trail) = if start < end {
            (&raw[start..end], &raw[end..])
        } else {
            ("", &raw[start..])
        };
        Token {
            lead: raw[..start].to_string(),
            core: core.trim_matches('-').to_string(),
            trail: trail.to_string(),
            index,
            broken_off: core.len() > 1 && core.ends_with('-') && trail.is_empty(),
        }
    }

    fn lower(&self) -> String {
        self.core.to_lowercase()
    }

    fn ends_sentence(&self) -> bool {
        self.trail
            .trim_end_matches(['"', '\'', ')', '”', '’'])
            .ends_with(['.', '?', '!', '…'])
    }

    fn render(&self) -> String {
        format!("{}{}{}", self.lead, self.core, self.trail)
    }
}

/// The words of `raws` as tokens, stutters collapsed; bare punctuation ("so , then") goes to
/// the word before.
fn tokens_of<'a>(raws: impl Iterator<Item = &'a str>) -> Vec<Token> {
    let mut tokens: Vec<Token> = Vec::new();
    for (index, raw) in raws.enumerate() {
        let mut tok = Token::parse(raw, index);
        if tok.core.is_empty() {
            if let Some(prev) = tokens.last_mut() {
                prev.trail.push_str(&tok.lead);
                prev.trail.push_str(&tok.trail);
            }
            continue;
        }
        tok.core = collapse_stutter(&tok.core);
        tokens.push(tok);
    }
    tokens
}

/// One pass of the cleanup: the tokens it keeps of those given.
type Pass = fn(Vec<Token>) -> Vec<Token>;

/// The tokens the cleanup keeps, and the words it drops (by index, with why, in order).
fn without_disfluencies(tokens: Vec<Token>) -> (Vec<Token>, Vec<(usize, Disfluency)>) {
    let passes: [(Pass, Disfluency); 4] = [
        (drop_fillers, Disfluency::Filler),
        (drop_comma_fillers, Disfluency::FillerPhrase),
        (drop_false_starts, Disfluency::FalseStart),
        (drop_repeats, Disfluency::Repeat),
    ];
    let mut dropped = Vec::new();
    let mut tokens = tokens;
    for (pass, why) in passes {
        let before: Vec<usize> = tokens.iter().map(|t| t.index).collect();
        tokens = pass(tokens);
        let mut kept = tokens.iter().map(|t| t.index).peekable();
        for index in before {
            if kept.peek() == Some(&index) {
                kept.next();
            } else {
                dropped.push((index, why));
            }
        }
    }
    dropped.sort_by_key(|&(index, _)| index);
    (tokens, dropped)
}

fn clean_body(body: &str, starts_sentence: bool) -> (String, bool) {
    let (mut tokens, _) = without_disfluencies(tokens_of(body.split_whitespace()));
    fix_capitals(&mut tokens, starts_sentence);
    let mut text = tokens
        .iter()
        .map(Token::render)
        .collect::<Vec<_>>()
        .join(" ");
    let mut open = false;
    if let Some(last) = tokens.last() {
        let trail = last.trail.trim_end_matches(['"', '\'', ')', '”', '’']);
        if trail.ends_with(',') {
            open = true;
        } else if !trail.ends_with(['.', '?', '!', '…', ':', ';']) {
            let trimmed = text.trim_end_matches(['-', '—']).len();
            text.truncate(trimmed);
            text.push('.');
        }
    }
    (text, open)
}

/// "I-I-I" → "I", "th-the" → "the"; "well-known", "re-read" stay.
fn collapse_stutter(core: &str) -> String {
    let parts: Vec<&str> = core.split('-').collect();
    if parts.len() < 2 {
        return core.to_string();
    }
    let last = parts[parts.len() - 1];
    let last_lower = last.to_lowercase();
    let is_stutter = parts[..parts.len() - 1].iter().all(|p| {
        let p = p.to_lowercase();
        !p.is_empty()
            && (p == last_lower
                || (p.chars().count() <= 3
                    && last_lower.starts_with(&p)
                    && !MORPHEME_PREFIXES.contains(&p.as_str())))
    });
    if is_stutter {
        last.to_string()
    } else {
        core.to_string()
    }
}

fn drop_fillers(tokens: Vec<Token>) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    for tok in tokens {
        if !is_filler_word(&tok.lower()) {
            out.push(tok);
            continue;
        }
        // Keep sentence-ending punctuation the filler carried ("... then uh."); of the commas
        // around a bracketed filler, keep the first: it may separate list items.
        let trail = tok.trail.trim_start_matches(',');
        if let Some(prev) = out.last_mut() {
            if !trail.is_empty() && !prev.ends_sentence() {
                prev.trail = prev.trail.trim_end_matches(',').to_string();
                prev.trail.push_str(trail);
            }
        }
    }
    out
}

fn drop_comma_fillers(tokens: Vec<Token>) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    'scan: while i < tokens.len() {
        let opens = out.last().is_none_or(|p: &Token| p.trail.ends_with(','));
        if opens {
            for phrase in COMMA_FILLERS {
                let end = i + phrase.len();
                if end > tokens.len() {
                    continue;
                }
                let words_match = tokens[i..end]
                    .iter()
                    .zip(phrase.iter())
                    .all(|(t, w)| t.lower() == *w && t.lead.is_empty());
                let inner_bare = tokens[i..end - 1].iter().all(|t| t.trail.is_empty());
                let closes = tokens[end - 1].trail == ",";
                if words_match && inner_bare && closes {
                    if let Some(prev) = out.last_mut() {
                        prev.trail = prev.trail.trim_end_matches(',').to_string();
                    }
                    i = end;
                    continue 'scan;
                }
            }
        }
        out.push(tokens[i].clone());
        i += 1;
    }
    out
}

/// "th- the", "I- I think": a word broken off and started again loses the broken part.
fn drop_false_starts(tokens: Vec<Token>) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    let mut tokens = tokens.into_iter().peekable();
    while let Some(tok) = tokens.next() {
        let restarted = tokens.peek().is_some_and(|next| {
            tok.broken_off && next.lead.is_empty() && next.lower().starts_with(&tok.lower())
        });
        if !restarted {
            out.push(tok);
        }
    }
    out
}

fn drop_repeats(tokens: Vec<Token>) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::with_capacity(tokens.len());
    for tok in tokens {
        if let Some(prev) = out.last_mut() {
            let same = prev.lower() == tok.lower();
            let joinable = prev.trail.is_empty() || prev.trail == ",";
            if same
                && joinable
                && tok.lead.is_empty()
                && !DELIBERATE_DOUBLES.contains(&tok.lower().as_str())
            {
                prev.trail = tok.trail;
                continue;
            }
        }
        out.push(tok);
    }
    out
}

fn fix_capitals(tokens: &mut [Token], starts_sentence: bool) {
    let mut sentence_start = starts_sentence;
    for tok in tokens.iter_mut() {
        let lower = tok.lower();
        if lower == "i" || lower.starts_with("i'") || lower.starts_with("i’") {
            tok.core.replace_range(..1, "I");
        }
        if sentence_start {
            let mut chars = tok.core.chars();
            if let Some(first) = chars.next() {
                if first.is_lowercase() {
                    tok.core = first.to_uppercase().chain(chars).collect();
                }
            }
        }
        sentence_start = tok.ends_sentence();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_fillers_stutters_and_repeats() {
        assert_eq!(
            clean_line("um so I-I-I think the the results were uh pretty good"),
            "So I think the results were pretty good."
        );
    }

    #[test]
    fn a_bracketed_filler_keeps_the_list_comma_before_it() {
        assert_eq!(
            clean_line("the gulls, the the ferries, uh, people arguing"),
            "The gulls, the ferries, people arguing."
        );
    }

    #[test]
    fn comma_bounded_fillers_go_but_real_uses_stay() {
        assert_eq!(
            clean_line("it was, you know, a long day"),
            "It was a long day."
        );
        assert_eq!(clean_line("do you know the way"), "Do you know the way.");
        assert_eq!(clean_line("I like this, like, a lot"), "I like this a lot.");
    }

    #[test]
    fn keeps_deliberate_doubles_and_real_hyphenation() {
        assert_eq!(
            clean_line("she had had a very very well-known re-read"),
            "She had had a very very well-known re-read."
        );
    }

    #[test]
    fn stutter_fragments_collapse() {
        assert_eq!(collapse_stutter("th-the"), "the");
        assert_eq!(collapse_stutter("w-w-what"), "what");
        assert_eq!(collapse_stutter("co-op"), "co-op");
        assert_eq!(collapse_stutter("state-of-the-art"), "state-of-the-art");
    }

    #[test]
    fn capitalizes_sentences_and_the_pronoun() {
        assert_eq!(
            clean_line("i'm here. and i think it works? yes"),
            "I'm here. And I think it works? Yes."
        );
    }

    #[test]
    fn fixes_spacing_around_punctuation() {
        assert_eq!(
            clean_line("  well ,   that   is odd  "),
            "Well, that is odd."
        );
    }

    #[test]
    fn filler_carrying_the_full_stop_hands_it_over() {
        assert_eq!(
            clean_line("we stopped there uh. then we left"),
            "We stopped there. Then we left."
        );
    }

    #[test]
    fn keeps_timestamps_and_speaker_labels() {
        assert_eq!(
            clean_line("[00:01:05] Dr. Ana Ruiz: um the the sample was uh contaminated"),
            "[00:01:05] Dr. Ana Ruiz: The sample was contaminated."
        );
        assert_eq!(
            clean_line("00:12 Speaker 2: yeah"),
            "00:12 Speaker 2: Yeah."
        );
    }

    #[test]
    fn a_realistic_transcript_keeps_its_lines_and_meaning() {
        let raw = "Interviewer: so, um, how did you you get started with field recording\n\
                   \n\n\
                   Maya: uh well I-I was, you know, fourteen and and my my uncle gave me a a cassette recorder\n\
                   Maya: it was, like, the best thing ever honestly\n";
        let want = "Interviewer: So, how did you get started with field recording.\n\
                    \n\
                    Maya: Well I was fourteen and my uncle gave me a cassette recorder.\n\
                    Maya: It was the best thing ever honestly.";
        assert_eq!(clean_transcript(raw), want);
    }

    #[test]
    fn a_sentence_split_across_segments_stays_one_sentence() {
        assert_eq!(
            clean_transcript(
                "I recorded the gulls, the ferries,\npeople arguing about fish\nthen I left"
            ),
            "I recorded the gulls, the ferries,\npeople arguing about fish.\nThen I left."
        );
    }

    #[test]
    fn is_deterministic_and_idempotent() {
        let raw = "um the the plan is, you know, simple";
        let once = clean_transcript(raw);
        assert_eq!(clean_transcript(raw), once);
        assert_eq!(clean_transcript(&once), once);
    }

    #[test]
    fn a_line_of_only_fillers_becomes_empty_body() {
        assert_eq!(clean_line("Maya: um uh"), "Maya:");
        assert_eq!(clean_line("um"), "");
    }

    #[test]
    fn a_broken_off_word_started_again_goes() {
        assert_eq!(
            clean_line("th- the ferries were I- I think late"),
            "The ferries were I think late."
        );
        // A broken-off word that is not started again stays.
        assert!(disfluent_words(&["a", "well-", "known", "fact"]).is_empty());
    }

    #[test]
    fn the_words_to_cut_are_those_cleaning_drops() {
        let words = [
            "So,", "um,", "I", "think", "the", "the", "answer", "is,", "you", "know,", "th-",
            "this.", "Uh.",
        ];
        assert_eq!(
            disfluent_words(&words),
            vec![
                (1, Disfluency::Filler),
                (5, Disfluency::Repeat),
                (8, Disfluency::FillerPhrase),
                (9, Disfluency::FillerPhrase),
                (10, Disfluency::FalseStart),
                (12, Disfluency::Filler),
            ]
        );
        let kept: Vec<&str> = words
            .iter()
            .enumerate()
            .filter(|(i, _)| !disfluent_words(&words).iter().any(|(d, _)| d == i))
            .map(|(_, w)| *w)
            .collect();
        let bare = |text: &str| {
            text.split_whitespace()
                .map(|w| Token::parse(w, 0).lower())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            bare(&clean_line(&kept.join(" "))),
            bare(&clean_line(&words.join(" "))),
            "cutting the words leaves the words cleaning the text leaves"
        );
        // A filler with its repeat around it: "the um the" loses both.
        assert_eq!(
            disfluent_words(&["the", "um", "the", "end"]),
            vec![(1, Disfluency::Filler), (2, Disfluency::Repeat)]
        );
        assert!(disfluent_words(&["had", "had", "a", "plan"]).is_empty());
    }

    #[test]
    fn non_ascii_text_is_safe() {
        assert_eq!(clean_line("über café naïve"), "Über café naïve.");
        assert_eq!(clean_line("音声 合成"), "音声 合成.");
    }
}
