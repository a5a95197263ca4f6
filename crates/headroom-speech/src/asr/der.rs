//! Diarization error rate, as NIST's md-eval scores it: time is scored in 10 ms frames, a
//! collar either side of each reference boundary is not scored, and the reference speakers
//! are mapped one to one onto the hypothesis speakers so as to agree the most. Missed speech,
//! false alarms and speaker confusion are each a share of the scored reference speech.

use serde::Serialize;

/// A stretch of speech by one speaker (any labels; only equality matters), in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Labelled {
    pub start: f64,
    pub end: f64,
    pub speaker: String,
}

/// The error, in seconds of scored time and as rates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DerReport {
    /// Reference speech scored (outside the collars).
    pub scored_secs: f64,
    pub missed_secs: f64,
    pub false_alarm_secs: f64,
    pub confusion_secs: f64,
    /// (missed + false alarm + confusion) / scored.
    pub der: f64,
    pub missed: f64,
    pub false_alarm: f64,
    pub confusion: f64,
}

const STEP: f64 = 0.01;

/// The diarization error rate of `hypothesis` against `reference`, with `collar` seconds either
/// side of each reference boundary left unscored (0.25 is customary).
pub fn diarization_error(
    reference: &[Labelled],
    hypothesis: &[Labelled],
    collar: f64,
) -> DerReport {
    let end = reference
        .iter()
        .chain(hypothesis)
        .map(|t| t.end)
        .fold(0.0, f64::max);
    let frames = (end / STEP).ceil() as usize + 1;
    let (ref_ids, ref_frames) = frame_sets(reference, frames);
    let (hyp_ids, hyp_frames) = frame_sets(hypothesis, frames);
    let mut scored = vec![true; frames];
    for t in reference {
        for edge in [t.start, t.end] {
            let from = ((edge - collar) / STEP).max(0.0).round() as usize;
            let to = (((edge + collar) / STEP).round() as usize).min(frames);
            scored[from.min(frames)..to].fill(false);
        }
    }
    // How often each reference speaker and hypothesis speaker speak in the same scored frame.
    let mut together = vec![vec![0usize; hyp_ids.len()]; ref_ids.len()];
    for f in (0..frames).filter(|&f| scored[f]) {
        for &r in &ref_frames[f] {
            for &h in &hyp_frames[f] {
                together[r][h] += 1;
            }
        }
    }
    let mapping = best_mapping(&together);
    let (mut total, mut missed, mut false_alarm, mut confusion) = (0usize, 0usize, 0usize, 0usize);
    for f in (0..frames).filter(|&f| scored[f]) {
        let (r, h) = (&ref_frames[f], &hyp_frames[f]);
        let correct = r
            .iter()
            .filter(|&&rs| mapping[rs].is_some_and(|hs| h.contains(&hs)))
            .count();
        total += r.len();
        missed += r.len().saturating_sub(h.len());
        false_alarm += h.len().saturating_sub(r.len());
        confusion += r.len().min(h.len()) - correct;
    }
    let secs = |n: usize| n as f64 * STEP;
    let rate = |n: usize| {
        if total == 0 {
            0.0
        } else {
            n as f64 / total as f64
        }
    };
    DerReport {
        scored_secs: secs(total),
        missed_secs: secs(missed),
        false_alarm_secs: secs(false_alarm),
        confusion_secs: secs(confusion),
        der: rate(missed + false_alarm + confusion),
        missed: rate(missed),
        false_alarm: rate(false_alarm),
        confusion: rate(confusion),
    }
}

/// The distinct labels, and for each frame the indices of those speaking in it.
fn frame_sets(turns: &[Labelled], frames: usize) -> (Vec<String>, Vec<Vec<usize>>) {
    let mut ids: Vec<String> = Vec::new();
    let mut sets = vec![Vec::new(); frames];
    for t in turns {
        let id = match ids.iter().position(|i| *i == t.speaker) {
            Some(i) => i,
            None => {
                ids.push(t.speaker.clone());
                ids.len() - 1
            }
        };
        let from = (t.start / STEP).round() as usize;
        let to = ((t.end / STEP).round() as usize).min(frames);
        for set in &mut sets[from.min(frames)..to] {
            if !set.contains(&id) {
                set.push(id);
            }
        }
    }
    (ids, sets)
}

/// The one-to-one mapping of rows onto columns with the largest total (each row to at most
/// one column): dynamic programming over the sets of columns used, fine for the handful of
/// speakers a recording has; beyond 16 columns, a greedy mapping.
fn best_mapping(together: &[Vec<usize>]) -> Vec<Option<usize>> {
    let rows = together.len();
    let cols = together.first().map_or(0, Vec::len);
    if cols > 16 {
        return greedy_mapping(together);
    }
    // best[i][mask]: the most agreement for rows i.. with columns in `mask` taken.
    let masks = 1usize << cols;
    let mut best = vec![vec![0usize; masks]; rows + 1];
    let mut choice = vec![vec![None; masks]; rows];
    for i in (0..rows).rev() {
        for mask in 0..masks {
            let mut top = best[i + 1][mask];
            let mut pick = None;
            for c in (0..cols).filter(|c| mask & (1 << c) == 0) {
                let v = together[i][c] + best[i + 1][mask | (1 << c)];
                if v > top {
                    top = v;
                    pick = Some(c);
                }
            }
            best[i][mask] = top;
            choice[i][mask] = pick;
        }
    }
    let mut mask = 0;
    (0..rows)
        .map(|i| {
            let pick = choice[i][mask];
            if let Some(c) = pick {
                mask |= 1 << c;
            }
            pick
        })
        .collect()
}

fn greedy_mapping(together: &[Vec<usize>]) -> Vec<Option<usize>> {
    let mut pairs: Vec<(usize, usize, usize)> = together
        .iter()
        .enumerate()
        .flat_map(|(r, row)| row.iter().enumerate().map(move |(c, &v)| (v, r, c)))
        .filter(|p| p.0 > 0)
        .collect();
    pairs.sort_by(|a, b| b.cmp(a));
    let mut mapping = vec![None; together.len()];
    let mut used = vec![false; together.first().map_or(0, Vec::len)];
    for (_, r, c) in pairs {
        if mapping[r].is_none() && !used[c] {
            mapping[r] = Some(c);
            used[c] = true;
        }
    }
    mapping
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(start: f64, end: f64, speaker: &str) -> Labelled {
        Labelled {
            start,
            end,
            speaker: speaker.into(),
        }
    }

    #[test]
    fn a_perfect_hypothesis_under_other_labels_scores_zero() {
        let reference = [
            t(0.0, 4.0, "alice"),
            t(4.5, 9.0, "bob"),
            t(9.5, 10.0, "alice"),
        ];
        let hypothesis = [t(0.0, 4.0, "S2"), t(4.5, 9.0, "S1"), t(9.5, 10.0, "S2")];
        let r = diarization_error(&reference, &hypothesis, 0.25);
        assert_eq!(r.der, 0.0, "{r:?}");
        assert!(r.scored_secs > 7.0 && r.scored_secs < 10.0, "{r:?}");
    }

    #[test]
    fn missed_false_alarm_and_confusion_are_each_counted() {
        let reference = [t(0.0, 10.0, "a"), t(10.0, 20.0, "b")];
        // a: right for 10 s; b: 5 s called a third speaker's... mapped b→y for 3 s only.
        let hypothesis = [
            t(0.0, 10.0, "x"),
            t(10.0, 13.0, "y"),
            t(13.0, 15.0, "x"),
            t(25.0, 27.0, "y"),
        ];
        let r = diarization_error(&reference, &hypothesis, 0.0);
        assert!((r.scored_secs - 20.0).abs() < 0.02, "{r:?}");
        assert!((r.missed_secs - 5.0).abs() < 0.02, "{r:?}");
        assert!((r.confusion_secs - 2.0).abs() < 0.02, "{r:?}");
        assert!((r.false_alarm_secs - 2.0).abs() < 0.02, "{r:?}");
        assert!((r.der - 9.0 / 20.0).abs() < 0.002, "{r:?}");
    }

    #[test]
    fn the_collar_forgives_boundaries_only() {
        let reference = [t(0.0, 5.0, "a"), t(5.0, 10.0, "b")];
        let late = [t(0.0, 5.2, "a"), t(5.2, 10.0, "b")];
        assert_eq!(diarization_error(&reference, &late, 0.25).der, 0.0);
        assert!(diarization_error(&reference, &late, 0.0).der > 0.0);
        let much_later = [t(0.0, 6.0, "a"), t(6.0, 10.0, "b")];
        assert!(diarization_error(&reference, &much_later, 0.25).confusion > 0.0);
    }

    #[test]
    fn one_speaker_for_everyone_confuses_all_but_the_largest() {
        let reference = [t(0.0, 6.0, "a"), t(6.0, 9.0, "b"), t(9.0, 10.0, "c")];
        let hypothesis = [t(0.0, 10.0, "x")];
        let r = diarization_error(&reference, &hypothesis, 0.0);
        assert!((r.confusion - 0.4).abs() < 0.002, "{r:?}");
        assert_eq!(r.missed, 0.0);
        assert_eq!(
            mapping_of(&[vec![1, 9], vec![8, 2]]),
            vec![Some(1), Some(0)]
        );
    }

    fn mapping_of(m: &[Vec<usize>]) -> Vec<Option<usize>> {
        best_mapping(m)
    }
}
