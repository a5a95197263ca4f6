//! Live transcription: text while someone speaks. Audio arrives in pieces (a recording, a
//! tenth of a second at a time); the voice activity detector follows it frame by frame, the
//! phrase being spoken is transcribed again every half second as a partial text, and when
//! a pause ends the phrase it is transcribed once more, as the final text, and forgotten.
//!
//! [`LiveTranscriber::push`] only keeps audio; [`LiveTranscriber::step`] does the work, one
//! transcription at a time, so a caller that falls behind (a slow model) skips partials
//! instead of queueing them: it pushes what arrived, steps until there is nothing to do, and
//! waits for more audio.

use super::vad::{SileroVad, VadError, VadStream, FRAME};
use super::{AsrError, Segment, TranscribeOptions, Transcriber, Transcript, SAMPLE_RATE};
use serde::Serialize;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// When a phrase is shown and when it ends.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveParams {
    /// New audio, in seconds, before the phrase's partial text is made again.
    pub partial_every_secs: f64,
    /// Silence that ends a phrase.
    pub pause_ms: u32,
    /// A phrase this long without a pause is ended where it is.
    pub max_phrase_secs: f64,
    /// A frame at or above this speech probability is speech; below `neg_threshold` it is
    /// silence (between the two, the previous state holds).
    pub threshold: f32,
    pub neg_threshold: f32,
    /// Audio kept either side of a phrase, so its first and last words are not clipped.
    pub pad_ms: u32,
}

impl Default for LiveParams {
    fn default() -> Self {
        LiveParams {
            partial_every_secs: 0.5,
            pause_ms: 700,
            max_phrase_secs: 20.0,
            threshold: 0.5,
            neg_threshold: 0.35,
            pad_ms: 300,
        }
    }
}

/// What live transcription has to show; times in seconds from the start of the audio.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LiveUpdate {
    /// The phrase being spoken, so far: replaced by the next partial or by the final text.
    Partial { start: f64, end: f64, text: String },
    /// A phrase ended: its segments, final.
    Final { segments: Vec<Segment> },
}

/// Follows audio as it arrives and says what is being said (see the module's docs).
pub struct LiveTranscriber {
    engine: Arc<dyn Transcriber>,
    vad: Arc<SileroVad>,
    stream: VadStream,
    options: TranscribeOptions,
    params: LiveParams,
    /// Audio not yet forgotten: it starts `base` samples into the recording, a whole number
    /// of frames, so `probs[i]` is the frame at `audio[i * FRAME..]`.
    audio: Vec<f32>,
    base: usize,
    probs: Vec<f32>,
    /// Frames of `probs` already followed.
    followed: usize,
    phrase: Option<Phrase>,
    /// The language the first phrase was heard in, kept for the rest (a multilingual model
    /// would otherwise guess again from every short phrase).
    language: Option<String>,
    finals: Vec<Segment>,
}

/// The phrase being spoken: the frame its speech began at and how many frames of silence
/// have followed its last speech.
#[derive(Debug, Clone, Copy)]
struct Phrase {
    first: usize,
    silent: usize,
    /// `audio.len()` when its partial text was last made.
    partial_at: usize,
}

impl From<VadError> for AsrError {
    fn from(e: VadError) -> Self {
        AsrError::model(e)
    }
}

impl LiveTranscriber {
    /// Live transcription with `engine` (decoding as `options` say; silence is judged by
    /// `vad` here, so the engine itself should hear all of its audio).
    pub fn new(
        engine: Arc<dyn Transcriber>,
        vad: Arc<SileroVad>,
        options: TranscribeOptions,
        params: LiveParams,
    ) -> LiveTranscriber {
        LiveTranscriber {
            engine,
            vad,
            stream: VadStream::default(),
            language: options.language.clone(),
            options,
            params,
            audio: Vec::new(),
            base: 0,
            probs: Vec::new(),
            followed: 0,
            phrase: None,
            finals: Vec::new(),
        }
    }

    /// Keeps 16 kHz mono `samples`, the next piece of the audio, and judges its frames.
    pub fn push(&mut self, samples: &[f32]) -> Result<(), AsrError> {
        self.audio.extend_from_slice(samples);
        let probs = self.vad.feed(&mut self.stream, samples)?;
        self.probs.extend(probs);
        Ok(())
    }

    /// Seconds of audio heard so far.
    pub fn heard_secs(&self) -> f64 {
        (self.base + self.audio.len()) as f64 / SAMPLE_RATE as f64
    }

    /// The next thing to show, or `None` when there is nothing to do until more audio comes.
    pub fn step(&mut self, cancel: &CancellationToken) -> Result<Option<LiveUpdate>, AsrError> {
        let pause = self.frames_of_ms(self.params.pause_ms);
        let longest = ((self.params.max_phrase_secs * SAMPLE_RATE as f64) as usize / FRAME).max(1);
        while self.followed < self.probs.len() {
            let i = self.followed;
            let p = self.probs[i];
            self.followed += 1;
            let Some(phrase) = &mut self.phrase else {
                if p >= self.params.threshold {
                    self.phrase = Some(Phrase {
                        first: i,
                        silent: 0,
                        // The first partial comes once there is that much speech to show.
                        partial_at: i * FRAME,
                    });
                }
                continue;
            };
            if p >= self.params.threshold {
                phrase.silent = 0;
            } else if p < self.params.neg_threshold || phrase.silent > 0 {
                phrase.silent += 1;
            }
            let (first, silent) = (phrase.first, phrase.silent);
            if silent >= pause {
                return self.finalize(first, i + 1 - silent, cancel).map(Some);
            }
            if i + 1 - first >= longest {
                return self.finalize(first, i + 1, cancel).map(Some);
            }
        }
        match self.phrase {
            Some(phrase) => {
                let every = (self.params.partial_every_secs * SAMPLE_RATE as f64) as usize;
                if self.audio.len() < phrase.partial_at + every.max(1) {
                    return Ok(None);
                }
                let update = self.partial(phrase.first, cancel)?;
                if let Some(phrase) = &mut self.phrase {
                    phrase.partial_at = self.audio.len();
                }
                Ok(update)
            }
            None => {
                // Silence: only the padding before speech that may yet begin is worth keeping.
                let keep = self.frames_of_ms(self.params.pad_ms);
                self.forget(self.followed.saturating_sub(keep));
                Ok(None)
            }
        }
    }

    /// The audio has ended: the phrase being spoken (if any) is final. Returns what is left to
    /// show, and the whole audio's transcript (every final segment, in order).
    pub fn finish(
        mut self,
        cancel: &CancellationToken,
    ) -> Result<(Vec<LiveUpdate>, Transcript), AsrError> {
        if let Some(p) = self.vad.flush(&mut self.stream)? {
            self.probs.push(p);
        }
        let mut updates = Vec::new();
        while let Some(update) = self.step(cancel)? {
            if matches!(update, LiveUpdate::Final { .. }) {
                updates.push(update);
            }
        }
        if let Some(phrase) = self.phrase {
            updates.push(self.finalize(phrase.first, self.probs.len(), cancel)?);
        }
        let transcript = Transcript {
            speakers: Vec::new(),
            duration: self.heard_secs(),
            language: self.language,
            segments: self.finals,
        };
        Ok((updates, transcript))
    }

    fn frames_of_ms(&self, ms: u32) -> usize {
        (ms as usize * SAMPLE_RATE as usize / 1000).div_ceil(FRAME)
    }

    /// The samples of frames `first..end`, with the padding either side that `audio` holds.
    fn span(&self, first: usize, end: usize) -> std::ops::Range<usize> {
        let pad = self.params.pad_ms as usize * SAMPLE_RATE as usize / 1000;
        (first * FRAME).saturating_sub(pad)..(end * FRAME + pad).min(self.audio.len())
    }

    fn transcribe(
        &mut self,
        range: std::ops::Range<usize>,
        options: &TranscribeOptions,
        cancel: &CancellationToken,
    ) -> Result<Vec<Segment>, AsrError> {
        let start = (self.base + range.start) as f64 / SAMPLE_RATE as f64;
        let heard = self
            .engine
            .transcribe(&&self.audio[range], options, &|_| {}, cancel)?;
        if self.language.is_none() {
            self.language = heard.language;
        }
        Ok(heard
            .segments
            .into_iter()
            .map(|mut s| {
                s.shift(start);
                s
            })
            .collect())
    }

    /// The phrase so far, greedily, without word times and from only its own audio (not a
    /// padded 30 s window): it is shown for a moment only, and soon.
    fn partial(
        &mut self,
        first: usize,
        cancel: &CancellationToken,
    ) -> Result<Option<LiveUpdate>, AsrError> {
        let range = self.span(first, self.probs.len());
        let options = TranscribeOptions {
            language: self.language.clone(),
            beam_size: 1,
            word_timestamps: false,
            skip_silence: false,
            audio_only_windows: true,
            // Once, greedily: a partial is shown for a moment, and the guards' hotter
            // retries only add time and guesses (the final text keeps them).
            guards: super::DecodingGuards::off(),
            ..self.options.clone()
        };
        let segments = self.transcribe(range.clone(), &options, cancel)?;
        let seconds = range.len() as f64 / SAMPLE_RATE as f64;
        let text = at_most_words(&join_text(&segments), words_heard_in(seconds));
        Ok(Some(LiveUpdate::Partial {
            start: (self.base + range.start) as f64 / SAMPLE_RATE as f64,
            end: (self.base + range.end) as f64 / SAMPLE_RATE as f64,
            text,
        }))
    }

    /// Frames `first..end` are a phrase: transcribed as the options ask, kept, and forgotten.
    fn finalize(
        &mut self,
        first: usize,
        end: usize,
        cancel: &CancellationToken,
    ) -> Result<LiveUpdate, AsrError> {
        let range = self.span(first, end);
        let options = TranscribeOptions {
            language: self.language.clone(),
            skip_silence: false,
            ..self.options.clone()
        };
        let segments = self.transcribe(range, &options, cancel)?;
        self.finals.extend(segments.iter().cloned());
        self.phrase = None;
        // Frames after the phrase's end are followed again: the next phrase may begin there.
        self.followed = end;
        self.forget(end);
        Ok(LiveUpdate::Final { segments })
    }

    /// Drops the audio and judgements before frame `frame`.
    fn forget(&mut self, frame: usize) {
        let frame = frame.min(self.followed).min(self.probs.len());
        if frame == 0 {
            return;
        }
        self.audio.drain(..(frame * FRAME).min(self.audio.len()));
        self.probs.drain(..frame);
        self.base += frame * FRAME;
        self.followed -= frame;
        if let Some(phrase) = &mut self.phrase {
            phrase.first = phrase.first.saturating_sub(frame);
            phrase.partial_at = phrase.partial_at.saturating_sub(frame * FRAME);
        }
    }
}

/// Segments' text as one line.
/// Words a stretch of speech can hold at most: fast speech is about 3 words a second. Whisper
/// cut off mid-phrase may repeat the last words until it runs out of tokens; a partial never
/// shows more than the audio could have said.
fn words_heard_in(seconds: f64) -> usize {
    (seconds * MAX_WORDS_PER_SECOND).ceil() as usize + 1
}

const MAX_WORDS_PER_SECOND: f64 = 4.0;

fn at_most_words(text: &str, words: usize) -> String {
    text.split_whitespace()
        .take(words)
        .collect::<Vec<_>>()
        .join(" ")
}

fn join_text(segments: &[Segment]) -> String {
    segments
        .iter()
        .map(|s| s.text.trim())
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_shows_no_more_words_than_its_audio_could_hold() {
        let run_on = "a quick run. ".repeat(40);
        let shown = at_most_words(&run_on, words_heard_in(1.5));
        assert_eq!(shown.split_whitespace().count(), 7);
        assert_eq!(at_most_words("two words", words_heard_in(1.0)), "two words");
    }
}
