//! Fillers Whisper hears but does not write. Whisper learned on cleaned transcripts, so it
//! leaves most "um"s and "uh"s out of its text; read after a prompt full of fillers, the same
//! window's encoding is written with them (and with other words garbled, so only the fillers
//! of that reading are taken). [`put_in_heard_fillers`] sets each among the words of the
//! plain reading, where the two readings' words line up, and times it by the sound between
//! the pauses nearest its heard time.

use super::{Segment, Word};
use crate::audio::{Loudness, SampleSink};
use headroom_base::fillers::{bare_word, is_filler_word};

/// What the second reading of a window reads first: fillers in the places people put them.
pub(crate) const FILLER_PROMPT: &str =
    "So, um, I was, uh, thinking that we could, hmm, go. Uh, yeah, I mean, um, er, okay.";

/// A written filler this close (seconds) to a heard one is the same filler.
const SAME_FILLER_SECS: f64 = 0.3;

/// The shortest stretch a filler is put in for (seconds).
const MIN_WORD_SECS: f64 = 0.04;

/// A filler sounds between two pauses, and is no longer than this (seconds).
const MAX_FILLER_SECS: f64 = 1.0;

/// How far from its heard time a filler's sound may be (seconds, middle to middle): Whisper
/// times a word it was prompted into writing loosely, often 0.2–0.4 s early.
const FILLER_REACH_SECS: f64 = 0.6;

/// The pauses of a window's 16 kHz audio (see [`Loudness::pauses`]), in seconds from `offset`.
pub(crate) fn pauses_in(audio: &[f32], offset: f64) -> Vec<(f64, f64)> {
    let mut loudness = Loudness::default();
    loudness.begin(16_000);
    // A sink of levels never refuses a block.
    let _ = loudness.take(audio);
    loudness
        .pauses()
        .into_iter()
        .map(|(s, e)| (s + offset, e + offset))
        .collect()
}

/// The sound between two of `pauses` that is a filler's length and nearest `filler`'s heard
/// time, within [`FILLER_REACH_SECS`].
fn sound_of(filler: &Word, pauses: &[(f64, f64)]) -> Option<(f64, f64)> {
    let heard = middle(filler);
    let apart = |&(s, e): &(f64, f64)| ((s + e) / 2.0 - heard).abs();
    pauses
        .windows(2)
        .map(|pair| (pair[0].1, pair[1].0))
        .filter(|&(s, e)| e - s >= MIN_WORD_SECS && e - s <= MAX_FILLER_SECS)
        .filter(|sound| apart(sound) <= FILLER_REACH_SECS)
        .min_by(|a, b| apart(a).total_cmp(&apart(b)))
}

/// A word of the plain reading this short, this unsure, where the second reading heard a
/// filler, is the filler misheard ("huh?", "a,", "her," for "uh"): it is written as the filler.
const MISHEARD_MAX_LETTERS: usize = 3;
const MISHEARD_MAX_PROBABILITY: f32 = 0.8;

/// The word as compared: bare and lower case.
fn key(text: &str) -> String {
    bare_word(text).to_lowercase()
}

fn middle(word: &Word) -> f64 {
    (word.start + word.end) / 2.0
}

fn is_filler(word: &Word) -> bool {
    is_filler_word(bare_word(&word.text))
}

/// How the two readings' words line up: one step of the alignment.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    /// The same word in both (plain index, heard index).
    Same(usize, usize),
    /// Different words in the same place.
    Swapped(usize, usize),
    /// A word only the second reading has (heard index), before the plain reading's word at
    /// the first index.
    Extra(usize, usize),
    /// A word only the plain reading has.
    Missing(usize),
}

/// A word only one reading has costs this much in [`align`]; two different words in one place
/// cost [`SWAP_COST`], less than one missing and one extra (a misheard word lines up with what
/// was heard) but more than one of them (so words in common line up rather than shift).
const GAP_COST: u32 = 2;
const SWAP_COST: u32 = 3;

/// The cheapest alignment of two word sequences (an edit distance over words): a window's
/// words, a few hundred at most.
fn align(plain: &[String], heard: &[String]) -> Vec<Step> {
    let (n, m) = (plain.len(), heard.len());
    let width = m + 1;
    let mut cost = vec![0u32; (n + 1) * width];
    for i in 0..=n {
        for j in 0..=m {
            cost[i * width + j] = match (i, j) {
                (0, j) => j as u32 * GAP_COST,
                (i, 0) => i as u32 * GAP_COST,
                (i, j) => {
                    let swap = if plain[i - 1] == heard[j - 1] {
                        0
                    } else {
                        SWAP_COST
                    };
                    (cost[(i - 1) * width + j - 1] + swap)
                        .min(cost[(i - 1) * width + j] + GAP_COST)
                        .min(cost[i * width + j - 1] + GAP_COST)
                }
            };
        }
    }
    let mut steps = Vec::with_capacity(n.max(m));
    let (mut i, mut j) = (n, m);
    while i > 0 || j > 0 {
        let here = cost[i * width + j];
        if i > 0 && j > 0 {
            let same = plain[i - 1] == heard[j - 1];
            let swap = if same { 0 } else { SWAP_COST };
            if here == cost[(i - 1) * width + j - 1] + swap {
                steps.push(if same {
                    Step::Same(i - 1, j - 1)
                } else {
                    Step::Swapped(i - 1, j - 1)
                });
                (i, j) = (i - 1, j - 1);
                continue;
            }
        }
        if j > 0 && (i == 0 || here == cost[i * width + j - 1] + GAP_COST) {
            steps.push(Step::Extra(i, j - 1));
            j -= 1;
        } else {
            steps.push(Step::Missing(i - 1));
            i -= 1;
        }
    }
    steps.reverse();
    steps
}

/// The fillers of `heard` (a second reading of the same audio) whose middle is before `until`
/// (seconds), written into `found`; the number written. The two readings' words are aligned:
/// a filler in place of a short, unsure word of `found` rewrites that word (it was the filler
/// misheard), one between two of its words is put in between. A filler `found` already has
/// there is not written twice. Every filler, put in or written by the plain reading, is timed
/// by the sound between two of `pauses` nearest its time, where there is one. `found`'s segments need their words (word
/// timestamps).
pub fn put_in_heard_fillers(
    found: &mut [Segment],
    heard: &[Segment],
    until: f64,
    pauses: &[(f64, f64)],
) -> usize {
    let places: Vec<(usize, usize)> = found
        .iter()
        .enumerate()
        .flat_map(|(s, seg)| (0..seg.words.len()).map(move |w| (s, w)))
        .collect();
    let heard: Vec<&Word> = heard
        .iter()
        .flat_map(|s| &s.words)
        .filter(|w| middle(w) < until)
        .collect();
    if places.is_empty() {
        return 0;
    }
    let plain_keys: Vec<String> = places
        .iter()
        .map(|&(s, w)| key(&found[s].words[w].text))
        .collect();
    let heard_keys: Vec<String> = heard.iter().map(|w| key(&w.text)).collect();
    let steps = align(&plain_keys, &heard_keys);
    let mut written = 0;
    // Misheard words first: they move no word.
    for step in &steps {
        if let Step::Swapped(i, j) = *step {
            let (s, w) = places[i];
            let separator = found[s].word_separator();
            if is_filler(heard[j]) && rewrite_misheard(&mut found[s].words[w], heard[j]) {
                found[s].write_text_from_words(separator);
                written += 1;
            }
        }
    }
    // Then the fillers between words, from the last, so earlier places stay where they are.
    for step in steps.iter().rev() {
        if let Step::Extra(i, j) = *step {
            let filler = heard[j];
            if !is_filler(filler) || written_near(found, filler) {
                continue;
            }
            let (s, at) = segment_place(found, &places, i, middle(filler));
            let timed = match sound_of(filler, pauses) {
                Some((start, end)) => Word {
                    start,
                    end,
                    ..filler.clone()
                },
                None => filler.clone(),
            };
            if insert(&mut found[s], at, &timed) {
                written += 1;
            }
        }
    }
    // The fillers the plain reading wrote are timed as loosely: each moves to its sound too.
    for segment in found.iter_mut() {
        for at in 0..segment.words.len() {
            if is_filler(&segment.words[at]) {
                if let Some(sound) = sound_of(&segment.words[at], pauses) {
                    retime(&mut segment.words, at, sound);
                }
            }
        }
    }
    written
}

/// Word `at` moved to `sound`, the words either side giving up what overlaps it, where each
/// keeps [`MIN_WORD_SECS`] (Whisper's span for the word before a filler often runs over it).
fn retime(words: &mut [Word], at: usize, (start, end): (f64, f64)) {
    let floor = at
        .checked_sub(1)
        .map_or(f64::NEG_INFINITY, |i| words[i].start + MIN_WORD_SECS);
    let ceiling = words
        .get(at + 1)
        .map_or(f64::INFINITY, |w| w.end - MIN_WORD_SECS);
    if start < floor || end > ceiling {
        return;
    }
    (words[at].start, words[at].end) = (start, end);
    if let Some(prev) = at.checked_sub(1).map(|i| &mut words[i]) {
        prev.end = prev.end.min(start);
    }
    if let Some(next) = words.get_mut(at + 1) {
        next.start = next.start.max(end);
    }
}

/// Writes `word` as the `filler` heard in its place when it is short and unsure and sounds
/// where the filler does; false when it is left.
fn rewrite_misheard(word: &mut Word, filler: &Word) -> bool {
    let overlap = word.end.min(filler.end) - word.start.max(filler.start);
    let shorter = (word.end - word.start).min(filler.end - filler.start);
    let bare = bare_word(&word.text);
    let misheard = !is_filler(word)
        && !bare.is_empty()
        && bare.chars().count() <= MISHEARD_MAX_LETTERS
        && word.probability < MISHEARD_MAX_PROBABILITY
        && shorter > 0.0
        && overlap >= shorter / 2.0;
    if !misheard {
        return false;
    }
    let at = word.text.find(bare).unwrap_or(0);
    let (lead, trail) = (&word.text[..at], &word.text[at + bare.len()..]);
    let spelled = bare_word(&filler.text).to_lowercase();
    let spelled = if bare.starts_with(char::is_uppercase) {
        capitalised(&spelled)
    } else {
        spelled
    };
    word.text = format!("{lead}{spelled}{trail}");
    true
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Whether `found` has a filler written within [`SAME_FILLER_SECS`] of `filler`.
fn written_near(found: &[Segment], filler: &Word) -> bool {
    found.iter().flat_map(|s| &s.words).any(|w| {
        is_filler(w)
            && w.start - SAME_FILLER_SECS <= filler.end
            && filler.start <= w.end + SAME_FILLER_SECS
    })
}

/// The segment, and the place among its words, of the place before plain word `i` (`places`
/// lists every word's segment and index): between two segments, the later when its time has
/// begun by `mid`, else the earlier.
fn segment_place(
    found: &[Segment],
    places: &[(usize, usize)],
    i: usize,
    mid: f64,
) -> (usize, usize) {
    let before = i.checked_sub(1).map(|k| places[k]);
    match (before, places.get(i).copied()) {
        (Some((s, w)), Some((t, _))) if s != t && mid < found[t].start => (s, w + 1),
        (_, Some((t, w))) => (t, w),
        (Some((s, w)), None) => (s, w + 1),
        (None, None) => (0, 0),
    }
}

/// Puts `filler` in `segment` before its word `at` and writes the segment's text again; false
/// when there is no room. The filler keeps its heard time where that lies between the middles
/// of the words either side; where it does not (its neighbours placed it, not its time), it
/// gets its heard length at the boundary between them. The words either side give up what
/// overlaps it.
fn insert(segment: &mut Segment, at: usize, filler: &Word) -> bool {
    let separator = segment.word_separator();
    let words = &mut segment.words;
    let prev = at.checked_sub(1).map(|i| &words[i]);
    let next = words.get(at);
    let floor = prev.map_or(f64::NEG_INFINITY, middle);
    let ceiling = next.map_or(f64::INFINITY, middle);
    let (mut start, mut end) = (filler.start.max(floor), filler.end.min(ceiling));
    if end - start < MIN_WORD_SECS {
        let boundary = prev.map(|w| w.end).or(next.map(|w| w.start));
        let half = (filler.end - filler.start) / 2.0;
        let boundary = boundary.unwrap_or(filler.start + half);
        (start, end) = ((boundary - half).max(floor), (boundary + half).min(ceiling));
        if end - start < MIN_WORD_SECS {
            return false;
        }
    }
    let last = at == words.len();
    if let Some(prev) = at.checked_sub(1).map(|i| &mut words[i]) {
        prev.end = prev.end.min(start);
        if prev.text.ends_with(|c: char| c.is_alphanumeric()) {
            prev.text.push(',');
        }
    }
    if let Some(next) = words.get_mut(at) {
        next.start = next.start.max(end);
    }
    let bare = bare_word(&filler.text).to_lowercase();
    let mut text = if at == 0 { capitalised(&bare) } else { bare };
    if !last {
        text.push(',');
    }
    let speaker = words
        .get(at)
        .or_else(|| at.checked_sub(1).map(|i| &words[i]))
        .and_then(|w| w.speaker.clone());
    words.insert(
        at,
        Word {
            start,
            end,
            text,
            probability: filler.probability,
            speaker,
        },
    );
    segment.start = segment.start.min(start);
    segment.end = segment.end.max(end);
    segment.write_text_from_words(separator);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(start: f64, end: f64, text: &str) -> Word {
        Word {
            start,
            end,
            text: text.into(),
            probability: 0.9,
            speaker: None,
        }
    }

    fn segment(words: Vec<Word>) -> Segment {
        Segment {
            start: words[0].start,
            end: words[words.len() - 1].end,
            text: words
                .iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            words,
            speaker: None,
        }
    }

    fn texts(s: &Segment) -> Vec<&str> {
        s.words.iter().map(|w| w.text.as_str()).collect()
    }

    #[test]
    fn a_heard_filler_goes_between_the_words_either_side_and_takes_its_time_from_them() {
        // Whisper's word times are contiguous: "leave" ran over the filler's sound.
        let mut found = vec![segment(vec![
            word(0.0, 0.4, "I"),
            word(0.4, 1.6, "leave"),
            word(1.6, 2.0, "before."),
        ])];
        let heard = vec![segment(vec![
            word(0.0, 0.4, "I"),
            word(0.4, 0.9, "leave,"),
            word(1.1, 1.4, "um,"),
            word(1.5, 2.0, "before."),
        ])];
        assert_eq!(put_in_heard_fillers(&mut found, &heard, 30.0, &[]), 1);
        let s = &found[0];
        assert_eq!(texts(s), ["I", "leave,", "um,", "before."]);
        assert_eq!(s.text, "I leave, um, before.");
        assert_eq!((s.words[2].start, s.words[2].end), (1.1, 1.4));
        assert_eq!(s.words[1].end, 1.1);
        assert_eq!(
            s.words[3].start, 1.6,
            "the next word's start was already after it"
        );
    }

    #[test]
    fn the_words_around_a_filler_place_it_when_its_time_is_off() {
        let mut found = vec![segment(vec![
            word(0.0, 0.5, "send"),
            word(0.5, 1.0, "me"),
            word(1.0, 1.5, "the"),
            word(1.5, 2.5, "numbers"),
            word(2.5, 3.0, "from"),
        ])];
        // The filler's time says after "numbers"; its neighbours say after "the".
        let heard = vec![segment(vec![
            word(0.5, 1.0, "me"),
            word(1.0, 1.5, "the,"),
            word(2.2, 2.6, "uh,"),
            word(2.6, 2.8, "numbers"),
        ])];
        assert_eq!(put_in_heard_fillers(&mut found, &heard, 30.0, &[]), 1);
        assert_eq!(
            texts(&found[0]),
            ["send", "me", "the,", "uh,", "numbers", "from"]
        );
        // Its heard length (0.4 s) at the boundary of "the" and "numbers".
        let w = &found[0].words;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(w[3].start, 1.3) && close(w[3].end, 1.7), "{w:?}");
        assert!(close(w[2].end, 1.3) && close(w[4].start, 1.7), "{w:?}");
    }

    #[test]
    fn a_filler_already_written_or_past_the_window_is_not_put_in() {
        let mut found = vec![segment(vec![word(0.0, 0.5, "Um,"), word(0.5, 1.0, "yes.")])];
        let heard = vec![segment(vec![
            word(0.1, 0.4, "Uh,"),
            word(0.5, 1.0, "yes."),
            word(5.0, 5.3, "um."),
        ])];
        assert_eq!(put_in_heard_fillers(&mut found, &heard, 4.0, &[]), 0);
        assert_eq!(texts(&found[0]), ["Um,", "yes."]);
    }

    #[test]
    fn a_filler_at_a_segments_start_is_capitalised_and_one_far_from_any_segment_is_left() {
        let mut found = vec![segment(vec![
            word(1.0, 1.5, "The"),
            word(1.5, 2.0, "train."),
        ])];
        let heard = vec![
            segment(vec![word(0.3, 0.7, "uh,"), word(1.0, 1.5, "the")]),
            segment(vec![word(9.0, 9.4, "hmm.")]),
        ];
        assert_eq!(put_in_heard_fillers(&mut found, &heard, 30.0, &[]), 1);
        assert_eq!(texts(&found[0]), ["Uh,", "The", "train."]);
        assert_eq!(found[0].start, 0.3);
    }

    #[test]
    fn a_short_unsure_word_where_a_filler_was_heard_is_the_filler_misheard() {
        let mut misheard = word(1.0, 1.3, "Huh?");
        misheard.probability = 0.56;
        let mut sure = word(3.0, 3.2, "her");
        sure.probability = 0.99;
        let mut found = vec![
            segment(vec![word(0.0, 1.0, "numbers."), misheard]),
            segment(vec![
                word(2.0, 3.0, "with"),
                sure,
                word(3.2, 3.6, "nothing"),
            ]),
        ];
        let heard = vec![segment(vec![
            word(0.0, 1.0, "numbers,"),
            word(1.05, 1.25, "uh,"),
            word(2.0, 3.0, "with,"),
            word(3.0, 3.2, "er,"),
            word(3.2, 3.6, "nothing"),
        ])];
        assert_eq!(put_in_heard_fillers(&mut found, &heard, 30.0, &[]), 1);
        assert_eq!(texts(&found[0]), ["numbers.", "Uh?"]);
        assert_eq!(found[0].text, "numbers. Uh?");
        assert_eq!((found[0].words[1].start, found[0].words[1].end), (1.0, 1.3));
        assert_eq!(
            texts(&found[1]),
            ["with", "her", "nothing"],
            "a sure word stays"
        );
    }

    #[test]
    fn the_readings_line_up_by_their_words_in_common() {
        let keys = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let steps = align(
            &keys(&["send", "me", "the", "numbers", "from"]),
            &keys(&["me", "the", "uh", "numbers"]),
        );
        assert_eq!(
            steps,
            [
                Step::Missing(0),
                Step::Same(1, 0),
                Step::Same(2, 1),
                Step::Extra(3, 2),
                Step::Same(3, 3),
                Step::Missing(4)
            ]
        );
        let steps = align(
            &keys(&["with", "her", "nothing"]),
            &keys(&["with", "er", "nothing"]),
        );
        assert_eq!(steps[1], Step::Swapped(1, 1));
        assert_eq!(align(&[], &keys(&["um"])), [Step::Extra(0, 0)]);
    }

    #[test]
    fn a_filler_heard_early_is_timed_by_the_sound_between_the_pauses_after_it() {
        // Planted: "Thursday" [pause] "uh" 9.09–9.25 [pause] "if that helps"; Whisper's plain
        // times give "if" the filler's sound, and the heard "uh" is 0.3 s early.
        let mut found = vec![segment(vec![
            word(8.43, 8.79, "Thursday"),
            word(8.87, 9.69, "if"),
            word(9.69, 9.89, "that"),
        ])];
        let heard = vec![segment(vec![
            word(8.43, 8.79, "Thursday,"),
            word(8.79, 8.87, "uh,"),
            word(8.87, 9.69, "if"),
        ])];
        let pauses = [(8.80, 9.09), (9.25, 9.45), (12.0, 12.5)];
        assert_eq!(put_in_heard_fillers(&mut found, &heard, 30.0, &pauses), 1);
        let w = &found[0].words;
        assert_eq!(texts(&found[0]), ["Thursday,", "uh,", "if", "that"]);
        assert_eq!((w[1].start, w[1].end), (9.09, 9.25));
        assert_eq!((w[0].end, w[2].start), (8.79, 9.25));
    }

    #[test]
    fn a_filler_the_plain_reading_wrote_late_moves_to_its_sound() {
        let mut found = vec![segment(vec![
            word(0.5, 1.5, "leave,"),
            word(2.07, 2.43, "um,"),
            word(2.43, 3.2, "before"),
        ])];
        let pauses = [(1.4, 1.57), (1.91, 2.1)];
        assert_eq!(put_in_heard_fillers(&mut found, &[], 30.0, &pauses), 0);
        let w = &found[0].words;
        assert_eq!((w[1].start, w[1].end), (1.57, 1.91));
        assert_eq!((w[0].end, w[2].start), (1.5, 2.43));
    }

    #[test]
    fn the_pauses_of_audio_are_found_in_its_time() {
        let rate = 16_000;
        let tone = |secs: f64| -> Vec<f32> {
            (0..(secs * rate as f64) as usize)
                .map(|i| 0.3 * (i as f32 * 0.2).sin())
                .collect()
        };
        let mut audio = tone(0.5);
        audio.extend(vec![0.0; rate / 4]);
        audio.extend(tone(0.5));
        let pauses = pauses_in(&audio, 10.0);
        assert_eq!(pauses.len(), 1, "{pauses:?}");
        assert!((pauses[0].0 - 10.5).abs() < 0.011 && (pauses[0].1 - 10.75).abs() < 0.011);
    }

    #[test]
    fn a_filler_in_a_language_written_without_spaces_keeps_none() {
        let mut found = vec![segment(vec![
            word(0.0, 0.5, "我们"),
            word(1.0, 1.5, "走。"),
        ])];
        found[0].text = "我们走。".into();
        let heard = vec![segment(vec![
            word(0.0, 0.5, "我们"),
            word(0.6, 0.9, "um"),
            word(1.0, 1.5, "走。"),
        ])];
        assert_eq!(put_in_heard_fillers(&mut found, &heard, 30.0, &[]), 1);
        assert_eq!(found[0].text, "我们,um,走。");
        let mut one = vec![segment(vec![word(1.0, 1.5, "Thursday.")])];
        let heard = vec![segment(vec![
            word(0.3, 0.7, "uh,"),
            word(1.0, 1.5, "Thursday."),
        ])];
        assert_eq!(put_in_heard_fillers(&mut one, &heard, 30.0, &[]), 1);
        assert_eq!(
            one[0].text, "Uh, Thursday.",
            "one word says nothing of spaces"
        );
    }

    #[test]
    fn no_room_between_the_words_leaves_the_filler_out() {
        let mut found = vec![segment(vec![word(0.0, 0.05, "a"), word(0.05, 0.08, "b")])];
        let heard = vec![segment(vec![word(0.04, 0.06, "um")])];
        assert_eq!(put_in_heard_fillers(&mut found, &heard, 30.0, &[]), 0);
        assert_eq!(found[0].words.len(), 2);
    }
}
