//! The independent judge: Resemblyzer's GE2E speaker encoder (`pretrained.pt` from the PyPI
//! package `Resemblyzer` 0.1.4, Apache-2.0), a second speaker embedder trained apart from the
//! one the voice match optimises ([`super::embedder`]). The match's search never calls it; it
//! only scores what the search found, so a gain the search's own embedder reports can be
//! checked by a judge the search could not fool on purpose.
//!
//! The network, as in `resemblyzer/voice_encoder.py`: a 3-layer LSTM (40 mel bands in, 256
//! hidden), the last layer's final hidden state through Linear(256→256) and ReLU, L2-normalised.
//! The front end, as in `resemblyzer/audio.py` and `hparams.py`: 16 kHz, the power mel
//! spectrogram (not its log) of librosa's defaults with a 25 ms window and 10 ms hop (400-point
//! FFT of a periodic Hann window, centred frames zero-padded by 200 samples, 40 Slaney mel
//! bands to 8 kHz); partial utterances of 160 frames (1.6 s) at 1.3 per second, the last one
//! kept (zero-padded) when it covers at least 75 % of a partial; each partial's embedding
//! averaged and normalised again (`embed_utterance`).
//!
//! Of `preprocess_wav` we keep the volume normalisation (raised to -30 dBFS, never lowered):
//! the model reads the power spectrum, not its log, so level changes its input, and the step
//! is cheap and exact. We leave out its silence trimming: it needs WebRTC's VAD (a C library
//! this workspace does not carry) and only shortens pauses longer than about 0.2 s, which
//! synthesized takes and checked reference clips seldom have; the search's embedder does not
//! trim either, so both judges see the same audio.
//!
//! The checkpoint is in PyTorch's legacy (pre-1.6, not zip) format: five pickles (magic number,
//! protocol, system info, the state, the storage keys) followed by each storage's raw bytes.
//! The pickles are read with candle's pickle reader; the storages are read here.

use super::embedder::MIN_SECONDS;
use super::{Embedding, VoiceError, EMBEDDING_DIM};
use crate::audio::mel::{MelSpec, MelSpectrogram, Padding, WindowKind};
use crate::audio::Audio;
use candle_core::pickle::{Object, Stack};
use candle_core::{DType, Device, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// The installed model's file.
pub const WEIGHTS_FILE: &str = "pretrained.pt";
const SAMPLE_RATE: u32 = 16_000;
/// `mel_window_length` 25 ms at 16 kHz.
const N_FFT: usize = 400;
/// `mel_window_step` 10 ms at 16 kHz.
const HOP: usize = 160;
/// `mel_n_channels`.
const N_MELS: usize = 40;
/// `partials_n_frames`.
const PARTIAL_FRAMES: usize = 160;
/// `embed_utterance`'s defaults: partials per second and the least coverage of the last one.
const RATE: f64 = 1.3;
const MIN_COVERAGE: f64 = 0.75;
/// `model_hidden_size`, `model_num_layers`.
const HIDDEN: usize = 256;
const LAYERS: usize = 3;
/// `audio_norm_target_dBFS`.
const TARGET_DBFS: f64 = -30.0;
/// Partials per forward pass, so a long clip never makes one huge batch.
const BATCH: usize = 32;

/// One LSTM layer, PyTorch's gate order (input, forget, cell, output).
struct LstmLayer {
    /// `weight_ih` transposed: input × 4·HIDDEN.
    w_ih: Tensor,
    /// `weight_hh` transposed: HIDDEN × 4·HIDDEN.
    w_hh: Tensor,
    /// `bias_ih + bias_hh`: 4·HIDDEN.
    bias: Tensor,
}

/// The loaded independent embedder.
pub struct IndependentEmbedder {
    layers: Vec<LstmLayer>,
    /// `linear.weight` transposed: HIDDEN × EMBEDDING_DIM.
    linear_w: Tensor,
    linear_b: Tensor,
    spectrogram: MelSpectrogram,
}

/// resemblyzer's front end: librosa's defaults with a 25 ms window and 10 ms hop.
const MEL: MelSpec = MelSpec {
    sample_rate: SAMPLE_RATE,
    n_fft: N_FFT,
    win_length: N_FFT,
    window: WindowKind::Hann,
    hop: HOP,
    padding: Padding::Zero,
    n_mels: N_MELS,
};

fn engine(e: impl std::fmt::Display) -> VoiceError {
    VoiceError::Engine(format!("independent embedder (Resemblyzer): {e}"))
}

/// The pickled prefix of a legacy checkpoint: the magic number 0x1950a86a20f9469cfc6c, then
/// protocol version 1001.
const LEGACY_MAGIC: &[u8] = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19\x2e";
const LEGACY_PROTOCOL: &[u8] = b"\x80\x02\x4d\xe9\x03\x2e";

fn read_pickle(cursor: &mut std::io::Cursor<&[u8]>) -> candle_core::Result<Object> {
    let mut stack = Stack::empty();
    stack.read_loop(cursor)?;
    stack.finalize()
}

/// Every tensor of a legacy PyTorch checkpoint's `model_state`, by name.
pub fn read_legacy_checkpoint(path: &Path) -> Result<HashMap<String, Tensor>, VoiceError> {
    let bytes = std::fs::read(path).map_err(|e| engine(format!("{}: {e}", path.display())))?;
    let bad = |what: &str| engine(format!("{}: {what}", path.display()));
    let rest = bytes
        .strip_prefix(LEGACY_MAGIC)
        .and_then(|b| b.strip_prefix(LEGACY_PROTOCOL))
        .ok_or_else(|| bad("not a legacy PyTorch checkpoint"))?;
    let mut cursor = std::io::Cursor::new(rest);
    let _system_info = read_pickle(&mut cursor).map_err(engine)?;
    let state = read_pickle(&mut cursor).map_err(engine)?;
    let keys = read_pickle(&mut cursor).map_err(engine)?;
    // The storages follow, in the order of `keys`: each its element count (i64) and its data.
    let keys = match keys {
        Object::List(keys) => keys
            .into_iter()
            .map(|k| k.unicode().map_err(|_| bad("a storage key is not text")))
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(bad("no storage keys")),
    };
    let mut at = cursor.position() as usize;
    let mut storages: HashMap<String, &[u8]> = HashMap::new();
    for key in keys {
        let count = rest
            .get(at..at + 8)
            .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
            .ok_or_else(|| bad("truncated"))?;
        let len = usize::try_from(count).map_err(|_| bad("negative storage size"))? * 4;
        let data = rest
            .get(at + 8..at + 8 + len)
            .ok_or_else(|| bad("truncated"))?;
        storages.insert(key, data);
        at += 8 + len;
    }
    let Object::Dict(entries) = state else {
        return Err(bad("the checkpoint is not a dictionary"));
    };
    let model_state = entries
        .into_iter()
        .find(|(k, _)| *k == Object::Unicode("model_state".into()))
        .map(|(_, v)| v)
        .ok_or_else(|| bad("no model_state"))?;
    let Object::Dict(entries) = model_state else {
        return Err(bad("model_state is not a dictionary"));
    };
    let mut tensors = HashMap::new();
    for (name, value) in entries {
        let Some(info) = value
            .into_tensor_info(name, Path::new(""))
            .map_err(engine)?
        else {
            continue;
        };
        if info.dtype != DType::F32 || !info.layout.is_contiguous() {
            return Err(bad(&format!("{} is not contiguous float32", info.name)));
        }
        let key = info.path.trim_start_matches('/');
        let data = storages
            .get(key)
            .ok_or_else(|| bad(&format!("{} has no storage", info.name)))?;
        let start = info.layout.start_offset();
        let len = info.layout.shape().elem_count() * 4;
        let raw = data
            .get(start..start + len)
            .ok_or_else(|| bad(&format!("{} runs past its storage", info.name)))?;
        let values: Vec<f32> = raw
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        let tensor =
            Tensor::from_vec(values, info.layout.shape().clone(), &Device::Cpu).map_err(engine)?;
        tensors.insert(info.name, tensor);
    }
    Ok(tensors)
}

/// The partial utterances of `samples` samples, as frame ranges' starts
/// (`VoiceEncoder.compute_partial_slices` with `embed_utterance`'s rate and coverage).
fn partial_starts(samples: usize) -> Vec<usize> {
    let frames = (samples + 1).div_ceil(HOP);
    let step = ((SAMPLE_RATE as f64 / RATE) / HOP as f64).round() as usize;
    let steps = (frames + step + 1).saturating_sub(PARTIAL_FRAMES).max(1);
    let mut starts: Vec<usize> = (0..steps).step_by(step).collect();
    let last = *starts.last().expect("at least one partial");
    let coverage = (samples as f64 - (last * HOP) as f64) / (PARTIAL_FRAMES * HOP) as f64;
    if coverage < MIN_COVERAGE && starts.len() > 1 {
        starts.pop();
    }
    starts
}

/// `normalize_volume(wav, -30, increase_only=True)`: quiet audio raised to -30 dBFS.
fn normalize_volume(samples: &mut [f32]) {
    if samples.is_empty() {
        return;
    }
    let int16_max = 32767.0f64;
    let mean_square = samples
        .iter()
        .map(|&s| (s as f64 * int16_max).powi(2))
        .sum::<f64>()
        / samples.len() as f64;
    let rms = mean_square.sqrt();
    if rms <= 0.0 {
        return;
    }
    let change = TARGET_DBFS - 20.0 * (rms / int16_max).log10();
    if change > 0.0 {
        let gain = 10f64.powf(change / 20.0) as f32;
        samples.iter_mut().for_each(|s| *s *= gain);
    }
}

impl IndependentEmbedder {
    /// Loads `pretrained.pt` from the installed `resemblyzer` model.
    pub fn load(dir: &Path) -> Result<IndependentEmbedder, VoiceError> {
        let mut tensors = read_legacy_checkpoint(&dir.join(WEIGHTS_FILE))?;
        let mut take = |name: &str| {
            tensors
                .remove(name)
                .ok_or_else(|| engine(format!("{WEIGHTS_FILE} has no {name}")))
        };
        let mut layers = Vec::with_capacity(LAYERS);
        for l in 0..LAYERS {
            let w_ih = take(&format!("lstm.weight_ih_l{l}"))?;
            let w_hh = take(&format!("lstm.weight_hh_l{l}"))?;
            let b_ih = take(&format!("lstm.bias_ih_l{l}"))?;
            let b_hh = take(&format!("lstm.bias_hh_l{l}"))?;
            let input = if l == 0 { N_MELS } else { HIDDEN };
            if w_ih.dims() != [4 * HIDDEN, input] || w_hh.dims() != [4 * HIDDEN, HIDDEN] {
                return Err(engine(format!("layer {l} has the wrong shape")));
            }
            layers.push(LstmLayer {
                w_ih: w_ih.t().and_then(|t| t.contiguous()).map_err(engine)?,
                w_hh: w_hh.t().and_then(|t| t.contiguous()).map_err(engine)?,
                bias: (b_ih + b_hh).map_err(engine)?,
            });
        }
        let linear_w = take("linear.weight")?;
        if linear_w.dims() != [EMBEDDING_DIM, HIDDEN] {
            return Err(engine("the linear layer has the wrong shape"));
        }
        Ok(IndependentEmbedder {
            layers,
            linear_w: linear_w.t().and_then(|t| t.contiguous()).map_err(engine)?,
            linear_b: take("linear.bias")?,
            spectrogram: MelSpectrogram::new(MEL),
        })
    }

    /// The power mel frames of 16 kHz samples (librosa's centred, zero-padded STFT),
    /// frame-major (frames × N_MELS).
    pub fn mel(&self, samples: &[f32]) -> Vec<f32> {
        let frames = self.spectrogram.frame_count(samples.len());
        self.spectrogram.power_mel(samples, frames)
    }

    /// The embeddings of `count` partials (each PARTIAL_FRAMES × N_MELS, frame-major), each
    /// L2-normalised: `count` × EMBEDDING_DIM.
    pub fn forward(&self, partials: &[f32], count: usize) -> Result<Vec<f32>, VoiceError> {
        self.forward_inner(partials, count).map_err(engine)
    }

    fn forward_inner(&self, partials: &[f32], count: usize) -> candle_core::Result<Vec<f32>> {
        let cpu = &Device::Cpu;
        let frames = PARTIAL_FRAMES;
        // Time-major: frames × count × input.
        let mut input = Tensor::from_slice(partials, (count, frames, N_MELS), cpu)?
            .transpose(0, 1)?
            .contiguous()?;
        let mut last = vec![0f32; count * HIDDEN];
        for layer in &self.layers {
            let width = input.dim(2)?;
            // The input's contribution to every step's gates at once.
            let projected = input
                .reshape((frames * count, width))?
                .matmul(&layer.w_ih)?
                .broadcast_add(&layer.bias)?
                .flatten_all()?
                .to_vec1::<f32>()?;
            let mut h = vec![0f32; count * HIDDEN];
            let mut c = vec![0f32; count * HIDDEN];
            let mut outputs = Vec::with_capacity(frames * count * HIDDEN);
            for t in 0..frames {
                let recurrent = Tensor::from_slice(&h, (count, HIDDEN), cpu)?
                    .matmul(&layer.w_hh)?
                    .flatten_all()?
                    .to_vec1::<f32>()?;
                let step = &projected[t * count * 4 * HIDDEN..(t + 1) * count * 4 * HIDDEN];
                for b in 0..count {
                    let gates = |g: usize, j: usize| {
                        let k = b * 4 * HIDDEN + g * HIDDEN + j;
                        step[k] + recurrent[k]
                    };
                    for j in 0..HIDDEN {
                        let i = sigmoid(gates(0, j));
                        let f = sigmoid(gates(1, j));
                        let g = gates(2, j).tanh();
                        let o = sigmoid(gates(3, j));
                        let k = b * HIDDEN + j;
                        c[k] = f * c[k] + i * g;
                        h[k] = o * c[k].tanh();
                    }
                }
                outputs.extend_from_slice(&h);
            }
            last.copy_from_slice(&h);
            input = Tensor::from_vec(outputs, (frames, count, HIDDEN), cpu)?;
        }
        let embedded = Tensor::from_vec(last, (count, HIDDEN), cpu)?
            .matmul(&self.linear_w)?
            .broadcast_add(&self.linear_b)?
            .relu()?
            .flatten_all()?
            .to_vec1::<f32>()?;
        let mut out = Vec::with_capacity(embedded.len());
        for vector in embedded.chunks_exact(EMBEDDING_DIM) {
            let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
            // All-zero after the ReLU: PyTorch divides by zero (NaN); this partial adds nothing.
            let scale = if norm > 0.0 { 1.0 / norm } else { 0.0 };
            out.extend(vector.iter().map(|v| v * scale));
        }
        Ok(out)
    }

    /// The speaker embedding of `audio` (any rate; resampled to 16 kHz), as Resemblyzer's
    /// `embed_utterance` makes it from a volume-normalised clip.
    pub fn embed(&self, audio: &Audio) -> Result<Embedding, VoiceError> {
        if audio.duration_secs() < MIN_SECONDS {
            return Err(VoiceError::TooShort {
                seconds: audio.duration_secs(),
                needed: MIN_SECONDS,
            });
        }
        let mut samples = if audio.sample_rate == SAMPLE_RATE {
            audio.samples.clone()
        } else {
            audio.to_16k()?.samples
        };
        normalize_volume(&mut samples);
        headroom_base::cpu::compute(|| self.embed_16k(samples))
    }

    /// The embedding of 16 kHz samples already normalised in volume.
    fn embed_16k(&self, mut samples: Vec<f32>) -> Result<Embedding, VoiceError> {
        let starts = partial_starts(samples.len());
        let end = (starts.last().expect("at least one partial") + PARTIAL_FRAMES) * HOP;
        if end >= samples.len() {
            samples.resize(end, 0.0);
        }
        let mel = self.mel(&samples);
        let mut sum = vec![0f32; EMBEDDING_DIM];
        for group in starts.chunks(BATCH) {
            let mut batch = Vec::with_capacity(group.len() * PARTIAL_FRAMES * N_MELS);
            for &start in group {
                batch.extend_from_slice(&mel[start * N_MELS..(start + PARTIAL_FRAMES) * N_MELS]);
            }
            let vectors = self.forward(&batch, group.len())?;
            for vector in vectors.chunks_exact(EMBEDDING_DIM) {
                for (s, v) in sum.iter_mut().zip(vector) {
                    *s += v;
                }
            }
        }
        Embedding::new(sum).ok_or_else(|| engine("the embedder gave no vector"))
    }
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partials_follow_resemblyzer() {
        // compute_partial_slices(n, rate=1.3, min_coverage=0.75), worked by hand from the
        // Python: frame step round(16000 / 1.3 / 160) = 77.
        assert_eq!(partial_starts(8_000), vec![0]);
        assert_eq!(partial_starts(16_000 * 3), vec![0, 77, 154]);
        // 4 s: 401 frames; steps 319 → starts 0, 77, 154, 231; the last covers
        // (64000 - 36960) / 25600 ≥ 0.75.
        assert_eq!(partial_starts(64_000), vec![0, 77, 154, 231]);
        // Just under the coverage: dropped.
        assert_eq!(partial_starts(231 * 160 + 19_199), vec![0, 77, 154]);
    }

    #[test]
    fn quiet_audio_is_raised_to_minus_30_dbfs_and_loud_audio_is_left() {
        let mut quiet = vec![0.001f32; 100];
        normalize_volume(&mut quiet);
        let dbfs = 20.0 * (quiet[0] as f64).log10();
        assert!((dbfs - TARGET_DBFS).abs() < 0.01, "{dbfs}");
        let mut loud = vec![0.5f32; 100];
        normalize_volume(&mut loud);
        assert_eq!(loud[0], 0.5);
        let mut silent = vec![0f32; 100];
        normalize_volume(&mut silent);
        assert!(silent.iter().all(|s| *s == 0.0));
    }
}
