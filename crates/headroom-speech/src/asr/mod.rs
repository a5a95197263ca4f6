//! Speech recognition: the [`Transcriber`] trait, the embedded Whisper engine, and exports.

pub mod export;
pub mod whisper;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// A stretch of speech with its text; times in seconds from the start of the audio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Segment {
    pub start: f64,
    pub end: f64,
    pub text: String,
}

/// A transcription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    pub language: Option<String>,
    /// Seconds of audio transcribed.
    pub duration: f64,
    pub segments: Vec<Segment>,
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
}

/// Choices for one transcription.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TranscribeOptions {
    /// A language code (`en`, `de`, ...); detected when `None` (multilingual models).
    pub language: Option<String>,
}

/// Why a transcription failed.
#[derive(Debug, thiserror::Error)]
pub enum AsrError {
    #[error("the speech model failed: {0}")]
    Model(String),
    #[error("unknown language {0}")]
    UnknownLanguage(String),
    #[error("transcription cancelled")]
    Cancelled,
    #[error(transparent)]
    Remote(Box<crate::remote_error::RemoteError>),
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

/// Speech to text, 16 kHz mono samples in. Implementations run on the calling thread (the
/// audio lane gives them a worker thread), report progress as a fraction, and stop promptly
/// when `cancel` fires.
pub trait Transcriber: Send + Sync {
    fn name(&self) -> &str;
    fn transcribe(
        &self,
        samples: &[f32],
        options: &TranscribeOptions,
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Transcript, AsrError>;
}
