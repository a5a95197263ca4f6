//! The commands the web view may call. Each one forwards to the workstation and turns its error
//! into a [`UiError`] the front end can show (a rejection keeps all its typed fields).
//!
//! Every command is `async`: Tauri runs a synchronous command on the main thread, which also
//! draws the window and delivers its input, so one that read a file or waited on a lock would
//! freeze the window. Async commands run on the async runtime's workers, and whatever blocks
//! (files, processes, `/proc`, the allocator, a lock a long job may hold) goes further, to the
//! blocking pool through [`blocking`]. The architecture test
//! `every_desktop_command_is_async_so_the_window_never_waits` keeps it so.

use crate::window_rendering::WindowRendering;
use crate::{events, Shell};
use headroom_base::job_clock::{JobClock, JobTime};
use headroom_base::sync::Locked;
use headroom_bench::harness::{self, BenchmarkRun, ConfiguredRunError};
use headroom_core::admission::{Rejection, SuggestedAction};
use headroom_core::config::Config;
use headroom_core::llm::ServerInfo;
use headroom_gpu::{GpuSampler, MemorySample, SamplerStatus};
use headroom_services::batch::FileFailure;
use headroom_services::recording::LiveRequest;
use headroom_services::residency::MemoryView;
use headroom_services::voices::VoiceProfile;
use headroom_services::LaneView;
use headroom_speech::asr::export::ExportFormat;
use headroom_speech::asr::live::{LiveParams, LiveUpdate};
use headroom_speech::asr::Speaker;
use headroom_speech::asr::TranscribeOptions;
use headroom_speech::cloning::Health;
use headroom_speech::models;
use headroom_speech::tts::Voice;
use headroom_speech::voice::matching::MatchProgress;
use headroom_workstation::batch::BatchServers;
use headroom_workstation::editing::{EditChange, EditSummary, EditedFormat, RecordingEdit};
use headroom_workstation::jobs::JobInfo;
use headroom_workstation::narration::{
    languages, LanguageView, NarrationEvent, NarrationOptions, NarrationSummary, NarrationView,
};
use headroom_workstation::projects::{
    Decision, Project, ProjectEntry, ProjectError, ProjectSegment, ProjectSettings, ProjectWord,
    SpeechTake, SplitAt, Suggestion, VersionInfo,
};
use headroom_workstation::resume::JobOutcome;
use headroom_workstation::speakers::SpeakerProfile;
use headroom_workstation::voice_desk::{ClipAdded, VoiceTakeView};
use headroom_workstation::workstation::{
    CleanAllEvent, CleanupSummary, ModelView, SaveDestination, SegmentOutcome, SegmentSaved,
    TextDestination, Waveform, Workstation, WorkstationError,
};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tauri::{AppHandle, Emitter, State};
use ts_rs::TS;

/// What kind of failure a [`UiError`] is.
#[derive(Debug, Clone, Copy, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum UiErrorKind {
    /// A lane refused the work: `rejection` says why, `actions` what to offer.
    Rejected,
    Cancelled,
    /// The project was saved elsewhere since the view was loaded: reload it.
    ChangedElsewhere,
    Error,
}

/// An error as the front end sees it.
#[derive(Debug, Clone, Serialize, TS)]
pub struct UiError {
    kind: UiErrorKind,
    message: String,
    rejection: Option<Box<Rejection>>,
    /// What the user can do about a rejection, in the order to offer them.
    actions: Vec<SuggestedAction>,
}

impl From<WorkstationError> for UiError {
    fn from(e: WorkstationError) -> Self {
        let rejection = e.rejection().cloned().map(Box::new);
        let kind = match (&e, &rejection) {
            (_, Some(_)) => UiErrorKind::Rejected,
            (WorkstationError::Cancelled, _) => UiErrorKind::Cancelled,
            (WorkstationError::Project(ProjectError::ChangedElsewhere { .. }), _) => {
                UiErrorKind::ChangedElsewhere
            }
            _ => UiErrorKind::Error,
        };
        UiError {
            kind,
            message: e.to_string(),
            actions: rejection
                .as_ref()
                .map(|r| r.suggested_actions())
                .unwrap_or_default(),
            rejection,
        }
    }
}

impl From<ConfiguredRunError> for UiError {
    fn from(e: ConfiguredRunError) -> Self {
        match e {
            // A server it may not use is refused as the lanes refuse it.
            ConfiguredRunError::Services(e) => WorkstationError::from(e).into(),
            other => UiError {
                kind: UiErrorKind::Error,
                message: other.to_string(),
                rejection: None,
                actions: Vec::new(),
            },
        }
    }
}

impl From<ProjectError> for UiError {
    fn from(e: ProjectError) -> Self {
        WorkstationError::from(e).into()
    }
}

/// Runs blocking work (files, processes) on the blocking pool, never on the main thread or an
/// async worker.
async fn blocking<T: Send + 'static>(
    shell: &Shell,
    work: impl FnOnce(&Workstation) -> Reply<T> + Send + 'static,
) -> Reply<T> {
    let workstation = shell.workstation.clone();
    tokio::task::spawn_blocking(move || work(&workstation))
        .await
        .map_err(|e| invalid(format!("the operation stopped: {e}")))?
}

fn invalid(message: impl Into<String>) -> UiError {
    UiError {
        kind: UiErrorKind::Error,
        message: message.into(),
        rejection: None,
        actions: Vec::new(),
    }
}

type Reply<T> = Result<T, UiError>;

#[derive(Serialize, TS)]
pub struct AppInfo {
    version: String,
    projects_dir: PathBuf,
    config_path: Option<PathBuf>,
    models_dir: PathBuf,
    /// How the window is drawn (`HEADROOM_WINDOW_RENDERING`, read at start).
    window_rendering: WindowRendering,
}

#[tauri::command]
pub async fn app_info(shell: State<'_, Shell>) -> Reply<AppInfo> {
    Ok(AppInfo {
        version: env!("CARGO_PKG_VERSION").to_string(),
        projects_dir: shell.workstation.store().root().to_path_buf(),
        config_path: shell.workstation.config_path().map(PathBuf::from),
        models_dir: shell.workstation.services().env().models_dir.clone(),
        window_rendering: shell.window_rendering,
    })
}

/// The front end calls this once its first view is interactive; the time since the process
/// started is the cold-start figure.
#[tauri::command]
pub async fn app_ready(shell: State<'_, Shell>) -> Reply<u64> {
    let ms = shell.started.elapsed().as_millis() as u64;
    tracing::info!(cold_start_ms = ms, "window interactive");
    Ok(ms)
}

#[tauri::command]
pub async fn list_projects(shell: State<'_, Shell>) -> Reply<Vec<ProjectEntry>> {
    blocking(&shell, |w| Ok(w.store().list()?)).await
}

/// A project as the window is sent it: all but its words' times. A three-hour transcript has
/// tens of thousands of them, most of its manifest's bytes, and the window shows none; sent with
/// them, opening such a project waited on 2.3 MB crossing into the web view (a tenth of a
/// second) where 0.4 MB does without. A segment's words are asked for where they are needed
/// (`segment_words`, for a split). What the window sends back of a segment (`shown`) is compared
/// without its words.
fn for_window(mut project: Project) -> Project {
    for segment in &mut project.segments {
        segment.words = Vec::new();
    }
    without_word_times(&mut project.edit);
    project
}

/// An edit as the window gets it: without its words' placed times, one span per word of the
/// transcript (the window is told which words are cut, by id).
fn without_word_times(edit: &mut Option<RecordingEdit>) {
    if let Some(edit) = edit {
        edit.word_times = Vec::new();
    }
}

/// The words of one segment, with their times (the window's projects carry none: see
/// [`for_window`]).
#[tauri::command]
pub async fn segment_words(
    shell: State<'_, Shell>,
    project: String,
    index: usize,
) -> Reply<Vec<ProjectWord>> {
    blocking(&shell, move |w| {
        let project = w.store().open(&project)?;
        Ok(project.segment(index)?.words.clone())
    })
    .await
}

/// Most segments' words one [`segments_words`] answers.
const WORDS_BATCH_MAX: usize = 200;

/// The words of `count` segments from `from` (fewer at the transcript's end), with their
/// times: the rows a list draws, read in one opening of the project.
#[tauri::command]
pub async fn segments_words(
    shell: State<'_, Shell>,
    project: String,
    from: usize,
    count: usize,
) -> Reply<Vec<Vec<ProjectWord>>> {
    blocking(&shell, move |w| {
        let project = w.store().open(&project)?;
        project.segment(from)?;
        Ok(project
            .segments
            .iter()
            .skip(from)
            .take(count.min(WORDS_BATCH_MAX))
            .map(|s| s.words.clone())
            .collect())
    })
    .await
}

#[tauri::command]
pub async fn create_project(shell: State<'_, Shell>, name: String) -> Reply<Project> {
    blocking(&shell, move |w| Ok(for_window(w.store().create(&name)?))).await
}

#[tauri::command]
pub async fn open_project(shell: State<'_, Shell>, id: String) -> Reply<Project> {
    blocking(&shell, move |w| Ok(for_window(w.store().open(&id)?))).await
}

/// The kept versions of a project's transcript, newest first.
#[tauri::command]
pub async fn project_versions(shell: State<'_, Shell>, id: String) -> Reply<Vec<VersionInfo>> {
    blocking(&shell, move |w| Ok(w.versions(&id)?)).await
}

/// Brings back a kept version of the transcript (what it replaces is kept too).
#[tauri::command]
pub async fn restore_version(
    shell: State<'_, Shell>,
    id: String,
    version: String,
) -> Reply<Project> {
    Ok(for_window(
        shell.workstation.restore_version(&id, &version).await?,
    ))
}

/// Where the project's takes in a voice profile go (the cloning server: the text and the
/// profile's reference clips), and whether the project allows it; `None` with no server set.
#[tauri::command]
pub async fn voice_destination(
    shell: State<'_, Shell>,
    id: String,
) -> Reply<Option<TextDestination>> {
    blocking(&shell, move |w| {
        let project = w.store().open(&id)?;
        Ok(w.voice_destination(&project))
    })
    .await
}

/// Where the project's text goes for cleanup with the text model, and whether it may.
#[tauri::command]
pub async fn text_destination(shell: State<'_, Shell>, id: String) -> Reply<TextDestination> {
    blocking(&shell, move |w| {
        let project = w.store().open(&id)?;
        Ok(w.text_destination(&project))
    })
    .await
}

#[tauri::command]
pub async fn rename_project(shell: State<'_, Shell>, id: String, name: String) -> Reply<Project> {
    blocking(&shell, move |w| {
        Ok(for_window(w.store().rename(&id, &name)?))
    })
    .await
}

#[tauri::command]
pub async fn delete_project(shell: State<'_, Shell>, id: String) -> Reply<()> {
    blocking(&shell, move |w| Ok(w.store().delete(&id)?)).await
}

#[tauri::command]
pub async fn update_project_settings(
    shell: State<'_, Shell>,
    id: String,
    settings: ProjectSettings,
    shown: ProjectSettings,
) -> Reply<Project> {
    Ok(for_window(
        shell
            .workstation
            .update_settings(&id, settings, shown)
            .await?,
    ))
}

/// Progress of a long job (`job-progress`): a fraction, the time elapsed and left, and for
/// model installs the step.
#[derive(Clone, Serialize, TS)]
pub struct JobProgress {
    pub job: String,
    /// 0..=1.
    pub progress: f32,
    pub step: Option<String>,
    /// `None` for model installs, whose fraction is per file.
    pub time: Option<JobTime>,
}

/// A job's fraction done, with its elapsed time and the estimate of what is left, as
/// `job-progress` events.
fn progress_events(app: AppHandle, job: String) -> Arc<dyn Fn(f32) + Send + Sync> {
    let clock = Mutex::new(JobClock::start());
    Arc::new(move |progress: f32| {
        let time = clock.locked().observe(progress as f64);
        let _ = app.emit(
            events::JOB_PROGRESS,
            JobProgress {
                job: job.clone(),
                progress,
                step: None,
                time: Some(time),
            },
        );
    })
}

/// Emits the input level of a recording job as `record-level` events.
fn level_events(app: AppHandle, job: String) -> Arc<dyn Fn(f32) + Send + Sync> {
    Arc::new(move |dbfs: f32| {
        let _ = app.emit(
            events::RECORD_LEVEL,
            RecordLevel {
                job: job.clone(),
                dbfs,
            },
        );
    })
}

#[tauri::command]
pub async fn transcribe(
    app: AppHandle,
    shell: State<'_, Shell>,
    project: String,
    path: String,
    job: String,
) -> Reply<Project> {
    let guard = shell.jobs.start(&job);
    let progress = progress_events(app, job);
    let path = PathBuf::from(path.trim());
    Ok(for_window(
        shell
            .workstation
            .transcribe(&project, &path, None, progress, guard.stop.clone())
            .await?,
    ))
}

/// What became of one of several files transcribed together: the project made of it, or why
/// there is none.
#[derive(Debug, Clone, Serialize, TS)]
pub struct FileOutcome {
    path: String,
    /// The project made of it, when it was transcribed.
    project: Option<FileProject>,
    /// Why there is none: a reason the window words, and the detail.
    failure: Option<FileFailure>,
}

/// A project made of a file, as the outcome names it.
#[derive(Debug, Clone, Serialize, TS)]
pub struct FileProject {
    id: String,
    name: String,
    segments: usize,
}

/// Several files (dropped together) as one queued job: a project of each, transcribed as
/// batch work; a bad file is reported in its outcome and the others go on. Cancelled, the
/// projects finished so far stay. `servers`: heard on transcription servers, `model` being
/// the name they know it by (bounded with them); absent, this machine's engine and its
/// default model (`model` is then not read).
#[tauri::command]
pub async fn transcribe_files(
    app: AppHandle,
    shell: State<'_, Shell>,
    paths: Vec<String>,
    job: String,
    servers: Option<BatchServers>,
    model: Option<String>,
) -> Reply<Vec<FileOutcome>> {
    let guard = shell.jobs.start(&job);
    let progress = progress_events(app, job);
    let servers = servers.unwrap_or_default();
    let paths: Vec<PathBuf> = paths
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect();
    let outcomes = shell
        .workstation
        .transcribe_files(
            &paths,
            model
                .as_deref()
                .map(str::trim)
                .filter(|m| !m.is_empty() && !servers.choice.is_embedded()),
            &servers,
            progress,
            guard.cancel.clone(),
        )
        .await
        .map_err(|(_, e)| UiError::from(e))?;
    Ok(outcomes
        .into_iter()
        .map(|outcome| {
            let path = outcome.path.display().to_string();
            match outcome.result {
                Ok(project) => FileOutcome {
                    path,
                    project: Some(FileProject {
                        segments: project.segments.len(),
                        id: project.id,
                        name: project.name,
                    }),
                    failure: None,
                },
                Err(failure) => FileOutcome {
                    path,
                    project: None,
                    failure: Some(failure),
                },
            }
        })
        .collect())
}

/// Names a speaker everywhere in the project; `shown` is the speakers as the view showed them
/// (refused as changed elsewhere when they are no longer so).
#[tauri::command]
pub async fn rename_speaker(
    shell: State<'_, Shell>,
    project: String,
    speaker: String,
    name: String,
    shown: Vec<Speaker>,
) -> Reply<Project> {
    Ok(for_window(
        shell
            .workstation
            .rename_speaker(&project, &speaker, name, shown)
            .await?,
    ))
}

/// Merges speaker `from` into `into` (the transcript is kept as a version first).
#[tauri::command]
pub async fn merge_speakers(
    shell: State<'_, Shell>,
    project: String,
    from: String,
    into: String,
    shown: Vec<Speaker>,
) -> Reply<Project> {
    Ok(for_window(
        shell
            .workstation
            .merge_speakers(&project, &from, &into, shown)
            .await?,
    ))
}

/// "This is <profile>": attaches a speaker to a voice profile (`None` detaches it).
#[tauri::command]
pub async fn attach_speaker(
    shell: State<'_, Shell>,
    project: String,
    speaker: String,
    profile: Option<String>,
    shown: Vec<Speaker>,
) -> Reply<Project> {
    Ok(for_window(
        shell
            .workstation
            .attach_speaker(&project, &speaker, profile, shown)
            .await?,
    ))
}

/// Makes a voice profile from a speaker's clean turns and attaches the speaker to it.
#[tauri::command]
pub async fn profile_from_speaker(
    shell: State<'_, Shell>,
    project: String,
    speaker: String,
    name: Option<String>,
    job: String,
) -> Reply<SpeakerProfile> {
    let guard = shell.jobs.start(&job);
    Ok(shell
        .workstation
        .profile_from_speaker(&project, &speaker, name, guard.cancel.clone())
        .await?)
}

/// Splits a segment at a word or a time; the new part gets `speaker` (`"new"` for a new one)
/// or the segment's. `shown` is the segment as the view showed it.
#[tauri::command]
pub async fn split_segment(
    shell: State<'_, Shell>,
    project: String,
    index: usize,
    at: SplitAt,
    speaker: Option<String>,
    shown: ProjectSegment,
) -> Reply<Project> {
    Ok(for_window(
        shell
            .workstation
            .split_segment(&project, index, at, speaker, shown)
            .await?,
    ))
}

/// Gives a segment another speaker (`"new"` for a new one, `None` for none).
#[tauri::command]
pub async fn set_segment_speaker(
    shell: State<'_, Shell>,
    project: String,
    index: usize,
    speaker: Option<String>,
    shown: ProjectSegment,
) -> Reply<Project> {
    Ok(for_window(
        shell
            .workstation
            .set_segment_speaker(&project, index, speaker, shown)
            .await?,
    ))
}

#[tauri::command]
pub async fn cancel_job(shell: State<'_, Shell>, job: String) -> Reply<bool> {
    Ok(shell.jobs.cancel(&job))
}

/// Pauses a running transcription, cleanup or narration: it stops at once and its project keeps
/// its checkpoint, listed with Resume (other jobs are cancelled).
#[tauri::command]
pub async fn pause_job(shell: State<'_, Shell>, job: String) -> Reply<bool> {
    Ok(shell.jobs.pause(&job))
}

#[tauri::command]
pub async fn edit_segment(
    shell: State<'_, Shell>,
    project: String,
    index: usize,
    text: String,
) -> Reply<SegmentSaved> {
    Ok(shell
        .workstation
        .edit_segment(&project, index, text)
        .await?)
}

#[tauri::command]
pub async fn clean_segment(
    app: AppHandle,
    shell: State<'_, Shell>,
    project: String,
    index: usize,
    rules_only: bool,
    job: String,
) -> Reply<Suggestion> {
    let guard = shell.jobs.start(&job);
    let on_event = move |event| {
        let _ = app.emit(events::CLEANUP, &event);
    };
    Ok(shell
        .workstation
        .clean_segment(&project, index, rules_only, &guard.cancel, &on_event)
        .await?)
}

/// A segment of a clean-all finished (`cleanup-progress`): refused segments carry the error
/// to show beside them; the job goes on with the next.
#[derive(Clone, Serialize, TS)]
pub struct CleanupProgress {
    pub project: String,
    pub segment: usize,
    pub count: usize,
    pub error: Option<UiError>,
}

/// Forwards a cleanup job's events: streamed text as `cleanup`, each finished segment as
/// `cleanup-progress`.
fn forward_cleanup(app: AppHandle) -> impl Fn(CleanAllEvent) + Send + Sync {
    move |event| match event {
        CleanAllEvent::Stream(stream) => {
            let _ = app.emit(events::CLEANUP, &stream);
        }
        CleanAllEvent::Segment {
            project,
            count,
            outcome,
        } => {
            let (segment, error) = match outcome {
                SegmentOutcome::Cleaned { segment, .. } => (segment, None),
                SegmentOutcome::Refused { segment, rejection } => {
                    (segment, Some(WorkstationError::Rejected(*rejection).into()))
                }
                SegmentOutcome::Skipped { segment, reason } => (segment, Some(invalid(reason))),
            };
            let _ = app.emit(
                events::CLEANUP_PROGRESS,
                CleanupProgress {
                    project,
                    segment,
                    count,
                    error,
                },
            );
        }
    }
}

/// Cleans every segment as a job recorded in the project (resumable after a crash).
#[tauri::command]
pub async fn clean_all(
    app: AppHandle,
    shell: State<'_, Shell>,
    project: String,
    rules_only: bool,
    job: String,
) -> Reply<CleanupSummary> {
    let guard = shell.jobs.start(&job);
    let on_event = forward_cleanup(app);
    Ok(shell
        .workstation
        .clean_all(&project, rules_only, false, &on_event, guard.stop.clone())
        .await?)
}

/// Every project's jobs a crash, a kill or a closed window interrupted.
#[tauri::command]
pub async fn interrupted_jobs(shell: State<'_, Shell>) -> Reply<Vec<JobInfo>> {
    blocking(&shell, |w| Ok(w.interrupted_jobs()?)).await
}

#[tauri::command]
pub async fn discard_job(shell: State<'_, Shell>, project: String, id: String) -> Reply<()> {
    blocking(&shell, move |w| Ok(w.discard_job(&project, &id)?)).await
}

/// Resumes an interrupted job from its checkpoint; `job` is the handle for progress and
/// cancel, `id` the recorded job.
#[tauri::command]
pub async fn resume_job(
    app: AppHandle,
    shell: State<'_, Shell>,
    project: String,
    id: String,
    job: String,
) -> Reply<JobOutcome> {
    let guard = shell.jobs.start(&job);
    let progress = progress_events(app.clone(), job);
    let on_event = forward_cleanup(app);
    Ok(
        match shell
            .workstation
            .resume_job(&project, &id, progress, &on_event, guard.stop.clone())
            .await?
        {
            JobOutcome::Transcribed(project) => {
                JobOutcome::Transcribed(Box::new(for_window(*project)))
            }
            other => other,
        },
    )
}

#[tauri::command]
pub async fn decide(
    shell: State<'_, Shell>,
    project: String,
    segment: Option<usize>,
    decision: Decision,
) -> Reply<Project> {
    Ok(for_window(
        shell
            .workstation
            .decide(&project, segment, decision)
            .await?,
    ))
}

#[tauri::command]
pub async fn export_transcript(
    shell: State<'_, Shell>,
    project: String,
    format: String,
) -> Reply<PathBuf> {
    let format: ExportFormat = format.parse().map_err(invalid)?;
    Ok(shell.workstation.export(&project, format).await?)
}

/// Changes the project's edit of its recording (nothing asked: shows it) as a job: the
/// recording is read again to place the cuts.
#[tauri::command]
pub async fn change_edit(
    shell: State<'_, Shell>,
    project: String,
    change: EditChange,
    job: String,
) -> Reply<EditSummary> {
    let guard = shell.jobs.start(&job);
    let mut summary = shell
        .workstation
        .change_edit(&project, change, guard.cancel.clone())
        .await?;
    without_word_times(&mut summary.edit);
    Ok(summary)
}

/// Writes the edited recording, its transcript re-timed or its cut list (`fps` frames a
/// second) into the project's `exports/`; returns where.
#[tauri::command]
pub async fn export_edited(
    shell: State<'_, Shell>,
    project: String,
    format: String,
    fps: u32,
    job: String,
) -> Reply<PathBuf> {
    let format: EditedFormat = format.parse().map_err(invalid)?;
    let guard = shell.jobs.start(&job);
    Ok(shell
        .workstation
        .export_edited(&project, format, fps, None, guard.cancel.clone())
        .await?)
}

/// Plays the edited recording from `from` seconds of the original to its end (or Stop).
#[tauri::command]
pub async fn play_edited(
    shell: State<'_, Shell>,
    project: String,
    from: f64,
    job: String,
) -> Reply<()> {
    let guard = shell.jobs.start(&job);
    Ok(shell
        .workstation
        .play_edited(&project, from, guard.cancel.clone())
        .await?)
}

/// Lists voices (runs `espeak-ng --voices`).
#[tauri::command]
pub async fn list_voices(shell: State<'_, Shell>) -> Reply<Vec<Voice>> {
    blocking(&shell, |w| Ok(w.voices()?)).await
}

#[tauri::command]
pub async fn synthesize(
    shell: State<'_, Shell>,
    project: String,
    segment: Option<usize>,
    job: String,
) -> Reply<SpeechTake> {
    let guard = shell.jobs.start(&job);
    Ok(shell
        .workstation
        .synthesize(&project, segment, guard.cancel.clone())
        .await?)
}

/// A narration's events, as `narration` events.
fn forward_narration(app: AppHandle) -> impl Fn(NarrationEvent) + Send + Sync {
    move |event| {
        let _ = app.emit(events::NARRATION, &event);
    }
}

/// Narrates the project (see `headroom_workstation::narration`); each segment's state comes as
/// `narration` events.
#[tauri::command]
pub async fn narrate(
    app: AppHandle,
    shell: State<'_, Shell>,
    project: String,
    options: NarrationOptions,
    job: String,
) -> Reply<NarrationSummary> {
    let guard = shell.jobs.start(&job);
    let on_event = forward_narration(app);
    Ok(shell
        .workstation
        .narrate(&project, options, &on_event, guard.stop.clone())
        .await?)
}

/// Narrates one segment again and lays out the narration's files again.
#[tauri::command]
pub async fn narrate_segment(
    app: AppHandle,
    shell: State<'_, Shell>,
    project: String,
    index: usize,
    job: String,
) -> Reply<NarrationSummary> {
    let guard = shell.jobs.start(&job);
    let on_event = forward_narration(app);
    Ok(shell
        .workstation
        .narrate_segment(&project, index, &on_event, guard.stop.clone())
        .await?)
}

#[tauri::command]
pub async fn narration(shell: State<'_, Shell>, project: String) -> Reply<NarrationView> {
    blocking(&shell, move |w| Ok(w.narration(&project)?)).await
}

#[tauri::command]
pub async fn narration_languages() -> Reply<Vec<LanguageView>> {
    Ok(languages())
}

/// A project file's waveform (peaks per bucket) for the timelines.
#[tauri::command]
pub async fn waveform(
    shell: State<'_, Shell>,
    project: String,
    file: String,
    buckets: usize,
) -> Reply<Waveform> {
    Ok(shell.workstation.waveform(&project, &file, buckets).await?)
}

/// Plays a stretch of a project file (a segment of the source, or of the narration).
#[tauri::command]
pub async fn play_range(
    shell: State<'_, Shell>,
    project: String,
    file: String,
    start: f64,
    end: f64,
    job: String,
) -> Reply<()> {
    let guard = shell.jobs.start(&job);
    Ok(shell
        .workstation
        .play_range(&project, &file, start, end, guard.cancel.clone())
        .await?)
}

#[tauri::command]
pub async fn play(
    shell: State<'_, Shell>,
    project: String,
    file: String,
    job: String,
) -> Reply<()> {
    let guard = shell.jobs.start(&job);
    Ok(shell
        .workstation
        .play(&project, &file, guard.cancel.clone())
        .await?)
}

/// Shows the system's Save dialog for a copy of `file_name`; the path chosen is remembered as
/// one place [`save_copy`] may write to.
#[tauri::command]
pub async fn choose_save_path(
    app: AppHandle,
    shell: State<'_, Shell>,
    file_name: String,
) -> Reply<Option<PathBuf>> {
    use tauri_plugin_dialog::DialogExt;
    let dialog = app
        .dialog()
        .file()
        .set_file_name(file_name)
        .add_filter("WAV audio", &["wav"]);
    // The dialog waits for the user: never on the main thread or an async worker.
    let chosen = tauri::async_runtime::spawn_blocking(move || dialog.blocking_save_file())
        .await
        .map_err(|e| invalid(format!("the Save dialog failed: {e}")))?;
    let Some(chosen) = chosen else {
        return Ok(None);
    };
    let path = chosen
        .into_path()
        .map_err(|e| invalid(format!("the Save dialog returned no file path: {e}")))?;
    shell.chosen.remember(path.clone());
    Ok(Some(path))
}

/// Saves a copy of a project file: to a name inside the project (`exports/narration.wav`), or
/// to a path the Save dialog returned. Any other path is refused: the web view does not decide
/// where the app writes.
#[tauri::command]
pub async fn save_copy(
    shell: State<'_, Shell>,
    project: String,
    file: String,
    destination: String,
) -> Reply<PathBuf> {
    let typed = destination.trim();
    let destination = if Path::new(typed).is_absolute() {
        if !shell.chosen.take(Path::new(typed)) {
            return Err(invalid(
                "choose where to save outside the project with Choose… (the system's Save dialog), \
                 or give a name inside the project such as exports/narration.wav",
            ));
        }
        SaveDestination::Chosen(PathBuf::from(typed))
    } else {
        SaveDestination::InProject(typed.to_string())
    };
    blocking(&shell, move |w| {
        Ok(w.save_copy(&project, &file, &destination)?)
    })
    .await
}

/// The input level while recording (`record-level`), in dBFS.
#[derive(Clone, Serialize, TS)]
pub struct RecordLevel {
    pub job: String,
    pub dbfs: f32,
}

/// A line of live text: the phrase being spoken, or a segment made final.
#[derive(Clone, Serialize, TS)]
pub struct LiveLine {
    pub start: f64,
    pub end: f64,
    pub text: String,
}

/// Live transcription while recording (`live-transcript`): the phrase being spoken so far
/// (replacing the last one shown), or the phrase's final segments (replacing it).
#[derive(Clone, Serialize, TS)]
pub struct LiveTranscript {
    pub job: String,
    pub partial: Option<LiveLine>,
    pub finals: Vec<LiveLine>,
}

/// Emits a recording job's live text as `live-transcript` events.
fn live_events(app: AppHandle, job: String) -> LiveRequest {
    let on_update = move |update: LiveUpdate| {
        let (partial, finals) = match update {
            LiveUpdate::Partial { start, end, text } => {
                (Some(LiveLine { start, end, text }), vec![])
            }
            LiveUpdate::Final { segments } => (
                None,
                segments
                    .into_iter()
                    .map(|s| LiveLine {
                        start: s.start,
                        end: s.end,
                        text: s.text.trim().to_string(),
                    })
                    .collect(),
            ),
        };
        let _ = app.emit(
            events::LIVE_TRANSCRIPT,
            LiveTranscript {
                job: job.clone(),
                partial,
                finals,
            },
        );
    };
    LiveRequest {
        model: models::DEFAULT_MODEL.to_string(),
        options: TranscribeOptions::default(),
        params: LiveParams::default(),
        on_update: Box::new(on_update),
    }
}

/// A finished recording: the WAV's absolute path, and with live transcription the project
/// holding its transcript, or why there is none (the recording is kept either way).
#[derive(Serialize, TS)]
pub struct RecordOutcome {
    pub file: PathBuf,
    pub project: Option<Project>,
    pub live_error: Option<UiError>,
}

/// Records until the job is cancelled (the Stop button) or `max_seconds`, transcribing live
/// when `live` is set.
#[tauri::command]
pub async fn record(
    app: AppHandle,
    shell: State<'_, Shell>,
    project: String,
    max_seconds: f64,
    live: bool,
    job: String,
) -> Reply<RecordOutcome> {
    let guard = shell.jobs.start(&job);
    let level = level_events(app.clone(), job.clone());
    let live = live.then(|| live_events(app, job));
    let recorded = shell
        .workstation
        .record(&project, max_seconds, level, live, guard.cancel.clone())
        .await?;
    let (project_now, live_error) = match recorded.transcribed {
        None => (None, None),
        Some(Ok(p)) => (Some(p), None),
        Some(Err(e)) => (None, Some(UiError::from(e))),
    };
    let file = blocking(&shell, move |w| {
        Ok(w.project_file(&project, &recorded.file)?)
    })
    .await?;
    Ok(RecordOutcome {
        file,
        project: project_now.map(for_window),
        live_error,
    })
}

/// The app's memory and the speech models in it: what each is for, what it cost to load,
/// how long it has been idle, or that it is loading (never waiting for a load to end). Read
/// from `/proc` on the blocking pool.
#[tauri::command]
pub async fn resident_models(shell: State<'_, Shell>) -> Reply<MemoryView> {
    blocking(&shell, |w| Ok(w.services().residency().view(Vec::new()))).await
}

/// "Free memory": lets go of every speech model no job is using (a model being loaded is
/// not waited for), and hands the allocator's free memory back, on the blocking pool.
#[tauri::command]
pub async fn free_memory(shell: State<'_, Shell>) -> Reply<MemoryView> {
    blocking(&shell, |w| {
        let residency = w.services().residency();
        let released = residency.free_memory();
        Ok(residency.view(released))
    })
    .await
}

/// Every lane's state (the first call builds the text model's client, which reads the
/// system's certificates: on the blocking pool).
#[tauri::command]
pub async fn lanes(shell: State<'_, Shell>) -> Reply<Vec<LaneView>> {
    blocking(&shell, |w| Ok(w.lanes()?)).await
}

/// The GPU panel's state: the sampler's status and the readings kept so far (thinned to at
/// most [`GPU_CHART_POINTS`]).
#[derive(Serialize, TS)]
pub struct GpuView {
    status: SamplerStatus,
    samples: Vec<MemorySample>,
}

const GPU_CHART_POINTS: usize = 600;

#[tauri::command]
pub async fn gpu_status(shell: State<'_, Shell>) -> Reply<GpuView> {
    let gpu = shell.workstation.gpu();
    let all = gpu.samples_since(0);
    let step = all.len().div_ceil(GPU_CHART_POINTS).max(1);
    Ok(GpuView {
        status: gpu.status(),
        samples: all.into_iter().step_by(step).collect(),
    })
}

/// A GPU reading (`gpu`), or the no-GPU state.
#[derive(Serialize, Clone, TS)]
pub struct GpuEvent {
    status: SamplerStatus,
    latest: Option<MemorySample>,
}

/// Emits the newest GPU reading every second for the GPU panel (the sampler itself reads
/// every 200 ms); without a GPU, the no-GPU state once.
pub fn start_gpu_events(app: AppHandle, gpu: GpuSampler) {
    tauri::async_runtime::spawn(async move {
        loop {
            let status = gpu.status();
            let no_gpu = matches!(status, SamplerStatus::NoGpu { .. });
            let _ = app.emit(
                events::GPU,
                GpuEvent {
                    status,
                    latest: gpu.latest(),
                },
            );
            if no_gpu {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    });
}

#[tauri::command]
pub async fn get_settings(shell: State<'_, Shell>) -> Reply<Config> {
    Ok(shell.workstation.config())
}

/// Checks and saves the settings (writes the config file).
#[tauri::command]
pub async fn save_settings(shell: State<'_, Shell>, settings: Config) -> Reply<()> {
    blocking(&shell, move |w| Ok(w.update_config(settings)?)).await
}

#[tauri::command]
pub async fn test_connection(shell: State<'_, Shell>, url: String) -> Reply<ServerInfo> {
    Ok(shell.workstation.test_connection(url.trim()).await?)
}

/// The models and whether each is installed (reads the models folder).
#[tauri::command]
pub async fn models(shell: State<'_, Shell>) -> Reply<Vec<ModelView>> {
    blocking(&shell, |w| Ok(w.models())).await
}

/// Installs a model; progress arrives as `job-progress` events with a `step` line.
#[tauri::command]
pub async fn install_model(
    app: AppHandle,
    shell: State<'_, Shell>,
    name: String,
    job: String,
) -> Reply<PathBuf> {
    use headroom_speech::models::InstallStep;
    let progress = Arc::new(move |step: InstallStep| {
        let (progress, line) = match &step {
            InstallStep::Downloading { package } => (0.0, format!("downloading {package}")),
            InstallStep::Writing { file, done, total } => (
                *done as f32 / (*total).max(1) as f32,
                format!("writing {file}"),
            ),
            InstallStep::Done { path } => (1.0, format!("installed in {}", path.display())),
        };
        let _ = app.emit(
            events::JOB_PROGRESS,
            JobProgress {
                job: job.clone(),
                progress,
                step: Some(line),
                time: None,
            },
        );
    });
    Ok(shell.workstation.install_model(&name, progress).await?)
}

/// Where benchmark reports are kept: beside the projects folder.
fn reports_dir(shell: &Shell) -> PathBuf {
    let projects = shell.workstation.store().root();
    projects
        .parent()
        .map(|p| p.join("bench"))
        .unwrap_or_else(|| projects.join("bench"))
}

/// A progress line of a running benchmark (`bench`).
#[derive(Clone, Serialize, TS)]
pub struct BenchProgress {
    pub line: String,
}

/// Runs the serving harness against the app's server; progress lines arrive as `bench` events.
#[tauri::command]
pub async fn run_benchmark(app: AppHandle, shell: State<'_, Shell>) -> Reply<BenchmarkRun> {
    let dir = reports_dir(&shell);
    let progress = move |line: &str| {
        let _ = app.emit(
            events::BENCH,
            BenchProgress {
                line: line.to_string(),
            },
        );
    };
    let services = shell.workstation.services();
    Ok(harness::run_configured(services, &dir, &progress).await?)
}

/// Opens a benchmark report in the system's browser; only files under the reports folder.
#[tauri::command]
pub async fn open_report(shell: State<'_, Shell>, path: String) -> Reply<()> {
    let dir = reports_dir(&shell);
    blocking(&shell, move |_| open_in_browser(&dir, PathBuf::from(path))).await
}

fn open_in_browser(dir: &std::path::Path, path: PathBuf) -> Reply<()> {
    let inside = path
        .canonicalize()
        .ok()
        .zip(dir.canonicalize().ok())
        .is_some_and(|(p, d)| p.starts_with(d));
    if !inside {
        return Err(invalid("only benchmark reports can be opened"));
    }
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(target_os = "windows") {
        "explorer"
    } else {
        "xdg-open"
    };
    headroom_base::process::Tool::new(opener)
        .path(&path)
        .launch()
        .map_err(|e| invalid(format!("cannot open {}: {e}", path.display())))?;
    Ok(())
}

// ---- Voices ----

/// A step of a voice match (`voice-match-progress`).
#[derive(Debug, Clone, Serialize, TS)]
pub struct VoiceMatchProgress {
    pub job: String,
    pub progress: MatchProgress,
}

#[tauri::command]
pub async fn voice_profiles(shell: State<'_, Shell>) -> Reply<Vec<VoiceProfile>> {
    blocking(&shell, |w| Ok(w.voice_profiles()?)).await
}

#[tauri::command]
pub async fn create_voice(shell: State<'_, Shell>, name: String) -> Reply<VoiceProfile> {
    blocking(&shell, move |w| Ok(w.create_voice(&name)?)).await
}

#[tauri::command]
pub async fn rename_voice(
    shell: State<'_, Shell>,
    voice: String,
    name: String,
) -> Reply<VoiceProfile> {
    blocking(&shell, move |w| Ok(w.rename_voice(&voice, &name)?)).await
}

#[tauri::command]
pub async fn delete_voice(shell: State<'_, Shell>, voice: String) -> Reply<()> {
    blocking(&shell, move |w| Ok(w.delete_voice(&voice)?)).await
}

#[tauri::command]
pub async fn add_voice_clip(
    shell: State<'_, Shell>,
    voice: String,
    path: String,
    job: String,
) -> Reply<ClipAdded> {
    let guard = shell.jobs.start(&job);
    Ok(shell
        .workstation
        .add_voice_clip(&voice, Path::new(path.trim()), guard.cancel.clone())
        .await?)
}

#[tauri::command]
pub async fn record_voice_clip(
    app: AppHandle,
    shell: State<'_, Shell>,
    voice: String,
    max_seconds: f64,
    job: String,
) -> Reply<ClipAdded> {
    let guard = shell.jobs.start(&job);
    let level = level_events(app, job);
    Ok(shell
        .workstation
        .record_voice_clip(&voice, max_seconds, level, guard.cancel.clone())
        .await?)
}

#[tauri::command]
pub async fn remove_voice_clip(
    shell: State<'_, Shell>,
    voice: String,
    clip: String,
) -> Reply<VoiceProfile> {
    blocking(&shell, move |w| Ok(w.remove_voice_clip(&voice, &clip)?)).await
}

#[tauri::command]
pub async fn set_clip_transcript(
    shell: State<'_, Shell>,
    voice: String,
    clip: String,
    transcript: String,
) -> Reply<VoiceProfile> {
    blocking(&shell, move |w| {
        Ok(w.set_clip_transcript(&voice, &clip, &transcript)?)
    })
    .await
}

#[tauri::command]
pub async fn match_voice(
    app: AppHandle,
    shell: State<'_, Shell>,
    voice: String,
    budget: usize,
    job: String,
) -> Reply<VoiceProfile> {
    let guard = shell.jobs.start(&job);
    let progress = Arc::new(move |progress: MatchProgress| {
        let _ = app.emit(
            events::VOICE_MATCH_PROGRESS,
            VoiceMatchProgress {
                job: job.clone(),
                progress,
            },
        );
    });
    Ok(shell
        .workstation
        .match_voice(&voice, budget, progress, guard.cancel.clone())
        .await?)
}

#[tauri::command]
pub async fn speak_as_voice(
    shell: State<'_, Shell>,
    voice: String,
    text: String,
    job: String,
) -> Reply<VoiceTakeView> {
    let guard = shell.jobs.start(&job);
    Ok(shell
        .workstation
        .speak_as_voice(&voice, text, guard.cancel.clone())
        .await?)
}

#[tauri::command]
pub async fn play_voice_file(
    shell: State<'_, Shell>,
    voice: String,
    file: String,
    job: String,
) -> Reply<()> {
    let guard = shell.jobs.start(&job);
    Ok(shell
        .workstation
        .play_voice_file(&voice, &file, guard.cancel.clone())
        .await?)
}

#[tauri::command]
pub async fn cloning_health(shell: State<'_, Shell>) -> Reply<Health> {
    Ok(shell.workstation.cloning_health().await?)
}
