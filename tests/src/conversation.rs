//! A cheap two-speaker conversation made at test time with two clearly different embedded
//! voices (Piper's `joe`, a man's neural voice, and espeak-ng's `en-us+f3`, a woman's formant
//! voice), its turns joined with pauses: the fixture for speakers in projects, the desktop
//! app's lanes and per-speaker narration.

use headroom_services::Services;
use headroom_speech::audio::{wav_bytes, Audio};
use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

/// The two voices, as projects name them: speaker 0's and speaker 1's.
pub const VOICES: [&str; 2] = ["piper-joe", "en-us+f3"];

/// The turns: (speaker, text). Speaker 0 says at least 5 s in turns of a second or more, so
/// a voice profile can be made from it.
pub const TURNS: [(usize, &str); 4] = [
    (
        0,
        "Good morning and welcome to the program. Today we talk about gardens on city roofs.",
    ),
    (
        1,
        "Thank you for having me. I started with a few tomato plants on a balcony.",
    ),
    (
        0,
        "That sounds wonderful. What was the hardest part of getting started with it?",
    ),
    (
        1,
        "Water, mostly. We carried it up six floors every single morning.",
    ),
];

/// The pause between two turns, in seconds.
pub const PAUSE_SECS: f64 = 0.7;

/// The conversation's file and each turn's speaker and time (seconds).
pub struct Conversation {
    pub path: PathBuf,
    pub turns: Vec<(usize, f64, f64)>,
    pub duration_secs: f64,
}

/// Speaks [`TURNS`] in [`VOICES`] and writes them, joined at 16 kHz with [`PAUSE_SECS`] of
/// silence between turns (and half that around the whole), to `path` as a WAV.
pub async fn two_speakers(services: &Services, path: &Path) -> Conversation {
    let rate = 16_000u32;
    let pause = vec![0.0f32; (PAUSE_SECS * rate as f64) as usize];
    let mut samples = pause[..pause.len() / 2].to_vec();
    let mut turns = Vec::new();
    for (speaker, text) in TURNS {
        let (service, voice) = services
            .speech_for_voice(Some(VOICES[speaker]))
            .expect("the voice is installed");
        let audio = service
            .synthesize(text.to_string(), voice, CancellationToken::new())
            .await
            .expect("a turn is spoken")
            .to_16k()
            .expect("resampled");
        let start = samples.len() as f64 / rate as f64;
        samples.extend_from_slice(&audio.samples);
        turns.push((speaker, start, samples.len() as f64 / rate as f64));
        samples.extend_from_slice(&pause);
    }
    let audio = Audio {
        samples,
        sample_rate: rate,
    };
    std::fs::write(path, wav_bytes(&audio)).expect("the conversation is written");
    Conversation {
        path: path.to_path_buf(),
        turns,
        duration_secs: audio.duration_secs(),
    }
}
