//! Speech recognition: the [`Transcriber`] trait, the embedded Whisper engine, and exports.

pub mod der;
pub mod diarize;
pub mod export;
pub mod fillers;
pub mod live;
mod normalize;
pub mod vad;
mod wer;
pub mod whisper;

pub use normalize::{normalize_english, normalized_words};
pub use wer::{normalized_word_error_rate, word_error_rate, WordEdit, WordErrors};

use crate::audio::SampleSource;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// A stretch of speech with its text; times in seconds from the start of the audio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    pub start: f64,
    pub end: f64,
    pub text: String,
    /// The words with their times, when word timestamps were asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub words: Vec<Word>,
    /// Who speaks (a [`Speaker::id`] of the transcript), when speakers were asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
}

impl Segment {
    /// Later by `secs`, words and all: a segment of a piece of audio, timed in the whole.
    pub fn shift(&mut self, secs: f64) {
        self.start += secs;
        self.end += secs;
        for w in &mut self.words {
            w.start += secs;
            w.end += secs;
        }
    }

    /// A segment without word times.
    pub fn new(start: f64, end: f64, text: impl Into<String>) -> Segment {
        Segment {
            start,
            end,
            text: text.into(),
            words: Vec::new(),
            speaker: None,
        }
    }

    /// What the segment's text puts between its words ([`word_separator`]).
    pub fn word_separator(&self) -> &'static str {
        word_separator(&self.text, self.words.len())
    }

    /// The segment's text written again from its words, `separator` between them (the one
    /// [`Segment::word_separator`] gave before the words changed).
    pub fn write_text_from_words(&mut self, separator: &str) {
        self.text = self
            .words
            .iter()
            .map(|w| w.text.as_str())
            .collect::<Vec<_>>()
            .join(separator);
    }
}

/// What a text of `words` words puts between them: nothing in languages written without spaces
/// (several words and no space between any), a space otherwise.
pub fn word_separator(text: &str, words: usize) -> &'static str {
    if words > 1 && !text.trim().contains(' ') {
        ""
    } else {
        " "
    }
}

/// One word of a segment, timed by aligning the decoder's attention to the audio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Word {
    pub start: f64,
    pub end: f64,
    /// The word with its punctuation, without surrounding spaces.
    pub text: String,
    /// The mean probability of the word's tokens as the model chose them.
    pub probability: f32,
    /// Who says it (a [`Speaker::id`] of the transcript), when speakers were asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
}

/// A voice heard in a transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Speaker {
    /// The label segments and words carry: `S1`, `S2`, … in order of first speech, stable
    /// within the transcript.
    pub id: String,
    /// The name shown: a voice profile's for a recognised speaker, or one the user gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The voice profile this speaker was recognised as, or attached to by the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// How close this speaker's voice is to that profile (cosine similarity), when the
    /// speaker was recognised by voice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f32>,
    /// Seconds this speaker speaks.
    #[serde(default)]
    pub seconds: f64,
}

impl Speaker {
    /// The n-th speaker (from 0) as first heard, unnamed.
    pub fn numbered(n: usize) -> Speaker {
        Speaker {
            id: format!("S{}", n + 1),
            name: None,
            profile: None,
            similarity: None,
            seconds: 0.0,
        }
    }

    /// The name to show: the speaker's own, else "Speaker N" from the label.
    pub fn display_name(&self) -> String {
        match &self.name {
            Some(name) => name.clone(),
            None => match self.id.strip_prefix('S') {
                Some(n) if n.chars().all(|c| c.is_ascii_digit()) => format!("Speaker {n}"),
                _ => self.id.clone(),
            },
        }
    }
}

/// A transcription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    pub language: Option<String>,
    /// Seconds of audio transcribed.
    pub duration: f64,
    pub segments: Vec<Segment>,
    /// Who speaks, when speakers were asked for; segments and words name them by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub speakers: Vec<Speaker>,
}

impl Transcript {
    /// The text of all segments, space-joined.
    pub fn text(&self) -> String {
        self.segments
            .iter()
            .map(|s| s.text.trim())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The shown name of the speaker labelled `id`, if the transcript has one so labelled.
    pub fn speaker_name(&self, id: &str) -> Option<String> {
        self.speakers
            .iter()
            .find(|s| s.id == id)
            .map(Speaker::display_name)
    }
}

/// Choices for one transcription.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscribeOptions {
    /// A language code (`en`, `de`, ...); detected when `None` (multilingual models).
    pub language: Option<String>,
    /// Beam search with this many beams; 0 or 1 decodes greedily.
    pub beam_size: usize,
    /// Text the model reads before each window: names and vocabulary it should spell so.
    pub initial_prompt: Option<String>,
    /// Time each word (cross-attention alignment), not only each segment.
    pub word_timestamps: bool,
    /// When to distrust a window's text and decode it again, or call it silence.
    pub guards: DecodingGuards,
    /// Transcribe only the speech voice activity detection finds (when its model is
    /// installed): silence is skipped and long audio is cut at pauses.
    pub skip_silence: bool,
    /// How the embedded engine holds its weights (int8, the default, or float32); an engine
    /// is loaded once per model and precision.
    pub precision: whisper::Precision,
    /// Encode a window's audio and a little silence after it (10 s at least) instead of the
    /// whole 30 s window padded with silence: about three times faster on a few seconds of
    /// audio, and less accurate, since Whisper learned on whole windows. Live
    /// transcription's passing text uses it; its final text does not.
    pub audio_only_windows: bool,
    /// Write English whatever the language spoken (Whisper's translate task; multilingual
    /// models only). `language` then names the language spoken, detected when `None`.
    pub translate: bool,
    /// After the first window, start none at or after this time (seconds into the audio):
    /// voice activity detection hears what a window left again at the start of its next
    /// chunk, in a whole window, instead of in a short one of its own.
    pub stop_at_secs: Option<f64>,
    /// Listen for the fillers ("um", "uh") Whisper leaves out of its text: each window is read
    /// a second time, from the same encoding, after a prompt full of fillers, and the fillers
    /// of that reading are put among the words (see [`fillers`]). Words are timed for it.
    /// About half as long again.
    pub hear_fillers: bool,
}

impl Default for TranscribeOptions {
    fn default() -> Self {
        TranscribeOptions {
            language: None,
            beam_size: 1,
            initial_prompt: None,
            word_timestamps: false,
            guards: DecodingGuards::default(),
            skip_silence: true,
            precision: whisper::Precision::Int8,
            audio_only_windows: false,
            translate: false,
            stop_at_secs: None,
            hear_fillers: false,
        }
    }
}

/// Whisper's guards against its own failure modes, as in the reference decoder: a window
/// whose text repeats itself (compresses too well) or that the model is unsure of (low mean
/// log-probability) is decoded again at the next temperature; a window the model thinks has
/// no speech, and is unsure of, yields no text at all.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodingGuards {
    /// Temperatures to try in order; the first is used unless the text fails a check.
    pub temperatures: Vec<f32>,
    /// Candidates sampled at each temperature above zero, of which the likeliest (highest
    /// sum of log-probabilities over length) is kept, as Whisper's and faster-whisper's
    /// `best_of` (5 by default in both).
    pub best_of: usize,
    /// Text longer than this many times its zlib-compressed size is a repetition loop.
    pub compression_ratio_threshold: Option<f32>,
    /// Text whose mean token log-probability is below this is a guess.
    pub log_prob_threshold: Option<f32>,
    /// A window whose no-speech probability is above this (and whose text is a guess) is silence.
    pub no_speech_threshold: Option<f32>,
}

impl Default for DecodingGuards {
    fn default() -> Self {
        DecodingGuards {
            temperatures: vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
            best_of: 5,
            compression_ratio_threshold: Some(2.4),
            log_prob_threshold: Some(-1.0),
            no_speech_threshold: Some(0.6),
        }
    }
}

impl DecodingGuards {
    /// Plain greedy decoding: one temperature, no checks.
    pub fn off() -> Self {
        DecodingGuards {
            temperatures: vec![0.0],
            best_of: 1,
            compression_ratio_threshold: None,
            log_prob_threshold: None,
            no_speech_threshold: None,
        }
    }
}

impl TranscribeOptions {
    /// The defaults, in `language`.
    pub fn in_language(language: Option<String>) -> Self {
        TranscribeOptions {
            language,
            ..Default::default()
        }
    }
}

/// Why a transcription failed.
#[derive(Debug, thiserror::Error)]
pub enum AsrError {
    #[error("the speech model failed: {0}")]
    Model(String),
    #[error("unknown language {0}")]
    UnknownLanguage(String),
    #[error(
        "this model is English-only and cannot translate: translating into English needs a \
         multilingual model (`headroom models install whisper-base`)"
    )]
    CannotTranslate,
    #[error("transcription cancelled")]
    Cancelled,
    #[error(transparent)]
    Remote(Box<crate::remote_error::RemoteError>),
    /// The audio could not be read (a spooled recording's temporary file).
    #[error(transparent)]
    Audio(#[from] crate::audio::AudioError),
}

impl From<crate::remote_error::RemoteError> for AsrError {
    fn from(e: crate::remote_error::RemoteError) -> Self {
        AsrError::Remote(Box::new(e))
    }
}

impl AsrError {
    pub fn model(e: impl std::fmt::Display) -> Self {
        AsrError::Model(e.to_string())
    }
}

/// Speech to text, 16 kHz mono samples in, read a stretch at a time from a
/// [`SampleSource`] (in memory, or spooled to disk for a long recording). Implementations
/// run on the calling thread (the
/// audio lane gives them a worker thread), report progress as a fraction, and stop promptly
/// when `cancel` fires.
pub trait Transcriber: Send + Sync {
    fn name(&self) -> &str;

    /// The only language this transcriber hears, if it hears one only (an English-only
    /// model): nothing is then detected, so pieces of audio need not wait for the first
    /// piece's language.
    fn sole_language(&self) -> Option<&str> {
        None
    }

    /// Whether it cuts the audio at pauses itself (a batch spread over servers cuts it into
    /// pieces heard at once), so voice activity detection is not put in front of it.
    fn cuts_at_pauses_itself(&self) -> bool {
        false
    }

    /// Transcribes from `from_secs` into the audio, handing each finished window to
    /// `window_done` (its segments, and the seconds of audio done), so a job can keep its
    /// progress and continue there after a crash. The transcript returned holds the segments
    /// from `from_secs` on, timed in the whole audio. An engine that cannot start midway
    /// transcribes the rest as one window ([`rest_as_one_window`]).
    fn transcribe_from(
        &self,
        samples: &dyn SampleSource,
        from_secs: f64,
        options: &TranscribeOptions,
        window_done: &mut dyn FnMut(WindowDone<'_>),
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Transcript, AsrError>;

    /// The whole audio, windows unwatched.
    fn transcribe(
        &self,
        samples: &dyn SampleSource,
        options: &TranscribeOptions,
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Transcript, AsrError> {
        self.transcribe_from(samples, 0.0, options, &mut |_| {}, progress, cancel)
    }
}

/// [`Transcriber::transcribe_from`] for an engine that cannot start midway (a remote server):
/// `whole` transcribes the audio from `from_secs` to the end, which is one window, timed in
/// the whole audio.
pub fn rest_as_one_window(
    samples: &dyn SampleSource,
    from_secs: f64,
    window_done: &mut dyn FnMut(WindowDone<'_>),
    whole: impl FnOnce(&[f32]) -> Result<Transcript, AsrError>,
) -> Result<Transcript, AsrError> {
    let skip = ((from_secs.max(0.0) * SAMPLE_RATE as f64) as usize).min(samples.len());
    let mut rest = whole(&samples.read(skip..samples.len())?)?;
    let offset = skip as f64 / SAMPLE_RATE as f64;
    for segment in &mut rest.segments {
        segment.shift(offset);
    }
    rest.duration = samples.len() as f64 / SAMPLE_RATE as f64;
    window_done(WindowDone {
        segments: &rest.segments,
        done_secs: rest.duration,
        duration_secs: rest.duration,
    });
    Ok(rest)
}

/// A window of a transcription, finished: its segments and how far the audio is done.
#[derive(Debug, Clone, Copy)]
pub struct WindowDone<'a> {
    pub segments: &'a [Segment],
    pub done_secs: f64,
    pub duration_secs: f64,
}

/// The rate transcribers take their samples at.
pub const SAMPLE_RATE: u32 = 16_000;

#[cfg(test)]
mod tests {
    use super::*;

    /// One segment over whatever it is given: an engine that cannot start midway.
    struct WholeOnly;

    impl Transcriber for WholeOnly {
        fn name(&self) -> &str {
            "whole-only"
        }

        fn transcribe_from(
            &self,
            samples: &dyn SampleSource,
            from_secs: f64,
            _options: &TranscribeOptions,
            window_done: &mut dyn FnMut(WindowDone<'_>),
            _progress: &dyn Fn(f32),
            _cancel: &CancellationToken,
        ) -> Result<Transcript, AsrError> {
            rest_as_one_window(samples, from_secs, window_done, |rest| {
                let secs = rest.len() as f64 / SAMPLE_RATE as f64;
                Ok(Transcript {
                    speakers: Vec::new(),
                    language: None,
                    duration: secs,
                    segments: vec![Segment::new(0.0, secs, format!("{secs} s"))],
                })
            })
        }
    }

    #[test]
    fn an_engine_without_windows_resumes_by_transcribing_the_rest_in_the_whole_timeline() {
        let samples = vec![0.0; 10 * SAMPLE_RATE as usize];
        let mut windows = Vec::new();
        let rest = WholeOnly
            .transcribe_from(
                &samples,
                4.0,
                &TranscribeOptions::default(),
                &mut |w| windows.push((w.segments.to_vec(), w.done_secs, w.duration_secs)),
                &|_| {},
                &CancellationToken::new(),
            )
            .unwrap();
        assert_eq!(rest.duration, 10.0);
        assert_eq!(rest.segments.len(), 1);
        assert_eq!((rest.segments[0].start, rest.segments[0].end), (4.0, 10.0));
        assert_eq!(
            rest.segments[0].text, "6 s",
            "only the rest was transcribed"
        );
        assert_eq!(windows, vec![(rest.segments.clone(), 10.0, 10.0)]);
        let past_the_end = WholeOnly
            .transcribe_from(
                &samples,
                99.0,
                &TranscribeOptions::default(),
                &mut |_| {},
                &|_| {},
                &CancellationToken::new(),
            )
            .unwrap();
        assert_eq!(past_the_end.segments[0].text, "0 s");
    }
}
