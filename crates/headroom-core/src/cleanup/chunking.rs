//! Splits a long transcript into pieces that each fit the text model's input bound, at the
//! most natural boundary available: a line (segment), then a sentence, then a word.

use crate::admission::estimate_tokens;

/// A piece of the document and the whitespace that followed it, so that joining every
/// `text + separator` gives back the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub text: String,
    pub separator: String,
}

/// Splits `text` into chunks of at most `max_tokens` estimated tokens each (a single word
/// larger than that becomes its own chunk). Leading whitespace of the document is dropped.
pub fn split_into_chunks(text: &str, max_tokens: u32) -> Vec<Chunk> {
    let max_tokens = max_tokens.max(1);
    let units = units(text.trim_start(), max_tokens);
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut current = String::new();
    let mut pending_sep = String::new();
    for (unit, sep) in units {
        let candidate_tokens =
            estimate_tokens(&current) + estimate_tokens(&pending_sep) + estimate_tokens(&unit);
        if !current.is_empty() && candidate_tokens > max_tokens {
            chunks.push(Chunk {
                text: std::mem::take(&mut current),
                separator: std::mem::take(&mut pending_sep),
            });
        }
        current.push_str(&pending_sep);
        current.push_str(&unit);
        pending_sep = sep;
    }
    if !current.is_empty() || !pending_sep.is_empty() || chunks.is_empty() {
        chunks.push(Chunk {
            text: current,
            separator: pending_sep,
        });
    }
    chunks
}

/// Breaks the text into (unit, following whitespace) pairs, each unit within the budget when
/// any boundary allows it.
fn units(text: &str, max_tokens: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (line, sep) in split_keeping(text, line_boundary) {
        if estimate_tokens(&line) <= max_tokens {
            out.push((line, sep));
            continue;
        }
        let sentences = split_keeping(&line, sentence_boundary);
        let last = sentences.len() - 1;
        for (i, (sentence, inner_sep)) in sentences.into_iter().enumerate() {
            let sentence_sep = if i == last { sep.clone() } else { inner_sep };
            if estimate_tokens(&sentence) <= max_tokens {
                out.push((sentence, sentence_sep));
                continue;
            }
            let words = split_keeping(&sentence, word_boundary);
            let last_word = words.len() - 1;
            for (j, (word, word_sep)) in words.into_iter().enumerate() {
                out.push((
                    word,
                    if j == last_word {
                        sentence_sep.clone()
                    } else {
                        word_sep
                    },
                ));
            }
        }
    }
    out
}

/// Splits at every boundary found by `next_boundary` (which returns the byte range of the
/// separator), keeping each separator beside the piece before it.
fn split_keeping(
    text: &str,
    next_boundary: impl Fn(&str) -> Option<(usize, usize)>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some((start, end)) = next_boundary(rest) {
        out.push((rest[..start].to_string(), rest[start..end].to_string()));
        rest = &rest[end..];
    }
    if !rest.is_empty() || out.is_empty() {
        // Trailing whitespace of the piece is its separator.
        let trimmed = rest.trim_end();
        out.push((trimmed.to_string(), rest[trimmed.len()..].to_string()));
    }
    out
}

/// A newline and any whitespace around it.
fn line_boundary(s: &str) -> Option<(usize, usize)> {
    let nl = s.find('\n')?;
    let start = s[..nl].trim_end().len();
    let end = nl + 1 + (s[nl + 1..].len() - s[nl + 1..].trim_start().len());
    if end >= s.len() {
        return None;
    }
    Some((start, end))
}

/// Whitespace after `.`, `?`, `!` or `…` (optionally closed by a quote or bracket).
fn sentence_boundary(s: &str) -> Option<(usize, usize)> {
    let mut iter = s.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        if !matches!(c, '.' | '?' | '!' | '…') {
            continue;
        }
        let mut end_of_mark = i + c.len_utf8();
        while let Some(&(j, q)) = iter.peek() {
            if matches!(q, '"' | '\'' | ')' | '”' | '’' | '.' | '?' | '!') {
                end_of_mark = j + q.len_utf8();
                iter.next();
            } else {
                break;
            }
        }
        let after = &s[end_of_mark..];
        let ws = after.len() - after.trim_start().len();
        if ws > 0 && ws < after.len() {
            return Some((end_of_mark, end_of_mark + ws));
        }
    }
    None
}

fn word_boundary(s: &str) -> Option<(usize, usize)> {
    let start = s.find(char::is_whitespace)?;
    let after = &s[start..];
    let ws = after.len() - after.trim_start().len();
    if start + ws >= s.len() {
        return None;
    }
    Some((start, start + ws))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejoin(chunks: &[Chunk]) -> String {
        chunks
            .iter()
            .map(|c| format!("{}{}", c.text, c.separator))
            .collect()
    }

    #[test]
    fn short_text_is_one_chunk() {
        let chunks = split_into_chunks("Hello there.\nGeneral Kenobi.\n", 100);
        assert_eq!(chunks.len(), 1);
        assert_eq!(rejoin(&chunks), "Hello there.\nGeneral Kenobi.\n");
    }

    #[test]
    fn splits_at_lines_first_and_rejoins_exactly() {
        let line = "This is one transcript segment with some words in it.";
        let doc = format!("{line}\n{line}\n\n{line}\n{line}");
        let budget = estimate_tokens(line) * 2 + 1;
        let chunks = split_into_chunks(&doc, budget);
        assert!(chunks.len() >= 2);
        for c in &chunks {
            assert!(estimate_tokens(&c.text) <= budget, "{c:?}");
            assert!(!c.text.ends_with(' '), "no dangling space: {c:?}");
        }
        assert_eq!(chunks[0].text, format!("{line}\n{line}"));
        assert_eq!(rejoin(&chunks), doc);
    }

    #[test]
    fn a_long_line_splits_at_sentences() {
        let doc = "First sentence is here. Second one follows! Third asks why? Fourth ends.";
        let chunks = split_into_chunks(doc, 10);
        assert!(
            chunks.iter().all(|c| c.text.ends_with(['.', '!', '?'])),
            "{chunks:?}"
        );
        assert_eq!(rejoin(&chunks), doc);
    }

    #[test]
    fn a_sentence_with_no_boundary_splits_at_words() {
        let doc = "word ".repeat(100);
        let chunks = split_into_chunks(doc.trim_end(), 10);
        assert!(chunks.len() > 5);
        for c in &chunks {
            assert!(estimate_tokens(&c.text) <= 10);
        }
        assert_eq!(rejoin(&chunks), doc.trim_end());
    }

    #[test]
    fn abbreviations_without_following_space_do_not_split() {
        assert_eq!(sentence_boundary("e.g.this"), None);
        assert_eq!(sentence_boundary("He said \"stop.\" Then"), Some((15, 16)));
    }

    #[test]
    fn empty_input_gives_one_empty_chunk() {
        let chunks = split_into_chunks("", 10);
        assert_eq!(
            chunks,
            vec![Chunk {
                text: String::new(),
                separator: String::new()
            }]
        );
    }
}
