//! The Slaney mel scale and its triangular filterbank (librosa's default), shared by Whisper's
//! front end and the speaker embedder's.

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
}
