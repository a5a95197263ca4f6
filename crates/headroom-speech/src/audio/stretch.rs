//! Time-stretching speech without changing its pitch (WSOLA: waveform-similarity overlap-add),
//! and finding where the sound in a take starts and ends — what fitting a synthesized take to a
//! segment's time slot needs.
//!
//! WSOLA cuts the input into overlapping Hann-windowed frames and lays them down at a steady
//! output hop; each frame's input position is the ideal one (output position × rate) moved by up
//! to a tolerance so that it continues the previous frame's waveform best (highest correlation),
//! which keeps the pitch periods intact where a plain overlap-add would smear them.

use super::Audio;

/// Frame length: long enough to hold two pitch periods of a low voice.
const FRAME_SECS: f64 = 0.030;
/// How far a frame may move from its ideal position to continue the waveform.
const TOLERANCE_SECS: f64 = 0.010;

/// `audio` played `rate` times as fast (`rate` > 1 shortens it) at the same pitch. The result
/// lasts `duration / rate`, to the sample.
pub fn time_stretch(audio: &Audio, rate: f64) -> Audio {
    let samples = &audio.samples;
    let rate = rate.clamp(0.25, 4.0);
    let out_len = (samples.len() as f64 / rate).round() as usize;
    let frame = ((audio.sample_rate as f64 * FRAME_SECS) as usize & !1).max(4);
    let hop = frame / 2;
    if (rate - 1.0).abs() < 1e-6 || samples.len() < 2 * frame {
        // Too short to stretch: keep the sound, fit the length with silence or a cut.
        let mut out = samples.clone();
        out.resize(out_len, 0.0);
        return Audio {
            samples: out,
            sample_rate: audio.sample_rate,
        };
    }
    let tolerance = (audio.sample_rate as f64 * TOLERANCE_SECS) as isize;
    // A periodic Hann window at half overlap sums to exactly one.
    let window: Vec<f32> = (0..frame)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f32::consts::PI * i as f32 / frame as f32).cos())
        .collect();
    let last_start = (samples.len() - frame) as isize;
    let mut out = vec![0.0f32; out_len + frame];
    let mut previous: isize = 0;
    let mut out_pos = 0usize;
    while out_pos < out_len {
        let ideal = ((out_pos as f64) * rate).round() as isize;
        let start = if out_pos == 0 {
            0
        } else {
            let natural = (previous + hop as isize).min(last_start);
            best_continuation(samples, natural, ideal, tolerance, frame, last_start)
        };
        let start = start.clamp(0, last_start) as usize;
        for (i, w) in window.iter().enumerate() {
            out[out_pos + i] += samples[start + i] * w;
        }
        previous = start as isize;
        out_pos += hop;
    }
    // The first half frame had no frame before it to overlap: undo its fade-in.
    for (i, w) in window.iter().take(hop).enumerate() {
        if *w > 1e-3 {
            out[i] /= w;
        } else {
            out[i] = samples[i];
        }
    }
    out.truncate(out_len);
    Audio {
        samples: out,
        sample_rate: audio.sample_rate,
    }
}

/// The start within `ideal ± tolerance` whose frame best matches the frame at `natural` (the
/// previous frame's continuation), by normalised cross-correlation over its first half.
fn best_continuation(
    samples: &[f32],
    natural: isize,
    ideal: isize,
    tolerance: isize,
    frame: usize,
    last_start: isize,
) -> isize {
    let span = frame / 2;
    let reference = &samples[natural.max(0) as usize..natural.max(0) as usize + span];
    let mut best = ideal.clamp(0, last_start);
    let mut best_score = f32::NEG_INFINITY;
    let low = (ideal - tolerance).max(0);
    let high = (ideal + tolerance).min(last_start);
    // Every other candidate first, then the neighbours of the best: a quarter of the work of a
    // full search, and the correlation is smooth at this resolution.
    let score = |c: isize| {
        let candidate = &samples[c as usize..c as usize + span];
        let (mut dot, mut energy) = (0.0f32, 1e-9f32);
        for (a, b) in reference.iter().zip(candidate) {
            dot += a * b;
            energy += b * b;
        }
        dot / energy.sqrt()
    };
    let mut c = low;
    while c <= high {
        let s = score(c);
        if s > best_score {
            (best, best_score) = (c, s);
        }
        c += 2;
    }
    for c in [best - 1, best + 1] {
        if (low..=high).contains(&c) && score(c) > best_score {
            (best, best_score) = (c, score(c));
        }
    }
    best
}

/// Where the sound in `audio` starts and ends (sample indices), ignoring anything quieter than
/// `floor_db` below its loudest 10 ms; `None` for silence.
pub fn sound_bounds(audio: &Audio, floor_db: f32) -> Option<(usize, usize)> {
    let step = (audio.sample_rate as usize / 100).max(1);
    let levels: Vec<f32> = audio
        .samples
        .chunks(step)
        .map(|c| (c.iter().map(|s| s * s).sum::<f32>() / c.len() as f32).sqrt())
        .collect();
    let loudest = levels.iter().cloned().fold(0.0f32, f32::max);
    if loudest < 1e-4 {
        return None;
    }
    let threshold = loudest * 10f32.powf(-floor_db.abs() / 20.0);
    let first = levels.iter().position(|&l| l >= threshold)?;
    let last = levels.iter().rposition(|&l| l >= threshold)?;
    Some((first * step, ((last + 1) * step).min(audio.samples.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(freq: f32, seconds: f64, rate: u32) -> Audio {
        let n = (seconds * rate as f64) as usize;
        Audio {
            samples: (0..n)
                .map(|i| 0.5 * (2.0 * std::f32::consts::PI * freq * i as f32 / rate as f32).sin())
                .collect(),
            sample_rate: rate,
        }
    }

    /// The strongest frequency in the middle of `audio`, by counting upward zero crossings.
    fn pitch(audio: &Audio) -> f32 {
        let n = audio.samples.len();
        let middle = &audio.samples[n / 4..3 * n / 4];
        let crossings = middle
            .windows(2)
            .filter(|w| w[0] < 0.0 && w[1] >= 0.0)
            .count();
        crossings as f32 / (middle.len() as f32 / audio.sample_rate as f32)
    }

    #[test]
    fn stretching_changes_the_length_and_keeps_the_pitch() {
        let input = tone(220.0, 2.0, 24_000);
        for rate in [0.8, 1.1, 1.25] {
            let out = time_stretch(&input, rate);
            let expected = (input.samples.len() as f64 / rate).round() as usize;
            assert_eq!(out.samples.len(), expected, "{rate}");
            let p = pitch(&out);
            assert!((p - 220.0).abs() < 4.0, "rate {rate}: pitch {p}");
            // No clicks or dropouts: the level stays near the tone's (0.5 / √2 RMS).
            let middle = &out.samples[2400..expected - 2400];
            for block in middle.chunks(480) {
                let rms = (block.iter().map(|s| s * s).sum::<f32>() / block.len() as f32).sqrt();
                assert!((rms - 0.3536).abs() < 0.05, "rate {rate}: rms {rms}");
            }
        }
    }

    #[test]
    fn a_plain_resample_would_change_the_pitch_and_stretching_does_not() {
        // The test's own check: playing 1.25× faster by dropping samples raises the pitch.
        let input = tone(200.0, 1.0, 16_000);
        let dropped = Audio {
            samples: (0..12_800)
                .map(|i| input.samples[(i as f64 * 1.25) as usize])
                .collect(),
            sample_rate: 16_000,
        };
        assert!((pitch(&dropped) - 250.0).abs() < 5.0);
        assert!((pitch(&time_stretch(&input, 1.25)) - 200.0).abs() < 5.0);
    }

    #[test]
    fn rate_one_and_short_clips_keep_their_samples() {
        let input = tone(300.0, 0.5, 22_050);
        assert_eq!(time_stretch(&input, 1.0), input);
        let short = tone(300.0, 0.02, 22_050);
        let out = time_stretch(&short, 2.0);
        assert_eq!(
            out.samples.len(),
            (short.samples.len() as f64 / 2.0).round() as usize
        );
        assert_eq!(out.samples[..], short.samples[..out.samples.len()]);
    }

    #[test]
    fn sound_bounds_skip_leading_and_trailing_silence() {
        let mut samples = vec![0.0f32; 4_800];
        samples.extend(tone(200.0, 0.5, 24_000).samples);
        samples.extend(vec![0.0001f32; 2_400]);
        let audio = Audio {
            samples,
            sample_rate: 24_000,
        };
        let (start, end) = sound_bounds(&audio, 40.0).unwrap();
        assert_eq!(start, 4_800);
        assert_eq!(end, 4_800 + 12_000);
        let silent = Audio {
            samples: vec![0.0; 1000],
            sample_rate: 24_000,
        };
        assert_eq!(sound_bounds(&silent, 40.0), None);
    }
}
