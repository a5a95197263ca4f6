//! Speech synthesis: the [`Synthesizer`] trait, the embedded espeak-ng engine and the
//! neural Kokoro and Piper voices.

mod espeak;
mod kokoro;
mod piper;

pub use espeak::{ipa_phonemes, Espeak, ESPEAK_PROGRAM};
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
    let fade = (rate as usize * 5 / 1000).max(1);
    let pause = vec![0.0f32; rate as usize * pause_ms as usize / 1000];
    let mut samples = Vec::new();
    for (i, clip) in clips.iter().enumerate() {
        let mut s = clip.samples.clone();
        let n = s.len();
        for k in 0..fade.min(n) {
            let gain = k as f32 / fade as f32;
            s[k] *= gain;
            s[n - 1 - k] *= gain;
        }
        if i > 0 {
            samples.extend_from_slice(&pause);
        }
        samples.extend(s);
    }
    Audio {
        samples,
        sample_rate: rate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
