//! Sample-rate conversion with a band-limited (FFT) resampler, so downsampling to 16 kHz does
//! not alias. [`StreamResampler`] takes the input in pieces (as a decoder produces it), so a
//! long file is never held at its original rate.

use super::AudioError;
use rubato::{FftFixedIn, Resampler};

/// Input frames per resampler call.
const CHUNK: usize = 1024;

/// Resamples mono `samples` from `from` Hz to `to` Hz.
pub fn resample(samples: &[f32], from: u32, to: u32) -> Result<Vec<f32>, AudioError> {
    if from == to || samples.is_empty() {
        return Ok(samples.to_vec());
    }
    let mut resampler = StreamResampler::new(from, to)?;
    let expected = (samples.len() as u64 * u64::from(to) / u64::from(from)) as usize;
    let mut out = Vec::with_capacity(expected + CHUNK);
    resampler.push(samples, &mut out)?;
    resampler.finish(&mut out)?;
    Ok(out)
}

/// A resampler fed piece by piece: output is appended as it becomes available, aligned with the
/// input (the filter's delay removed) and exactly `input * to / from` long once finished.
pub struct StreamResampler {
    inner: FftFixedIn<f32>,
    from: u32,
    to: u32,
    /// Input not yet a whole chunk.
    pending: Vec<f32>,
    /// Output still to drop: the filter's delay.
    to_skip: usize,
    input_frames: u64,
    /// Output handed on so far (the caller may keep none of it: a decode streams it on).
    emitted: u64,
}

impl StreamResampler {
    pub fn new(from: u32, to: u32) -> Result<StreamResampler, AudioError> {
        let inner = FftFixedIn::<f32>::new(from as usize, to as usize, CHUNK, 2, 1)
            .map_err(|e| error(from, to, &e))?;
        Ok(StreamResampler {
            to_skip: inner.output_delay(),
            inner,
            from,
            to,
            pending: Vec::with_capacity(CHUNK),
            input_frames: 0,
            emitted: 0,
        })
    }

    /// Adds input, appending whatever output it completes to `out`.
    pub fn push(&mut self, mut input: &[f32], out: &mut Vec<f32>) -> Result<(), AudioError> {
        self.input_frames += input.len() as u64;
        while !input.is_empty() {
            let take = (CHUNK - self.pending.len()).min(input.len());
            self.pending.extend_from_slice(&input[..take]);
            input = &input[take..];
            if self.pending.len() == CHUNK {
                let frames = self
                    .inner
                    .process(&[&self.pending], None)
                    .map_err(|e| error(self.from, self.to, &e))?;
                self.emit(&frames[0], out, u64::MAX);
                self.pending.clear();
            }
        }
        Ok(())
    }

    /// Flushes what the filter still holds, appending output up to its exact length.
    pub fn finish(mut self, out: &mut Vec<f32>) -> Result<(), AudioError> {
        let expected = self.input_frames * u64::from(self.to) / u64::from(self.from);
        if !self.pending.is_empty() {
            let frames = self
                .inner
                .process_partial(Some(&[&self.pending]), None)
                .map_err(|e| error(self.from, self.to, &e))?;
            self.emit(&frames[0], out, expected);
        }
        let tail = self
            .inner
            .process_partial::<&[f32]>(None, None)
            .map_err(|e| error(self.from, self.to, &e))?;
        self.emit(&tail[0], out, expected);
        Ok(())
    }

    /// Appends `frames` past the filter's delay, up to `most` output in all.
    fn emit(&mut self, frames: &[f32], out: &mut Vec<f32>, most: u64) {
        let skip = self.to_skip.min(frames.len());
        self.to_skip -= skip;
        let room = most
            .saturating_sub(self.emitted)
            .min((frames.len() - skip) as u64) as usize;
        out.extend_from_slice(&frames[skip..skip + room]);
        self.emitted += room as u64;
    }
}

fn error(from: u32, to: u32, e: &dyn std::fmt::Display) -> AudioError {
    AudioError::Resample {
        from,
        to,
        detail: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(hz: f32, rate: u32, secs: f32) -> Vec<f32> {
        (0..(rate as f32 * secs) as usize)
            .map(|i| (2.0 * std::f32::consts::PI * hz * i as f32 / rate as f32).sin())
            .collect()
    }

    #[test]
    fn keeps_length_and_pitch() {
        let input = tone(440.0, 44_100, 1.0);
        let out = resample(&input, 44_100, 16_000).unwrap();
        assert_eq!(out.len(), 16_000);
        // Count rising zero crossings: 440 per second either way.
        let crossings = out.windows(2).filter(|w| w[0] < 0.0 && w[1] >= 0.0).count();
        assert!((438..=442).contains(&crossings), "{crossings}");
    }

    #[test]
    fn removes_what_the_new_rate_cannot_hold() {
        // 10 kHz is above 16 kHz's Nyquist limit: it must not fold back as a loud 6 kHz tone.
        let out = resample(&tone(10_000.0, 48_000, 0.5), 48_000, 16_000).unwrap();
        let rms = (out[2000..6000].iter().map(|s| s * s).sum::<f32>() / 4000.0).sqrt();
        assert!(rms < 0.05, "aliasing left rms {rms}");
    }

    #[test]
    fn pieces_of_any_size_give_the_same_output_as_one_call() {
        let input = tone(300.0, 48_000, 0.7);
        let whole = resample(&input, 48_000, 16_000).unwrap();
        let mut resampler = StreamResampler::new(48_000, 16_000).unwrap();
        let mut pieces = vec![9.0f32; 3]; // output appended after what the caller has
        for piece in input.chunks(777) {
            resampler.push(piece, &mut pieces).unwrap();
        }
        resampler.finish(&mut pieces).unwrap();
        assert_eq!(&pieces[..3], &[9.0; 3]);
        assert_eq!(&pieces[3..], &whole[..]);
    }

    #[test]
    fn same_rate_is_a_copy() {
        assert_eq!(
            resample(&[0.1, 0.2], 16_000, 16_000).unwrap(),
            vec![0.1, 0.2]
        );
    }
}
