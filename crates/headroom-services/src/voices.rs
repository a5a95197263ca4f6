//! Voice profiles: a voice library (a folder per voice, usable from any project) holding each
//! voice's reference clips, their checks and transcripts, its speaker embedding, and what an
//! approximate voice match found. Every write is atomic; a profile that cannot be read is
//! reported and left as it is. The workflows that fill profiles (check, transcribe, embed,
//! match, speak) are [`crate::voice_work`].

use headroom_base::clock::unix_ms;
use headroom_base::fsutil::{folder_name, sync_dir, write_atomic, Beneath, BeneathError};
use headroom_speech::audio::{decode_file, wav_bytes, Audio, DecodeLimits};
use headroom_speech::voice::matching::{EspeakSetting, MatchOutcome, Score};
use headroom_speech::voice::{check_clip, ClipReport, Embedding, Severity};
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

const PROFILE: &str = "profile.json";
const CLIPS: &str = "clips";
const FORMAT_VERSION: u32 = 1;
const MAX_NAME_CHARS: usize = 80;
/// At most this many reference clips a voice.
pub const MAX_CLIPS: usize = 10;

/// What an imported voice file may hold, counted in bytes actually unpacked (a zip entry's
/// declared size is not trusted). A voice holds at most [`MAX_CLIPS`] clips of 5–30 s, stored
/// as 16-bit mono WAV: 2.9 MB for 30 s at 48 kHz, 23 MB at 384 kHz, the highest rate
/// Headroom decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportLimits {
    /// The voice file itself.
    pub file_bytes: u64,
    /// `profile.json`, unpacked.
    pub profile_bytes: u64,
    /// One clip, unpacked.
    pub clip_bytes: u64,
    /// Everything unpacked, together.
    pub total_bytes: u64,
    /// Clips in the voice.
    pub clips: usize,
}

impl Default for ImportLimits {
    fn default() -> Self {
        ImportLimits {
            file_bytes: 64 << 20,
            profile_bytes: 1 << 20,
            clip_bytes: 24 << 20,
            // Ten 30 s clips at 96 kHz (58 MB), or at 48 kHz (29 MB) with room to spare.
            total_bytes: 64 << 20,
            clips: MAX_CLIPS,
        }
    }
}

/// Why a voice library operation failed.
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    #[error("no voice {0:?}; list voices with `headroom voice list`")]
    NotFound(String),
    #[error("a voice named {0:?} already exists")]
    NameTaken(String),
    #[error("{0}")]
    InvalidName(String),
    #[error("voice {voice:?} has no clip {clip:?}")]
    NoSuchClip { voice: String, clip: String },
    #[error("voice {0:?} already has {MAX_CLIPS} clips; remove one first")]
    TooManyClips(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a readable voice profile ({reason}); it was left as it is")]
    BadProfile { path: PathBuf, reason: String },
    #[error("{path} is not a Headroom voice file: {reason}")]
    BadImport { path: PathBuf, reason: String },
    /// A path in a voice's folder that would leave it (a symbolic link on the way).
    #[error(transparent)]
    Beneath(#[from] BeneathError),
    /// An imported file holds more than a voice does; nothing was kept.
    #[error("{path} holds more than a voice does: {reason}; nothing was imported")]
    ImportTooLarge { path: PathBuf, reason: String },
    /// An imported clip fails the checks an added clip must pass; nothing was kept.
    #[error("{path}: {clip} is refused, as it would be if it were added: {advice}; nothing was imported")]
    ImportedClipRefused {
        path: PathBuf,
        clip: String,
        advice: String,
    },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> LibraryError + '_ {
    move |source| LibraryError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One reference clip of a voice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ReferenceClip {
    pub id: String,
    /// The WAV file, relative to the voice's folder.
    pub file: String,
    pub seconds: f64,
    pub report: ClipReport,
    /// What is said in it (transcribed, or typed by the user); cloning servers may want it.
    pub transcript: Option<String>,
    #[cfg_attr(feature = "typescript", ts(type = "number[]"))]
    pub embedding: Embedding,
    pub added_unix_ms: u64,
}

/// What an approximate voice match found, kept so later takes use it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct VoiceMatch {
    pub outcome: MatchOutcome,
    /// The default voice on the same held-out sentences: what "no match" scores.
    pub default_held_out: Score,
    /// The espeak-ng variant and pitch closest to the voice (the cheap first match).
    pub espeak: Option<(EspeakSetting, Score)>,
    pub found_unix_ms: u64,
    /// The clips the match was made for: a match made before clips changed is stale.
    pub clip_ids: Vec<String>,
}

/// A voice profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct VoiceProfile {
    pub format: u32,
    /// The folder name; stable across renames.
    pub id: String,
    pub name: String,
    pub created_unix_ms: u64,
    pub modified_unix_ms: u64,
    pub clips: Vec<ReferenceClip>,
    /// The mean of the clips' embeddings; `None` without clips.
    #[cfg_attr(feature = "typescript", ts(type = "number[] | null"))]
    pub embedding: Option<Embedding>,
    /// The voice's name on an OpenAI-style cloning server; the profile's name when unset.
    #[serde(default)]
    pub server_voice: Option<String>,
    #[serde(default)]
    pub matched: Option<VoiceMatch>,
}

impl VoiceProfile {
    /// The match, if it was made for the clips the voice has now.
    pub fn current_match(&self) -> Option<&VoiceMatch> {
        let ids: Vec<&str> = self.clips.iter().map(|c| c.id.as_str()).collect();
        self.matched.as_ref().filter(|m| {
            m.clip_ids
                .iter()
                .map(String::as_str)
                .eq(ids.iter().copied())
        })
    }

    /// The clip sent to cloning servers: the longest accepted one.
    pub fn reference_clip(&self) -> Option<&ReferenceClip> {
        self.clips
            .iter()
            .max_by(|a, b| a.seconds.total_cmp(&b.seconds))
    }

    fn refresh_embedding(&mut self) {
        self.embedding = Embedding::mean(self.clips.iter().map(|c| &c.embedding));
    }
}

/// The voice library: a folder per voice under one root.
#[derive(Debug, Clone)]
pub struct VoiceLibrary {
    root: PathBuf,
}

/// A voice name's folder name.
fn slug(name: &str) -> Result<String, LibraryError> {
    folder_name(name, "voice", MAX_NAME_CHARS).map_err(LibraryError::InvalidName)
}

fn plain_id(id: &str) -> bool {
    !id.is_empty() && !id.starts_with('.') && id.chars().all(|c| c.is_alphanumeric() || c == '-')
}

impl VoiceLibrary {
    pub fn new(root: impl Into<PathBuf>) -> VoiceLibrary {
        VoiceLibrary { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn folder(&self, id: &str) -> Result<PathBuf, LibraryError> {
        if !plain_id(id) {
            return Err(LibraryError::NotFound(id.to_string()));
        }
        Ok(self.root.join(id))
    }

    /// A voice's folder, opened so that its files are read and written only beneath it and
    /// through no symbolic link (see [`Beneath`]).
    pub fn beneath(&self, id: &str) -> Result<Beneath, LibraryError> {
        Beneath::open(&self.folder(id)?, "voice").map_err(|e| {
            if e.is_not_found() {
                LibraryError::NotFound(id.to_string())
            } else {
                e.into()
            }
        })
    }

    /// A clip's WAV file.
    pub fn clip_path(&self, profile: &VoiceProfile, clip: &ReferenceClip) -> PathBuf {
        self.root.join(&profile.id).join(&clip.file)
    }

    fn read(&self, id: &str) -> Result<VoiceProfile, LibraryError> {
        let voice = self.beneath(id)?;
        let path = voice.shown(PROFILE);
        let mut bytes = Vec::new();
        match voice.open_file(PROFILE) {
            Ok(mut file) => {
                file.read_to_end(&mut bytes).map_err(io_error(&path))?;
            }
            Err(e) if e.is_not_found() => return Err(LibraryError::NotFound(id.to_string())),
            Err(e) => return Err(e.into()),
        }
        let mut profile: VoiceProfile =
            serde_json::from_slice(&bytes).map_err(|e| LibraryError::BadProfile {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        if profile.format > FORMAT_VERSION {
            return Err(LibraryError::BadProfile {
                path,
                reason: format!("written by a newer Headroom (format {})", profile.format),
            });
        }
        profile.id = id.to_string();
        Ok(profile)
    }

    /// Every readable voice, by name; unreadable profiles are skipped with a warning.
    pub fn list(&self) -> Result<Vec<VoiceProfile>, LibraryError> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error(&self.root)(e)),
        };
        let mut voices = Vec::new();
        for entry in entries.flatten() {
            let id = entry.file_name().to_string_lossy().into_owned();
            if !plain_id(&id) || !entry.path().join(PROFILE).exists() {
                continue;
            }
            match self.read(&id) {
                Ok(p) => voices.push(p),
                Err(e) => tracing::warn!(voice = %id, "skipped: {e}"),
            }
        }
        voices.sort_by_key(|v| v.name.to_lowercase());
        Ok(voices)
    }

    /// A voice by its id or its name (case-insensitive).
    pub fn open(&self, name_or_id: &str) -> Result<VoiceProfile, LibraryError> {
        if plain_id(name_or_id) && self.root.join(name_or_id).join(PROFILE).exists() {
            return self.read(name_or_id);
        }
        let wanted = name_or_id.trim().to_lowercase();
        self.list()?
            .into_iter()
            .find(|v| v.name.to_lowercase() == wanted)
            .ok_or_else(|| LibraryError::NotFound(name_or_id.to_string()))
    }

    fn name_taken(&self, name: &str, except: Option<&str>) -> Result<bool, LibraryError> {
        let wanted = name.trim().to_lowercase();
        Ok(self
            .list()?
            .iter()
            .any(|v| v.name.to_lowercase() == wanted && Some(v.id.as_str()) != except))
    }

    /// Saves a profile atomically, stamping its modification time.
    pub fn save(&self, profile: &mut VoiceProfile) -> Result<(), LibraryError> {
        let voice = self.beneath(&profile.id)?;
        if !voice.exists(PROFILE)? {
            return Err(LibraryError::NotFound(profile.id.clone()));
        }
        profile.modified_unix_ms = unix_ms().max(profile.modified_unix_ms);
        let json = serde_json::to_vec_pretty(profile).expect("a profile serializes");
        voice.write_atomic(PROFILE, &json)?;
        Ok(())
    }

    /// Writes a profile into a voice folder being built (made by this process, hidden).
    fn write_profile(&self, folder: &Path, profile: &VoiceProfile) -> Result<(), LibraryError> {
        let path = folder.join(PROFILE);
        let json = serde_json::to_vec_pretty(profile).expect("a profile serializes");
        write_atomic(&path, &json).map_err(io_error(&path))
    }

    /// A new, empty voice.
    pub fn create(&self, name: &str) -> Result<VoiceProfile, LibraryError> {
        let base = slug(name)?;
        if self.name_taken(name, None)? {
            return Err(LibraryError::NameTaken(name.trim().to_string()));
        }
        std::fs::create_dir_all(&self.root).map_err(io_error(&self.root))?;
        let mut id = base.clone();
        let mut n = 2;
        while self.root.join(&id).exists() {
            id = format!("{base}-{n}");
            n += 1;
        }
        let now = unix_ms();
        let profile = VoiceProfile {
            format: FORMAT_VERSION,
            id: id.clone(),
            name: name.trim().to_string(),
            created_unix_ms: now,
            modified_unix_ms: now,
            clips: Vec::new(),
            embedding: None,
            server_voice: None,
            matched: None,
        };
        self.install(&profile)?;
        tracing::info!(voice = %id, "voice created");
        Ok(profile)
    }

    /// Builds a voice's folder under a hidden name (its clips, written by `fill`, then its
    /// profile) and renames it into place, so a crash never leaves half a voice; when `fill`
    /// or a write fails, the hidden folder is removed and nothing is left behind.
    fn install_with(
        &self,
        profile: &mut VoiceProfile,
        fill: impl FnOnce(&Path, &mut VoiceProfile) -> Result<(), LibraryError>,
    ) -> Result<(), LibraryError> {
        let building = self
            .root
            .join(format!(".new-{}-{}", profile.id, std::process::id()));
        let _ = std::fs::remove_dir_all(&building);
        let result = (|| {
            let clips_dir = building.join(CLIPS);
            std::fs::create_dir_all(&clips_dir).map_err(io_error(&clips_dir))?;
            fill(&building, profile)?;
            self.write_profile(&building, profile)?;
            let folder = self.root.join(&profile.id);
            std::fs::rename(&building, &folder).map_err(io_error(&folder))?;
            sync_dir(&self.root).map_err(io_error(&self.root))
        })();
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&building);
        }
        result
    }

    fn install(&self, profile: &VoiceProfile) -> Result<(), LibraryError> {
        self.install_with(&mut profile.clone(), |_, _| Ok(()))
    }

    pub fn rename(&self, id: &str, new_name: &str) -> Result<VoiceProfile, LibraryError> {
        slug(new_name)?;
        let mut profile = self.read(id)?;
        if self.name_taken(new_name, Some(id))? {
            return Err(LibraryError::NameTaken(new_name.trim().to_string()));
        }
        profile.name = new_name.trim().to_string();
        self.save(&mut profile)?;
        Ok(profile)
    }

    /// Deletes a voice with its clips (renamed out of sight first, then removed).
    pub fn delete(&self, id: &str) -> Result<(), LibraryError> {
        let folder = self.folder(id)?;
        if !folder.join(PROFILE).exists() {
            return Err(LibraryError::NotFound(id.to_string()));
        }
        let doomed = self.root.join(format!(".deleted-{id}-{}", unix_ms()));
        std::fs::rename(&folder, &doomed).map_err(io_error(&folder))?;
        sync_dir(&self.root).map_err(io_error(&self.root))?;
        std::fs::remove_dir_all(&doomed).map_err(io_error(&doomed))?;
        tracing::info!(voice = %id, "voice deleted");
        Ok(())
    }

    /// Adds a checked, embedded clip: its WAV is written first, then the profile.
    pub fn add_clip(
        &self,
        id: &str,
        audio: &Audio,
        report: ClipReport,
        transcript: Option<String>,
        embedding: Embedding,
    ) -> Result<VoiceProfile, LibraryError> {
        let mut profile = self.read(id)?;
        if profile.clips.len() >= MAX_CLIPS {
            return Err(LibraryError::TooManyClips(profile.name));
        }
        let clip_id = (1..)
            .map(|n| format!("clip-{n}"))
            .find(|c| !profile.clips.iter().any(|k| &k.id == c))
            .expect("a free clip id");
        let file = format!("{CLIPS}/{clip_id}.wav");
        self.beneath(id)?.write_atomic(&file, &wav_bytes(audio))?;
        profile.clips.push(ReferenceClip {
            id: clip_id,
            file,
            seconds: audio.duration_secs(),
            report,
            transcript,
            embedding,
            added_unix_ms: unix_ms(),
        });
        profile.refresh_embedding();
        self.save(&mut profile)?;
        Ok(profile)
    }

    /// Removes a clip (the profile first, then its file, so a crash leaves at most an unused
    /// file).
    pub fn remove_clip(&self, id: &str, clip_id: &str) -> Result<VoiceProfile, LibraryError> {
        let mut profile = self.read(id)?;
        let index = profile
            .clips
            .iter()
            .position(|c| c.id == clip_id)
            .ok_or_else(|| LibraryError::NoSuchClip {
                voice: profile.name.clone(),
                clip: clip_id.to_string(),
            })?;
        let clip = profile.clips.remove(index);
        profile.refresh_embedding();
        self.save(&mut profile)?;
        let _ = self.beneath(id)?.remove_file(&clip.file);
        Ok(profile)
    }

    /// Edits a clip's transcript.
    pub fn set_transcript(
        &self,
        id: &str,
        clip_id: &str,
        transcript: &str,
    ) -> Result<VoiceProfile, LibraryError> {
        let mut profile = self.read(id)?;
        let name = profile.name.clone();
        let clip =
            profile
                .clips
                .iter_mut()
                .find(|c| c.id == clip_id)
                .ok_or(LibraryError::NoSuchClip {
                    voice: name,
                    clip: clip_id.to_string(),
                })?;
        clip.transcript = Some(transcript.trim().to_string()).filter(|t| !t.is_empty());
        self.save(&mut profile)?;
        Ok(profile)
    }

    /// Keeps what a match found.
    pub fn set_match(&self, id: &str, matched: VoiceMatch) -> Result<VoiceProfile, LibraryError> {
        let mut profile = self.read(id)?;
        profile.matched = Some(matched);
        self.save(&mut profile)?;
        Ok(profile)
    }

    /// Writes a voice as one file (a zip of its profile and clips), atomically.
    pub fn export(&self, id: &str, to: &Path) -> Result<(), LibraryError> {
        let profile = self.read(id)?;
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        let bad = |e: zip::result::ZipError| LibraryError::Io {
            path: to.to_path_buf(),
            source: std::io::Error::other(e),
        };
        zip.start_file(PROFILE, options).map_err(bad)?;
        zip.write_all(&serde_json::to_vec_pretty(&profile).expect("a profile serializes"))
            .map_err(io_error(to))?;
        let voice = self.beneath(&profile.id)?;
        for clip in &profile.clips {
            let mut source = voice.open_file(&clip.file)?;
            zip.start_file(&clip.file, options).map_err(bad)?;
            std::io::copy(&mut source, &mut zip).map_err(io_error(to))?;
        }
        let bytes = zip.finish().map_err(bad)?.into_inner();
        write_atomic(to, &bytes).map_err(io_error(to))
    }

    /// Imports a voice file made by [`VoiceLibrary::export`] within [`ImportLimits::default`];
    /// a taken name gets " (2)" and so on.
    pub fn import(&self, from: &Path) -> Result<VoiceProfile, LibraryError> {
        self.import_within(from, ImportLimits::default())
    }

    /// Imports a voice file within `limits`. Clips are streamed to disk, never held whole in
    /// memory, and counted as they are unpacked: the file's own sizes are not believed. Each
    /// clip is checked as an added clip is (5–30 s, level, silence: [`check_clip`]) and its
    /// report and length are measured again. A refused import leaves nothing behind.
    pub fn import_within(
        &self,
        from: &Path,
        limits: ImportLimits,
    ) -> Result<VoiceProfile, LibraryError> {
        let file = headroom_base::input::open_regular(from).map_err(io_error(from))?;
        let size = file.metadata().map_err(io_error(from))?.len();
        if size > limits.file_bytes {
            return Err(LibraryError::ImportTooLarge {
                path: from.to_path_buf(),
                reason: format!(
                    "the file is {size} bytes, more than the {} a voice file may be",
                    limits.file_bytes
                ),
            });
        }
        self.import_from(std::io::BufReader::new(file), from, limits)
    }

    /// [`VoiceLibrary::import_within`] from any seekable source; `shown` names it in errors.
    fn import_from<R: Read + Seek>(
        &self,
        source: R,
        shown: &Path,
        limits: ImportLimits,
    ) -> Result<VoiceProfile, LibraryError> {
        let bad = |reason: String| LibraryError::BadImport {
            path: shown.to_path_buf(),
            reason,
        };
        let too_large = |reason: String| LibraryError::ImportTooLarge {
            path: shown.to_path_buf(),
            reason,
        };
        let mut archive = zip::ZipArchive::new(source).map_err(|e| bad(e.to_string()))?;
        let mut profile_json = Vec::new();
        {
            let entry = archive
                .by_name(PROFILE)
                .map_err(|e| bad(format!("{PROFILE}: {e}")))?;
            entry
                .take(limits.profile_bytes + 1)
                .read_to_end(&mut profile_json)
                .map_err(|e| bad(format!("{PROFILE}: {e}")))?;
        }
        if profile_json.len() as u64 > limits.profile_bytes {
            return Err(too_large(format!(
                "{PROFILE} unpacks to more than {} bytes",
                limits.profile_bytes
            )));
        }
        let mut unpacked = profile_json.len() as u64;
        let mut profile: VoiceProfile =
            serde_json::from_slice(&profile_json).map_err(|e| bad(format!("{PROFILE}: {e}")))?;
        drop(profile_json);
        if profile.clips.len() > limits.clips {
            return Err(too_large(format!(
                "it has {} clips; a voice has at most {}",
                profile.clips.len(),
                limits.clips
            )));
        }
        for (i, clip) in profile.clips.iter().enumerate() {
            let expected = format!("{CLIPS}/{}.wav", clip.id);
            if clip.file != expected || !plain_id(&clip.id) {
                return Err(bad(format!("a clip is stored as {:?}", clip.file)));
            }
            if profile.clips[..i].iter().any(|c| c.id == clip.id) {
                return Err(bad(format!("{} is listed twice", clip.id)));
            }
        }
        let base_name = profile.name.trim().to_string();
        slug(&base_name)?;
        let mut name = base_name.clone();
        let mut n = 2;
        while self.name_taken(&name, None)? {
            name = format!("{base_name} ({n})");
            n += 1;
        }
        let base = slug(&name)?;
        let mut id = base.clone();
        let mut k = 2;
        std::fs::create_dir_all(&self.root).map_err(io_error(&self.root))?;
        while self.root.join(&id).exists() {
            id = format!("{base}-{k}");
            k += 1;
        }
        profile.id = id;
        profile.name = name;
        profile.format = FORMAT_VERSION;
        self.install_with(&mut profile, |building, profile| {
            for clip in &mut profile.clips {
                let path = building.join(&clip.file);
                let entry = archive
                    .by_name(&clip.file)
                    .map_err(|e| bad(format!("{}: {e}", clip.file)))?;
                let left = limits.total_bytes.saturating_sub(unpacked);
                let bound = limits.clip_bytes.min(left);
                let mut out = std::fs::File::create_new(&path).map_err(io_error(&path))?;
                // One byte past the bound tells a clip that is too large from one that fits.
                let copied = std::io::copy(&mut entry.take(bound + 1), &mut out)
                    .map_err(|e| bad(format!("{}: {e}", clip.file)))?;
                if copied > bound {
                    return Err(too_large(if bound < limits.clip_bytes {
                        format!(
                            "its files unpack to more than {} bytes in all",
                            limits.total_bytes
                        )
                    } else {
                        format!(
                            "{} unpacks to more than {} bytes (a clip is at most 30 s)",
                            clip.file, limits.clip_bytes
                        )
                    }));
                }
                unpacked += copied;
                out.sync_all().map_err(io_error(&path))?;
                drop(out);
                let audio = decode_file(&path, DecodeLimits::default())
                    .map_err(|e| bad(format!("{}: {e}", clip.file)))?;
                let report = check_clip(&audio);
                if !report.accepted() {
                    let advice = report
                        .findings
                        .iter()
                        .filter(|f| f.severity == Severity::Refused)
                        .map(|f| f.advice.as_str())
                        .collect::<Vec<_>>()
                        .join("; ");
                    return Err(LibraryError::ImportedClipRefused {
                        path: shown.to_path_buf(),
                        clip: clip.id.clone(),
                        advice,
                    });
                }
                // Measured here, not taken from the file.
                clip.seconds = audio.duration_secs();
                clip.report = report;
            }
            profile.refresh_embedding();
            profile.modified_unix_ms = unix_ms();
            Ok(())
        })?;
        Ok(profile)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_speech::voice::{check_clip, EMBEDDING_DIM};

    fn tone(seconds: f64) -> Audio {
        Audio {
            samples: (0..(seconds * 16_000.0) as usize)
                .map(|i| (i as f32 * 0.05).sin() * 0.3)
                .collect(),
            sample_rate: 16_000,
        }
    }

    fn embedding(seed: usize) -> Embedding {
        Embedding::new(
            (0..EMBEDDING_DIM)
                .map(|i| ((i * seed) % 7) as f32 + 0.1)
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn voices_are_created_renamed_listed_and_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let library = VoiceLibrary::new(dir.path().join("voices"));
        assert!(library.list().unwrap().is_empty());
        let anna = library.create("Anna Narrator").unwrap();
        assert_eq!(anna.id, "anna-narrator");
        assert!(matches!(
            library.create("anna narrator"),
            Err(LibraryError::NameTaken(_))
        ));
        assert!(matches!(
            library.create("  "),
            Err(LibraryError::InvalidName(_))
        ));
        library.create("Ben").unwrap();
        let renamed = library.rename(&anna.id, "Anna").unwrap();
        assert_eq!(renamed.id, anna.id, "the folder stays");
        assert_eq!(library.open("anna").unwrap().id, anna.id, "found by name");
        let names: Vec<String> = library
            .list()
            .unwrap()
            .into_iter()
            .map(|v| v.name)
            .collect();
        assert_eq!(names, ["Anna", "Ben"]);
        library.delete(&anna.id).unwrap();
        assert!(matches!(
            library.open("anna"),
            Err(LibraryError::NotFound(_))
        ));
        assert!(matches!(
            library.open("../etc"),
            Err(LibraryError::NotFound(_))
        ));
        assert_eq!(
            std::fs::read_dir(library.root()).unwrap().count(),
            1,
            "nothing left behind"
        );
    }

    #[test]
    fn clips_are_added_removed_and_averaged_and_a_match_goes_stale() {
        let dir = tempfile::tempdir().unwrap();
        let library = VoiceLibrary::new(dir.path());
        let voice = library.create("Cara").unwrap();
        let audio = tone(6.0);
        let v = library
            .add_clip(
                &voice.id,
                &audio,
                check_clip(&audio),
                Some("hello".into()),
                embedding(1),
            )
            .unwrap();
        assert_eq!(v.clips.len(), 1);
        assert!(library.clip_path(&v, &v.clips[0]).exists());
        assert!(v.embedding.as_ref().unwrap().similarity(&embedding(1)) > 0.99999);
        let v = library
            .add_clip(&voice.id, &audio, check_clip(&audio), None, embedding(3))
            .unwrap();
        assert_eq!(v.clips[1].id, "clip-2");
        let mean = v.embedding.clone().unwrap();
        assert!(mean.similarity(&embedding(1)) < 0.9999 && mean.similarity(&embedding(3)) < 0.9999);
        let v = library
            .set_transcript(&voice.id, "clip-2", "  typed  ")
            .unwrap();
        assert_eq!(v.clips[1].transcript.as_deref(), Some("typed"));
        let removed = library.remove_clip(&voice.id, "clip-1").unwrap();
        assert_eq!(removed.clips.len(), 1);
        assert!(
            removed
                .embedding
                .as_ref()
                .unwrap()
                .similarity(&embedding(3))
                > 0.99999
        );
        assert!(
            !library.clip_path(&v, &v.clips[0]).exists(),
            "the file went with it"
        );
        assert!(matches!(
            library.remove_clip(&voice.id, "clip-9"),
            Err(LibraryError::NoSuchClip { .. })
        ));
    }

    #[test]
    fn a_voice_exports_to_one_file_and_imports_under_a_free_name() {
        let dir = tempfile::tempdir().unwrap();
        let library = VoiceLibrary::new(dir.path().join("voices"));
        let voice = library.create("Dana").unwrap();
        let audio = tone(6.0);
        library
            .add_clip(
                &voice.id,
                &audio,
                check_clip(&audio),
                Some("words".into()),
                embedding(2),
            )
            .unwrap();
        let file = dir.path().join("dana.headroom-voice");
        library.export(&voice.id, &file).unwrap();
        let imported = library.import(&file).unwrap();
        assert_eq!(imported.name, "Dana (2)");
        assert_eq!(imported.clips.len(), 1);
        assert_eq!(imported.clips[0].transcript.as_deref(), Some("words"));
        let clip = std::fs::read(library.clip_path(&imported, &imported.clips[0])).unwrap();
        assert_eq!(clip, wav_bytes(&audio));
        // Not a voice file, or one whose clip path leaves its folder: refused, nothing made.
        std::fs::write(dir.path().join("junk"), b"not a zip").unwrap();
        assert!(matches!(
            library.import(&dir.path().join("junk")),
            Err(LibraryError::BadImport { .. })
        ));
        let mut evil = library.open("Dana").unwrap();
        evil.clips[0].file = "../../outside.wav".into();
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        zip.start_file(PROFILE, zip::write::SimpleFileOptions::default())
            .unwrap();
        zip.write_all(&serde_json::to_vec(&evil).unwrap()).unwrap();
        let evil_file = dir.path().join("evil.zip");
        std::fs::write(&evil_file, zip.finish().unwrap().into_inner()).unwrap();
        assert!(matches!(
            library.import(&evil_file),
            Err(LibraryError::BadImport { .. })
        ));
        assert_eq!(library.list().unwrap().len(), 2);
    }

    /// A voice file as `export` writes one, from a profile and its members' bytes.
    fn voice_file(profile: &VoiceProfile, members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        zip.start_file(PROFILE, options).unwrap();
        zip.write_all(&serde_json::to_vec(profile).unwrap())
            .unwrap();
        for (name, bytes) in members {
            zip.start_file(*name, options).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    /// A profile listing `count` clips named as export names them.
    fn profile_with_clips(count: usize) -> VoiceProfile {
        let audio = tone(6.0);
        VoiceProfile {
            format: FORMAT_VERSION,
            id: "max".into(),
            name: "Max".into(),
            created_unix_ms: 0,
            modified_unix_ms: 0,
            clips: (1..=count)
                .map(|n| ReferenceClip {
                    id: format!("clip-{n}"),
                    file: format!("{CLIPS}/clip-{n}.wav"),
                    seconds: 6.0,
                    report: check_clip(&audio),
                    transcript: None,
                    embedding: embedding(n),
                    added_unix_ms: 0,
                })
                .collect(),
            embedding: None,
            server_voice: None,
            matched: None,
        }
    }

    /// Nothing but the finished voices in the library: no hidden half-made folder.
    fn only_voices(library: &VoiceLibrary, expected: usize) {
        let names: Vec<_> = std::fs::read_dir(library.root())
            .map(|d| d.map(|e| e.unwrap().file_name()).collect())
            .unwrap_or_default();
        assert_eq!(names.len(), expected, "{names:?}");
        assert_eq!(library.list().unwrap().len(), expected);
    }

    #[test]
    fn an_import_is_bounded_in_clips_and_bytes_and_each_clip_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let library = VoiceLibrary::new(dir.path().join("voices"));
        let clip = wav_bytes(&tone(6.0)); // 192 KB
        let import = |name: &str, profile: &VoiceProfile, members: &[(&str, &[u8])], limits| {
            let file = dir.path().join(name);
            std::fs::write(&file, voice_file(profile, members)).unwrap();
            library.import_within(&file, limits)
        };
        let three: Vec<(String, &[u8])> = (1..=3)
            .map(|n| (format!("{CLIPS}/clip-{n}.wav"), &clip[..]))
            .collect();
        let three: Vec<(&str, &[u8])> = three.iter().map(|(n, b)| (n.as_str(), *b)).collect();
        let limits = ImportLimits {
            clip_bytes: clip.len() as u64,
            total_bytes: 3 * clip.len() as u64 + 64 * 1024,
            clips: 3,
            ..ImportLimits::default()
        };
        // Within every bound: imported, each clip measured again.
        let max = import("ok.voice", &profile_with_clips(3), &three, limits).unwrap();
        assert_eq!(max.clips.len(), 3);
        assert!((max.clips[2].seconds - 6.0).abs() < 1e-3);
        only_voices(&library, 1);

        // More clips than a voice holds: refused before anything is unpacked.
        let four = profile_with_clips(4);
        let error = import("four.voice", &four, &three, limits).unwrap_err();
        assert!(
            matches!(error, LibraryError::ImportTooLarge { .. }),
            "{error}"
        );
        assert!(error.to_string().contains("4 clips"), "{error}");
        // A clip past its bound, and clips that together pass the total: refused, nothing left.
        let tight = ImportLimits {
            clip_bytes: clip.len() as u64 - 1,
            ..limits
        };
        let error = import("big.voice", &profile_with_clips(3), &three, tight).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("clips/clip-1.wav unpacks to more than"),
            "{error}"
        );
        let total = ImportLimits {
            total_bytes: 2 * clip.len() as u64 + 1024,
            ..limits
        };
        let error = import("total.voice", &profile_with_clips(3), &three, total).unwrap_err();
        assert!(error.to_string().contains("in all"), "{error}");
        only_voices(&library, 1);

        // Each clip is checked as an added clip is: too short, or silent, is refused.
        let short = wav_bytes(&tone(2.0));
        let error = import(
            "short.voice",
            &profile_with_clips(2),
            &[(three[0].0, &clip), (three[1].0, &short)],
            limits,
        )
        .unwrap_err();
        assert!(
            matches!(&error, LibraryError::ImportedClipRefused { clip, .. } if clip == "clip-2"),
            "{error}"
        );
        assert!(error.to_string().contains("at least 5 s"), "{error}");
        let silent = wav_bytes(&Audio {
            samples: vec![0.0; 16_000 * 6],
            sample_rate: 16_000,
        });
        let error = import(
            "silent.voice",
            &profile_with_clips(1),
            &[(three[0].0, &silent)],
            limits,
        )
        .unwrap_err();
        assert!(error.to_string().contains("silent"), "{error}");
        only_voices(&library, 1);
    }

    /// Reads through to `inner`, counting the bytes it gives.
    struct Counting<R> {
        inner: R,
        read: std::rc::Rc<std::cell::Cell<u64>>,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read.set(self.read.get() + n as u64);
            Ok(n)
        }
    }

    impl<R: Seek> Seek for Counting<R> {
        fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
            self.inner.seek(to)
        }
    }

    #[test]
    fn a_highly_compressible_clip_is_refused_after_reading_no_more_than_the_bound() {
        // 64 MiB of zeros packs into about 64 KB: the hostile file of the issue, one clip.
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        zip.start_file(PROFILE, options).unwrap();
        zip.write_all(&serde_json::to_vec(&profile_with_clips(1)).unwrap())
            .unwrap();
        zip.start_file(format!("{CLIPS}/clip-1.wav"), options)
            .unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            zip.write_all(&zeros).unwrap();
        }
        let packed = zip.finish().unwrap().into_inner();
        assert!(packed.len() < 1 << 20, "{} bytes", packed.len());

        let dir = tempfile::tempdir().unwrap();
        let library = VoiceLibrary::new(dir.path().join("voices"));
        let read = std::rc::Rc::new(std::cell::Cell::new(0));
        let source = Counting {
            inner: std::io::Cursor::new(packed.clone()),
            read: read.clone(),
        };
        let limits = ImportLimits {
            clip_bytes: 256 * 1024,
            ..ImportLimits::default()
        };
        let error = library
            .import_from(source, Path::new("max.voice"), limits)
            .unwrap_err();
        assert!(
            matches!(error, LibraryError::ImportTooLarge { .. }),
            "{error}"
        );
        // Unpacking stopped at the bound: a fraction of the packed clip was read (the whole
        // of it unpacks to 64 MiB).
        assert!(
            read.get() < packed.len() as u64 / 4,
            "read {} of {} packed bytes",
            read.get(),
            packed.len()
        );
        only_voices(&library, 0);
    }

    #[cfg(unix)]
    #[test]
    fn a_voice_folder_never_leads_out_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let library = VoiceLibrary::new(dir.path().join("voices"));
        let voice = library.create("Eve").unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let clips = library.root().join(&voice.id).join(CLIPS);
        std::fs::remove_dir_all(&clips).unwrap();
        std::os::unix::fs::symlink(&outside, &clips).unwrap();
        let audio = tone(6.0);
        let error = library
            .add_clip(&voice.id, &audio, check_clip(&audio), None, embedding(1))
            .unwrap_err();
        assert!(
            error.to_string().starts_with(
                "clips is a symbolic link; Headroom writes only inside the voice folder"
            ),
            "{error}"
        );
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        assert!(library.open("Eve").unwrap().clips.is_empty());
    }
}
