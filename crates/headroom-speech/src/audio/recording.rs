//! A recording written to disk as it happens: 16-bit mono WAV in `<name>.partial` beside the
//! final file, its header brought up to date and the data synced about once a second, renamed
//! to the final name when the recording ends. A crash (or SIGKILL) loses at most the last
//! second; [`repair_partial`] makes what was written whole again on the next start.

use super::AudioError;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often the header is updated and the data synced.
const SYNC_EVERY: Duration = Duration::from_secs(1);

/// Where a recording is written until it ends: `take.wav` → `take.wav.partial`.
pub fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

/// A WAV file being recorded.
pub struct WavRecorder {
    writer: hound::WavWriter<BufWriter<std::fs::File>>,
    partial: PathBuf,
    path: PathBuf,
    frames: u64,
    synced: Instant,
}

fn write_error(path: &Path, e: impl std::fmt::Display) -> AudioError {
    AudioError::Write {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

impl WavRecorder {
    /// Starts `path`'s recording at `sample_rate` (in its `.partial` file).
    pub fn create(path: &Path, sample_rate: u32) -> Result<WavRecorder, AudioError> {
        let partial = partial_path(path);
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let file = std::fs::File::create(&partial).map_err(|e| write_error(&partial, e))?;
        let writer = hound::WavWriter::new(BufWriter::new(file), spec)
            .map_err(|e| write_error(&partial, e))?;
        Ok(WavRecorder {
            writer,
            partial,
            path: path.to_path_buf(),
            frames: 0,
            synced: Instant::now(),
        })
    }

    /// Appends samples in [-1, 1]; about once a second the header is brought up to date and
    /// everything written so far reaches the disk.
    pub fn write(&mut self, samples: &[f32]) -> Result<(), AudioError> {
        for s in samples {
            let v = (s.clamp(-1.0, 1.0) * i16::MAX as f32).round() as i16;
            self.writer
                .write_sample(v)
                .map_err(|e| write_error(&self.partial, e))?;
        }
        self.frames += samples.len() as u64;
        if self.synced.elapsed() >= SYNC_EVERY {
            self.sync()?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<(), AudioError> {
        // hound's flush writes the header with the current lengths, then flushes the buffer.
        self.writer
            .flush()
            .map_err(|e| write_error(&self.partial, e))?;
        std::fs::File::open(&self.partial)
            .and_then(|f| f.sync_data())
            .map_err(|e| write_error(&self.partial, e))?;
        self.synced = Instant::now();
        Ok(())
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Ends the recording: the header made final, synced, and the file given its name.
    pub fn finish(self) -> Result<PathBuf, AudioError> {
        let WavRecorder {
            writer,
            partial,
            path,
            ..
        } = self;
        writer.finalize().map_err(|e| write_error(&partial, e))?;
        std::fs::File::open(&partial)
            .and_then(|f| f.sync_all())
            .map_err(|e| write_error(&partial, e))?;
        std::fs::rename(&partial, &path).map_err(|e| write_error(&path, e))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // The rename itself must survive a crash.
            let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(path)
    }

    /// Drops a recording that never got going (nothing is left on disk).
    pub fn discard(self) {
        let partial = self.partial.clone();
        drop(self.writer);
        let _ = std::fs::remove_file(partial);
    }
}

/// Makes a `.partial` recording left by a crash whole: its header's lengths are set from what
/// the file holds (a partial frame at the end is cut), and it gets its final name, which is
/// returned. A file too short to hold a header is removed (`None`).
pub fn repair_partial(partial: &Path) -> Result<Option<PathBuf>, AudioError> {
    let error = |e: std::io::Error| write_error(partial, e);
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(partial)
        .map_err(error)?;
    let len = file.metadata().map_err(error)?.len();
    let mut head = vec![0u8; 4096.min(len as usize)];
    file.read_exact(&mut head).map_err(error)?;
    let not_ours = || AudioError::Corrupt {
        path: partial.to_path_buf(),
        detail: "not a recording Headroom wrote; it was left as it is".into(),
    };
    if !head.starts_with(b"RIFF") {
        return Err(not_ours());
    }
    if head.len() >= 12 && &head[8..12] != b"WAVE" {
        return Err(not_ours());
    }
    // Walk the chunks to the data chunk; its frames are 2 bytes (16-bit mono, as the recorder
    // writes). A recording cut off before its header was whole holds nothing: removed.
    let mut at = 12usize;
    let data_start = loop {
        let Some(chunk) = head.get(at..at + 8) else {
            std::fs::remove_file(partial).map_err(error)?;
            return Ok(None);
        };
        let size = u32::from_le_bytes(chunk[4..8].try_into().expect("4 bytes")) as usize;
        if &chunk[..4] == b"data" {
            break at + 8;
        }
        at += 8 + size + (size & 1);
    };
    let data = (len - data_start as u64) / 2 * 2;
    let end = data_start as u64 + data;
    file.set_len(end).map_err(error)?;
    let riff = u32::try_from(end - 8).unwrap_or(u32::MAX);
    let data_len = u32::try_from(data).unwrap_or(u32::MAX);
    file.seek(SeekFrom::Start(4)).map_err(error)?;
    file.write_all(&riff.to_le_bytes()).map_err(error)?;
    file.seek(SeekFrom::Start(data_start as u64 - 4))
        .map_err(error)?;
    file.write_all(&data_len.to_le_bytes()).map_err(error)?;
    file.sync_all().map_err(error)?;
    let name = partial
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".partial"))
        .ok_or_else(|| AudioError::Corrupt {
            path: partial.to_path_buf(),
            detail: "not a .partial recording".into(),
        })?;
    let repaired = partial.with_file_name(name);
    std::fs::rename(partial, &repaired).map_err(error)?;
    Ok(Some(repaired))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(n: usize) -> Vec<f32> {
        (0..n).map(|i| (i as f32 * 0.05).sin() * 0.5).collect()
    }

    #[test]
    fn a_finished_recording_is_a_whole_wav_under_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("take.wav");
        let mut rec = WavRecorder::create(&path, 16_000).unwrap();
        rec.write(&tone(8000)).unwrap();
        rec.write(&tone(8000)).unwrap();
        assert!(partial_path(&path).exists() && !path.exists());
        rec.finish().unwrap();
        let reader = hound::WavReader::open(&path).unwrap();
        assert_eq!(reader.duration(), 16_000);
        assert!(!partial_path(&path).exists());
    }

    #[test]
    fn a_partial_recording_with_a_stale_header_is_repaired_to_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("take.wav");
        let mut rec = WavRecorder::create(&path, 16_000).unwrap();
        rec.write(&tone(4000)).unwrap();
        rec.sync().unwrap();
        rec.write(&tone(6000)).unwrap();
        // A crash now: what the buffer had passed on is on disk; the header, synced a moment
        // ago, says 4000 frames.
        let partial = partial_path(&path);
        std::mem::forget(rec);
        let mut bytes = std::fs::read(&partial).unwrap();
        let on_disk = (bytes.len() as u64 - 44) / 2;
        assert!(on_disk > 4000, "{on_disk}");
        bytes.push(0x7f); // and half a frame
        std::fs::write(&partial, &bytes).unwrap();
        assert_eq!(
            hound::WavReader::open(&partial).unwrap().duration(),
            4000,
            "the header is behind"
        );
        let repaired = repair_partial(&partial).unwrap().unwrap();
        assert_eq!(repaired, path);
        assert_eq!(
            u64::from(hound::WavReader::open(&path).unwrap().duration()),
            on_disk
        );
        // Too short to hold anything: removed.
        let empty = dir.path().join("empty.wav.partial");
        std::fs::write(&empty, b"RIFF").unwrap();
        assert_eq!(repair_partial(&empty).unwrap(), None);
        assert!(!empty.exists());
        // A file that is not a recording is never touched.
        let foreign = dir.path().join("notes.txt.partial");
        std::fs::write(&foreign, b"my notes, not audio").unwrap();
        assert!(matches!(
            repair_partial(&foreign),
            Err(AudioError::Corrupt { .. })
        ));
        assert_eq!(std::fs::read(&foreign).unwrap(), b"my notes, not audio");
    }
}
