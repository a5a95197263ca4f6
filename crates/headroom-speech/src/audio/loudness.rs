//! A recording's loudness 10 ms at a time, and the pauses between its words: what the edit
//! cuts at and the recognizer times fillers by.

use super::{AudioError, SampleSink};
use std::ops::ControlFlow;

/// A loudness frame's length.
const FRAME_SECS: f64 = 0.01;
/// How far under the loud speech a recording is silent.
const SILENT_BELOW_DB: f32 = 40.0;
/// Shortest silence counted as a pause between words.
const MIN_PAUSE_SECS: f64 = 0.08;

/// The loudness of a recording, 10 ms at a time, gathered as it is decoded (a few kilobytes a
/// minute, never the audio): where its pauses are (the edit finds its quietest stretch
/// for room tone in them, and the recognizer times fillers between them).
#[derive(Debug, Default)]
pub struct Loudness {
    frame: usize,
    /// A frame's length in seconds, exactly (220 samples at 22.05 kHz are 9.98 ms).
    pub(crate) frame_secs: f64,
    energy: f64,
    filled: usize,
    /// Each 10 ms frame's level (RMS).
    pub(crate) levels: Vec<f32>,
}

impl SampleSink for Loudness {
    fn begin(&mut self, sample_rate: u32) {
        self.frame = ((f64::from(sample_rate) * FRAME_SECS) as usize).max(1);
        self.frame_secs = self.frame as f64 / f64::from(sample_rate.max(1));
    }

    fn take(&mut self, block: &[f32]) -> Result<ControlFlow<()>, AudioError> {
        for &s in block {
            self.energy += f64::from(s) * f64::from(s);
            self.filled += 1;
            if self.filled == self.frame {
                self.levels
                    .push((self.energy / self.frame as f64).sqrt() as f32);
                self.energy = 0.0;
                self.filled = 0;
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

impl Loudness {
    /// The pauses: stretches at least [`MIN_PAUSE_SECS`] long that are silent, in order.
    /// Silent is [`SILENT_BELOW_DB`] under the recording's loud speech (its 90th percentile
    /// 10 ms), where a speaker's soft word ends are still heard, or just above the recording's
    /// own floor of noise (its 10th percentile) where that is higher.
    pub fn pauses(&self) -> Vec<(f64, f64)> {
        let mut sorted = self.levels.clone();
        sorted.sort_by(f32::total_cmp);
        let (Some(&loud), Some(&noise)) = (
            sorted.get(sorted.len() * 9 / 10),
            sorted.get(sorted.len() / 10),
        ) else {
            return Vec::new();
        };
        if loud <= 0.0 {
            return Vec::new();
        }
        let floor = (loud * 10f32.powf(-SILENT_BELOW_DB / 20.0)).max(noise * 2.0);
        let secs = |f: usize| f as f64 * self.frame_secs;
        let mut pauses = Vec::new();
        let mut from = None;
        for (i, &level) in self.levels.iter().chain([&f32::INFINITY]).enumerate() {
            match (level < floor, from) {
                (true, None) => from = Some(i),
                (false, Some(f)) => {
                    if secs(i - f) >= MIN_PAUSE_SECS - 1e-9 {
                        pauses.push((secs(f), secs(i)));
                    }
                    from = None;
                }
                _ => {}
            }
        }
        pauses
    }
}
