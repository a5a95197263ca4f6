//! Voice profiles: a voice library (a folder per voice, usable from any project) holding each
//! voice's reference clips, their checks and transcripts, its speaker embedding, and what an
//! approximate voice match found. Every write is atomic; a profile that cannot be read is
//! reported and left as it is. The workflows that fill profiles (check, transcribe, embed,
//! match, speak) are [`crate::voice_work`].

use headroom_base::clock::unix_ms;
use headroom_base::fsutil::{folder_name, sync_dir, write_atomic};
use headroom_speech::audio::{wav_bytes, Audio};
use headroom_speech::voice::matching::{EspeakSetting, MatchOutcome, Score};
use headroom_speech::voice::{ClipReport, Embedding};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

const PROFILE: &str = "profile.json";
const CLIPS: &str = "clips";
const FORMAT_VERSION: u32 = 1;
const MAX_NAME_CHARS: usize = 80;
/// At most this many reference clips a voice.
pub const MAX_CLIPS: usize = 10;
/// The largest exported voice file imported (ten 30-second clips at 48 kHz are ~29 MB).
const MAX_IMPORT_BYTES: u64 = 64 * 1024 * 1024;

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

    /// A clip's WAV file.
    pub fn clip_path(&self, profile: &VoiceProfile, clip: &ReferenceClip) -> PathBuf {
        self.root.join(&profile.id).join(&clip.file)
    }

    fn read(&self, id: &str) -> Result<VoiceProfile, LibraryError> {
        let path = self.folder(id)?.join(PROFILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(LibraryError::NotFound(id.to_string()))
            }
            Err(e) => return Err(io_error(&path)(e)),
        };
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
        let folder = self.folder(&profile.id)?;
        if !folder.join(PROFILE).exists() {
            return Err(LibraryError::NotFound(profile.id.clone()));
        }
        profile.modified_unix_ms = unix_ms().max(profile.modified_unix_ms);
        self.write_profile(&folder, profile)
    }

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
        self.install(&profile, &[])?;
        tracing::info!(voice = %id, "voice created");
        Ok(profile)
    }

    /// Builds a voice's folder under a hidden name (its clips, then its profile) and renames it
    /// into place, so a crash never leaves half a voice.
    fn install(
        &self,
        profile: &VoiceProfile,
        clips: &[(String, Vec<u8>)],
    ) -> Result<(), LibraryError> {
        let building = self
            .root
            .join(format!(".new-{}-{}", profile.id, std::process::id()));
        let _ = std::fs::remove_dir_all(&building);
        let clips_dir = building.join(CLIPS);
        std::fs::create_dir_all(&clips_dir).map_err(io_error(&clips_dir))?;
        for (file, bytes) in clips {
            let path = building.join(file);
            write_atomic(&path, bytes).map_err(io_error(&path))?;
        }
        self.write_profile(&building, profile)?;
        let folder = self.root.join(&profile.id);
        std::fs::rename(&building, &folder).map_err(io_error(&folder))?;
        sync_dir(&self.root).map_err(io_error(&self.root))
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
        let path = self.folder(id)?.join(&file);
        write_atomic(&path, &wav_bytes(audio)).map_err(io_error(&path))?;
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
        let _ = std::fs::remove_file(self.folder(id)?.join(&clip.file));
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
        for clip in &profile.clips {
            let path = self.clip_path(&profile, clip);
            let bytes = std::fs::read(&path).map_err(io_error(&path))?;
            zip.start_file(&clip.file, options).map_err(bad)?;
            zip.write_all(&bytes).map_err(io_error(to))?;
        }
        let bytes = zip.finish().map_err(bad)?.into_inner();
        write_atomic(to, &bytes).map_err(io_error(to))
    }

    /// Imports a voice file made by [`VoiceLibrary::export`]; a taken name gets " (2)" and so
    /// on. Sizes are checked before anything is unpacked.
    pub fn import(&self, from: &Path) -> Result<VoiceProfile, LibraryError> {
        let bad = |reason: String| LibraryError::BadImport {
            path: from.to_path_buf(),
            reason,
        };
        let size = std::fs::metadata(from).map_err(io_error(from))?.len();
        if size > MAX_IMPORT_BYTES {
            return Err(bad(format!(
                "it is {size} bytes, more than a voice file holds"
            )));
        }
        let file = std::fs::File::open(from).map_err(io_error(from))?;
        let mut archive = zip::ZipArchive::new(file).map_err(|e| bad(e.to_string()))?;
        let mut read_member = |name: &str| -> Result<Vec<u8>, LibraryError> {
            let entry = archive
                .by_name(name)
                .map_err(|e| bad(format!("{name}: {e}")))?;
            if entry.size() > MAX_IMPORT_BYTES {
                return Err(bad(format!("{name} unpacks to {} bytes", entry.size())));
            }
            let mut bytes = Vec::new();
            entry
                .take(MAX_IMPORT_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(io_error(from))?;
            if bytes.len() as u64 > MAX_IMPORT_BYTES {
                return Err(bad(format!("{name} unpacks past the size limit")));
            }
            Ok(bytes)
        };
        let mut profile: VoiceProfile = serde_json::from_slice(&read_member(PROFILE)?)
            .map_err(|e| bad(format!("{PROFILE}: {e}")))?;
        if profile.clips.len() > MAX_CLIPS {
            return Err(bad(format!("it has {} clips", profile.clips.len())));
        }
        let mut clips = Vec::new();
        for clip in &profile.clips {
            let expected = format!("{CLIPS}/{}.wav", clip.id);
            if clip.file != expected || !plain_id(&clip.id) {
                return Err(bad(format!("a clip is stored as {:?}", clip.file)));
            }
            let bytes = read_member(&clip.file)?;
            headroom_speech::audio::decode_bytes(
                bytes.clone(),
                Some("wav"),
                Path::new(&clip.file),
                Default::default(),
            )
            .map_err(|e| bad(e.to_string()))?;
            clips.push((clip.file.clone(), bytes));
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
        profile.refresh_embedding();
        profile.modified_unix_ms = unix_ms();
        self.install(&profile, &clips)?;
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
}
