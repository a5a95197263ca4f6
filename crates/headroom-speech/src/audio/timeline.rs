//! Narration on the original's timeline: each take trimmed to its sound and fitted to its
//! segment's slot by time-stretching within bounds (what does not fit is measured, never hidden),
//! the takes laid out at their segments' starts, and the result optionally mixed over the
//! original with the original ducked under the narration.

use super::stretch::{sound_bounds, time_stretch};
use super::{resample, Audio, AudioError};
use serde::{Deserialize, Serialize};

/// How far a take may be sped up or slowed down to fit its slot.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct FitBounds {
    /// The slowest rate (below 1: a short take is slowed to fill its slot, to here at most).
    pub min_rate: f64,
    /// The fastest rate (above 1: a long take is sped up, to here at most).
    pub max_rate: f64,
}

impl Default for FitBounds {
    fn default() -> Self {
        FitBounds {
            min_rate: 0.8,
            max_rate: 1.25,
        }
    }
}

/// Changes of rate smaller than this are not worth the processing.
const RATE_EPSILON: f64 = 0.02;
/// Quieter than this below a take's loudest part is silence to trim.
const TRIM_FLOOR_DB: f32 = 45.0;
/// Over its slot by less than this is not an overflow worth flagging.
pub const OVERFLOW_EPSILON_SECS: f64 = 0.05;
/// The fade where a take is cut at the next segment's start.
const CUT_FADE_SECS: f64 = 0.015;

/// A take fitted to its slot.
#[derive(Debug, Clone, PartialEq)]
pub struct FittedTake {
    pub audio: Audio,
    /// The take's sound before fitting (silence trimmed).
    pub natural_secs: f64,
    /// The rate it was played at (1.25: a quarter faster).
    pub rate: f64,
    /// How long it lasts after fitting, before any cut.
    pub fitted_secs: f64,
    /// How far it runs past its own slot, after fitting.
    pub overflow_secs: f64,
    /// How much was cut where the next segment starts (0 when it fitted in the room there was).
    pub cut_secs: f64,
}

/// Trims `take` to its sound and fits it to `slot_secs` (its segment's length) within `bounds`.
/// A take still too long runs on into the silence after its slot, up to `room_secs` (to the
/// next segment's start); anything past that is cut with a short fade, and both are reported.
pub fn fit_to_slot(take: &Audio, slot_secs: f64, room_secs: f64, bounds: FitBounds) -> FittedTake {
    let sound = match sound_bounds(take, TRIM_FLOOR_DB) {
        Some((start, end)) => Audio {
            samples: take.samples[start..end].to_vec(),
            sample_rate: take.sample_rate,
        },
        None => Audio {
            samples: Vec::new(),
            sample_rate: take.sample_rate,
        },
    };
    let natural_secs = sound.duration_secs();
    let slot_secs = slot_secs.max(0.05);
    let wanted = natural_secs / slot_secs;
    let mut rate = wanted.clamp(bounds.min_rate.min(1.0), bounds.max_rate.max(1.0));
    if (rate - 1.0).abs() < RATE_EPSILON || natural_secs == 0.0 {
        rate = 1.0;
    }
    let mut audio = time_stretch(&sound, rate);
    let fitted_secs = audio.duration_secs();
    let overflow_secs = (fitted_secs - slot_secs).max(0.0);
    let room = (room_secs.max(slot_secs) * audio.sample_rate as f64).round() as usize;
    let mut cut_secs = 0.0;
    if audio.samples.len() > room {
        cut_secs = (audio.samples.len() - room) as f64 / audio.sample_rate as f64;
        audio.samples.truncate(room);
        let fade = ((CUT_FADE_SECS * audio.sample_rate as f64) as usize).min(room);
        for (i, s) in audio.samples[room - fade..].iter_mut().enumerate() {
            *s *= 1.0 - (i + 1) as f32 / fade as f32;
        }
    }
    FittedTake {
        audio,
        natural_secs,
        rate,
        fitted_secs,
        overflow_secs,
        cut_secs,
    }
}

/// The takes laid out at their start times (seconds) in one track at `sample_rate`, lasting at
/// least `duration_secs`.
pub fn lay_out(
    takes: &[(f64, &Audio)],
    duration_secs: f64,
    sample_rate: u32,
) -> Result<Audio, AudioError> {
    let mut track = vec![0.0f32; (duration_secs.max(0.0) * sample_rate as f64).round() as usize];
    for (start, take) in takes {
        let samples = if take.sample_rate == sample_rate {
            take.samples.clone()
        } else {
            resample(&take.samples, take.sample_rate, sample_rate)?
        };
        let at = (start.max(0.0) * sample_rate as f64).round() as usize;
        if track.len() < at + samples.len() {
            track.resize(at + samples.len(), 0.0);
        }
        for (out, s) in track[at..].iter_mut().zip(&samples) {
            *out += s;
        }
    }
    Ok(Audio {
        samples: track,
        sample_rate,
    })
}

/// How the original sits under the narration in a mix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ducking {
    /// The original's gain while the narration speaks (0.2: about −14 dB).
    pub gain: f32,
    pub attack_secs: f64,
    pub release_secs: f64,
}

impl Default for Ducking {
    fn default() -> Self {
        Ducking {
            gain: 0.2,
            attack_secs: 0.03,
            release_secs: 0.3,
        }
    }
}

/// The narration over `original` (resampled to the narration's rate), the original ducked
/// where the narration sounds; the sum is scaled down only if it would clip.
pub fn duck_under(
    narration: &Audio,
    original: &Audio,
    ducking: Ducking,
) -> Result<Audio, AudioError> {
    let rate = narration.sample_rate;
    let under = if original.sample_rate == rate {
        original.samples.clone()
    } else {
        resample(&original.samples, original.sample_rate, rate)?
    };
    let len = narration.samples.len().max(under.len());
    // Where the narration sounds, by 10 ms blocks, as a target gain for the original.
    let block = (rate as usize / 100).max(1);
    let attack = 1.0 - (-1.0 / (ducking.attack_secs * rate as f64).max(1.0)).exp() as f32;
    let release = 1.0 - (-1.0 / (ducking.release_secs * rate as f64).max(1.0)).exp() as f32;
    let mut gain = 1.0f32;
    let mut out = Vec::with_capacity(len);
    for start in (0..len).step_by(block) {
        let end = (start + block).min(len);
        let speaking = narration
            .samples
            .get(start..end.min(narration.samples.len()))
            .map(|b| b.iter().map(|s| s * s).sum::<f32>() / b.len().max(1) as f32 > 1e-6)
            .unwrap_or(false);
        let target = if speaking { ducking.gain } else { 1.0 };
        for i in start..end {
            let step = if target < gain { attack } else { release };
            gain += (target - gain) * step;
            let n = narration.samples.get(i).copied().unwrap_or(0.0);
            let o = under.get(i).copied().unwrap_or(0.0);
            out.push(n + o * gain);
        }
    }
    let peak = out.iter().fold(0.0f32, |m, s| m.max(s.abs()));
    if peak > 0.99 {
        let scale = 0.99 / peak;
        out.iter_mut().for_each(|s| *s *= scale);
    }
    Ok(Audio {
        samples: out,
        sample_rate: rate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone_with_silence(lead: f64, sound: f64, tail: f64, rate: u32) -> Audio {
        let n = |s: f64| (s * rate as f64) as usize;
        let mut samples = vec![0.0; n(lead)];
        samples
            .extend((0..n(sound)).map(|i| {
                0.4 * (2.0 * std::f32::consts::PI * 180.0 * i as f32 / rate as f32).sin()
            }));
        samples.extend(vec![0.0; n(tail)]);
        Audio {
            samples,
            sample_rate: rate,
        }
    }

    #[test]
    fn a_take_is_trimmed_and_sped_up_within_bounds() {
        let take = tone_with_silence(0.3, 2.2, 0.4, 24_000);
        let fitted = fit_to_slot(&take, 2.0, 3.0, FitBounds::default());
        assert!(
            (fitted.natural_secs - 2.2).abs() < 0.02,
            "{}",
            fitted.natural_secs
        );
        assert!((fitted.rate - 1.1).abs() < 0.02, "{}", fitted.rate);
        assert!((fitted.fitted_secs - 2.0).abs() < 0.02);
        assert!(fitted.overflow_secs < OVERFLOW_EPSILON_SECS);
        assert_eq!(fitted.cut_secs, 0.0);
        // The sound starts at once: the leading silence is gone.
        assert!(fitted.audio.samples[..240].iter().any(|s| s.abs() > 0.1));
    }

    #[test]
    fn too_long_a_take_overflows_into_the_gap_then_is_cut() {
        let take = tone_with_silence(0.0, 3.0, 0.0, 16_000);
        let roomy = fit_to_slot(&take, 2.0, 4.0, FitBounds::default());
        assert_eq!(roomy.rate, 1.25);
        assert!(
            (roomy.overflow_secs - 0.4).abs() < 0.02,
            "{}",
            roomy.overflow_secs
        );
        assert_eq!(roomy.cut_secs, 0.0);
        let tight = fit_to_slot(&take, 2.0, 2.1, FitBounds::default());
        assert!((tight.cut_secs - 0.3).abs() < 0.02, "{}", tight.cut_secs);
        assert_eq!(tight.audio.samples.len(), (2.1 * 16_000.0) as usize);
        assert!(
            tight.audio.samples.last().unwrap().abs() < 0.01,
            "faded out"
        );
    }

    #[test]
    fn a_short_take_is_slowed_at_most_to_the_bound_and_a_near_fit_is_left_alone() {
        let take = tone_with_silence(0.0, 1.0, 0.0, 16_000);
        let slowed = fit_to_slot(&take, 2.0, 2.0, FitBounds::default());
        assert_eq!(slowed.rate, 0.8);
        assert!((slowed.fitted_secs - 1.25).abs() < 0.01);
        let near = fit_to_slot(&take, 1.01, 2.0, FitBounds::default());
        assert_eq!(near.rate, 1.0);
        let silent = fit_to_slot(
            &Audio {
                samples: vec![0.0; 1600],
                sample_rate: 16_000,
            },
            1.0,
            1.0,
            FitBounds::default(),
        );
        assert_eq!((silent.natural_secs, silent.rate), (0.0, 1.0));
    }

    #[test]
    fn takes_are_laid_out_at_their_starts_at_one_rate() {
        let a = tone_with_silence(0.0, 0.5, 0.0, 22_050);
        let b = tone_with_silence(0.0, 0.5, 0.0, 24_000);
        let track = lay_out(&[(1.0, &a), (3.0, &b)], 4.0, 24_000).unwrap();
        assert_eq!(track.samples.len(), 96_000);
        let first_sound = track.samples.iter().position(|s| s.abs() > 0.05).unwrap();
        assert!((first_sound as i64 - 24_000).abs() < 24, "{first_sound}");
        let after_gap = track.samples[48_000..]
            .iter()
            .position(|s| s.abs() > 0.05)
            .unwrap()
            + 48_000;
        assert!((after_gap as i64 - 72_000).abs() < 24, "{after_gap}");
        let longer = lay_out(&[(3.8, &b)], 4.0, 24_000).unwrap();
        assert_eq!(
            longer.samples.len(),
            (4.3 * 24_000.0) as usize,
            "grows to hold it"
        );
    }

    #[test]
    fn the_original_is_ducked_only_under_the_narration() {
        let rate = 16_000;
        let original = Audio {
            samples: vec![0.5; rate as usize * 3],
            sample_rate: rate,
        };
        let mut narration = vec![0.0f32; rate as usize * 3];
        for s in &mut narration[rate as usize..2 * rate as usize] {
            *s = 0.1;
        }
        let narration = Audio {
            samples: narration,
            sample_rate: rate,
        };
        let mix = duck_under(&narration, &original, Ducking::default()).unwrap();
        assert!(
            (mix.samples[rate as usize / 2] - 0.5).abs() < 1e-3,
            "full before"
        );
        let under = mix.samples[rate as usize * 3 / 2];
        assert!((under - (0.1 + 0.5 * 0.2)).abs() < 0.01, "ducked: {under}");
        let after = mix.samples[rate as usize * 3 - 10];
        assert!(after > 0.45, "released after: {after}");
    }
}
