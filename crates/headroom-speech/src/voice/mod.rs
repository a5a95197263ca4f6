//! Voices: reference clips checked ([`check`]), speaker embeddings that measure how close two
//! voices are ([`embedder`]), a second embedder that judges independently ([`independent`]),
//! and the approximate voice match that searches an embedded voice's settings for the one
//! closest to a profile ([`matching`]). Profiles themselves are stored by the workstation;
//! cloning servers are in [`crate::remote`].

pub mod check;
pub mod embedder;
pub mod independent;
pub mod matching;

pub use check::{check_clip, ClipReport, Finding, Severity, MAX_CLIP_SECS, MIN_CLIP_SECS};
pub use embedder::{Embedding, SpeakerEmbedder, EMBEDDING_DIM};
pub use independent::IndependentEmbedder;

use crate::audio::AudioError;
use crate::tts::TtsError;

/// Why a voice operation failed.
#[derive(Debug, thiserror::Error)]
pub enum VoiceError {
    #[error("the speaker embedder failed: {0}")]
    Engine(String),
    #[error(
        "{seconds:.2} s of audio is too short to tell a voice; at least {needed:.2} s is needed"
    )]
    TooShort { seconds: f64, needed: f64 },
    #[error("voice match cancelled")]
    Cancelled,
    #[error("the voice match failed: {0}")]
    Search(String),
    #[error("no candidate voice stayed intelligible (word error rate at most {bound:.2}); the best shipped style scored {best:.2}")]
    Unintelligible { bound: f64, best: f64 },
    #[error(transparent)]
    Audio(#[from] AudioError),
    #[error(transparent)]
    Tts(#[from] TtsError),
    #[error("transcribing a take failed: {0}")]
    Asr(String),
}
