//! Projects: a folder per project the user can see and back up, holding `project.json` (the
//! manifest: settings, transcript, cleanup decisions), `audio/` (imported and recorded audio),
//! `speech/` (synthesized WAVs) and `exports/`. Every write of the manifest is atomic, and a
//! manifest that cannot be read is reported, never overwritten or deleted.
//!
//! Every file of a project is read and written through [`ProjectStore::beneath`], which
//! resolves paths beneath the project's folder and follows no symbolic link: a `speech/` or
//! `exports/` that leads out of the folder (a shared or synced folder, an unpacked archive)
//! is refused by name, and nothing is written where it points.

use headroom_base::clock::unix_ms;
use headroom_base::fsutil::{
    folder_name, remove_stale_temporaries_beneath, sync_dir, Beneath, BeneathError, EntryKind,
};
use headroom_core::admission::RejectReason;
use headroom_core::cleanup::{CleanupMode, FailurePolicy};
use headroom_speech::asr::{Segment, Speaker, Transcript, Word};
use headroom_speech::audio::repair_partial_in;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

mod edits;
mod narrated;
mod opened;
pub mod recording_edit;
mod speakers;
pub use narrated::{
    NarratedSegment, Narration, NarrationMode, NarrationOptions, NarrationOutput,
    NarrationSettings, NarrationStage, NarrationTake, SegmentRefusal, SegmentState, SpeakerVoice,
    SpeakerVoiceSource, VoiceNote,
};
pub use recording_edit::RecordingEdit;
pub use speakers::{SpeakerEditError, SpeakerSetting, SplitAt, NEW_SPEAKER};

const MANIFEST: &str = "project.json";
const FORMAT_VERSION: u32 = 1;
const MAX_NAME_CHARS: usize = 80;

/// Why a project operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error("no project {0:?}")]
    NotFound(String),
    #[error("a project named {0:?} already exists")]
    NameTaken(String),
    #[error("{0}")]
    InvalidName(String),
    #[error("segment {index} does not exist (the transcript has {count})")]
    NoSuchSegment { index: usize, count: usize },
    #[error("segment {0} has no cleanup suggestion to decide on")]
    NoSuggestion(usize),
    #[error("no kept version {0:?} (see the project's versions)")]
    NoSuchVersion(String),
    #[error("no job {0:?} in this project (see the project's jobs)")]
    NoSuchJob(String),
    #[error("job {0} is running (in this or another window, or the command line); cancel it there first")]
    JobRunning(String),
    #[error("{name} was changed elsewhere (another window or the command line) after this view of it was loaded; it now shows what was saved there: make the change again")]
    ChangedElsewhere { name: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a readable project manifest ({reason}); it was left as it is")]
    BadManifest { path: PathBuf, reason: String },
    /// A path that would leave the project (a symbolic link on the way, `..`).
    #[error(transparent)]
    Beneath(#[from] BeneathError),
}

impl ProjectError {
    /// Wraps an I/O error with the path it concerns.
    pub fn from_io(path: &Path) -> impl FnOnce(std::io::Error) -> ProjectError + '_ {
        move |source| ProjectError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// A project's folder of kept transcript versions.
const VERSIONS: &str = "versions";
/// A project's folder of job records (see [`crate::jobs`]).
pub(crate) const JOBS: &str = "jobs";
/// The folders a new project starts with.
const CREATED_SUBFOLDERS: [&str; 3] = ["audio", "speech", "exports"];

/// Where a project keeps what can be made again from its files: the waveforms' peaks.
const PEAKS_CACHE: &str = "cache/peaks";

/// Where a project keeps the peaks of its file `relative` (`audio/talk.flac`).
pub(crate) fn peaks_cache(relative: &str) -> String {
    format!("{PEAKS_CACHE}/{relative}.peaks")
}
/// Every folder of a project that the app writes files into.
pub const SUBFOLDERS: [&str; 5] = ["audio", "speech", "exports", VERSIONS, JOBS];

/// The store's lock file, in its root.
const LOCK_FILE: &str = ".lock";

/// The store's lock, held while alive (closing the file releases it).
pub(crate) struct StoreLock(#[allow(dead_code)] std::fs::File);

/// What [`ProjectStore::recover_after_crash`] found and mended.
#[derive(Debug, Default, PartialEq)]
pub struct Recovered {
    /// Recordings made whole, as WAV files.
    pub recordings: Vec<PathBuf>,
    /// Temporary files of interrupted writes, removed.
    pub temporaries_removed: usize,
}

/// The `.json` files in one of a project's folders; none when the folder is not there yet.
pub(crate) fn json_files(dir: &Path) -> Result<Vec<PathBuf>, ProjectError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ProjectError::from_io(dir)(e)),
    };
    Ok(entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect())
}

/// Per-project choices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(default)]
pub struct ProjectSettings {
    /// Send the transcript to the text model; when off, only the rule-based cleanup runs and no
    /// request leaves the machine.
    pub llm_cleanup: bool,
    /// What happens when the text lane refuses a cleanup.
    pub failure_policy: FailurePolicy,
    pub cleanup_mode: CleanupMode,
    /// The text model's server for this project; `None` uses the app's setting.
    pub server_url: Option<String>,
    /// More servers beside `server_url` behind this project's text lane (each with its own
    /// slots, health and breaker); only with a `server_url` of the project's own.
    pub upstreams: Vec<String>,
    /// The servers on other machines (their origins, e.g. `https://gpu.example:8000`) this
    /// project's transcript may be sent to, by the user's explicit consent: each upstream of
    /// its text lane off this machine needs its own. Servers on this machine need none. (A
    /// project saved with one origin reads as a list of that one.)
    #[serde(default, deserialize_with = "one_or_many_origins")]
    pub remote_text_allowed: Vec<String>,
    /// The transcription servers on other machines (their origins) this project's recording
    /// may be sent to, by the user's explicit consent (given when a batch sent to servers made
    /// the project); servers on this machine need none.
    pub remote_audio_allowed: Vec<String>,
    /// The one cloning server on another machine (its origin) this project's text and voice
    /// clips may be sent to, by the user's explicit consent; servers on this machine need
    /// none. A different server elsewhere needs consent again.
    pub remote_voice_allowed: Option<String>,
    /// The synthesis voice (an espeak-ng voice id, or `joe` for the Piper voice); `None` is the
    /// engine's default.
    pub voice: Option<String>,
    /// Whether transcribing finds who speaks when (`off`, `auto`, or how many speakers).
    #[cfg_attr(feature = "typescript", ts(type = "string"))]
    pub speakers: SpeakerSetting,
    /// Whether transcribing writes the fillers ("um", "uh") Whisper hears but leaves out of its
    /// text, so that editing by the words can cut them (each window read twice: about half as
    /// long again).
    pub hear_fillers: bool,
}

impl ProjectSettings {
    /// What this project allows off this machine for its voices: its cloning server.
    pub fn remote_consent(&self) -> headroom_base::consent::RemoteConsent {
        headroom_base::consent::RemoteConsent::allowing(self.remote_voice_allowed.iter())
    }

    /// What this project allows off this machine for its transcript: its text lane's servers.
    pub fn text_consent(&self) -> headroom_base::consent::RemoteConsent {
        headroom_base::consent::RemoteConsent::allowing(self.remote_text_allowed.iter())
    }
}

/// Origins as a list, or as the one origin (or none) older projects saved.
fn one_or_many_origins<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Origins {
        One(Option<String>),
        Many(Vec<String>),
    }
    Ok(match Origins::deserialize(deserializer)? {
        Origins::One(one) => one.into_iter().collect(),
        Origins::Many(many) => many,
    })
}

impl Default for ProjectSettings {
    fn default() -> Self {
        ProjectSettings {
            llm_cleanup: false,
            failure_policy: FailurePolicy::Reject,
            cleanup_mode: CleanupMode::Cleanup,
            server_url: None,
            upstreams: Vec::new(),
            remote_text_allowed: Vec::new(),
            remote_audio_allowed: Vec::new(),
            remote_voice_allowed: None,
            voice: None,
            speakers: SpeakerSetting::default(),
            hear_fillers: false,
        }
    }
}

/// Where a cleanup suggestion came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum SuggestionSource {
    Llm,
    RuleBased,
}

/// The user's decision on a suggestion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    #[default]
    Pending,
    Accepted,
    Rejected,
}

/// Why a text is not what was asked of the text model, as a code each front end words in its
/// own language (the window in the user's; the English `note` beside it stays for the CLI, the
/// logs and files written before codes were kept).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TextNote {
    /// The rules cleaned the text (or part of it): the text model refused, or its reply was
    /// unusable, for these reasons.
    RuleBased { reasons: Vec<RejectReason> },
    /// Not translated, for these reasons (the rules cannot translate): the original, cleaned by
    /// the rules, is spoken.
    NotTranslated { reasons: Vec<RejectReason> },
    /// The project's LLM cleanup is off: the rules cleaned the text instead of rewriting it.
    RulesInsteadOfRewrite,
}

/// Reads an optional code leniently: one this version does not know (a kind or a reason a newer
/// version wrote) reads as none, so the project still opens and the English note still shows.
pub(crate) fn unknown_code_as_none<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let value = Option::<serde_json::Value>::deserialize(d)?;
    Ok(value.and_then(|v| serde_json::from_value(v).ok()))
}

/// A cleaned version of one segment, waiting for or holding the user's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Suggestion {
    pub text: String,
    pub source: SuggestionSource,
    /// Why the rule-based cleanup was used, when a rejection caused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The same, as a code.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "unknown_code_as_none"
    )]
    pub note_code: Option<TextNote>,
    #[serde(default)]
    pub decision: Decision,
}

/// One transcript segment in a project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ProjectSegment {
    pub start: f64,
    pub end: f64,
    /// The transcribed text, as the user edited it.
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suggestion: Option<Suggestion>,
    /// Who speaks (a [`Speaker::id`] of the project's speakers), once speakers were found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// The words with their times, as transcribed (kept for splitting the segment at a word
    /// and for exports); dropped when the text is edited, as they no longer say it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub words: Vec<ProjectWord>,
}

/// A word of a segment with its time, in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ProjectWord {
    pub start: f64,
    pub end: f64,
    pub text: String,
}

impl ProjectSegment {
    /// The text synthesis uses: the accepted cleanup, else the transcript text.
    pub fn speech_text(&self) -> &str {
        match &self.suggestion {
            Some(s) if s.decision == Decision::Accepted => &s.text,
            _ => &self.text,
        }
    }
}

/// A synthesized file kept in the project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct SpeechTake {
    /// Relative to the project folder.
    pub file: String,
    pub voice: Option<String>,
    /// The segment spoken, or `None` for the whole transcript.
    pub segment: Option<usize>,
    pub duration_secs: f64,
    pub created_unix_ms: u64,
    /// For a take in a voice profile: how it was made ("voice match (approximate)", "cloned
    /// by ...") and how close it is to the voice, beside the default voice: by the embedder
    /// the voice match searched against, and by the independent one (Resemblyzer's, `None`
    /// when it is not installed), which the search never used.
    #[serde(default)]
    pub voice_method: Option<String>,
    #[serde(default)]
    pub similarity: Option<f32>,
    #[serde(default)]
    pub default_similarity: Option<f32>,
    #[serde(default)]
    pub similarity_independent: Option<f32>,
    #[serde(default)]
    pub default_similarity_independent: Option<f32>,
}

/// The manifest, `project.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Project {
    pub format: u32,
    /// The folder's name; stable handle for the UI.
    pub id: String,
    pub name: String,
    pub created_unix_ms: u64,
    pub modified_unix_ms: u64,
    #[serde(default)]
    pub settings: ProjectSettings,
    /// The audio the transcript came from, relative to the project folder.
    #[serde(default)]
    pub source_audio: Option<String>,
    #[serde(default)]
    pub language: Option<String>,
    #[serde(default)]
    pub duration_secs: f64,
    #[serde(default)]
    pub segments: Vec<ProjectSegment>,
    /// Who speaks in the transcript, when speakers were found; segments name them by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub speakers: Vec<Speaker>,
    #[serde(default)]
    pub speech: Vec<SpeechTake>,
    /// The project's narration (see `crate::narration`), once one was started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub narration: Option<Narration>,
    /// The edit of the recording by its words (see the `editing` module): what was asked and the
    /// stretches of the original kept. The original is never changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<RecordingEdit>,
}

impl Project {
    /// Parses a manifest's bytes; `path` names it in errors. Also the fuzzing entry point.
    pub fn from_manifest(bytes: &[u8], path: &Path) -> Result<Project, ProjectError> {
        let project: Project =
            serde_json::from_slice(bytes).map_err(|e| ProjectError::BadManifest {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
        if project.format > FORMAT_VERSION {
            return Err(ProjectError::BadManifest {
                path: path.to_path_buf(),
                reason: format!(
                    "written by a newer Headroom (format {}, this one reads {FORMAT_VERSION})",
                    project.format
                ),
            });
        }
        Ok(project)
    }

    /// Replaces the transcript (and any cleanup decisions on the old one).
    pub fn set_transcript(&mut self, transcript: &Transcript) {
        self.language = transcript.language.clone();
        self.duration_secs = transcript.duration;
        self.segments = transcript
            .segments
            .iter()
            .map(|s| ProjectSegment {
                start: s.start,
                end: s.end,
                text: s.text.trim().to_string(),
                suggestion: None,
                speaker: s.speaker.clone(),
                words: s
                    .words
                    .iter()
                    .map(|w| ProjectWord {
                        start: w.start,
                        end: w.end,
                        text: w.text.clone(),
                    })
                    .collect(),
            })
            .collect();
        self.speakers = transcript.speakers.clone();
        // The edit was of the words replaced (the version kept before has it).
        self.edit = None;
    }

    /// The transcript as the user edited it, for exports.
    pub fn transcript(&self) -> Transcript {
        Transcript {
            speakers: self.speakers.clone(),
            language: self.language.clone(),
            duration: self.duration_secs,
            segments: self
                .segments
                .iter()
                .map(|s| Segment {
                    speaker: s.speaker.clone(),
                    start: s.start,
                    end: s.end,
                    text: s.text.clone(),
                    words: s
                        .words
                        .iter()
                        .map(|w| Word {
                            start: w.start,
                            end: w.end,
                            text: w.text.clone(),
                            probability: 1.0,
                            speaker: s.speaker.clone(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// The text to synthesize: accepted cleanups where there are any, else the transcript.
    pub fn speech_text(&self, segment: Option<usize>) -> Result<String, ProjectError> {
        match segment {
            Some(i) => Ok(self.segment(i)?.speech_text().to_string()),
            None => Ok(self
                .segments
                .iter()
                .map(|s| s.speech_text().trim())
                .filter(|t| !t.is_empty())
                .collect::<Vec<_>>()
                .join(" ")),
        }
    }

    pub fn segment(&self, index: usize) -> Result<&ProjectSegment, ProjectError> {
        let count = self.segments.len();
        self.segments
            .get(index)
            .ok_or(ProjectError::NoSuchSegment { index, count })
    }

    pub fn segment_mut(&mut self, index: usize) -> Result<&mut ProjectSegment, ProjectError> {
        let count = self.segments.len();
        self.segments
            .get_mut(index)
            .ok_or(ProjectError::NoSuchSegment { index, count })
    }

    /// Records the user's decision on a segment's suggestion.
    pub fn decide(&mut self, index: usize, decision: Decision) -> Result<(), ProjectError> {
        match &mut self.segment_mut(index)?.suggestion {
            Some(s) => {
                s.decision = decision;
                Ok(())
            }
            None => Err(ProjectError::NoSuggestion(index)),
        }
    }

    /// Decides every pending suggestion at once; returns how many changed.
    pub fn decide_all(&mut self, decision: Decision) -> usize {
        let mut changed = 0;
        for s in self
            .segments
            .iter_mut()
            .filter_map(|s| s.suggestion.as_mut())
        {
            if s.decision == Decision::Pending {
                s.decision = decision;
                changed += 1;
            }
        }
        changed
    }
}

/// A transcript as it was before something replaced it wholesale (transcribing again, accepting
/// or rejecting every suggestion, restoring another version), kept in the project's
/// `versions/` folder so it can be restored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptVersion {
    pub id: String,
    pub saved_unix_ms: u64,
    /// Why it was kept, e.g. "before transcribing again".
    pub reason: String,
    #[serde(default)]
    pub source_audio: Option<String>,
    #[serde(default)]
    pub language: Option<String>,
    #[serde(default)]
    pub duration_secs: f64,
    pub segments: Vec<ProjectSegment>,
    /// The speakers the segments name, as they were then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub speakers: Vec<Speaker>,
    /// The edit of the recording as it was then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<RecordingEdit>,
}

/// A kept version as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct VersionInfo {
    pub id: String,
    pub saved_unix_ms: u64,
    pub reason: String,
    pub segments: usize,
}

/// A project as listed, or the reason it cannot be opened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ProjectEntry {
    Ok {
        id: String,
        name: String,
        modified_unix_ms: u64,
        segments: usize,
    },
    Unreadable {
        id: String,
        error: String,
    },
}

/// The folder holding all projects.
#[derive(Debug, Clone)]
pub struct ProjectStore {
    root: PathBuf,
    /// Manifests read last, kept parsed (shared by the store's clones).
    opened: opened::Opened,
}

/// Checks a project name and turns it into a folder name.
fn folder_name_for(name: &str) -> Result<String, ProjectError> {
    folder_name(name, "project", MAX_NAME_CHARS).map_err(ProjectError::InvalidName)
}

/// Reads and parses the manifest of `id` from `file` (shown as `path` in errors).
fn read_manifest(id: &str, mut file: std::fs::File, path: &Path) -> Result<Project, ProjectError> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut bytes).map_err(ProjectError::from_io(path))?;
    let mut project = Project::from_manifest(&bytes, path)?;
    // The folder is the identity; a copied or moved folder keeps working.
    project.id = id.to_string();
    Ok(project)
}

impl ProjectStore {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ProjectStore {
            root: root.into(),
            opened: opened::Opened::default(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The folder of a project; refuses ids that would leave the projects folder.
    pub fn folder(&self, id: &str) -> Result<PathBuf, ProjectError> {
        let plain = !id.is_empty()
            && !id.starts_with('.')
            && id.chars().all(|c| c.is_alphanumeric() || c == '-');
        if !plain {
            return Err(ProjectError::NotFound(id.to_string()));
        }
        Ok(self.root.join(id))
    }

    /// The project's folder, opened so that every file of it is read and written beneath it
    /// and through no symbolic link (see [`Beneath`]): the one way into a project's files.
    pub fn beneath(&self, id: &str) -> Result<Beneath, ProjectError> {
        let folder = self.folder(id)?;
        Beneath::open(&folder, "project").map_err(|e| {
            if e.is_not_found() {
                ProjectError::NotFound(id.to_string())
            } else {
                e.into()
            }
        })
    }

    /// Every project folder, newest first; unreadable manifests are listed with their error.
    pub fn list(&self) -> Result<Vec<ProjectEntry>, ProjectError> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(ProjectError::from_io(&self.root)(e)),
        };
        let mut listed = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let Some(id) = path
                .file_name()
                .and_then(|n| n.to_str())
                .map(str::to_string)
            else {
                continue;
            };
            if id.starts_with('.') || !path.join(MANIFEST).exists() {
                continue;
            }
            listed.push(
                self.entry(&id)
                    .unwrap_or_else(|e| ProjectEntry::Unreadable {
                        id,
                        error: e.to_string(),
                    }),
            );
        }
        listed.sort_by_key(|e| match e {
            ProjectEntry::Ok {
                modified_unix_ms, ..
            } => std::cmp::Reverse(*modified_unix_ms),
            ProjectEntry::Unreadable { .. } => std::cmp::Reverse(0),
        });
        Ok(listed)
    }

    fn name_in_use(&self, name: &str, except: Option<&str>) -> Result<bool, ProjectError> {
        Ok(self.list()?.iter().any(|e| match e {
            ProjectEntry::Ok { id, name: n, .. } => {
                Some(id.as_str()) != except && n.trim().eq_ignore_ascii_case(name.trim())
            }
            ProjectEntry::Unreadable { .. } => false,
        }))
    }

    /// A free folder name for `name` (the slug, then `slug-2`, `slug-3`, ...).
    fn free_folder(&self, name: &str) -> Result<String, ProjectError> {
        let slug = folder_name_for(name)?;
        let mut candidate = slug.clone();
        let mut n = 2;
        while self.root.join(&candidate).exists() {
            candidate = format!("{slug}-{n}");
            n += 1;
        }
        Ok(candidate)
    }

    /// Takes the store's lock: a file lock on `<root>/.lock`. Every change to a project
    /// (create, rename, delete, update) holds it, so writers in this process (each opens the
    /// file itself) and in other processes — a second app, the CLI — take turns and each
    /// works on what the one before it wrote. Held for a manifest's read and write, never for
    /// a long job. Released when the guard drops.
    pub(crate) fn lock(&self) -> Result<StoreLock, ProjectError> {
        std::fs::create_dir_all(&self.root).map_err(ProjectError::from_io(&self.root))?;
        let path = self.root.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(ProjectError::from_io(&path))?;
        file.lock().map_err(ProjectError::from_io(&path))?;
        Ok(StoreLock(file))
    }

    /// Opens the project, applies `change` and saves it, under the store's lock: the change
    /// sees every write finished before it, and no write is lost to a concurrent one.
    pub fn update<T, E: From<ProjectError>>(
        &self,
        id: &str,
        change: impl FnOnce(&mut Project) -> Result<T, E>,
    ) -> Result<(Project, T), E> {
        let _lock = self.lock()?;
        let mut project = self.open(id)?;
        let out = change(&mut project)?;
        self.save_locked(&mut project)?;
        Ok((project, out))
    }

    /// As [`ProjectStore::update`], first keeping the transcript as it is (when it has one) as
    /// a version that can be restored; `reason` says what is about to replace it.
    pub fn update_keeping_version<T, E: From<ProjectError>>(
        &self,
        id: &str,
        reason: &str,
        change: impl FnOnce(&mut Project) -> Result<T, E>,
    ) -> Result<(Project, T), E> {
        let _lock = self.lock()?;
        let mut project = self.open(id)?;
        self.keep_version(&project, reason)?;
        let out = change(&mut project)?;
        self.save_locked(&mut project)?;
        Ok((project, out))
    }

    /// Writes the project's current transcript to `versions/` (nothing when it has none).
    fn keep_version(&self, project: &Project, reason: &str) -> Result<(), ProjectError> {
        if project.segments.is_empty() {
            return Ok(());
        }
        let beneath = self.beneath(&project.id)?;
        beneath.create_dir_all(VERSIONS)?;
        let saved = unix_ms();
        // Unique even for two versions kept in one millisecond.
        let mut n = 0;
        let id = loop {
            let id = format!("{saved}-{n}");
            if !beneath.exists(format!("{VERSIONS}/{id}.json"))? {
                break id;
            }
            n += 1;
        };
        let version = TranscriptVersion {
            id: id.clone(),
            saved_unix_ms: saved,
            reason: reason.to_string(),
            source_audio: project.source_audio.clone(),
            language: project.language.clone(),
            duration_secs: project.duration_secs,
            segments: project.segments.clone(),
            speakers: project.speakers.clone(),
            edit: project.edit.clone(),
        };
        let json = serde_json::to_vec_pretty(&version).expect("a version serializes");
        beneath.write_atomic(format!("{VERSIONS}/{id}.json"), &json)?;
        Ok(())
    }

    /// The kept versions of a project's transcript, newest first.
    pub fn versions(&self, id: &str) -> Result<Vec<VersionInfo>, ProjectError> {
        let mut versions = Vec::new();
        let beneath = self.beneath(id)?;
        if !beneath.exists(VERSIONS)? {
            return Ok(versions);
        }
        for path in json_files(&beneath.shown(VERSIONS))? {
            let Some(name) = path.file_name() else {
                continue;
            };
            let Ok(version) = self.read_version(&beneath, &Path::new(VERSIONS).join(name)) else {
                continue; // a damaged version is skipped, never deleted
            };
            versions.push(VersionInfo {
                id: version.id,
                saved_unix_ms: version.saved_unix_ms,
                reason: version.reason,
                segments: version.segments.len(),
            });
        }
        versions.sort_by(|a, b| b.saved_unix_ms.cmp(&a.saved_unix_ms).then(b.id.cmp(&a.id)));
        Ok(versions)
    }

    fn read_version(
        &self,
        beneath: &Beneath,
        relative: &Path,
    ) -> Result<TranscriptVersion, ProjectError> {
        let path = beneath.shown(relative);
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut beneath.open_file(relative)?, &mut bytes)
            .map_err(ProjectError::from_io(&path))?;
        serde_json::from_slice(&bytes).map_err(|e| ProjectError::BadManifest {
            path,
            reason: e.to_string(),
        })
    }

    /// Brings back a kept version; the transcript it replaces is kept as a version first.
    pub fn restore(&self, id: &str, version: &str) -> Result<Project, ProjectError> {
        let plain = !version.is_empty() && version.chars().all(|c| c.is_ascii_digit() || c == '-');
        let beneath = self.beneath(id)?;
        let relative = Path::new(VERSIONS).join(format!("{version}.json"));
        if !plain || !beneath.exists(&relative)? {
            return Err(ProjectError::NoSuchVersion(version.to_string()));
        }
        let kept = self.read_version(&beneath, &relative)?;
        let (project, ()) =
            self.update_keeping_version(id, &format!("before restoring {version}"), |p| {
                p.source_audio = kept.source_audio;
                p.language = kept.language;
                p.duration_secs = kept.duration_secs;
                p.segments = kept.segments;
                p.speakers = kept.speakers;
                p.edit = kept.edit;
                Ok::<_, ProjectError>(())
            })?;
        Ok(project)
    }

    /// Makes whole what a crash left in the projects; run when the app starts. Repairs the
    /// recordings it interrupted (their `.partial` files in `audio/`) and removes the temporary
    /// files of writes it cut short (an import of a long recording among them), in every
    /// project's folders. Every folder is listed, and every file repaired, renamed or removed,
    /// through the project folder's handle ([`Beneath`]): a subfolder or a file that is a link
    /// (out of the project or not) is never listed through, opened or removed.
    pub fn recover_after_crash(&self) -> Recovered {
        let mut recovered = Recovered {
            temporaries_removed: Beneath::open(&self.root, "projects")
                .map(|root| remove_stale_temporaries_beneath(&root, ""))
                .unwrap_or(0),
            ..Recovered::default()
        };
        let Ok(entries) = self.list() else {
            return recovered;
        };
        for entry in entries {
            let ProjectEntry::Ok { id, .. } = entry else {
                continue;
            };
            let Ok(beneath) = self.beneath(&id) else {
                continue;
            };
            recovered.temporaries_removed += remove_stale_temporaries_beneath(&beneath, "");
            // A subfolder that is a link (out of the project or not) is refused by the listing:
            // nothing there is the project's to remove or repair.
            for sub in SUBFOLDERS {
                recovered.temporaries_removed += remove_stale_temporaries_beneath(&beneath, sub);
            }
            for sub in CREATED_SUBFOLDERS {
                recovered.temporaries_removed +=
                    remove_stale_temporaries_beneath(&beneath, Path::new(PEAKS_CACHE).join(sub));
            }
            let Ok(files) = beneath.read_dir("audio") else {
                continue;
            };
            for file in files {
                let relative = Path::new("audio").join(&file.name);
                if file.kind != EntryKind::File
                    || relative.extension().and_then(|e| e.to_str()) != Some("partial")
                {
                    continue;
                }
                match repair_partial_in(&beneath, &relative) {
                    Ok(Some(repaired)) => {
                        tracing::warn!(file = %repaired.display(), "recovered a recording interrupted by a crash");
                        recovered.recordings.push(repaired);
                    }
                    Ok(None) => {}
                    Err(e) => tracing::error!(
                        "cannot recover {}: {e}",
                        beneath.shown(&relative).display()
                    ),
                }
            }
        }
        if recovered.temporaries_removed > 0 {
            tracing::warn!(
                count = recovered.temporaries_removed,
                "removed temporary files of writes a crash cut short"
            );
        }
        recovered
    }

    /// Removes what a crash left of a create or a delete (hidden `.new-*` and `.deleted-*`
    /// folders). Both are made and removed under the store's lock, so with it held any found
    /// are leftovers.
    fn sweep_leftovers(&self) {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(".new-") || name.starts_with(".deleted-") {
                if let Err(e) = std::fs::remove_dir_all(entry.path()) {
                    tracing::warn!(folder = %name, error = %e, "a leftover folder stays");
                }
            }
        }
    }

    pub fn create(&self, name: &str) -> Result<Project, ProjectError> {
        let _lock = self.lock()?;
        self.sweep_leftovers();
        let id = self.free_folder(name)?;
        if self.name_in_use(name, None)? {
            return Err(ProjectError::NameTaken(name.trim().to_string()));
        }
        // Built under a hidden name and renamed into place, so a crash never leaves a
        // half-made folder holding the name.
        let building = self.root.join(format!(".new-{id}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&building);
        for sub in CREATED_SUBFOLDERS {
            let dir = building.join(sub);
            std::fs::create_dir_all(&dir).map_err(ProjectError::from_io(&dir))?;
        }
        let now = unix_ms();
        let project = Project {
            speakers: Vec::new(),
            format: FORMAT_VERSION,
            id,
            name: name.trim().to_string(),
            created_unix_ms: now,
            modified_unix_ms: now,
            settings: ProjectSettings::default(),
            source_audio: None,
            language: None,
            duration_secs: 0.0,
            segments: Vec::new(),
            speech: Vec::new(),
            narration: None,
            edit: None,
        };
        let json = serde_json::to_vec_pretty(&project).expect("a project serializes");
        Beneath::open(&building, "project")?.write_atomic(MANIFEST, &json)?;
        let folder = self.root.join(&project.id);
        std::fs::rename(&building, &folder).map_err(ProjectError::from_io(&folder))?;
        sync_dir(&self.root).map_err(ProjectError::from_io(&self.root))?;
        tracing::info!(id = %project.id, "project created");
        Ok(project)
    }

    /// The project as saved: its manifest with the typed edits saved since (see `edits`).
    pub fn open(&self, id: &str) -> Result<Project, ProjectError> {
        Ok(self.open_with_edits(id)?.0)
    }

    /// [`ProjectStore::open`], with the manifest's own modification time (before the typed
    /// edits) and what the journal of edits held.
    fn open_with_edits(&self, id: &str) -> Result<(Project, u64, edits::Journal), ProjectError> {
        let (beneath, file, key) = self.manifest_file(id)?;
        let mut project = match self.opened.get(id, key) {
            Some(project) => project,
            None => {
                let project = read_manifest(id, file, &beneath.shown(MANIFEST))?;
                self.opened.keep(id, key, &project);
                project
            }
        };
        let base = project.modified_unix_ms;
        let journal = edits::replay(&beneath, &mut project)?;
        Ok((project, base, journal))
    }

    /// The project's folder, its manifest opened for reading, and which file that is.
    fn manifest_file(
        &self,
        id: &str,
    ) -> Result<(Beneath, std::fs::File, opened::FileKey), ProjectError> {
        let beneath = self.beneath(id)?;
        let file = match beneath.open_file(MANIFEST) {
            Ok(file) => file,
            Err(e) if e.is_not_found() => return Err(ProjectError::NotFound(id.to_string())),
            Err(e) => return Err(e.into()),
        };
        let metadata = file
            .metadata()
            .map_err(ProjectError::from_io(&beneath.shown(MANIFEST)))?;
        Ok((beneath, file, opened::FileKey::of(&metadata)))
    }

    /// What the Projects list shows of `id`: from what was kept of its manifest while the file
    /// is the same one (a listing then parses no manifest of megabytes), with the time of its
    /// last typed edit.
    fn entry(&self, id: &str) -> Result<ProjectEntry, ProjectError> {
        let (beneath, file, key) = self.manifest_file(id)?;
        let head = match self.opened.head(id, key) {
            Some(head) => head,
            None => {
                let head = opened::Head::of(&read_manifest(id, file, &beneath.shown(MANIFEST))?);
                self.opened.keep_head(id, key, head.clone());
                head
            }
        };
        Ok(ProjectEntry::Ok {
            id: id.to_string(),
            modified_unix_ms: edits::modified_with_edits(&beneath, head.modified_unix_ms)?,
            name: head.name,
            segments: head.segments,
        })
    }

    /// Puts `text` into segment `index` (its cleanup suggestion and word times, made from the
    /// old text, are dropped), saved durably as one line of the project's journal of edits
    /// rather than a rewrite of the manifest (folded in by the next whole save, or here when
    /// the journal is long). Unchanged text saves nothing.
    pub fn edit_text(&self, id: &str, index: usize, text: &str) -> Result<Project, ProjectError> {
        let _lock = self.lock()?;
        let (mut project, base, journal) = self.open_with_edits(id)?;
        if !edits::set_segment_text(project.segment_mut(index)?, text) {
            return Ok(project);
        }
        let beneath = self.beneath(id)?;
        match edits::append(&beneath, &mut project, base, journal, index)? {
            edits::Saved::Appended => {}
            edits::Saved::FoldNow => self.save_locked(&mut project)?,
        }
        Ok(project)
    }

    /// Saves the manifest atomically, stamping the modification time; the caller holds the
    /// store's lock and opened `project` under it.
    fn save_locked(&self, project: &mut Project) -> Result<(), ProjectError> {
        if !self.beneath(&project.id)?.exists(MANIFEST)? {
            return Err(ProjectError::NotFound(project.id.clone()));
        }
        project.modified_unix_ms = unix_ms().max(project.modified_unix_ms);
        self.write_manifest(project)
    }

    /// Writes the manifest whole; the typed edits it now holds leave the journal.
    fn write_manifest(&self, project: &Project) -> Result<(), ProjectError> {
        let json = serde_json::to_vec_pretty(project).expect("a project serializes");
        let beneath = self.beneath(&project.id)?;
        beneath.write_atomic(MANIFEST, &json)?;
        edits::remove(&beneath)?;
        // Kept parsed as written: the store's lock is held, so the file is this one.
        if let Ok(Ok(metadata)) = beneath.open_file(MANIFEST).map(|f| f.metadata()) {
            self.opened
                .keep(&project.id, opened::FileKey::of(&metadata), project);
        }
        Ok(())
    }

    /// Renames a project. Its folder (its id) stays: a job running on the project, in this
    /// process or another, still finds it by the id it started with.
    pub fn rename(&self, id: &str, new_name: &str) -> Result<Project, ProjectError> {
        folder_name_for(new_name)?;
        let _lock = self.lock()?;
        let mut project = self.open(id)?;
        if project.name == new_name.trim() {
            return Ok(project);
        }
        if self.name_in_use(new_name, Some(id))? {
            return Err(ProjectError::NameTaken(new_name.trim().to_string()));
        }
        project.name = new_name.trim().to_string();
        self.save_locked(&mut project)?;
        Ok(project)
    }

    /// Deletes a project's folder with everything in it.
    pub fn delete(&self, id: &str) -> Result<(), ProjectError> {
        let _lock = self.lock()?;
        self.sweep_leftovers();
        let folder = self.folder(id)?;
        if !folder.join(MANIFEST).exists() {
            return Err(ProjectError::NotFound(id.to_string()));
        }
        // Renamed out of sight first (one atomic step), then removed: a crash midway leaves
        // a hidden folder, never a project with half its files.
        let doomed = self.root.join(format!(".deleted-{id}-{}", unix_ms()));
        std::fs::rename(&folder, &doomed).map_err(ProjectError::from_io(&folder))?;
        sync_dir(&self.root).map_err(ProjectError::from_io(&self.root))?;
        std::fs::remove_dir_all(&doomed).map_err(ProjectError::from_io(&doomed))?;
        tracing::info!(id, "project deleted");
        Ok(())
    }

    /// Copies an audio file into the project's `audio/` folder (atomically) and returns its
    /// path relative to the project.
    pub fn import_audio(&self, project: &Project, source: &Path) -> Result<String, ProjectError> {
        let file_name =
            source
                .file_name()
                .and_then(|n| n.to_str())
                .ok_or_else(|| ProjectError::Io {
                    path: source.to_path_buf(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "not a file name",
                    ),
                })?;
        let relative = format!("audio/{file_name}");
        let beneath = self.beneath(&project.id)?;
        beneath.create_dir_all("audio")?;
        // The project's own file imported again is left as it is.
        let same = match beneath.file_path(&relative) {
            Ok(target) => source.canonicalize().ok() == target.canonicalize().ok(),
            Err(e) if e.is_not_found() => false,
            Err(e) => return Err(e.into()),
        };
        if !same {
            let mut from = headroom_base::input::open_regular(source)
                .map_err(ProjectError::from_io(source))?;
            beneath.copy_atomic_from(&relative, &mut from)?;
        }
        Ok(relative)
    }

    /// Writes a file inside the project (atomically); `relative` like `exports/talk.srt`.
    pub fn write_file(
        &self,
        project: &Project,
        relative: &str,
        bytes: &[u8],
    ) -> Result<PathBuf, ProjectError> {
        Ok(self.beneath(&project.id)?.write_atomic(relative, bytes)?)
    }

    /// Writes what `content` reads to a file inside the project (atomically, in pieces).
    pub fn write_file_from(
        &self,
        project: &Project,
        relative: &str,
        content: &mut dyn std::io::Read,
    ) -> Result<PathBuf, ProjectError> {
        Ok(self
            .beneath(&project.id)?
            .copy_atomic_from(relative, content)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (ProjectStore, PathBuf) {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "headroom-projects-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        (ProjectStore::new(&dir), dir)
    }

    fn transcript() -> Transcript {
        Transcript {
            speakers: Vec::new(),
            language: Some("en".into()),
            duration: 4.0,
            segments: vec![
                Segment {
                    speaker: None,
                    start: 0.0,
                    end: 2.0,
                    text: " um hello there".into(),
                    words: Vec::new(),
                },
                Segment {
                    speaker: None,
                    start: 2.0,
                    end: 4.0,
                    text: " second part".into(),
                    words: Vec::new(),
                },
            ],
        }
    }

    #[test]
    fn create_list_open_rename_delete() {
        let (store, dir) = store();
        assert!(store.list().unwrap().is_empty());
        let p = store.create("  My Interview! ").unwrap();
        assert_eq!(p.id, "my-interview");
        assert_eq!(p.name, "My Interview!");
        for sub in ["audio", "speech", "exports", "project.json"] {
            assert!(dir.join("my-interview").join(sub).exists(), "{sub}");
        }
        assert!(matches!(
            store.create("my interview!"),
            Err(ProjectError::NameTaken(_))
        ));
        let other = store.create("My-Interview").unwrap();
        assert_eq!(other.id, "my-interview-2", "a free folder is chosen");

        let renamed = store.rename("my-interview", "Episode 12").unwrap();
        assert_eq!(renamed.id, "my-interview", "the folder, the id, stays");
        assert_eq!(store.open("my-interview").unwrap().name, "Episode 12");
        assert!(matches!(
            store.rename("my-interview", "My-Interview"),
            Err(ProjectError::NameTaken(_))
        ));

        let names: Vec<String> = store
            .list()
            .unwrap()
            .into_iter()
            .map(|e| match e {
                ProjectEntry::Ok { name, .. } => name,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(names.len(), 2);
        store.delete("my-interview").unwrap();
        assert!(matches!(
            store.open("my-interview"),
            Err(ProjectError::NotFound(_))
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn concurrent_writers_lose_no_update_and_renames_keep_the_id() {
        // Each writer opens the store itself, as another process would: the file lock makes
        // every read-modify-write see the one before it.
        let (store, dir) = store();
        store.create("Shared").unwrap();
        let writers: Vec<_> = (0..4)
            .map(|w| {
                let store = ProjectStore::new(dir.clone());
                std::thread::spawn(move || {
                    for i in 0..25 {
                        store
                            .update("shared", |p| {
                                p.segments.push(ProjectSegment {
                                    speaker: None,
                                    start: 0.0,
                                    end: 1.0,
                                    text: format!("writer {w} edit {i}"),
                                    suggestion: None,
                                    words: Vec::new(),
                                });
                                Ok::<_, ProjectError>(())
                            })
                            .unwrap();
                        if i % 5 == 0 {
                            store.rename("shared", &format!("Shared {w}-{i}")).unwrap();
                        }
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        let project = store.open("shared").unwrap();
        assert_eq!(project.segments.len(), 100, "every edit is kept");
        assert!(project.name.starts_with("Shared "));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn names_and_ids_are_checked() {
        let (store, dir) = store();
        assert!(matches!(
            store.create("   "),
            Err(ProjectError::InvalidName(_))
        ));
        assert!(matches!(
            store.create("!!!"),
            Err(ProjectError::InvalidName(_))
        ));
        assert!(matches!(
            store.create(&"x".repeat(81)),
            Err(ProjectError::InvalidName(_))
        ));
        for bad in ["../etc", "a/b", ".hidden", ""] {
            assert!(
                matches!(store.open(bad), Err(ProjectError::NotFound(_))),
                "{bad}"
            );
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_damaged_manifest_is_reported_and_left_alone() {
        let (store, dir) = store();
        store.create("Good").unwrap();
        let broken = store.create("Broken").unwrap();
        let manifest = dir.join(&broken.id).join(MANIFEST);
        std::fs::write(&manifest, b"{ not json").unwrap();
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 2);
        assert!(listed.iter().any(|e| matches!(e,
            ProjectEntry::Unreadable { id, error } if id == "broken" && error.contains("left as it is"))));
        assert_eq!(std::fs::read(&manifest).unwrap(), b"{ not json");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_note_code_this_version_does_not_know_reads_as_none_and_the_project_opens() {
        let (store, dir) = store();
        let mut p = store.create("Later").unwrap();
        p.set_transcript(&transcript());
        let note = Some("Cleaned up by the rules: a reason from a newer version".to_string());
        for (i, segment) in p.segments.iter_mut().enumerate() {
            segment.suggestion = Some(Suggestion {
                text: "Hello there.".into(),
                source: SuggestionSource::RuleBased,
                note: note.clone(),
                note_code: Some(TextNote::RuleBased {
                    reasons: vec![if i == 0 {
                        RejectReason::TextLaneFull
                    } else {
                        RejectReason::UpstreamBusy
                    }],
                }),
                decision: Decision::Pending,
            });
        }
        store
            .update("later", |stored| {
                *stored = p.clone();
                Ok::<_, ProjectError>(())
            })
            .unwrap();
        // A newer version wrote a kind and a reason this one has never heard of.
        let manifest = dir.join("later").join(MANIFEST);
        let mut newer: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
        newer["segments"][0]["suggestion"]["note_code"]["kind"] = "kind_from_the_future".into();
        newer["segments"][1]["suggestion"]["note_code"]["reasons"][0] =
            "reason_from_the_future".into();
        std::fs::write(&manifest, serde_json::to_vec_pretty(&newer).unwrap()).unwrap();
        let reopened = store.open("later").unwrap();
        for s in &reopened.segments {
            let suggestion = s.suggestion.as_ref().unwrap();
            assert_eq!(suggestion.note_code, None);
            assert_eq!(suggestion.note, note);
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn transcript_decisions_and_speech_text() {
        let (store, dir) = store();
        let mut p = store.create("Talk").unwrap();
        p.set_transcript(&transcript());
        assert_eq!(p.speech_text(None).unwrap(), "um hello there second part");
        assert!(matches!(
            p.decide(0, Decision::Accepted),
            Err(ProjectError::NoSuggestion(0))
        ));
        p.segments[0].suggestion = Some(Suggestion {
            text: "Hello there.".into(),
            source: SuggestionSource::Llm,
            note: None,
            note_code: None,
            decision: Decision::Pending,
        });
        assert_eq!(p.speech_text(Some(0)).unwrap(), "um hello there");
        p.decide(0, Decision::Accepted).unwrap();
        assert_eq!(p.speech_text(None).unwrap(), "Hello there. second part");
        assert!(matches!(
            p.speech_text(Some(7)),
            Err(ProjectError::NoSuchSegment { index: 7, count: 2 })
        ));
        let (saved, ()) = store
            .update("talk", |stored| {
                *stored = p.clone();
                Ok::<_, ProjectError>(())
            })
            .unwrap();
        assert!(saved.modified_unix_ms >= p.modified_unix_ms);
        let reopened = store.open("talk").unwrap();
        assert_eq!(reopened.segments, p.segments);
        assert_eq!(reopened.transcript().segments[0].text, "um hello there");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn files_stay_inside_the_project() {
        let (store, dir) = store();
        let p = store.create("Files").unwrap();
        let path = store.write_file(&p, "exports/a.srt", b"1").unwrap();
        assert_eq!(std::fs::read(path).unwrap(), b"1");
        assert!(store.write_file(&p, "../escape.txt", b"x").is_err());
        assert!(store.write_file(&p, "/tmp/abs.txt", b"x").is_err());
        let source = dir.join("clip.wav");
        std::fs::write(&source, b"RIFF").unwrap();
        assert_eq!(store.import_audio(&p, &source).unwrap(), "audio/clip.wav");
        assert_eq!(
            std::fs::read(dir.join("files/audio/clip.wav")).unwrap(),
            b"RIFF"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Crash recovery lists, repairs and removes only through the project folder's handle: a
    /// `.partial` recording or a stale temporary that is a link, or an `audio/` that is a link
    /// out of the project, leaves what they point to untouched; a real `.partial` is repaired.
    #[cfg(target_os = "linux")]
    #[test]
    fn recovery_never_follows_a_link_planted_where_it_lists_repairs_or_removes() {
        use headroom_speech::audio::{wav_bytes, Audio};
        use std::os::unix::fs::symlink;
        let (store, dir) = store();
        let outside = PathBuf::from(format!("{}-outside", dir.display()));
        let _ = std::fs::remove_dir_all(&outside);
        std::fs::create_dir_all(&outside).unwrap();
        // A recording with half a frame at its end: a repair would cut it and rename it.
        let mut wav = wav_bytes(&Audio {
            samples: vec![0.25; 400],
            sample_rate: 16_000,
        });
        wav.push(0x7f);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let ended = child.id();
        child.wait().unwrap();
        let stale = format!(".talk.wav.headroom-{ended}-0.tmp");
        std::fs::write(outside.join("victim.wav"), &wav).unwrap();
        std::fs::write(outside.join("out.wav.partial"), &wav).unwrap();
        std::fs::write(outside.join(&stale), b"keep").unwrap();

        let planted = store.create("Links in audio").unwrap();
        let audio = store.folder(&planted.id).unwrap().join("audio");
        std::fs::create_dir_all(&audio).unwrap();
        symlink(outside.join("victim.wav"), audio.join("take.wav.partial")).unwrap();
        symlink(outside.join(&stale), audio.join(&stale)).unwrap();
        std::fs::write(audio.join("real.wav.partial"), &wav).unwrap();

        let linked = store.create("Audio out").unwrap();
        let folder = store.folder(&linked.id).unwrap();
        let _ = std::fs::remove_dir_all(folder.join("audio"));
        symlink(&outside, folder.join("audio")).unwrap();

        let recovered = store.recover_after_crash();
        assert_eq!(recovered.recordings, [audio.join("real.wav")]);
        assert_eq!(recovered.temporaries_removed, 0);
        assert_eq!(std::fs::read(outside.join("victim.wav")).unwrap(), wav);
        assert_eq!(std::fs::read(outside.join("out.wav.partial")).unwrap(), wav);
        assert_eq!(std::fs::read(outside.join(&stale)).unwrap(), b"keep");
        assert!(!outside.join("out.wav").exists() && !audio.join("take.wav").exists());
        assert!(
            audio.join("take.wav.partial").is_symlink(),
            "the links stay"
        );
        assert!(audio.join(&stale).is_symlink());
        std::fs::remove_dir_all(dir).unwrap();
        std::fs::remove_dir_all(outside).unwrap();
    }

    #[test]
    fn a_stale_temporary_in_the_peaks_cache_is_swept_at_start() {
        let (store, _dir) = store();
        let p = store.create("Cached").unwrap();
        let cache = store.folder(&p.id).unwrap().join(PEAKS_CACHE).join("audio");
        std::fs::create_dir_all(&cache).unwrap();
        // A writer that has ended: its temporary file is stale.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let ended = child.id();
        child.wait().unwrap();
        let stale = cache.join(format!(".talk.wav.peaks.headroom-{ended}-0.tmp"));
        std::fs::write(&stale, b"half").unwrap();
        let kept = cache.join("talk.wav.peaks");
        std::fs::write(&kept, b"whole").unwrap();
        let recovered = store.recover_after_crash();
        assert_eq!(recovered.temporaries_removed, 1);
        assert!(!stale.exists() && kept.exists());
    }

    /// A project with the two-segment transcript, saved whole, and its folder.
    fn transcribed(store: &ProjectStore) -> PathBuf {
        let p = store.create("Typed").unwrap();
        store
            .update(&p.id, |p| {
                p.set_transcript(&transcript());
                p.segments[0].suggestion = Some(Suggestion {
                    text: "hello there".into(),
                    source: SuggestionSource::RuleBased,
                    note: None,
                    note_code: None,
                    decision: Decision::Pending,
                });
                p.segments[0].words = vec![ProjectWord {
                    start: 0.0,
                    end: 0.5,
                    text: "um".into(),
                }];
                Ok::<_, ProjectError>(())
            })
            .unwrap();
        store.folder(&p.id).unwrap()
    }

    #[test]
    fn a_typed_edit_is_a_line_appended_not_a_rewritten_manifest() {
        let (store, dir) = store();
        let folder = transcribed(&store);
        let manifest = std::fs::read(folder.join(MANIFEST)).unwrap();
        let before = store.open("typed").unwrap();

        let edited = store.edit_text("typed", 0, "hello there, friend").unwrap();
        assert_eq!(
            std::fs::read(folder.join(MANIFEST)).unwrap(),
            manifest,
            "the manifest is not written for a typed edit"
        );
        let journal = std::fs::read_to_string(folder.join(edits::EDITS)).unwrap();
        assert_eq!(journal.lines().count(), 1, "{journal}");
        assert!(journal.len() < 200, "one short line: {journal}");
        assert!(edited.modified_unix_ms > before.modified_unix_ms);
        let segment = &edited.segments[0];
        assert_eq!(segment.text, "hello there, friend");
        assert!(segment.suggestion.is_none(), "made from the old text");
        assert!(segment.words.is_empty(), "the old text's times");
        assert_eq!(edited.segments[1], before.segments[1]);

        // Another process (a store with nothing kept) opens the same.
        assert_eq!(ProjectStore::new(&dir).open("typed").unwrap(), edited);
        // The same text again saves nothing.
        assert_eq!(
            store.edit_text("typed", 0, "hello there, friend").unwrap(),
            edited
        );
        assert_eq!(
            std::fs::read_to_string(folder.join(edits::EDITS))
                .unwrap()
                .lines()
                .count(),
            1
        );
        assert!(matches!(
            store.edit_text("typed", 2, "x"),
            Err(ProjectError::NoSuchSegment { index: 2, count: 2 })
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_whole_save_folds_the_edits_in_and_a_stale_journal_is_never_replayed() {
        let (store, dir) = store();
        let folder = transcribed(&store);
        store.edit_text("typed", 0, "first edit").unwrap();
        store.edit_text("typed", 1, "second edit").unwrap();
        let journal = std::fs::read(folder.join(edits::EDITS)).unwrap();

        let (saved, ()) = store
            .update("typed", |p| {
                p.segments.remove(0); // the transcript changes shape
                Ok::<_, ProjectError>(())
            })
            .unwrap();
        assert!(!folder.join(edits::EDITS).exists(), "folded in");
        let on_disk: Project =
            serde_json::from_slice(&std::fs::read(folder.join(MANIFEST)).unwrap()).unwrap();
        assert_eq!(on_disk.segments.len(), 1);
        assert_eq!(on_disk.segments[0].text, "second edit");

        // A crash after the manifest's write, before the journal's removal: its lines were
        // typed on the manifest before, and are not applied again (segment 0 is now another).
        std::fs::write(folder.join(edits::EDITS), &journal).unwrap();
        for reader in [store.clone(), ProjectStore::new(&dir)] {
            let opened = reader.open("typed").unwrap();
            assert_eq!(opened.segments, saved.segments);
            assert_eq!(opened.modified_unix_ms, saved.modified_unix_ms);
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_line_a_crash_cut_short_is_skipped_and_the_next_edit_kept() {
        let (store, dir) = store();
        let folder = transcribed(&store);
        store.edit_text("typed", 0, "kept").unwrap();
        let path = folder.join(edits::EDITS);
        let mut torn = std::fs::read(&path).unwrap();
        torn.extend_from_slice(br#"{"base":1,"modified":2,"segm"#);
        std::fs::write(&path, &torn).unwrap();
        assert_eq!(store.open("typed").unwrap().segments[0].text, "kept");

        store.edit_text("typed", 1, "after the crash").unwrap();
        let opened = ProjectStore::new(&dir).open("typed").unwrap();
        assert_eq!(opened.segments[0].text, "kept");
        assert_eq!(opened.segments[1].text, "after the crash");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn an_edit_longer_than_the_journal_may_grow_is_saved_in_the_manifest_whole() {
        let (store, dir) = store();
        let folder = transcribed(&store);
        let chapter = "a pasted chapter. ".repeat(300_000);
        store.edit_text("typed", 0, &chapter).unwrap();
        let opened = ProjectStore::new(&dir).open("typed").unwrap();
        assert_eq!(opened.segments[0].text, chapter);
        assert!(
            std::fs::metadata(folder.join(edits::EDITS))
                .map_or(true, |m| m.len() <= edits::FOLD_AT_BYTES),
            "the journal holds no more than it is read to"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_long_journal_is_folded_into_the_manifest_by_the_next_edit() {
        let (store, dir) = store();
        let folder = transcribed(&store);
        let path = folder.join(edits::EDITS);
        let mut folded = false;
        for n in 0..300 {
            store
                .edit_text("typed", n % 2, &format!("take {n}"))
                .unwrap();
            let lines = std::fs::read_to_string(&path)
                .map(|j| j.lines().count())
                .unwrap_or(0);
            assert!(lines <= 256, "{lines} lines after {n} edits");
            folded |= lines == 0;
        }
        assert!(folded, "the journal was folded at least once");
        let opened = ProjectStore::new(&dir).open("typed").unwrap();
        assert_eq!(opened.segments[0].text, "take 298");
        assert_eq!(opened.segments[1].text, "take 299");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_listing_shows_the_last_typed_edit_and_what_another_process_saved() {
        let (store, dir) = store();
        transcribed(&store);
        let entry = |store: &ProjectStore| match store.list().unwrap().remove(0) {
            ProjectEntry::Ok {
                name,
                modified_unix_ms,
                segments,
                ..
            } => (name, modified_unix_ms, segments),
            other => panic!("{other:?}"),
        };
        let (_, before, segments) = entry(&store);
        assert_eq!(segments, 2);
        let edited = store.edit_text("typed", 1, "typed later").unwrap();
        assert!(edited.modified_unix_ms > before);
        assert_eq!(
            entry(&store).1,
            edited.modified_unix_ms,
            "the journal's time"
        );
        // Another process saves the manifest whole: the next listing reads it.
        ProjectStore::new(&dir).rename("typed", "Renamed").unwrap();
        let (name, modified, _) = entry(&store);
        assert_eq!(name, "Renamed");
        assert!(modified >= edited.modified_unix_ms);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
