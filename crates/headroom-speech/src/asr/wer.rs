//! Word error rate: how far a transcript is from what was said.

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
    let (r, h) = (words(reference), words(hypothesis));
    let mut row: Vec<usize> = (0..=h.len()).collect();
    for i in 1..=r.len() {
        let mut prev = row[0];
        row[0] = i;
        for j in 1..=h.len() {
            let cost = usize::from(r[i - 1] != h[j - 1]);
            let next = (row[j] + 1).min(row[j - 1] + 1).min(prev + cost);
            prev = row[j];
            row[j] = next;
        }
    }
    row[h.len()] as f64 / r.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_edits_ignoring_case_and_punctuation() {
        assert_eq!(word_error_rate("The cat sat.", "the cat sat"), 0.0);
        assert!((word_error_rate("the cat sat", "the bat sat down") - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(word_error_rate("one two", ""), 1.0);
    }
}
