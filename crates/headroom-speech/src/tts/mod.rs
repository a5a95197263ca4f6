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
