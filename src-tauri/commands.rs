//! The commands the web view may call. Each one forwards to the workstation and turns its error
//! into a [`UiError`] the front end can show (a rejection keeps all its typed fields).

use crate::{events, Shell};
use headroom_core::admission::{Rejection, SuggestedAction};
use headroom_core::asr::export::ExportFormat;
use headroom_core::config::Config;
use headroom_core::gpu::{GpuSampler, MemorySample, SamplerStatus};
use headroom_core::llm::ServerInfo;
use headroom_core::projects::{
    Decision, Project, ProjectEntry, ProjectSettings, SpeechTake, Suggestion,
};
use headroom_core::tts::Voice;
use headroom_core::workstation::{BenchmarkRun, LaneView, ModelView, WorkstationError};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use tauri::{AppHandle, Emitter, State};

/// An error as the front end sees it.
#[derive(Debug, Serialize)]
pub struct UiError {
    /// `rejected`, `cancelled` or `error`.
    kind: &'static str,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    rejection: Option<Box<Rejection>>,
    /// What the user can do about a rejection, in the order to offer them.
    actions: Vec<SuggestedAction>,
}

impl From<WorkstationError> for UiError {
    fn from(e: WorkstationError) -> Self {
        let rejection = e.rejection().cloned().map(Box::new);
        let kind = match (&e, &rejection) {
            (_, Some(_)) => "rejected",
            (WorkstationError::Cancelled, _) => "cancelled",
            _ => "error",
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

impl From<headroom_core::projects::ProjectError> for UiError {
    fn from(e: headroom_core::projects::ProjectError) -> Self {
        WorkstationError::from(e).into()
    }
}

fn invalid(message: impl Into<String>) -> UiError {
    UiError {
        kind: "error",
        message: message.into(),
        rejection: None,
        actions: Vec::new(),
    }
}

type Reply<T> = Result<T, UiError>;

#[derive(Serialize)]
pub struct AppInfo {
    version: &'static str,
    projects_dir: PathBuf,
    config_path: Option<PathBuf>,
    models_dir: PathBuf,
}

#[tauri::command]
pub fn app_info(shell: State<'_, Shell>) -> AppInfo {
    AppInfo {
        version: env!("CARGO_PKG_VERSION"),
        projects_dir: shell.workstation.store().root().to_path_buf(),
        config_path: shell.workstation.config_path().map(PathBuf::from),
        models_dir: headroom_core::models::models_dir(),
    }
}

/// The front end calls this once its first view is interactive; the time since the process
/// started is the cold-start figure.
#[tauri::command]
pub fn app_ready(shell: State<'_, Shell>) -> u64 {
    let ms = shell.started.elapsed().as_millis() as u64;
    tracing::info!(cold_start_ms = ms, "window interactive");
    ms
}

#[tauri::command]
pub fn list_projects(shell: State<'_, Shell>) -> Reply<Vec<ProjectEntry>> {
    Ok(shell.workstation.store().list()?)
}

#[tauri::command]
pub fn create_project(shell: State<'_, Shell>, name: String) -> Reply<Project> {
    Ok(shell.workstation.store().create(&name)?)
}

#[tauri::command]
pub fn open_project(shell: State<'_, Shell>, id: String) -> Reply<Project> {
    Ok(shell.workstation.store().open(&id)?)
}

#[tauri::command]
pub async fn rename_project(shell: State<'_, Shell>, id: String, name: String) -> Reply<Project> {
    Ok(shell.workstation.store().rename(&id, &name)?)
}

#[tauri::command]
pub fn delete_project(shell: State<'_, Shell>, id: String) -> Reply<()> {
    Ok(shell.workstation.store().delete(&id)?)
}

#[tauri::command]
pub async fn update_project_settings(
    shell: State<'_, Shell>,
    id: String,
    settings: ProjectSettings,
) -> Reply<Project> {
    let (project, ()) = shell
        .workstation
        .update_project(&id, |p| {
            p.settings = settings;
            Ok(())
        })
        .await?;
    Ok(project)
}

#[derive(Clone, Serialize)]
struct JobProgress<'a> {
    job: &'a str,
    progress: f32,
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
    let progress_job = job.clone();
    let progress = Arc::new(move |progress: f32| {
        let _ = app.emit(
            events::JOB_PROGRESS,
            JobProgress {
                job: &progress_job,
                progress,
            },
        );
    });
    let path = PathBuf::from(path.trim());
    Ok(shell
        .workstation
        .transcribe(&project, &path, None, progress, guard.cancel.clone())
        .await?)
}

#[tauri::command]
pub fn cancel_job(shell: State<'_, Shell>, job: String) -> bool {
    shell.jobs.cancel(&job)
}

#[tauri::command]
pub async fn edit_segment(
    shell: State<'_, Shell>,
    project: String,
    index: usize,
    text: String,
) -> Reply<Project> {
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

#[tauri::command]
pub async fn decide(
    shell: State<'_, Shell>,
    project: String,
    segment: Option<usize>,
    decision: Decision,
) -> Reply<Project> {
    Ok(shell
        .workstation
        .decide(&project, segment, decision)
        .await?)
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

#[tauri::command]
pub fn list_voices(shell: State<'_, Shell>) -> Reply<Vec<Voice>> {
    Ok(shell.workstation.voices()?)
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

#[tauri::command]
pub fn save_copy(
    shell: State<'_, Shell>,
    project: String,
    file: String,
    destination: String,
) -> Reply<PathBuf> {
    let destination = PathBuf::from(destination.trim());
    if !destination.is_absolute() {
        return Err(invalid("give the full path of the file to save"));
    }
    Ok(shell.workstation.save_copy(&project, &file, &destination)?)
}

#[derive(Clone, Serialize)]
struct RecordLevel<'a> {
    job: &'a str,
    dbfs: f32,
}

/// Records until the job is cancelled (the Stop button) or `max_seconds`; returns the absolute
/// path of the WAV saved in the project.
#[tauri::command]
pub async fn record(
    app: AppHandle,
    shell: State<'_, Shell>,
    project: String,
    max_seconds: f64,
    job: String,
) -> Reply<PathBuf> {
    let guard = shell.jobs.start(&job);
    let level_job = job.clone();
    let level = Arc::new(move |dbfs: f32| {
        let _ = app.emit(
            events::RECORD_LEVEL,
            RecordLevel {
                job: &level_job,
                dbfs,
            },
        );
    });
    let relative = shell
        .workstation
        .record(&project, max_seconds, level, guard.cancel.clone())
        .await?;
    Ok(shell.workstation.project_file(&project, &relative)?)
}

#[tauri::command]
pub fn lanes(shell: State<'_, Shell>) -> Reply<Vec<LaneView>> {
    Ok(shell.workstation.lanes()?)
}

/// The GPU panel's state: the sampler's status and the readings kept so far (thinned to at
/// most [`GPU_CHART_POINTS`]).
#[derive(Serialize)]
pub struct GpuView {
    status: SamplerStatus,
    samples: Vec<MemorySample>,
}

const GPU_CHART_POINTS: usize = 600;

#[tauri::command]
pub fn gpu_status(shell: State<'_, Shell>) -> GpuView {
    let gpu = shell.workstation.gpu();
    let all = gpu.samples_since(0);
    let step = all.len().div_ceil(GPU_CHART_POINTS).max(1);
    GpuView {
        status: gpu.status(),
        samples: all.into_iter().step_by(step).collect(),
    }
}

#[derive(Serialize, Clone)]
struct GpuEvent {
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
pub fn get_settings(shell: State<'_, Shell>) -> Config {
    shell.workstation.config()
}

#[tauri::command]
pub fn save_settings(shell: State<'_, Shell>, settings: Config) -> Reply<()> {
    Ok(shell.workstation.update_config(settings)?)
}

#[tauri::command]
pub async fn test_connection(shell: State<'_, Shell>, url: String) -> Reply<ServerInfo> {
    Ok(shell.workstation.test_connection(url.trim()).await?)
}

#[tauri::command]
pub fn models(shell: State<'_, Shell>) -> Vec<ModelView> {
    shell.workstation.models()
}

#[derive(Clone, Serialize)]
struct InstallProgress<'a> {
    job: &'a str,
    progress: f32,
    step: String,
}

/// Installs a model; progress arrives as `job-progress` events with a `step` line.
#[tauri::command]
pub async fn install_model(
    app: AppHandle,
    shell: State<'_, Shell>,
    name: String,
    job: String,
) -> Reply<PathBuf> {
    use headroom_core::models::InstallStep;
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
            InstallProgress {
                job: &job,
                progress,
                step: line,
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

#[derive(Clone, Serialize)]
struct BenchProgress<'a> {
    line: &'a str,
}

/// Runs the serving harness against the app's server; progress lines arrive as `bench` events.
#[tauri::command]
pub async fn run_benchmark(app: AppHandle, shell: State<'_, Shell>) -> Reply<BenchmarkRun> {
    let dir = reports_dir(&shell);
    let progress = move |line: &str| {
        let _ = app.emit(events::BENCH, BenchProgress { line });
    };
    Ok(shell.workstation.benchmark(&dir, &progress).await?)
}

/// Opens a benchmark report in the system's browser; only files under the reports folder.
#[tauri::command]
pub fn open_report(shell: State<'_, Shell>, path: String) -> Reply<()> {
    let dir = reports_dir(&shell);
    let path = PathBuf::from(path);
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
    std::process::Command::new(opener)
        .arg(&path)
        .spawn()
        .map_err(|e| invalid(format!("cannot open {} with {opener}: {e}", path.display())))?;
    Ok(())
}
