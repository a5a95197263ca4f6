//! A waveform's peaks, gathered as a file is decoded: at one sample's resolution while that
//! fits, halving the resolution whenever the count reaches a bound, so a waveform of three hours
//! costs a few megabytes, never the audio.

use super::decode::SampleSink;
use super::AudioError;
use std::ops::ControlFlow;

/// Most peaks kept (4 MiB of f32): a waveform of 4096 buckets is then within 1/256 of a bucket
/// of the exact one, at any length.
pub const MAX_PEAKS: usize = 1 << 20;

/// The loudest sample of each `per` samples, in order; `per` doubles as the file grows.
#[derive(Debug, Clone)]
pub struct Peaks {
    /// Samples per kept peak (a power of two).
    per: usize,
    peaks: Vec<f32>,
    /// The loudest of the samples after the last kept peak.
    partial: f32,
    /// Samples after the last kept peak.
    partial_len: usize,
    total: usize,
    sample_rate: u32,
    cap: usize,
}

impl Default for Peaks {
    fn default() -> Self {
        Peaks::with_cap(MAX_PEAKS)
    }
}

impl Peaks {
    fn with_cap(cap: usize) -> Peaks {
        Peaks {
            per: 1,
            peaks: Vec::new(),
            partial: 0.0,
            partial_len: 0,
            total: 0,
            sample_rate: 0,
            cap: cap.max(2) & !1,
        }
    }

    pub fn duration_secs(&self) -> f64 {
        if self.sample_rate == 0 {
            return 0.0;
        }
        self.total as f64 / f64::from(self.sample_rate)
    }

    /// The loudest sample in each of `buckets` equal slices of the audio (the last may be
    /// shorter; fewer slices than asked when there are fewer samples).
    pub fn buckets(&self, buckets: usize) -> Vec<f32> {
        let per_bucket = self.total.div_ceil(buckets.max(1)).max(1);
        let kept = |i: usize| {
            if i < self.peaks.len() {
                self.peaks[i]
            } else {
                self.partial
            }
        };
        (0..self.total)
            .step_by(per_bucket)
            .map(|start| {
                let end = (start + per_bucket).min(self.total);
                (start / self.per..end.div_ceil(self.per))
                    .map(kept)
                    .fold(0.0f32, f32::max)
            })
            .collect()
    }
}

/// The first bytes of [`Peaks::to_bytes`].
const MAGIC: &[u8; 8] = b"HRPEAKS1";

impl Peaks {
    /// The peaks as bytes to keep (a project's cache): read back with [`Peaks::from_bytes`],
    /// they give the same buckets. `key` is stored with them (what they were made from:
    /// a file's length and time, say) and must match when they are read.
    pub fn to_bytes(&self, key: u64) -> Vec<u8> {
        let values = self.finished();
        let mut out = Vec::with_capacity(40 + values.len() * 4);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&key.to_le_bytes());
        out.extend_from_slice(&self.sample_rate.to_le_bytes());
        out.extend_from_slice(&(self.per as u64).to_le_bytes());
        out.extend_from_slice(&(self.total as u64).to_le_bytes());
        for v in values {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out
    }

    /// Peaks kept by [`Peaks::to_bytes`] under `key`; `None` for another key, or bytes that
    /// are not whole, consistent peaks (a cache file damaged or from elsewhere).
    pub fn from_bytes(bytes: &[u8], key: u64) -> Option<Peaks> {
        let header = 8 + 8 + 4 + 8 + 8;
        let body = bytes.get(header..)?;
        let u64_at = |at: usize| Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?));
        if bytes.get(..8)? != MAGIC || u64_at(8)? != key {
            return None;
        }
        let sample_rate = u32::from_le_bytes(bytes.get(16..20)?.try_into().ok()?);
        let per = usize::try_from(u64_at(20)?).ok()?;
        let total = usize::try_from(u64_at(28)?).ok()?;
        let values: Vec<f32> = body
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let consistent = per.is_power_of_two()
            && body.len() % 4 == 0
            && values.len() <= MAX_PEAKS
            && values.len() == total.div_ceil(per)
            && values.iter().all(|v| v.is_finite() && *v >= 0.0);
        consistent.then_some(Peaks {
            per,
            peaks: values,
            partial: 0.0,
            partial_len: 0,
            total,
            sample_rate,
            cap: MAX_PEAKS,
        })
    }

    /// The kept peaks and the partial one after them, if any: one per `per` samples.
    fn finished(&self) -> Vec<f32> {
        let mut values = self.peaks.clone();
        if self.partial_len > 0 {
            values.push(self.partial);
        }
        values
    }
}

impl SampleSink for Peaks {
    fn begin(&mut self, sample_rate: u32) {
        self.sample_rate = sample_rate;
    }

    fn take(&mut self, block: &[f32]) -> Result<ControlFlow<()>, AudioError> {
        for s in block {
            self.partial = self.partial.max(s.abs());
            self.partial_len += 1;
            if self.partial_len == self.per {
                self.peaks.push(self.partial);
                self.partial = 0.0;
                self.partial_len = 0;
                if self.peaks.len() == self.cap {
                    // Half the resolution: each pair becomes its louder one.
                    let halved: Vec<f32> =
                        self.peaks.chunks_exact(2).map(|p| p[0].max(p[1])).collect();
                    self.peaks = halved;
                    self.per *= 2;
                }
            }
        }
        self.total += block.len();
        Ok(ControlFlow::Continue(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(samples: &[f32], buckets: usize) -> Vec<f32> {
        let per = samples.len().div_ceil(buckets).max(1);
        samples
            .chunks(per)
            .map(|c| c.iter().fold(0.0f32, |m, s| m.max(s.abs())))
            .collect()
    }

    fn gathered(samples: &[f32], cap: usize) -> Peaks {
        let mut peaks = Peaks::with_cap(cap);
        peaks.begin(8_000);
        for block in samples.chunks(333) {
            assert!(peaks.take(block).unwrap().is_continue());
        }
        peaks
    }

    #[test]
    fn peaks_of_audio_that_fits_are_exact() {
        let samples: Vec<f32> = (0..10_007)
            .map(|i| ((i * 7919) % 1000) as f32 / -1000.0)
            .collect();
        let peaks = gathered(&samples, MAX_PEAKS);
        for buckets in [1, 7, 100, 4096, 20_000] {
            assert_eq!(
                peaks.buckets(buckets),
                exact(&samples, buckets),
                "{buckets}"
            );
        }
        assert!((peaks.duration_secs() - 10_007.0 / 8_000.0).abs() < 1e-12);
    }

    #[test]
    fn kept_peaks_read_back_to_the_same_buckets_and_only_under_their_key() {
        let samples: Vec<f32> = (0..70_001)
            .map(|i| ((i * 31) % 977) as f32 / 977.0)
            .collect();
        for cap in [MAX_PEAKS, 256] {
            let peaks = gathered(&samples, cap);
            let bytes = peaks.to_bytes(42);
            let read = Peaks::from_bytes(&bytes, 42).unwrap();
            for buckets in [1, 100, 4096] {
                assert_eq!(
                    read.buckets(buckets),
                    peaks.buckets(buckets),
                    "{cap} {buckets}"
                );
            }
            assert_eq!(read.duration_secs(), peaks.duration_secs());
            assert!(Peaks::from_bytes(&bytes, 43).is_none(), "another key");
            assert!(
                Peaks::from_bytes(&bytes[..bytes.len() - 4], 42).is_none(),
                "cut short"
            );
            assert!(
                Peaks::from_bytes(&bytes[..30], 42).is_none(),
                "a header cut short"
            );
            let mut damaged = bytes.clone();
            damaged[20] = 3;
            assert!(
                Peaks::from_bytes(&damaged, 42).is_none(),
                "per not a power of two"
            );
        }
    }

    #[test]
    fn peaks_of_long_audio_stay_bounded_and_land_in_their_bucket() {
        // 64 buckets of 1000 samples, each with one spike of its own height somewhere in it.
        let mut samples = vec![0.01f32; 64_000];
        for b in 0..64 {
            samples[b * 1000 + (b * 37) % 1000] = (b + 1) as f32 / 64.0;
        }
        let peaks = gathered(&samples, 256);
        assert!(peaks.peaks.len() < 256, "{} kept", peaks.peaks.len());
        assert_eq!(peaks.per, 256);
        let found = peaks.buckets(64);
        assert_eq!(found.len(), 64);
        // A kept peak spans 256 samples, so a spike within 256 of a bucket's edge may show in
        // its neighbour as well; it is never lost, and never lands further away.
        for (b, &peak) in found.iter().enumerate() {
            let own = (b + 1) as f32 / 64.0;
            assert!(peak >= own, "bucket {b}: {peak} below its spike {own}");
            assert!(
                peak <= (b + 2) as f32 / 64.0,
                "bucket {b}: {peak} from afar"
            );
        }
    }
}
