//! Whisper's log-mel front end: 25 ms Hann windows every 10 ms at 16 kHz (n_fft 400, hop
//! 160), power spectrum by FFT, Slaney-scale mel filters up to 8 kHz (the shared
//! [`MelSpectrogram`]), then log10, clamp to 8 below the peak, rescale. Frames are centred
//! (reflect padding), and the last frame is dropped, as the reference implementation does.

use crate::audio::mel::{slaney_filters, MelSpec, MelSpectrogram, Padding, WindowKind};

pub const SAMPLE_RATE: usize = 16_000;
pub const N_FFT: usize = 400;
pub const HOP: usize = 160;
/// Frames in one 30-second window.
pub const WINDOW_FRAMES: usize = 3000;
pub const WINDOW_SAMPLES: usize = WINDOW_FRAMES * HOP;

/// Computes log-mel spectrograms.
pub struct MelFrontend {
    n_mels: usize,
    spectrogram: MelSpectrogram,
}

/// Whisper's filterbank: Slaney mels up to 8 kHz over its 400-point FFT.
pub fn mel_filters(n_mels: usize) -> Vec<f32> {
    slaney_filters(n_mels, N_FFT, SAMPLE_RATE as u32)
}

impl MelFrontend {
    pub fn new(n_mels: usize) -> Self {
        MelFrontend {
            n_mels,
            spectrogram: MelSpectrogram::new(MelSpec {
                sample_rate: SAMPLE_RATE as u32,
                n_fft: N_FFT,
                win_length: N_FFT,
                window: WindowKind::Hann,
                hop: HOP,
                padding: Padding::Reflect,
                n_mels,
            }),
        }
    }

    pub fn n_mels(&self) -> usize {
        self.n_mels
    }

    /// Log-mel features of `samples` (16 kHz mono): n_mels × frames, row-major, with
    /// frames = samples.len() / HOP (the last centred frame dropped, as the reference does).
    pub fn log_mel(&self, samples: &[f32]) -> (Vec<f32>, usize) {
        let frames = samples.len() / HOP;
        let power = self.spectrogram.power_mel(samples, frames);
        let mut mel = vec![0f32; self.n_mels * frames];
        for (f, bands) in power.chunks_exact(self.n_mels).enumerate() {
            for (m, energy) in bands.iter().enumerate() {
                mel[m * frames + f] = energy.max(1e-10).log10();
            }
        }
        let peak = mel.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        for v in mel.iter_mut() {
            *v = (v.max(peak - 8.0) + 4.0) / 4.0;
        }
        (mel, frames)
    }
}

/// Copies frames [start, start + WINDOW_FRAMES) of an n_mels × total mel into a window,
/// padding past the end with `fill`.
pub fn window(
    mel: &[f32],
    n_mels: usize,
    total: usize,
    start: usize,
    width: usize,
    fill: f32,
) -> Vec<f32> {
    let mut out = vec![fill; n_mels * width];
    let take = total.saturating_sub(start).min(width);
    for m in 0..n_mels {
        out[m * width..m * width + take]
            .copy_from_slice(&mel[m * total + start..m * total + start + take]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::mel::{hz_to_mel, mel_to_hz};

    #[test]
    fn a_tone_lights_up_the_matching_mel_band() {
        let tone: Vec<f32> = (0..SAMPLE_RATE)
            .map(|i| {
                (2.0 * std::f32::consts::PI * 1000.0 * i as f32 / SAMPLE_RATE as f32).sin() * 0.5
            })
            .collect();
        let frontend = MelFrontend::new(80);
        let (mel, frames) = frontend.log_mel(&tone);
        assert_eq!(frames, 100);
        let mid = frames / 2;
        let loudest = (0..80)
            .max_by(|&a, &b| mel[a * frames + mid].total_cmp(&mel[b * frames + mid]))
            .unwrap();
        let centre_hz = |m: usize| mel_to_hz(hz_to_mel(8000.0) * (m + 1) as f64 / 81.0);
        assert!(
            (centre_hz(loudest) - 1000.0).abs() < 60.0,
            "band {loudest} at {} Hz",
            centre_hz(loudest)
        );
        // Values are rescaled into Whisper's range.
        assert!(mel.iter().all(|v| (-1.5..=2.5).contains(v)));
    }

    #[test]
    fn windows_pad_past_the_end() {
        let mel: Vec<f32> = (0..2 * 5).map(|v| v as f32).collect();
        let w = window(&mel, 2, 5, 3, WINDOW_FRAMES, -1.0);
        assert_eq!(&w[..3], &[3.0, 4.0, -1.0]);
        assert_eq!(&w[WINDOW_FRAMES..WINDOW_FRAMES + 2], &[8.0, 9.0]);
        let narrow = window(&mel, 2, 5, 1, 3, -1.0);
        assert_eq!(narrow, [1.0, 2.0, 3.0, 6.0, 7.0, 8.0]);
    }
}
