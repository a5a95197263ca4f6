//! Word error rate: how far a transcript is from what was said.

use super::normalize::normalized_words;
use serde::Serialize;

/// Lower-case words with punctuation removed.
fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric())
                .collect::<String>()
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Word-level edit distance (substitutions, insertions, deletions) over the reference's length,
/// ignoring case and punctuation.
pub fn word_error_rate(reference: &str, hypothesis: &str) -> f64 {
    WordErrors::between(words(reference), words(hypothesis)).rate
}

/// The word error rate after Whisper-style English normalization of both texts
/// ([`normalize_english`](super::normalize_english)): numbers as digits, British spellings
/// as American, contractions spelled out, hesitations and bracketed text removed. The
/// comparison Whisper's evaluations report.
pub fn normalized_word_error_rate(reference: &str, hypothesis: &str) -> f64 {
    WordErrors::normalized(reference, hypothesis).rate
}

/// One step of the alignment of a hypothesis to its reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum WordEdit {
    Same {
        word: String,
    },
    Substituted {
        reference: String,
        hypothesis: String,
    },
    /// A reference word the hypothesis lacks.
    Deleted {
        reference: String,
    },
    /// A hypothesis word the reference lacks.
    Inserted {
        hypothesis: String,
    },
}

/// A word error rate with the alignment behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WordErrors {
    /// Errors over reference words (0 for an empty reference with an empty hypothesis).
    pub rate: f64,
    /// Substitutions, deletions and insertions.
    pub errors: usize,
    pub reference_words: usize,
    /// The alignment, in reference order.
    pub edits: Vec<WordEdit>,
}

impl WordErrors {
    /// The raw comparison: case and punctuation ignored.
    pub fn raw(reference: &str, hypothesis: &str) -> WordErrors {
        WordErrors::between(words(reference), words(hypothesis))
    }

    /// After Whisper-style English normalization of both texts.
    pub fn normalized(reference: &str, hypothesis: &str) -> WordErrors {
        WordErrors::between(normalized_words(reference), normalized_words(hypothesis))
    }

    /// The edits only, without the words that match.
    pub fn differences(&self) -> impl Iterator<Item = &WordEdit> {
        self.edits
            .iter()
            .filter(|e| !matches!(e, WordEdit::Same { .. }))
    }

    /// Minimum edit distance between two word lists, with one alignment that reaches it:
    /// of the alignments with the fewest errors, one that matches the most words.
    fn between(r: Vec<String>, h: Vec<String>) -> WordErrors {
        let width = h.len() + 1;
        // cell[i * width + j]: (edits, matched words) to turn r[..i] into h[..j], fewest
        // edits first, then most matches.
        let mut cell = vec![(0usize, 0usize); (r.len() + 1) * width];
        let better = |a: (usize, usize), b: (usize, usize)| {
            if (a.0, std::cmp::Reverse(a.1)) <= (b.0, std::cmp::Reverse(b.1)) {
                a
            } else {
                b
            }
        };
        let step = |cell: &[(usize, usize)], i: usize, j: usize| {
            let (e, m) = cell[(i - 1) * width + j - 1];
            let same = r[i - 1] == h[j - 1];
            let diagonal = (e + usize::from(!same), m + usize::from(same));
            let (e, m) = cell[(i - 1) * width + j];
            let up = (e + 1, m);
            let (e, m) = cell[i * width + j - 1];
            let left = (e + 1, m);
            (diagonal, up, left)
        };
        for (j, c) in cell.iter_mut().take(width).enumerate() {
            *c = (j, 0);
        }
        for i in 1..=r.len() {
            cell[i * width] = (i, 0);
            for j in 1..=h.len() {
                let (diagonal, up, left) = step(&cell, i, j);
                cell[i * width + j] = better(better(diagonal, up), left);
            }
        }
        let errors = cell[r.len() * width + h.len()].0;
        // Walk back along the best cells: a match or substitution, a deletion, an insertion.
        let mut edits = Vec::with_capacity(r.len().max(h.len()));
        let (mut i, mut j) = (r.len(), h.len());
        while i > 0 || j > 0 {
            let here = cell[i * width + j];
            if i > 0 && j > 0 {
                let (diagonal, up, _) = step(&cell, i, j);
                if here == diagonal {
                    edits.push(if r[i - 1] == h[j - 1] {
                        WordEdit::Same {
                            word: r[i - 1].clone(),
                        }
                    } else {
                        WordEdit::Substituted {
                            reference: r[i - 1].clone(),
                            hypothesis: h[j - 1].clone(),
                        }
                    });
                    i -= 1;
                    j -= 1;
                    continue;
                }
                if here == up {
                    edits.push(WordEdit::Deleted {
                        reference: r[i - 1].clone(),
                    });
                    i -= 1;
                    continue;
                }
            }
            if j == 0 {
                edits.push(WordEdit::Deleted {
                    reference: r[i - 1].clone(),
                });
                i -= 1;
            } else {
                edits.push(WordEdit::Inserted {
                    hypothesis: h[j - 1].clone(),
                });
                j -= 1;
            }
        }
        edits.reverse();
        WordErrors {
            rate: errors as f64 / r.len().max(1) as f64,
            errors,
            reference_words: r.len(),
            edits,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_edits_ignoring_case_and_punctuation() {
        assert_eq!(word_error_rate("The cat sat.", "the cat sat"), 0.0);
        assert!((word_error_rate("the cat sat", "the bat sat down") - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(word_error_rate("one two", ""), 1.0);
        assert_eq!(word_error_rate("", ""), 0.0);
    }

    #[test]
    fn the_alignment_names_each_edit() {
        let e = WordErrors::raw("the cat sat on the mat", "a cat sat on mat today");
        assert_eq!(e.errors, 3);
        assert_eq!(e.reference_words, 6);
        assert_eq!(
            e.differences().cloned().collect::<Vec<_>>(),
            vec![
                WordEdit::Substituted {
                    reference: "the".into(),
                    hypothesis: "a".into()
                },
                WordEdit::Deleted {
                    reference: "the".into()
                },
                WordEdit::Inserted {
                    hypothesis: "today".into()
                },
            ]
        );
        // Every word of both sides appears once, in order.
        let reference: Vec<&str> = e
            .edits
            .iter()
            .filter_map(|x| match x {
                WordEdit::Same { word } => Some(word.as_str()),
                WordEdit::Substituted { reference, .. } | WordEdit::Deleted { reference } => {
                    Some(reference.as_str())
                }
                WordEdit::Inserted { .. } => None,
            })
            .collect();
        assert_eq!(reference, ["the", "cat", "sat", "on", "the", "mat"]);
        let empty = WordErrors::raw("", "extra words");
        assert_eq!(empty.errors, 2);
        assert_eq!(empty.edits.len(), 2);
    }

    #[test]
    fn normalization_forgives_conventions_not_mishearings() {
        let said = "My grandfather sold mackerel here for forty years, by the harbour.";
        let heard = "My grandfather sold mackerel here for 40 years by the harbor";
        assert!(word_error_rate(said, heard) > 0.1);
        assert_eq!(normalized_word_error_rate(said, heard), 0.0);
        let misheard = "My grandfather sold mackerel here for fourteen years by the harbor";
        let e = WordErrors::normalized(said, misheard);
        assert_eq!(e.errors, 1);
        assert_eq!(
            e.differences().cloned().collect::<Vec<_>>(),
            vec![WordEdit::Substituted {
                reference: "40".into(),
                hypothesis: "14".into()
            }]
        );
    }

    #[test]
    fn edits_serialize_with_their_kind() {
        let json = serde_json::to_string(&WordEdit::Deleted {
            reference: "years".into(),
        })
        .expect("serializes");
        assert_eq!(json, r#"{"op":"deleted","reference":"years"}"#);
    }
}
