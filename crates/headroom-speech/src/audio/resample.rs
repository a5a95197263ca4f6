//! Sample-rate conversion with a band-limited (FFT) resampler, so downsampling to 16 kHz does
//! not alias.

use super::AudioError;
use rubato::{FftFixedIn, Resampler};

/// Resamples mono `samples` from `from` Hz to `to` Hz.
pub fn resample(samples: &[f32], from: u32, to: u32) -> Result<Vec<f32>, AudioError> {
    if from == to || samples.is_empty() {
        return Ok(samples.to_vec());
    }
    let err = |e: &dyn std::fmt::Display| AudioError::Resample {
        from,
        to,
        detail: e.to_string(),
    };
    let chunk = 1024;
    let mut resampler =
        FftFixedIn::<f32>::new(from as usize, to as usize, chunk, 2, 1).map_err(|e| err(&e))?;
    let expected = (samples.len() as u64 * to as u64 / from as u64) as usize;
    let delay = resampler.output_delay();
    let mut out = Vec::with_capacity(expected + delay + chunk);
    let mut input = samples.chunks(chunk).peekable();
    while let Some(block) = input.next() {
        let frames = if block.len() == chunk {
            resampler.process(&[block], None).map_err(|e| err(&e))?
        } else {
            resampler
                .process_partial(Some(&[block]), None)
                .map_err(|e| err(&e))?
        };
        out.extend_from_slice(&frames[0]);
        if input.peek().is_none() {
            // Flush what the filter still holds.
            let tail = resampler
                .process_partial::<&[f32]>(None, None)
                .map_err(|e| err(&e))?;
            out.extend_from_slice(&tail[0]);
        }
    }
    let end = (delay + expected).min(out.len());
    Ok(out[delay.min(end)..end].to_vec())
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
    fn same_rate_is_a_copy() {
        assert_eq!(
            resample(&[0.1, 0.2], 16_000, 16_000).unwrap(),
            vec![0.1, 0.2]
        );
    }
}
