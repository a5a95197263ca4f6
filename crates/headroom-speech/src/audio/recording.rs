//! A recording written to disk as it happens: 16-bit mono WAV in `<name>.partial` beside the
//! final file, its header brought up to date and the data synced about once a second, renamed
//! to the final name when the recording ends. A crash (or SIGKILL) loses at most the last
//! second; [`repair_partial`] makes what was written whole again on the next start.
//!
//! Both names are used only through the folder's open handle ([`Beneath`]): the `.partial`
//! file is created new (a file or link planted at its name is never opened, truncated or
//! followed), renamed and removed in that folder, never by a path looked up again.

use super::AudioError;
use headroom_base::fsutil::{Beneath, BeneathError};
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

/// Where a recording goes: `file`, a path of plain names inside a folder held open.
#[derive(Debug)]
pub struct RecordTarget {
    folder: Beneath,
    file: PathBuf,
}

impl RecordTarget {
    /// `file` (relative, e.g. `audio/recording-1.wav`) inside `folder`.
    pub fn new(folder: Beneath, file: impl Into<PathBuf>) -> RecordTarget {
        RecordTarget {
            folder,
            file: file.into(),
        }
    }

    /// The file at `path`, a place the user chose (the CLI's `--out`): its folder is opened as
    /// given, the file and its `.partial` file are then used only through it.
    pub fn at(path: &Path) -> Result<RecordTarget, AudioError> {
        let (folder, name) = split(path)?;
        let folder = Beneath::open(folder, "recording").map_err(|e| beneath_error(path, e))?;
        Ok(RecordTarget::new(folder, name))
    }

    /// Where the finished recording is, for showing.
    pub fn shown(&self) -> PathBuf {
        self.folder.shown(&self.file)
    }
}

/// A path's folder (`.` for a bare name) and its file name.
fn split(path: &Path) -> Result<(&Path, &std::ffi::OsStr), AudioError> {
    let name = path.file_name().ok_or_else(|| AudioError::Write {
        path: path.to_path_buf(),
        message: "not a file name".into(),
    })?;
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Ok((folder, name))
}

/// A recording is written or repaired under `path`.
fn write_error(path: &Path, e: impl std::fmt::Display) -> AudioError {
    AudioError::Write {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// [`write_error`] for what [`Beneath`] refused or failed at (its own path left out: `path`
/// says where).
fn beneath_error(path: &Path, e: BeneathError) -> AudioError {
    match e {
        BeneathError::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists => {
            write_error(
                path,
                "something is already there; a recording never replaces it",
            )
        }
        BeneathError::Io { source, .. } => write_error(path, source),
        other => write_error(path, other),
    }
}

/// A WAV file being recorded.
pub struct WavRecorder {
    writer: hound::WavWriter<BufWriter<std::fs::File>>,
    /// The same open file as the writer's, for syncing it.
    file: std::fs::File,
    target: RecordTarget,
    partial: PathBuf,
    frames: u64,
    synced: Instant,
}

impl WavRecorder {
    /// Starts `path`'s recording at `sample_rate` (in its `.partial` file, made new in `path`'s
    /// folder), as [`WavRecorder::create_at`] does.
    pub fn create(path: &Path, sample_rate: u32) -> Result<WavRecorder, AudioError> {
        WavRecorder::create_at(RecordTarget::at(path)?, sample_rate)
    }

    /// Starts `target`'s recording at `sample_rate` in its `.partial` file, created new through
    /// the folder's handle (the folders on the way are made): whatever is at that name already
    /// (a file, a link, a pipe) is an error, never opened.
    pub fn create_at(target: RecordTarget, sample_rate: u32) -> Result<WavRecorder, AudioError> {
        let partial = partial_path(&target.file);
        let shown = target.folder.shown(&partial);
        let spec = hound::WavSpec {
            channels: 1,
            sample_rate,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let file = target
            .folder
            .create_new(&partial)
            .map_err(|e| beneath_error(&shown, e))?;
        let sync = file.try_clone().map_err(|e| write_error(&shown, e))?;
        let writer = hound::WavWriter::new(BufWriter::new(file), spec)
            .map_err(|e| write_error(&shown, e))?;
        Ok(WavRecorder {
            writer,
            file: sync,
            target,
            partial,
            frames: 0,
            synced: Instant::now(),
        })
    }

    fn shown_partial(&self) -> PathBuf {
        self.target.folder.shown(&self.partial)
    }

    /// Appends samples in [-1, 1]; about once a second the header is brought up to date and
    /// everything written so far reaches the disk.
    pub fn write(&mut self, samples: &[f32]) -> Result<(), AudioError> {
        for s in samples {
            let v = (s.clamp(-1.0, 1.0) * i16::MAX as f32).round() as i16;
            self.writer
                .write_sample(v)
                .map_err(|e| write_error(&self.shown_partial(), e))?;
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
            .map_err(|e| write_error(&self.shown_partial(), e))?;
        self.file
            .sync_data()
            .map_err(|e| write_error(&self.shown_partial(), e))?;
        self.synced = Instant::now();
        Ok(())
    }

    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Ends the recording: the header made final, synced, and the file given its name (in the
    /// same folder, through its handle; the folder synced so the rename survives a crash).
    pub fn finish(self) -> Result<PathBuf, AudioError> {
        let shown_partial = self.shown_partial();
        let WavRecorder {
            writer,
            file,
            target,
            partial,
            ..
        } = self;
        writer
            .finalize()
            .map_err(|e| write_error(&shown_partial, e))?;
        file.sync_all()
            .map_err(|e| write_error(&shown_partial, e))?;
        let path = target.shown();
        target
            .folder
            .rename(&partial, &target.file)
            .map_err(|e| beneath_error(&path, e))?;
        Ok(path)
    }

    /// Drops a recording that never got going (nothing is left on disk).
    pub fn discard(self) {
        let WavRecorder {
            writer,
            target,
            partial,
            ..
        } = self;
        drop(writer);
        let _ = target.folder.remove_file(partial);
    }
}

/// Makes a `.partial` recording left by a crash whole, as [`repair_partial_in`] does, with
/// `partial`'s folder opened as given.
pub fn repair_partial(partial: &Path) -> Result<Option<PathBuf>, AudioError> {
    let (folder, name) = split(partial)?;
    let folder = Beneath::open(folder, "recording").map_err(|e| beneath_error(partial, e))?;
    repair_partial_in(&folder, Path::new(name))
}

/// Makes the `.partial` recording `partial` (relative to `folder`) that a crash left whole:
/// its header's lengths are set from what the file holds (a partial frame at the end is cut),
/// and it gets its final name, whose path is returned. A file too short to hold a header is
/// removed (`None`). Opened, renamed and removed only through `folder`'s handle: a link at
/// either name, or on the way, is refused and what it points to left alone.
pub fn repair_partial_in(folder: &Beneath, partial: &Path) -> Result<Option<PathBuf>, AudioError> {
    let shown = folder.shown(partial);
    let error = |e: std::io::Error| write_error(&shown, e);
    let refused = |e: BeneathError| beneath_error(&shown, e);
    let name = partial
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".partial"))
        .ok_or_else(|| AudioError::Corrupt {
            path: shown.clone(),
            detail: "not a .partial recording".into(),
        })?;
    let repaired = partial.with_file_name(name);
    let mut file = folder.open_update(partial).map_err(refused)?;
    let len = file.metadata().map_err(error)?.len();
    let mut head = vec![0u8; 4096.min(len as usize)];
    file.read_exact(&mut head).map_err(error)?;
    let not_ours = || AudioError::Corrupt {
        path: shown.clone(),
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
            drop(file);
            folder.remove_file(partial).map_err(refused)?;
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
    drop(file);
    folder.rename(partial, &repaired).map_err(refused)?;
    Ok(Some(folder.shown(&repaired)))
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

    /// A link planted at the name the recording is written under (its `.partial` file) or
    /// repaired from is never followed: the file it points to, outside, is untouched.
    #[cfg(unix)]
    #[test]
    fn a_link_planted_at_a_recordings_names_is_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        let folder = dir.path().join("audio");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::create_dir_all(&folder).unwrap();
        let victim = outside.join("victim.wav");
        // A WAV with a stale header and half a frame at the end: a repair would cut it.
        let mut wav = crate::audio::wav_bytes(&crate::audio::Audio {
            samples: tone(100),
            sample_rate: 16_000,
        });
        wav.push(0x7f);
        std::fs::write(&victim, &wav).unwrap();

        let path = folder.join("take.wav");
        std::os::unix::fs::symlink(&victim, partial_path(&path)).unwrap();
        assert!(
            WavRecorder::create(&path, 16_000).is_err(),
            "a link is there"
        );
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            wav,
            "the victim is untouched"
        );

        let planted = folder.join("crash.wav.partial");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        assert!(repair_partial(&planted).is_err());
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            wav,
            "the victim is untouched"
        );
        assert!(!folder.join("crash.wav").exists());
    }
}
