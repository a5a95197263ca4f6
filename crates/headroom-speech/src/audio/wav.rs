//! 16-bit PCM WAV output, written atomically, or as the audio arrives.

use super::{Audio, AudioError};
use std::io::{Cursor, Seek, Write};
use std::path::{Path, PathBuf};

/// The audio as a 16-bit mono WAV file in memory.
pub fn wav_bytes(audio: &Audio) -> Vec<u8> {
    let mut cursor = Cursor::new(Vec::new());
    let mut wav =
        WavStream::new(&mut cursor, audio.sample_rate, Path::new("")).expect("writing to memory");
    wav.append(audio).expect("writing to memory");
    wav.finish().expect("writing to memory");
    cursor.into_inner()
}

/// Writes a WAV file so that readers never see a half-written file.
pub fn write_wav(path: &Path, audio: &Audio) -> Result<(), AudioError> {
    headroom_base::fsutil::write_atomic(path, &wav_bytes(audio)).map_err(|e| AudioError::Write {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// A 16-bit mono WAV written piece by piece as its audio is made, never held whole: a take
/// hours long costs the memory of one piece. The header's sizes are written by
/// [`WavStream::finish`]; a stream dropped before it is not a valid file.
pub struct WavStream<W: Write + Seek> {
    writer: hound::WavWriter<W>,
    sample_rate: u32,
    samples: u64,
    /// Named in errors.
    path: PathBuf,
}

impl<W: Write + Seek> WavStream<W> {
    /// Starts a WAV of `sample_rate` on `out`; `path` names it in errors.
    pub fn new(out: W, sample_rate: u32, path: &Path) -> Result<Self, AudioError> {
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let path = path.to_path_buf();
        let writer = hound::WavWriter::new(out, spec).map_err(|e| write_error(&path, e))?;
        Ok(WavStream {
            writer,
            sample_rate,
            samples: 0,
            path,
        })
    }

    /// Appends `audio`, which must have the stream's sample rate.
    pub fn append(&mut self, audio: &Audio) -> Result<(), AudioError> {
        if audio.sample_rate != self.sample_rate {
            return Err(AudioError::Write {
                path: self.path.clone(),
                message: format!(
                    "a piece of {} Hz cannot join a take of {} Hz",
                    audio.sample_rate, self.sample_rate
                ),
            });
        }
        let mut samples = self.writer.get_i16_writer(audio.samples.len() as u32);
        for s in &audio.samples {
            samples.write_sample((s.clamp(-1.0, 1.0) * i16::MAX as f32).round() as i16);
        }
        samples.flush().map_err(|e| write_error(&self.path, e))?;
        self.samples += audio.samples.len() as u64;
        Ok(())
    }

    /// Seconds written so far.
    pub fn duration_secs(&self) -> f64 {
        self.samples as f64 / self.sample_rate as f64
    }

    /// Writes the header's sizes; the file is complete.
    pub fn finish(self) -> Result<(), AudioError> {
        let path = self.path;
        self.writer.finalize().map_err(|e| write_error(&path, e))
    }
}

fn write_error(path: &Path, e: hound::Error) -> AudioError {
    AudioError::Write {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wav_written_in_pieces_is_the_wav_of_the_whole() {
        let piece = |start: usize| Audio {
            samples: (start..start + 1000)
                .map(|i| (i as f32 * 0.01).sin() * 0.5)
                .collect(),
            sample_rate: 24_000,
        };
        let whole = Audio {
            samples: [piece(0).samples, piece(1000).samples].concat(),
            sample_rate: 24_000,
        };
        let mut cursor = Cursor::new(Vec::new());
        let mut wav = WavStream::new(&mut cursor, 24_000, Path::new("take.wav")).unwrap();
        wav.append(&piece(0)).unwrap();
        wav.append(&piece(1000)).unwrap();
        assert!((wav.duration_secs() - 2000.0 / 24_000.0).abs() < 1e-9);
        // A piece of another rate is refused, naming the file.
        let other = Audio {
            samples: vec![0.0; 10],
            sample_rate: 16_000,
        };
        let refused = wav.append(&other).unwrap_err().to_string();
        assert!(
            refused.contains("take.wav") && refused.contains("16000 Hz"),
            "{refused}"
        );
        wav.finish().unwrap();
        assert_eq!(cursor.into_inner(), wav_bytes(&whole));
    }
}
