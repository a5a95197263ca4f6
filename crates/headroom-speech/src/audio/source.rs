//! Samples read a stretch at a time: held in memory, or spooled to disk as they are decoded
//! so that an hours-long recording costs disk, not memory.

use super::decode::SampleSink;
use super::AudioError;
use headroom_base::sync::Locked;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::ops::{ControlFlow, Range};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Mono samples at a known rate, read by range. Whatever reads audio for its work
/// (transcription, voice activity, speakers) reads the stretches it needs, so the same code
/// runs over a clip in memory and over three hours spooled to disk.
pub trait SampleSource: Send + Sync {
    /// Samples in all.
    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the samples of `range` (cut at the end) to `out`.
    fn read_into(&self, range: Range<usize>, out: &mut Vec<f32>) -> Result<(), AudioError>;

    /// The samples of `range` (cut at the end).
    fn read(&self, range: Range<usize>) -> Result<Vec<f32>, AudioError> {
        let mut out = Vec::with_capacity(range.len().min(self.len()));
        self.read_into(range, &mut out)?;
        Ok(out)
    }
}

/// Samples in memory (a `Vec<f32>`, a slice, an `Arc<[f32]>`).
impl<T: AsRef<[f32]> + Send + Sync> SampleSource for T {
    fn len(&self) -> usize {
        self.as_ref().len()
    }

    fn read_into(&self, range: Range<usize>, out: &mut Vec<f32>) -> Result<(), AudioError> {
        let samples = self.as_ref();
        let end = range.end.min(samples.len());
        out.extend_from_slice(&samples[range.start.min(end)..end]);
        Ok(())
    }
}

/// Decoded samples in a temporary file: created unnamed in a folder the caller chooses (the
/// system removes it when it is closed, even after a crash), written once as the audio is
/// decoded, then read by range.
pub struct SpooledAudio {
    file: Mutex<File>,
    len: usize,
    sample_rate: u32,
    /// Named in errors.
    shown: PathBuf,
}

/// Bytes of one spooled sample (f32, little-endian).
const SAMPLE_BYTES: usize = 4;

impl SpooledAudio {
    /// A writer of a new spool in `dir`; `shown` names the audio in errors.
    pub fn create(dir: &Path, shown: &Path) -> Result<SpoolWriter, AudioError> {
        let file = tempfile::tempfile_in(dir).map_err(|e| AudioError::Write {
            path: dir.to_path_buf(),
            message: format!("cannot make a temporary file for the decoded audio: {e}"),
        })?;
        Ok(SpoolWriter {
            file: BufWriter::with_capacity(1 << 16, file),
            len: 0,
            shown: shown.to_path_buf(),
            dir: dir.to_path_buf(),
        })
    }

    pub fn sample_rate(&self) -> u32 {
        self.sample_rate
    }

    pub fn duration_secs(&self) -> f64 {
        self.len as f64 / f64::from(self.sample_rate)
    }
}

impl SampleSource for SpooledAudio {
    fn len(&self) -> usize {
        self.len
    }

    fn read_into(&self, range: Range<usize>, out: &mut Vec<f32>) -> Result<(), AudioError> {
        let end = range.end.min(self.len);
        let start = range.start.min(end);
        if start == end {
            return Ok(());
        }
        let mut bytes = vec![0u8; (end - start) * SAMPLE_BYTES];
        {
            let mut file = self.file.locked();
            file.seek(SeekFrom::Start((start * SAMPLE_BYTES) as u64))
                .and_then(|_| file.read_exact(&mut bytes))
                .map_err(|e| AudioError::Read {
                    path: self.shown.clone(),
                    message: format!("the decoded audio could not be read back: {e}"),
                })?;
        }
        out.extend(
            bytes
                .chunks_exact(SAMPLE_BYTES)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
        Ok(())
    }
}

/// Writes decoded samples into a spool: a [`SampleSink`] for [`super::Decode`].
pub struct SpoolWriter {
    file: BufWriter<File>,
    len: usize,
    shown: PathBuf,
    dir: PathBuf,
}

impl SpoolWriter {
    /// The spool of samples at `sample_rate`, ready to read.
    pub fn finish(self, sample_rate: u32) -> Result<SpooledAudio, AudioError> {
        let dir = self.dir.clone();
        let file = self.file.into_inner().map_err(|e| AudioError::Write {
            path: dir,
            message: format!("cannot write the decoded audio: {}", e.error()),
        })?;
        Ok(SpooledAudio {
            file: Mutex::new(file),
            len: self.len,
            sample_rate,
            shown: self.shown,
        })
    }
}

impl SpoolWriter {
    /// Appends `block` to the spool.
    pub fn write(&mut self, block: &[f32]) -> Result<(), AudioError> {
        let bytes: Vec<u8> = block.iter().flat_map(|s| s.to_le_bytes()).collect();
        self.file.write_all(&bytes).map_err(|e| AudioError::Write {
            path: self.dir.clone(),
            message: format!("cannot write the decoded audio: {e}"),
        })?;
        self.len += block.len();
        Ok(())
    }
}

impl SampleSink for SpoolWriter {
    fn take(&mut self, block: &[f32]) -> Result<ControlFlow<()>, AudioError> {
        self.write(block)?;
        Ok(ControlFlow::Continue(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spool_reads_back_what_was_written_by_range_and_cuts_at_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let samples: Vec<f32> = (0..10_000).map(|i| (i as f32 * 0.01).sin()).collect();
        let mut writer = SpooledAudio::create(dir.path(), Path::new("talk.wav")).unwrap();
        for block in samples.chunks(777) {
            assert!(writer.take(block).unwrap().is_continue());
        }
        let spool = writer.finish(16_000).unwrap();
        assert_eq!(spool.len(), samples.len());
        assert_eq!(spool.read(0..10_000).unwrap(), samples);
        assert_eq!(spool.read(1234..5678).unwrap(), samples[1234..5678]);
        assert_eq!(spool.read(9_990..20_000).unwrap(), samples[9_990..]);
        assert!(spool.read(20_000..30_000).unwrap().is_empty());
        // The same answers as the samples in memory.
        assert_eq!(samples.read(9_990..20_000).unwrap(), samples[9_990..]);
        assert!(samples.read(20_000..30_000).unwrap().is_empty());
        // Unnamed: nothing is left in the folder, whatever becomes of the process.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
