//! Speech synthesis: the [`Synthesizer`] trait, the embedded espeak-ng engine and the
//! neural Kokoro and Piper voices.

mod espeak;
mod kokoro;
mod piper;

pub use espeak::{ipa_phonemes, voice_names, Espeak, EspeakVoices, ESPEAK_PROGRAM};
pub use kokoro::{Kokoro, Style, DEFAULT_STYLE, KOKORO_SAMPLE_RATE, STYLE_DIM};
pub use piper::Piper;

use crate::audio::Audio;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

/// A voice an engine offers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Voice {
    pub id: String,
    pub language: String,
    pub name: String,
}

/// Why synthesis failed.
#[derive(Debug, thiserror::Error)]
pub enum TtsError {
    #[error("{engine} is not installed: {hint}")]
    EngineMissing { engine: String, hint: String },
    #[error("unknown voice {voice:?}; list voices with `headroom speak --list-voices`")]
    UnknownVoice { voice: String },
    #[error("nothing to say: the text is empty")]
    EmptyText,
    #[error("{engine} failed: {message}")]
    Engine { engine: String, message: String },
    #[error("synthesis cancelled")]
    Cancelled,
    #[error(transparent)]
    Remote(Box<crate::remote_error::RemoteError>),
}

impl From<crate::remote_error::RemoteError> for TtsError {
    fn from(e: crate::remote_error::RemoteError) -> Self {
        TtsError::Remote(Box::new(e))
    }
}

/// Text to speech. Runs on the calling thread (the audio lane gives it a worker thread).
pub trait Synthesizer: Send + Sync {
    fn name(&self) -> &str;
    fn voices(&self) -> Result<Vec<Voice>, TtsError>;
    fn synthesize(
        &self,
        text: &str,
        voice: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Audio, TtsError>;

    /// Synthesizes at `speed` (1 is the voice's own pace, 2 twice as fast), at the same pitch.
    /// Engines with a speed of their own use it; this default time-stretches the take (WSOLA).
    fn synthesize_at_speed(
        &self,
        text: &str,
        voice: Option<&str>,
        speed: f32,
        cancel: &CancellationToken,
    ) -> Result<Audio, TtsError> {
        let audio = self.synthesize(text, voice, cancel)?;
        Ok(stretched(audio, speed))
    }
}

/// The speeds speech may be asked for, as OpenAI's speech endpoint takes them.
pub const SPEEDS: std::ops::RangeInclusive<f32> = 0.25..=4.0;

/// `audio` played `speed` times as fast, at the same pitch (unchanged at speed 1).
pub fn stretched(audio: Audio, speed: f32) -> Audio {
    if (speed - 1.0).abs() < 1e-6 {
        audio
    } else {
        crate::audio::stretch::time_stretch(&audio, f64::from(speed))
    }
}

/// An engine that speaks at a set speed: its [`Synthesizer::synthesize`] is the engine's
/// [`Synthesizer::synthesize_at_speed`].
pub struct AtSpeed {
    engine: std::sync::Arc<dyn Synthesizer>,
    speed: f32,
}

impl AtSpeed {
    pub fn new(engine: std::sync::Arc<dyn Synthesizer>, speed: f32) -> Self {
        AtSpeed { engine, speed }
    }
}

impl Synthesizer for AtSpeed {
    fn name(&self) -> &str {
        self.engine.name()
    }

    fn voices(&self) -> Result<Vec<Voice>, TtsError> {
        self.engine.voices()
    }

    fn synthesize(
        &self,
        text: &str,
        voice: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Audio, TtsError> {
        self.engine
            .synthesize_at_speed(text, voice, self.speed, cancel)
    }

    fn synthesize_at_speed(
        &self,
        text: &str,
        voice: Option<&str>,
        speed: f32,
        cancel: &CancellationToken,
    ) -> Result<Audio, TtsError> {
        self.engine
            .synthesize_at_speed(text, voice, self.speed * speed, cancel)
    }
}

/// Splits text into sentences (keeping their punctuation), so long text is synthesized
/// piece by piece and joined.
pub fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        current.push(c);
        if matches!(c, '.' | '!' | '?' | '…' | '\n')
            && chars.peek().is_none_or(|n| n.is_whitespace())
        {
            let s = current.trim();
            if !s.is_empty() {
                out.push(s.to_string());
            }
            current.clear();
        }
    }
    let s = current.trim();
    if !s.is_empty() {
        out.push(s.to_string());
    }
    out
}

/// The pause between the pieces of a sentence too long for a voice to take at once: shorter
/// than the one between sentences, as at a comma.
pub const PIECE_PAUSE_MS: u32 = 120;

/// Words before which a clause may start: a sentence too long for a voice and without
/// punctuation is cut there before it is cut between any two words.
const CLAUSE_WORDS: &[&str] = &[
    "and", "but", "or", "nor", "so", "yet", "because", "although", "though", "while", "whereas",
    "which", "who", "whose", "where", "when", "unless", "until", "whether",
];

/// Where a long sentence may be cut, from the most natural place to the least.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Boundary {
    /// After a comma, semicolon, colon, closing bracket or dash (a closing quote after it
    /// included).
    Phrase,
    /// Between two words, before a conjunction or relative word ([`CLAUSE_WORDS`]).
    Clause,
    /// Between any two words.
    Word,
    /// Between two characters (a "word" too long on its own, such as a long number or link).
    Character,
}

/// The byte offsets in `text` (trimmed) where a piece may end at `boundary`, in order: the
/// piece is `text[..end]`, the rest `text[end..]` with its leading space trimmed. Never 0 or
/// the text's length.
fn boundaries(text: &str, boundary: Boundary) -> Vec<usize> {
    if boundary == Boundary::Character {
        return text.char_indices().map(|(i, _)| i).skip(1).collect();
    }
    let dash = |c: char| matches!(c, '-' | '–' | '—');
    let mut out = Vec::new();
    let mut words = text
        .split_whitespace()
        .map(|w| (w.as_ptr() as usize - text.as_ptr() as usize, w))
        .peekable();
    while let Some((start, word)) = words.next() {
        if boundary == Boundary::Phrase {
            // Inside a word: "a—b" may be cut after its dash.
            out.extend(
                word.char_indices()
                    .filter(|&(i, c)| (c == '—' || c == '–') && i > 0)
                    .map(|(i, c)| start + i + c.len_utf8())
                    .filter(|&end| end < start + word.len()),
            );
        }
        let Some(&(_, next)) = words.peek() else {
            break;
        };
        let end = start + word.len();
        let here = match boundary {
            Boundary::Phrase => word
                .trim_end_matches(['"', '\'', '”', '’', '»'])
                .chars()
                .last()
                .is_some_and(|c| matches!(c, ',' | ';' | ':' | ')' | ']') || dash(c)),
            Boundary::Clause => {
                let next: String = next
                    .chars()
                    .filter(|c| c.is_alphanumeric())
                    .collect::<String>()
                    .to_lowercase();
                CLAUSE_WORDS.contains(&next.as_str())
            }
            Boundary::Word | Boundary::Character => true,
        };
        if here {
            out.push(end);
        }
    }
    out
}

/// A piece measured: where it ends in the rest of the sentence, its size, and what measuring
/// it made (the voice's token ids, so they need not be made twice).
struct Measured<T> {
    end: usize,
    size: usize,
    made: T,
}

/// Cuts `sentence` into pieces of at most `max` tokens each as `measure` counts them, at
/// the most natural places that allow it (after a phrase's punctuation, then before a
/// conjunction, then between words, and within a word only where a single word is itself
/// too long), keeping every word, in order. `measure(piece, last)` gives a piece's size and
/// what measuring it made (`last`: the piece runs to the end of the sentence); the pieces'
/// products come back in order. A sentence that fits is measured once and not cut; one that
/// does not is cut into pieces of about an even share each (as many shares as fit with a
/// tenth to spare), a natural place preferred to an even share. Sizes come from `measure`
/// alone, so the bound holds for whatever it counts (a voice's phoneme tokens, measured on
/// the very text spoken).
pub fn split_to_fit<T>(
    sentence: &str,
    max: usize,
    mut measure: impl FnMut(&str, bool) -> Result<(usize, T), TtsError>,
) -> Result<Vec<T>, TtsError> {
    let mut pieces = Vec::new();
    let mut rest = sentence.trim();
    while !rest.is_empty() {
        let (size, made) = measure(rest, true)?;
        if size <= max {
            pieces.push(made);
            break;
        }
        let piece = first_piece(rest, size, max, &mut measure)?;
        pieces.push(piece.made);
        rest = rest[piece.end..].trim_start();
    }
    Ok(pieces)
}

/// The first piece of `rest` (of `size` tokens, over `max`): at the most natural kind of
/// boundary that has one (a phrase's end, then before a conjunction, then any word's end),
/// the piece nearest an even share of the rest that fits, where one at a phrase's end or
/// before a conjunction is at least half a share; else as many characters of the first word
/// as fit.
fn first_piece<T>(
    rest: &str,
    size: usize,
    max: usize,
    measure: &mut impl FnMut(&str, bool) -> Result<(usize, T), TtsError>,
) -> Result<Measured<T>, TtsError> {
    let spare = (max - max / 10).max(1);
    let share = size.div_ceil(size.div_ceil(spare)).min(max);
    // The longest piece known to be within the share, and the shortest known to be over it.
    // Each kind of boundary searches between the two the one before left.
    let mut below: Option<Measured<T>> = None;
    let mut above = Measured {
        end: rest.len(),
        size,
        made: None,
    };
    for boundary in [Boundary::Phrase, Boundary::Clause, Boundary::Word] {
        longest_within(rest, boundary, share, &mut below, &mut above, measure)?;
        let under = below
            .as_ref()
            .filter(|b| boundary == Boundary::Word || 2 * b.size >= share)
            .map(|b| share - b.size);
        let over = (above.size <= max && above.made.is_some()).then(|| above.size - share);
        match (under, over) {
            (Some(under), Some(over)) if over < under => return Ok(above.into_made()),
            (Some(_), _) => return Ok(below.expect("a piece under the share")),
            (None, Some(_)) => return Ok(above.into_made()),
            (None, None) => {}
        }
    }
    // The first word alone is too long: as many of its characters as fit.
    longest_within(
        rest,
        Boundary::Character,
        max,
        &mut below,
        &mut above,
        measure,
    )?;
    below.ok_or_else(|| TtsError::Engine {
        engine: "speech".into(),
        message: format!(
            "{:?} is longer than the voice takes at once, even alone",
            rest.chars().next().unwrap_or(' ')
        ),
    })
}

impl<T> Measured<Option<T>> {
    /// A piece known to have been measured.
    fn into_made(self) -> Measured<T> {
        Measured {
            end: self.end,
            size: self.size,
            made: self.made.expect("a measured piece"),
        }
    }
}

/// Narrows `below` (at most `bound` tokens) and `above` (more) to neighbouring `boundary`
/// cuts of `rest` between them, measuring as few pieces as it can: the first guess where the
/// sizes known so far put the bound, then alternately a halving and a guess.
fn longest_within<T>(
    rest: &str,
    boundary: Boundary,
    bound: usize,
    below: &mut Option<Measured<T>>,
    above: &mut Measured<Option<T>>,
    measure: &mut impl FnMut(&str, bool) -> Result<(usize, T), TtsError>,
) -> Result<(), TtsError> {
    let from = below.as_ref().map_or(0, |b| b.end);
    let cuts: Vec<usize> = boundaries(rest, boundary)
        .into_iter()
        .filter(|&end| end > from && end < above.end)
        .collect();
    let (mut lo, mut hi) = (0, cuts.len());
    let mut halve = false;
    while lo < hi {
        let i = if halve {
            (lo + hi) / 2
        } else {
            let (low_end, low_size) = below.as_ref().map_or((0, 0), |b| (b.end, b.size));
            let guess = low_end
                + (bound - low_size.min(bound)) * (above.end - low_end)
                    / (above.size - low_size).max(1);
            (lo + cuts[lo..hi].partition_point(|&end| end <= guess)).clamp(lo + 1, hi) - 1
        };
        halve = !halve;
        let end = cuts[i];
        let (size, made) = measure(&rest[..end], false)?;
        if size <= bound {
            *below = Some(Measured { end, size, made });
            lo = i + 1;
        } else {
            *above = Measured {
                end,
                size,
                made: Some(made),
            };
            hi = i;
        }
    }
    Ok(())
}

/// A sentence's IPA phonemes ([`ipa_phonemes`]), or a piece's: one that is not the
/// sentence's last (`last`) ends as at a comma, so the voice carries on rather than
/// closing the sentence.
fn piece_phonemes(program: &str, voice: &str, piece: &str, last: bool) -> Result<String, TtsError> {
    let mut phonemes = ipa_phonemes(program, voice, piece)?;
    if !last && !phonemes.ends_with([',', '.', '?', '!']) {
        phonemes.push(',');
    }
    Ok(phonemes)
}

/// Speaks one sentence with a voice that takes at most `max` tokens at once: cut with
/// [`split_to_fit`] where it is longer (`measure` counts a piece's tokens and makes them),
/// each piece spoken by `speak` (`None`: it makes no sound) and the clips joined with
/// [`PIECE_PAUSE_MS`] pauses, `cancel` checked between pieces. No text is ever dropped.
pub fn speak_in_pieces<T>(
    sentence: &str,
    max: usize,
    cancel: &CancellationToken,
    measure: impl FnMut(&str, bool) -> Result<(usize, T), TtsError>,
    mut speak: impl FnMut(T) -> Result<Option<Audio>, TtsError>,
) -> Result<Option<Audio>, TtsError> {
    let mut clips = Vec::new();
    for (i, piece) in split_to_fit(sentence, max, measure)?
        .into_iter()
        .enumerate()
    {
        if i > 0 {
            headroom_base::cpu::give_way();
            if cancel.is_cancelled() {
                return Err(TtsError::Cancelled);
            }
        }
        clips.extend(speak(piece)?);
    }
    Ok(match clips.len() {
        0 => None,
        1 => clips.pop(),
        _ => Some(join_clips(&clips, PIECE_PAUSE_MS)),
    })
}

/// Speaks `text` sentence by sentence with `speak` (which may return `None` for a sentence
/// that makes no sound), checking `cancel` between sentences, and joins the clips.
pub fn synthesize_by_sentence(
    text: &str,
    pause_ms: u32,
    cancel: &CancellationToken,
    mut speak: impl FnMut(&str) -> Result<Option<Audio>, TtsError>,
) -> Result<Audio, TtsError> {
    let mut clips = Vec::new();
    for sentence in sentences(text) {
        // Batch speech waits here while someone's interactive job runs.
        headroom_base::cpu::give_way();
        if cancel.is_cancelled() {
            return Err(TtsError::Cancelled);
        }
        clips.extend(speak(&sentence)?);
    }
    if clips.is_empty() {
        return Err(TtsError::EmptyText);
    }
    Ok(join_clips(&clips, pause_ms))
}

/// Joins clips with a short pause, fading each edge over 5 ms so no joint clicks.
pub fn join_clips(clips: &[Audio], pause_ms: u32) -> Audio {
    let rate = clips.first().map_or(22_050, |c| c.sample_rate);
    let mut joiner = ClipJoiner::new(pause_ms);
    Audio {
        samples: clips
            .iter()
            .flat_map(|clip| joiner.next(clip.clone()).samples)
            .collect(),
        sample_rate: rate,
    }
}

/// Joins clips one at a time, as they are synthesized: each comes back with its edges faded
/// over 5 ms and, after the first, the pause before it, so the pieces played in order are
/// [`join_clips`] of them all.
pub struct ClipJoiner {
    pause_ms: u32,
    started: bool,
}

impl ClipJoiner {
    pub fn new(pause_ms: u32) -> Self {
        ClipJoiner {
            pause_ms,
            started: false,
        }
    }

    pub fn next(&mut self, clip: Audio) -> Audio {
        let rate = clip.sample_rate;
        let fade = (rate as usize * 5 / 1000).max(1);
        let mut samples = if self.started {
            vec![0.0f32; rate as usize * self.pause_ms as usize / 1000]
        } else {
            Vec::new()
        };
        self.started = true;
        let start = samples.len();
        samples.extend(clip.samples);
        let s = &mut samples[start..];
        let n = s.len();
        for k in 0..fade.min(n) {
            let gain = k as f32 / fade as f32;
            s[k] *= gain;
            s[n - 1 - k] *= gain;
        }
        Audio {
            samples,
            sample_rate: rate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One second of a 200 Hz tone at 16 kHz, whatever the text.
    struct Tone;

    impl Synthesizer for Tone {
        fn name(&self) -> &str {
            "tone"
        }
        fn voices(&self) -> Result<Vec<Voice>, TtsError> {
            Ok(Vec::new())
        }
        fn synthesize(
            &self,
            _text: &str,
            _voice: Option<&str>,
            _cancel: &CancellationToken,
        ) -> Result<Audio, TtsError> {
            Ok(Audio {
                samples: (0..16_000)
                    .map(|i| (i as f32 * 200.0 * std::f32::consts::TAU / 16_000.0).sin() * 0.5)
                    .collect(),
                sample_rate: 16_000,
            })
        }
    }

    #[test]
    fn at_speed_time_stretches_an_engine_without_a_speed_of_its_own() {
        let cancel = CancellationToken::new();
        for (speed, samples) in [(1.0, 16_000), (2.0, 8_000), (0.5, 32_000), (4.0, 4_000)] {
            let engine = AtSpeed::new(std::sync::Arc::new(Tone), speed);
            let audio = engine.synthesize("hi", None, &cancel).unwrap();
            assert_eq!(audio.samples.len(), samples, "speed {speed}");
            assert_eq!(audio.sample_rate, 16_000);
        }
        assert!(SPEEDS.contains(&0.25) && SPEEDS.contains(&4.0) && !SPEEDS.contains(&4.01));
    }

    #[test]
    fn sentences_split_at_terminal_punctuation() {
        assert_eq!(
            sentences("Hello there. How are you? Fine!  3.5 is a number"),
            vec!["Hello there.", "How are you?", "Fine!", "3.5 is a number"]
        );
        assert!(sentences("   ").is_empty());
    }

    /// Splits `text` with a measure that counts characters (spaces too, as phonemes count
    /// word breaks), giving back the pieces and how many were measured.
    fn split_counting_characters(text: &str, max: usize) -> (Vec<String>, usize) {
        let mut measured = 0;
        let pieces = split_to_fit(text, max, |piece, _last| {
            measured += 1;
            Ok((piece.chars().count(), piece.to_string()))
        })
        .unwrap();
        (pieces, measured)
    }

    fn words(text: &str) -> Vec<&str> {
        text.split_whitespace().collect()
    }

    #[test]
    fn a_long_sentence_is_cut_into_pieces_that_fit_keeping_every_word_in_order() {
        let text = (0..300)
            .map(|i| ["river", "a", "lighthouse", "of", "morning", "stone"][i % 6])
            .collect::<Vec<_>>()
            .join(" ");
        for max in [40, 100, 508] {
            let (pieces, measured) = split_counting_characters(&text, max);
            assert!(pieces.len() > 1, "{max}");
            assert_eq!(words(&pieces.join(" ")), words(&text), "{max}: {pieces:?}");
            for piece in &pieces {
                assert!(piece.chars().count() <= max, "{max}: {piece:?}");
                assert_eq!(piece.trim(), piece, "no piece starts or ends with a space");
            }
            // As few pieces as fit with a tenth to spare, of about equal size.
            let spare = max - max / 10;
            assert!(
                pieces.len() <= text.len().div_ceil(spare) + 1,
                "{max}: {pieces:?}"
            );
            let sizes: Vec<usize> = pieces.iter().map(|p| p.len()).collect();
            let (least, most) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            assert!(2 * least >= *most, "{max}: uneven pieces {sizes:?}");
            // Each piece costs a handful of measurements, not one per word.
            assert!(measured <= 12 * pieces.len(), "{max}: {measured} measured");
        }
        // A sentence that fits is measured once, and kept as it is.
        assert_eq!(
            split_counting_characters("  Short enough.  ", 20),
            (vec!["Short enough.".to_string()], 1)
        );
        assert!(split_counting_characters("   ", 20).0.is_empty());
    }

    #[test]
    fn a_sentence_is_cut_at_punctuation_then_before_a_conjunction_then_between_words() {
        // Phrases: after a comma, a semicolon, a colon, a dash, a closing quote or bracket.
        let (pieces, _) = split_counting_characters(
            "the boats came in late that night, the nets were full of silver fish; \
             the keeper counted them twice: forty \"or more,\" he said \
             — and went home (slowly) to sleep",
            60,
        );
        for piece in &pieces[..pieces.len() - 1] {
            assert!(
                piece.ends_with([',', ';', ':', '"', '—', ')']),
                "cut inside a phrase: {pieces:?}"
            );
        }
        // Without punctuation, before "and", "but", "which", "when" ...
        let text = "the gulls circled over the harbor for most of the morning \
                    and the baker opened his shutters early for the market \
                    while the children waited by the gate of the little school";
        let (pieces, _) = split_counting_characters(text, 100);
        assert_eq!(
            pieces,
            [
                "the gulls circled over the harbor for most of the morning",
                "and the baker opened his shutters early for the market",
                "while the children waited by the gate of the little school"
            ]
        );
        // A dash inside a word ("night—the") is a phrase's end too.
        let (pieces, _) = split_counting_characters(
            "we sailed out before the sun came up over the hills—the water was calm",
            55,
        );
        assert_eq!(
            pieces,
            [
                "we sailed out before the sun came up over the hills—",
                "the water was calm"
            ]
        );
    }

    #[test]
    fn a_word_too_long_alone_is_cut_between_characters_and_nothing_is_lost() {
        let digits = "7".repeat(130);
        let text = format!("call {digits} now");
        let (pieces, _) = split_counting_characters(&text, 50);
        assert!(pieces.iter().all(|p| p.chars().count() <= 50), "{pieces:?}");
        assert_eq!(pieces.concat().replace(' ', ""), text.replace(' ', ""));
        // Multi-byte characters are cut between characters, never inside one.
        let (pieces, _) = split_counting_characters(&"ü".repeat(30), 7);
        assert!(pieces.iter().all(|p| p.chars().count() <= 7));
        assert_eq!(pieces.concat(), "ü".repeat(30));
        // A measure that stays over the bound for a single character is refused, not cut.
        let err = split_to_fit("unsayable", 3, |piece, _| Ok((10 + piece.len(), ()))).unwrap_err();
        assert!(
            err.to_string().contains("longer than the voice takes"),
            "{err}"
        );
    }

    #[test]
    fn the_bound_holds_whatever_the_measure_counts() {
        // Sizes that do not grow evenly with the text (a word may read as many phonemes):
        // every piece is still measured within the bound, and every word kept.
        let text = (0..200)
            .map(|i| if i % 7 == 0 { "1999" } else { "so" })
            .collect::<Vec<_>>()
            .join(" ");
        let size = |piece: &str| {
            piece
                .split_whitespace()
                .map(|w| if w == "1999" { 30 } else { 3 })
                .sum::<usize>()
        };
        let pieces =
            split_to_fit(&text, 120, |piece, _| Ok((size(piece), piece.to_string()))).unwrap();
        assert_eq!(words(&pieces.join(" ")), words(&text));
        assert!(pieces.iter().all(|p| size(p) <= 120), "{pieces:?}");
    }

    #[test]
    fn a_sentence_in_pieces_is_one_clip_with_short_pauses_and_stops_when_cancelled() {
        let clip = |n: usize| Audio {
            samples: vec![0.5; n],
            sample_rate: 24_000,
        };
        let cancel = CancellationToken::new();
        let sentence = "one two three four five six seven eight nine ten";
        let measure = |piece: &str, _: bool| Ok((piece.len(), piece.to_string()));
        // Fits: spoken as it is, one clip untouched.
        let whole = speak_in_pieces(sentence, 100, &cancel, measure, |p| Ok(Some(clip(p.len()))))
            .unwrap()
            .unwrap();
        assert_eq!(whole.samples, vec![0.5; sentence.len()]);
        // Too long: every piece spoken, joined with a short pause and faded edges.
        let mut spoken = Vec::new();
        let joined = speak_in_pieces(sentence, 20, &cancel, measure, |p| {
            spoken.push(p.clone());
            Ok(Some(clip(1000)))
        })
        .unwrap()
        .unwrap();
        assert_eq!(words(&spoken.join(" ")), words(sentence));
        let pause = 24_000 * PIECE_PAUSE_MS as usize / 1000;
        assert_eq!(
            joined.samples.len(),
            1000 * spoken.len() + pause * (spoken.len() - 1)
        );
        assert_eq!(joined.samples[1000 + pause / 2], 0.0);
        assert!(joined.samples[999].abs() < 0.01 && joined.samples[1000 + pause].abs() < 0.01);
        // Pieces that make no sound make none; cancelled, it stops before the next piece.
        let silent = speak_in_pieces(sentence, 20, &cancel, measure, |_| Ok(None)).unwrap();
        assert!(silent.is_none());
        let mut calls = 0;
        let stopped = speak_in_pieces(sentence, 20, &cancel, measure, |_| {
            calls += 1;
            cancel.cancel();
            Ok(Some(clip(10)))
        });
        assert!(matches!(stopped, Err(TtsError::Cancelled)) && calls == 1);
    }

    #[test]
    fn joins_start_and_end_at_silence() {
        let clip = Audio {
            samples: vec![1.0; 1000],
            sample_rate: 22_050,
        };
        let joined = join_clips(&[clip.clone(), clip], 100);
        assert_eq!(joined.samples.len(), 2000 + 2205);
        assert_eq!(joined.samples[0], 0.0);
        assert!(
            joined.samples[999].abs() < 0.01,
            "fades out before the pause"
        );
        assert!(
            joined.samples[1000 + 2205].abs() < 0.01,
            "fades in after the pause"
        );
        assert_eq!(joined.samples[500], 1.0);
    }
}
