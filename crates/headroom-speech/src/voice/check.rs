//! Checks of a reference clip before it joins a voice profile: length, level, clipping,
//! silence and noise, each with advice a person can act on.

use crate::audio::Audio;
use serde::{Deserialize, Serialize};

/// The shortest reference clip a profile takes.
pub const MIN_CLIP_SECS: f64 = 5.0;
/// The longest: cloning servers and the embedder gain nothing past it.
pub const MAX_CLIP_SECS: f64 = 30.0;

/// Frames of 20 ms for level statistics.
const FRAME_SECS: f64 = 0.02;
/// A frame this far below the loudest speech counts as silence.
const SILENCE_BELOW_PEAK_DB: f32 = 35.0;

/// How much a finding matters: a refused clip is not added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Refused,
    Warning,
}

/// One finding, with what to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Finding {
    pub severity: Severity,
    /// A stable name: `too_short`, `too_long`, `silent`, `too_quiet`, `clipped`,
    /// `mostly_silence`, `noisy`.
    pub check: String,
    pub advice: String,
}

/// What the checks measured and found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ClipReport {
    pub seconds: f64,
    /// Level of the speech (the loud frames' RMS), dB full scale.
    pub speech_dbfs: f32,
    /// The quiet frames' level, an estimate of the noise floor, dB full scale.
    pub noise_dbfs: f32,
    /// Speech over noise, dB.
    pub snr_db: f32,
    /// Share of samples at full scale.
    pub clipped_fraction: f32,
    /// Share of frames that are silence.
    pub silence_fraction: f32,
    pub findings: Vec<Finding>,
}

impl ClipReport {
    /// Whether the clip may join a profile (warnings allowed).
    pub fn accepted(&self) -> bool {
        !self
            .findings
            .iter()
            .any(|f| f.severity == Severity::Refused)
    }
}

fn db(power: f64) -> f32 {
    (10.0 * power.max(1e-12).log10()) as f32
}

/// Checks a reference clip.
pub fn check_clip(audio: &Audio) -> ClipReport {
    let seconds = audio.duration_secs();
    let frame = ((audio.sample_rate as f64 * FRAME_SECS) as usize).max(1);
    let mut levels: Vec<f32> = audio
        .samples
        .chunks(frame)
        .filter(|c| c.len() == frame)
        .map(|c| db(c.iter().map(|&s| (s as f64) * (s as f64)).sum::<f64>() / frame as f64))
        .collect();
    levels.sort_by(f32::total_cmp);
    let quantile = |q: f64| -> f32 {
        if levels.is_empty() {
            -120.0
        } else {
            levels[((levels.len() - 1) as f64 * q).round() as usize]
        }
    };
    let speech_dbfs = quantile(0.9);
    let noise_dbfs = quantile(0.1);
    let silence_fraction = if levels.is_empty() {
        1.0
    } else {
        levels
            .iter()
            .filter(|&&l| l < speech_dbfs - SILENCE_BELOW_PEAK_DB || l < -60.0)
            .count() as f32
            / levels.len() as f32
    };
    let clipped = audio.samples.iter().filter(|s| s.abs() >= 0.999).count();
    let clipped_fraction = clipped as f32 / audio.samples.len().max(1) as f32;
    let mut findings = Vec::new();
    let mut find = |severity, check: &str, advice: String| {
        findings.push(Finding {
            severity,
            check: check.into(),
            advice,
        })
    };
    if seconds < MIN_CLIP_SECS {
        find(
            Severity::Refused,
            "too_short",
            format!("the clip is {seconds:.1} s; record at least {MIN_CLIP_SECS:.0} s of speech"),
        );
    }
    if seconds > MAX_CLIP_SECS {
        find(
            Severity::Refused,
            "too_long",
            format!("the clip is {seconds:.1} s; trim it to {MAX_CLIP_SECS:.0} s or less (several shorter clips are better than one long one)"),
        );
    }
    if speech_dbfs < -60.0 {
        find(
            Severity::Refused,
            "silent",
            "the clip is silent: check the microphone and its input level".into(),
        );
    } else {
        if speech_dbfs < -35.0 {
            find(
                Severity::Warning,
                "too_quiet",
                format!("speech is quiet ({speech_dbfs:.0} dBFS): move closer to the microphone or raise its gain"),
            );
        }
        if clipped_fraction > 0.001 {
            find(
                Severity::Warning,
                "clipped",
                format!(
                    "{:.1}% of the samples are clipped: lower the input gain and record again",
                    clipped_fraction * 100.0
                ),
            );
        }
        if silence_fraction > 0.5 {
            find(
                Severity::Warning,
                "mostly_silence",
                format!(
                    "{:.0}% of the clip is silence: trim the pauses so the speech fills it",
                    silence_fraction * 100.0
                ),
            );
        }
        if speech_dbfs - noise_dbfs < 15.0 {
            find(
                Severity::Warning,
                "noisy",
                format!(
                    "the background is loud ({:.0} dB below the speech): record in a quieter room",
                    speech_dbfs - noise_dbfs
                ),
            );
        }
    }
    ClipReport {
        seconds,
        speech_dbfs,
        noise_dbfs,
        snr_db: speech_dbfs - noise_dbfs,
        clipped_fraction,
        silence_fraction,
        findings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A "speech-like" signal: a tone switching on and off (syllables), over noise.
    fn clip(seconds: f64, gain: f32, noise: f32, on_fraction: f64) -> Audio {
        let rate = 16_000;
        let mut seed = 12345u32;
        let samples = (0..(seconds * rate as f64) as usize)
            .map(|i| {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                let n = (seed >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
                let t = i as f64 / rate as f64;
                let on = (t * 4.0).fract() < on_fraction;
                let tone = if on {
                    (t * 2.0 * std::f64::consts::PI * 220.0).sin() as f32
                } else {
                    0.0
                };
                (tone * gain + n * noise).clamp(-1.0, 1.0)
            })
            .collect();
        Audio {
            samples,
            sample_rate: rate,
        }
    }

    fn checks(report: &ClipReport) -> Vec<&str> {
        report.findings.iter().map(|f| f.check.as_str()).collect()
    }

    #[test]
    fn a_clean_clip_passes() {
        let r = check_clip(&clip(8.0, 0.3, 0.0005, 0.8));
        assert!(r.accepted(), "{r:?}");
        assert!(r.findings.is_empty(), "{r:?}");
        assert!(r.snr_db > 30.0, "{r:?}");
    }

    #[test]
    fn length_bounds_refuse_with_advice() {
        let short = check_clip(&clip(2.0, 0.3, 0.0005, 0.8));
        assert!(!short.accepted());
        assert_eq!(checks(&short), ["too_short"]);
        assert!(short.findings[0].advice.contains("at least 5 s"));
        assert_eq!(
            checks(&check_clip(&clip(31.0, 0.3, 0.0005, 0.8))),
            ["too_long"]
        );
    }

    #[test]
    fn silence_is_refused_and_problems_are_named() {
        let silent = check_clip(&clip(6.0, 0.0, 0.0, 0.8));
        assert_eq!(checks(&silent), ["silent"]);
        assert!(!silent.accepted());
        assert!(checks(&check_clip(&clip(6.0, 0.01, 0.0, 0.8))).contains(&"too_quiet"));
        let clipped = check_clip(&clip(6.0, 1.5, 0.0, 0.8));
        assert!(checks(&clipped).contains(&"clipped"), "{clipped:?}");
        assert!(clipped.accepted(), "clipping is a warning");
        assert!(checks(&check_clip(&clip(6.0, 0.3, 0.0005, 0.2))).contains(&"mostly_silence"));
        let noisy = check_clip(&clip(6.0, 0.3, 0.4, 0.8));
        assert!(checks(&noisy).contains(&"noisy"), "{noisy:?}");
    }
}
