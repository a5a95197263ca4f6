//! Mel spectrograms, one implementation for every model's front end: the Slaney mel scale and
//! its triangular filterbank (librosa's default), and [`MelSpectrogram`], the short-time
//! power spectrum through those filters, parameterised by what each model was trained on
//! ([`MelSpec`]: FFT size, window and its length, hop, padding, bands). Whisper, the speaker
//! embedder and the independent judge each take its power mel frames and finish them their way.

use rustfft::num_complex::Complex32;
use rustfft::{Fft, FftPlanner};
use std::sync::Arc;

/// Hz to Slaney mels: linear below 1 kHz, logarithmic above.
pub fn hz_to_mel(hz: f64) -> f64 {
    let (f_sp, min_log_hz) = (200.0 / 3.0, 1000.0);
    let min_log_mel = min_log_hz / f_sp;
    let logstep = (6.4f64).ln() / 27.0;
    if hz >= min_log_hz {
        min_log_mel + (hz / min_log_hz).ln() / logstep
    } else {
        hz / f_sp
    }
}

/// Slaney mels to Hz.
pub fn mel_to_hz(mel: f64) -> f64 {
    let (f_sp, min_log_hz) = (200.0 / 3.0, 1000.0);
    let min_log_mel = min_log_hz / f_sp;
    let logstep = (6.4f64).ln() / 27.0;
    if mel >= min_log_mel {
        min_log_hz * (logstep * (mel - min_log_mel)).exp()
    } else {
        mel * f_sp
    }
}

/// Slaney-normalised triangular filters from 0 Hz to Nyquist, `n_mels` × (`n_fft`/2 + 1),
/// row-major.
pub fn slaney_filters(n_mels: usize, n_fft: usize, sample_rate: u32) -> Vec<f32> {
    let bins = n_fft / 2 + 1;
    let nyquist = sample_rate as f64 / 2.0;
    let (lo, hi) = (hz_to_mel(0.0), hz_to_mel(nyquist));
    let points: Vec<f64> = (0..n_mels + 2)
        .map(|i| mel_to_hz(lo + (hi - lo) * i as f64 / (n_mels + 1) as f64))
        .collect();
    let mut filters = vec![0f32; n_mels * bins];
    for m in 0..n_mels {
        let (left, centre, right) = (points[m], points[m + 1], points[m + 2]);
        let norm = 2.0 / (right - left);
        for b in 0..bins {
            let f = b as f64 * sample_rate as f64 / n_fft as f64;
            let rising = (f - left) / (centre - left);
            let falling = (right - f) / (right - centre);
            filters[m * bins + b] = (rising.min(falling).max(0.0) * norm) as f32;
        }
    }
    filters
}

/// The window each frame is weighted by (periodic, as librosa's and torch's are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    Hann,
    Hamming,
}

/// How frames reach past the ends of the signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// Frames start at 0 and stop where the last whole FFT fits: `1 + (len - n_fft) / hop`.
    None,
    /// Centred frames (`n_fft / 2` either side), the signal mirrored at its ends
    /// (torch.stft's `center=True`): `1 + len / hop` frames.
    Reflect,
    /// Centred frames, zeros past the ends (librosa's `pad_mode="constant"`).
    Zero,
}

/// A model's front end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MelSpec {
    pub sample_rate: u32,
    pub n_fft: usize,
    /// The window's length, centred in the FFT with zeros around it (`n_fft` for none).
    pub win_length: usize,
    pub window: WindowKind,
    pub hop: usize,
    pub padding: Padding,
    pub n_mels: usize,
}

/// The power mel spectrogram of a [`MelSpec`], its window, filters and FFT made once.
pub struct MelSpectrogram {
    spec: MelSpec,
    filters: Vec<f32>,
    window: Vec<f32>,
    fft: Arc<dyn Fft<f32>>,
}

impl MelSpectrogram {
    pub fn new(spec: MelSpec) -> MelSpectrogram {
        assert!(spec.win_length <= spec.n_fft && spec.hop > 0, "{spec:?}");
        let offset = (spec.n_fft - spec.win_length) / 2;
        let mut window = vec![0f32; spec.n_fft];
        for i in 0..spec.win_length {
            let phase = 2.0 * std::f64::consts::PI * i as f64 / spec.win_length as f64;
            window[offset + i] = match spec.window {
                WindowKind::Hann => 0.5 - 0.5 * phase.cos(),
                WindowKind::Hamming => 0.54 - 0.46 * phase.cos(),
            } as f32;
        }
        MelSpectrogram {
            filters: slaney_filters(spec.n_mels, spec.n_fft, spec.sample_rate),
            window,
            fft: FftPlanner::new().plan_fft_forward(spec.n_fft),
            spec,
        }
    }

    /// How many frames `len` samples make.
    pub fn frame_count(&self, len: usize) -> usize {
        let MelSpec { n_fft, hop, .. } = self.spec;
        match self.spec.padding {
            Padding::None if len >= n_fft => 1 + (len - n_fft) / hop,
            Padding::None => 0,
            Padding::Reflect | Padding::Zero => 1 + len / hop,
        }
    }

    /// The first `frames` power mel frames of `samples` (at most [`Self::frame_count`]),
    /// frame-major: `frames` × `n_mels`.
    pub fn power_mel(&self, samples: &[f32], frames: usize) -> Vec<f32> {
        let MelSpec {
            n_fft, hop, n_mels, ..
        } = self.spec;
        let frames = frames.min(self.frame_count(samples.len()));
        let bins = n_fft / 2 + 1;
        let pad = match self.spec.padding {
            Padding::None => 0,
            Padding::Reflect | Padding::Zero => n_fft / 2,
        };
        let sample_at = |i: isize| -> f32 {
            let n = samples.len() as isize;
            match self.spec.padding {
                _ if n == 0 => 0.0,
                Padding::Reflect => {
                    let mirrored = if i < 0 { -i } else { i };
                    let mirrored = if mirrored >= n {
                        2 * (n - 1) - mirrored
                    } else {
                        mirrored
                    };
                    samples[mirrored.clamp(0, n - 1) as usize]
                }
                Padding::None | Padding::Zero => usize::try_from(i)
                    .ok()
                    .and_then(|i| samples.get(i))
                    .copied()
                    .unwrap_or(0.0),
            }
        };
        let mut out = Vec::with_capacity(frames * n_mels);
        let mut buf = vec![Complex32::new(0.0, 0.0); n_fft];
        let mut scratch = vec![Complex32::new(0.0, 0.0); self.fft.get_inplace_scratch_len()];
        let mut power = vec![0f32; bins];
        for f in 0..frames {
            let start = (f * hop) as isize - pad as isize;
            for (k, (slot, w)) in buf.iter_mut().zip(&self.window).enumerate() {
                *slot = Complex32::new(sample_at(start + k as isize) * w, 0.0);
            }
            self.fft.process_with_scratch(&mut buf, &mut scratch);
            for (p, c) in power.iter_mut().zip(&buf) {
                *p = c.norm_sqr();
            }
            for m in 0..n_mels {
                let filter = &self.filters[m * bins..(m + 1) * bins];
                out.push(filter.iter().zip(&power).map(|(w, p)| w * p).sum());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slaney_scale_round_trips_and_bends_at_1khz() {
        for hz in [0.0, 440.0, 1000.0, 4000.0, 8000.0] {
            assert!((mel_to_hz(hz_to_mel(hz)) - hz).abs() < 1e-6);
        }
        assert!((hz_to_mel(1000.0) - 15.0).abs() < 1e-9);
    }

    #[test]
    fn filters_are_non_empty_triangles() {
        for (n_mels, n_fft) in [(80, 400), (40, 512)] {
            let f = slaney_filters(n_mels, n_fft, 16_000);
            let bins = n_fft / 2 + 1;
            assert_eq!(f.len(), n_mels * bins);
            for m in 0..n_mels {
                let row = &f[m * bins..(m + 1) * bins];
                assert!(row.iter().all(|&w| w >= 0.0));
                assert!(
                    row.iter().any(|&w| w > 0.0),
                    "filter {m} of {n_mels} is empty"
                );
            }
        }
        // Whisper's filterbank: the first filter peaks at bin 1 with weight ~0.0246.
        assert!((slaney_filters(80, 400, 16_000)[1] - 0.02486).abs() < 1e-3);
    }

    /// The reference: a direct DFT of each frame, as written in the front ends' papers.
    fn direct_power_mel(spec: MelSpec, samples: &[f32], frames: usize) -> Vec<f32> {
        let mel = MelSpectrogram::new(spec);
        let bins = spec.n_fft / 2 + 1;
        let pad = if spec.padding == Padding::None {
            0
        } else {
            spec.n_fft / 2
        };
        let mut out = Vec::new();
        for f in 0..frames {
            let frame: Vec<f64> = (0..spec.n_fft)
                .map(|k| {
                    let i = (f * spec.hop + k) as isize - pad as isize;
                    let n = samples.len() as isize;
                    let s = match spec.padding {
                        Padding::Reflect => {
                            let i = i.abs();
                            samples[(if i >= n { 2 * (n - 1) - i } else { i }) as usize]
                        }
                        _ => usize::try_from(i)
                            .ok()
                            .and_then(|i| samples.get(i))
                            .copied()
                            .unwrap_or(0.0),
                    };
                    s as f64 * mel.window[k] as f64
                })
                .collect();
            let power: Vec<f64> = (0..bins)
                .map(|b| {
                    let (mut re, mut im) = (0.0, 0.0);
                    for (k, x) in frame.iter().enumerate() {
                        let angle =
                            -2.0 * std::f64::consts::PI * (b * k) as f64 / spec.n_fft as f64;
                        re += x * angle.cos();
                        im += x * angle.sin();
                    }
                    re * re + im * im
                })
                .collect();
            for m in 0..spec.n_mels {
                let filter = &mel.filters[m * bins..(m + 1) * bins];
                out.push(
                    filter
                        .iter()
                        .zip(&power)
                        .map(|(w, p)| *w as f64 * p)
                        .sum::<f64>() as f32,
                );
            }
        }
        out
    }

    #[test]
    fn every_padding_and_window_matches_a_direct_transform() {
        let samples: Vec<f32> = (0..2_000)
            .map(|i| ((i as f32 * 0.07).sin() + (i as f32 * 0.31).cos() * 0.5) * 0.4)
            .collect();
        for (padding, window, n_fft, win_length) in [
            (Padding::Reflect, WindowKind::Hann, 400, 400),
            (Padding::Zero, WindowKind::Hann, 400, 400),
            (Padding::None, WindowKind::Hamming, 512, 400),
        ] {
            let spec = MelSpec {
                sample_rate: 16_000,
                n_fft,
                win_length,
                window,
                hop: 160,
                padding,
                n_mels: 40,
            };
            let mel = MelSpectrogram::new(spec);
            let frames = mel.frame_count(samples.len());
            let expected_frames = match padding {
                Padding::None => 1 + (2_000 - n_fft) / 160,
                _ => 1 + 2_000 / 160,
            };
            assert_eq!(frames, expected_frames, "{spec:?}");
            let fast = mel.power_mel(&samples, frames);
            let direct = direct_power_mel(spec, &samples, frames);
            assert_eq!(fast.len(), frames * 40);
            for (i, (a, b)) in fast.iter().zip(&direct).enumerate() {
                assert!(
                    (a - b).abs() <= 1e-3 * b.abs().max(1e-3),
                    "{spec:?} value {i}: {a} vs {b}"
                );
            }
        }
    }
}
