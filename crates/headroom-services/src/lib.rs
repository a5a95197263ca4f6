//! The composition root: [`Services`] is built once per process from the loaded
//! [`Config`] and the [`Environment`] the binary read, and owns what every front end shares —
//! the metrics registry, the one audio lane, the speech engines on it, the GPU sampler and one
//! text lane per upstream server. `headroom serve`, the CLI commands, the desktop app and the
//! benchmarks borrow from it; none builds lanes of its own, so a text lane always yields to the
//! same audio lane the speech endpoints run on.
//!
//! ```no_run
//! use headroom_core::config::Config;
//! use headroom_services::{Environment, Services};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let env = Environment::from_vars(|name| std::env::var_os(name), std::env::temp_dir);
//! let config = Config::load(env.config_file.as_deref(), |n| std::env::var(n).ok())?;
//! let services = Services::new(config, env);
//! // A server on this machine needs no consent; one elsewhere needs its origin allowed.
//! let consent = headroom_base::consent::RemoteConsent::none();
//! let text = services.text_lane("http://127.0.0.1:8000/v1", &consent)?;
//! // An interactive transcription on `services.speech()` now makes `text` yield (rule `gate`).
//! assert!(services.audio_lane().snapshot().occupancy.in_flight == 0);
//! # drop(text);
//! # Ok(()) }
//! ```
//!
//! | item | for |
//! |---|---|
//! | [`Services`] | the shared lanes, speech, GPU sampler and metrics |
//! | [`Environment`] | paths and programs, read from the process environment once, by the binary |
//! | [`speech`] | speech jobs (transcribe, synthesize) scheduled on the audio lane |
//! | [`recording`] | recording from an input device, transcribed live when asked |
//! | [`residency`] | which models are in memory, what each costs, letting go of idle ones |
//! | [`voices`] | the voice library: profiles, reference clips, embeddings, matches |
//! | [`voice_work`] | voice workflows on the audio lane: add a clip, score, match, speak as a voice |

pub mod batch;
pub mod recording;
pub mod residency;
pub mod speaking_voice;
pub mod speech;
pub mod transcription_fleet;
pub mod voice_catalog;
pub mod voice_work;
pub mod voices;

use headroom_base::consent::{Payload, RemoteConsent, Role};
use headroom_base::sync::Locked;
use headroom_core::admission::{MemoryGauge, RejectReason};
use headroom_core::config::{Config, ConfigError};
use headroom_core::lanes::{
    AudioLane, LaneEvent, LaneSnapshot, TextLane, TextLaneConfig, UpstreamSpec, WeakTextLane,
};
use headroom_core::llm::{ApiKey, LlmClient, LlmError};
use headroom_core::metrics::Metrics;
use headroom_core::signals::{CrossedSignal, Signals};
use headroom_gpu::{GpuSampler, ReplayReader, DEFAULT_CAPACITY, DEFAULT_PERIOD};
use headroom_speech::asr::{AsrError, Transcriber};
use headroom_speech::models;
use headroom_speech::tts::{Espeak, Kokoro, Piper, Synthesizer, ESPEAK_PROGRAM};
use headroom_speech::voice::{IndependentEmbedder, SpeakerEmbedder, VoiceError};
use residency::Residency;
use serde::Serialize;
use speech::{SpeechError, SpeechService};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::broadcast;

/// Voice names that select a neural voice model (`piper-joe`) rather than an espeak-ng voice.
pub const NEURAL_VOICE_PREFIX: &str = "piper-";
/// Voice names that select the Kokoro model: `kokoro` (its default style) or `kokoro-<style>`.
pub const KOKORO_VOICE: &str = "kokoro";

/// Where Headroom finds its files and helper programs, and the secrets it may send. The binary
/// reads these from its environment once ([`Environment::from_vars`]); libraries never do.
#[derive(Debug, Clone)]
pub struct Environment {
    /// The config file named by `--config` or `HEADROOM_CONFIG`; `None`: the default file.
    pub config_file: Option<PathBuf>,
    /// `HEADROOM_MODELS_DIR`, else the platform data directory.
    pub models_dir: PathBuf,
    /// `HEADROOM_PROJECTS_DIR`, else the platform data directory.
    pub projects_dir: PathBuf,
    /// `HEADROOM_VOICES_DIR`, else the platform data directory: the voice library.
    pub voices_dir: PathBuf,
    /// `HEADROOM_ESPEAK`, else `espeak-ng` on `PATH`.
    pub espeak: String,
    /// `HEADROOM_PYTHON`, else `python3`: runs pip for model installs.
    pub python: String,
    /// `HEADROOM_GPU_REPLAY`: a recorded GPU trace to show instead of NVML readings.
    pub gpu_replay: Option<PathBuf>,
    /// `HEADROOM_AUDIO_API_KEY`: the key for external speech servers (never the text model's).
    pub audio_api_key: Option<ApiKey>,
    /// `TMPDIR`, else the platform's: where uploads are received before they are decoded.
    pub temp_dir: PathBuf,
}

impl Environment {
    /// Resolves everything from `var` (the binary passes `std::env::var_os`); empty values count
    /// as unset. `platform_temp_dir` gives the temporary folder when `TMPDIR` is unset (the
    /// binary passes `std::env::temp_dir`, which reads the platform's own settings).
    pub fn from_vars(
        var: impl Fn(&str) -> Option<OsString>,
        platform_temp_dir: impl FnOnce() -> PathBuf,
    ) -> Environment {
        let set = |name: &str| var(name).filter(|v| !v.is_empty());
        let text = |name: &str| set(name).map(|v| v.to_string_lossy().into_owned());
        Environment {
            config_file: set("HEADROOM_CONFIG").map(PathBuf::from),
            models_dir: set("HEADROOM_MODELS_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(models::default_models_dir),
            projects_dir: set("HEADROOM_PROJECTS_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(default_projects_dir),
            voices_dir: set("HEADROOM_VOICES_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(default_voices_dir),
            espeak: text("HEADROOM_ESPEAK").unwrap_or_else(|| ESPEAK_PROGRAM.into()),
            python: text("HEADROOM_PYTHON").unwrap_or_else(|| "python3".into()),
            gpu_replay: set("HEADROOM_GPU_REPLAY").map(PathBuf::from),
            audio_api_key: text("HEADROOM_AUDIO_API_KEY").and_then(ApiKey::new),
            temp_dir: set("TMPDIR")
                .map(PathBuf::from)
                .unwrap_or_else(platform_temp_dir),
        }
    }

    /// The config file the app writes settings to: the named one, else the default.
    pub fn config_file_to_write(&self) -> Option<PathBuf> {
        self.config_file.clone().or_else(Config::default_path)
    }
}

/// Whether two server URLs name the same origin (scheme, host and port).
fn same_origin(a: &str, b: &str) -> bool {
    let origin = |u: &str| url::Url::parse(u.trim()).ok().map(|u| u.origin());
    matches!((origin(a), origin(b)), (Some(x), Some(y)) if x == y && x.is_tuple())
}

/// `~/.local/share/headroom/projects` on Linux (the platform data directory).
pub fn default_projects_dir() -> PathBuf {
    directories::ProjectDirs::from("", "", "headroom")
        .map(|d| d.data_dir().join("projects"))
        .unwrap_or_else(|| PathBuf::from("headroom-projects"))
}

/// `~/.local/share/headroom/voices` on Linux.
pub fn default_voices_dir() -> PathBuf {
    directories::ProjectDirs::from("", "", "headroom")
        .map(|d| d.data_dir().join("voices"))
        .unwrap_or_else(|| PathBuf::from("headroom-voices"))
}

/// Why a shared service could not be had; each keeps its cause.
#[derive(Debug, thiserror::Error)]
pub enum ServicesError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("the text model's server at {url} cannot be used: {source}")]
    Server {
        url: headroom_base::redact::SecretUrl,
        #[source]
        source: LlmError,
    },
    #[error(transparent)]
    Speech(#[from] SpeechError),
    #[error(transparent)]
    Voice(#[from] VoiceError),
    /// A text lane's upstream is on another machine its caller has no consent for: refused
    /// before a byte is sent, and recorded in that lane's history.
    #[error(transparent)]
    NotAllowed(Box<headroom_core::admission::Rejection>),
}

/// A lane's snapshot with the server it fronts (text lanes).
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct LaneView {
    pub server_url: Option<String>,
    #[serde(flatten)]
    pub snapshot: LaneSnapshot,
    /// The audio lane's: who has the CPU, batch work paused for interactive work, and the
    /// interactive jobs that ran beside batch work.
    pub cpu: Option<headroom_base::cpu::CpuShareView>,
    /// On the configured text lane's view: the signals crossed now (a policy to change).
    pub signals: Vec<CrossedSignal>,
}

/// The GPU sampler as the text lanes' memory-pressure gate reads it.
struct SampledGpuMemory(GpuSampler);

impl MemoryGauge for SampledGpuMemory {
    fn free_mib(&self) -> Option<f64> {
        self.0.fresh_free_mib()
    }
    fn device(&self) -> String {
        self.0.device().to_string()
    }
    fn period(&self) -> Duration {
        self.0.period()
    }
}

/// Everything the front ends share. Build it once ([`Services::new`]) and borrow it.
pub struct Services {
    /// Itself, so workflows that outlive a borrow ([`Services::voices`]) can hold it.
    me: std::sync::Weak<Services>,
    config: Mutex<Config>,
    env: Environment,
    metrics: Arc<Metrics>,
    audio_lane: AudioLane,
    /// Embedded Whisper and espeak-ng on the audio lane.
    speech: Arc<SpeechService>,
    /// Every model loaded (Whisper, VAD, neural voices, the speaker embedder): loaded on first
    /// use, let go when idle.
    residency: Arc<Residency>,
    voice_library: voices::VoiceLibrary,
    /// One text lane per server URL, so each server keeps its own bound.
    text_lanes: Mutex<HashMap<String, TextLane>>,
    lane_events: broadcast::Sender<LaneEvent>,
    /// Started on first use: commands that never look at the GPU never start NVML.
    gpu: OnceLock<GpuSampler>,
    /// The runtime the lane-event forwarders run on (callers may come from other threads).
    runtime: tokio::runtime::Handle,
    /// The rates that say a policy is wrong, read from the metrics every few seconds.
    signals: Mutex<Signals>,
}

impl Services {
    /// Must be called inside a Tokio runtime, which then runs the lane-event forwarders.
    pub fn new(config: Config, env: Environment) -> Arc<Services> {
        let metrics = Arc::new(Metrics::new());
        let audio_lane = AudioLane::new(config.audio_lane(), metrics.clone());
        let residency = Arc::new(Residency::new(config.audio_lane.model_idle()));
        let voice_library = voices::VoiceLibrary::new(env.voices_dir.clone());
        let speech = Arc::new(
            SpeechService::new(
                audio_lane.clone(),
                env.models_dir.clone(),
                env.temp_dir.clone(),
                Arc::new(Espeak::new(env.espeak.clone()).with_temp_dir(env.temp_dir.clone())),
                residency.clone(),
            )
            .with_voice_library(voice_library.clone()),
        );
        let (lane_events, _) = broadcast::channel(256);
        let runtime = tokio::runtime::Handle::current();
        forward_events(&runtime, audio_lane.subscribe(), lane_events.clone());
        release_idle_models(&runtime, Arc::downgrade(&residency));
        let watcher = runtime.clone();
        let services = Arc::new_cyclic(|me| Services {
            me: me.clone(),
            config: Mutex::new(config),
            env,
            metrics,
            audio_lane,
            speech,
            residency,
            voice_library,
            text_lanes: Mutex::new(HashMap::new()),
            lane_events,
            gpu: OnceLock::new(),
            runtime,
            signals: Mutex::new(Signals::new()),
        });
        watcher.spawn(watch_signals(Arc::downgrade(&services)));
        services
    }

    /// Reads the metrics into the signals (the GPU's gauges first, when it is sampled) and
    /// returns the ones crossed now.
    pub fn observe_signals(&self) -> Vec<CrossedSignal> {
        self.observe_signals_at(headroom_base::clock::unix_ms())
    }

    /// [`Services::observe_signals`] as of `at_unix_ms` (a test replays minutes in moments).
    pub fn observe_signals_at(&self, at_unix_ms: u64) -> Vec<CrossedSignal> {
        if let Some(gpu) = self.gpu.get() {
            publish_gpu_memory(&self.metrics, gpu);
        }
        let text = self.metrics.render();
        let mut signals = self.signals.locked();
        if let Err(e) = signals.observe(at_unix_ms, &text) {
            tracing::warn!("signals skipped a reading: {e}");
        }
        signals.crossed().to_vec()
    }

    /// The signals crossed at the last reading, in the table's order.
    pub fn crossed_signals(&self) -> Vec<CrossedSignal> {
        self.signals.locked().crossed().to_vec()
    }

    /// These services as a shared value (for a front end that keeps them).
    pub fn shared(&self) -> Arc<Services> {
        self.me
            .upgrade()
            .expect("services are only reached through their Arc")
    }

    /// The settings now in force.
    pub fn config(&self) -> Config {
        self.config.locked().clone()
    }

    pub fn env(&self) -> &Environment {
        &self.env
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The one audio lane every audio job runs on.
    pub fn audio_lane(&self) -> &AudioLane {
        &self.audio_lane
    }

    /// The embedded speech engines (Whisper, espeak-ng) on the audio lane.
    pub fn speech(&self) -> &Arc<SpeechService> {
        &self.speech
    }

    /// Speech on the same lane with other engines (an external server by URL), sharing the
    /// loaded embedded models for whatever is not replaced.
    pub fn speech_using(
        &self,
        transcriber: Option<Arc<dyn Transcriber>>,
        synthesizer: Option<Arc<dyn Synthesizer>>,
    ) -> Arc<SpeechService> {
        let mut service = SpeechService::clone(&self.speech);
        if let Some(engine) = transcriber {
            service = service.with_transcriber(engine);
        }
        if let Some(engine) = synthesizer {
            service = service.with_synthesizer(engine);
        }
        Arc::new(service)
    }

    /// Speech that transcribes where `servers` says (see [`transcription_fleet::ServerChoice`]),
    /// asking them for `model`, on the same lane as the embedded engines: none, this
    /// machine's engine; one, that server hearing the recording as the engine would; several
    /// (or pieces per server given), a fleet hearing pieces at once. Audio goes to each
    /// server, so every one on another machine must be allowed by `consent`; refused before
    /// anything is sent, as is a choice no job may name. One front end builds it once per
    /// job or batch, so a batch's files share the servers' health and backoff.
    pub fn speech_for_servers(
        &self,
        servers: &transcription_fleet::ServerChoice,
        model: &str,
        consent: &RemoteConsent,
    ) -> Result<Arc<SpeechService>, SpeechError> {
        use headroom_speech::remote::RemoteTranscriber;
        servers.check(model).map_err(AsrError::from)?;
        let key = self.env.audio_api_key.clone();
        let transcriber: Arc<dyn Transcriber> = match servers.urls.as_slice() {
            [] => return Ok(self.speech.clone()),
            [url] if servers.per_server.is_none() => {
                Arc::new(RemoteTranscriber::new(url, model, key, consent).map_err(AsrError::from)?)
            }
            urls => {
                let settings = transcription_fleet::FleetSettings {
                    per_server: servers.per_server.map_or(1, usize::from),
                    ..transcription_fleet::FleetSettings::default()
                };
                Arc::new(
                    transcription_fleet::TranscriptionFleet::new(
                        urls,
                        model,
                        key,
                        consent,
                        settings,
                        self.metrics.clone(),
                    )
                    .map_err(AsrError::from)?,
                )
            }
        };
        Ok(self.speech_using(Some(transcriber), None))
    }

    /// The voice workflows (add clips, score, match, speak as a voice) over these services.
    pub fn voices(&self) -> voice_work::Voices {
        voice_work::Voices::new(self.arc())
    }

    /// These services, owned, for work that outlives a borrow.
    pub(crate) fn arc(&self) -> Arc<Services> {
        self.me
            .upgrade()
            .expect("services are alive while borrowed")
    }

    /// The voice library (profiles of voices, usable in any project).
    pub fn voice_library(&self) -> &voices::VoiceLibrary {
        &self.voice_library
    }

    /// The models in memory and what each costs.
    pub fn residency(&self) -> &Arc<Residency> {
        &self.residency
    }

    /// Kokoro, loaded (on the calling thread) when it is not in memory.
    pub fn kokoro(&self) -> Result<Arc<Kokoro>, ServicesError> {
        Ok(self
            .residency
            .slot::<Kokoro>(KOKORO_VOICE, "voice")
            .get_or_load(|| {
                let dir = models::locate(&self.env.models_dir, KOKORO_VOICE)?;
                Ok::<_, SpeechError>(Kokoro::load(&dir, &self.env.espeak)?)
            })?)
    }

    /// The independent speaker embedder (Resemblyzer's), which scores takes and matches beside
    /// [`Services::embedder`] but is never searched against; loaded (on the calling thread)
    /// when it is not in memory. Not installed: an error saying how to install it.
    pub fn independent_embedder(&self) -> Result<Arc<IndependentEmbedder>, ServicesError> {
        self.residency
            .slot::<IndependentEmbedder>(
                models::INDEPENDENT_EMBEDDER_MODEL,
                "speaker embedding (independent judge)",
            )
            .get_or_load(|| {
                let dir = models::locate(&self.env.models_dir, models::INDEPENDENT_EMBEDDER_MODEL)
                    .map_err(SpeechError::from)?;
                Ok(IndependentEmbedder::load(&dir)?)
            })
    }

    /// The speaker embedder, loaded (on the calling thread) when it is not in memory.
    pub fn embedder(&self) -> Result<Arc<SpeakerEmbedder>, ServicesError> {
        self.speech.loaded_embedder().map_err(|e| match e {
            SpeechError::Voice(e) => ServicesError::Voice(e),
            other => ServicesError::Speech(other),
        })
    }

    /// The speaker diarizer (the speaker embedder and the voice activity detector), loaded
    /// (on the calling thread) when they are not in memory. Transcriptions find speakers
    /// with [`speech::SpeechService::transcribe_with`], which uses the same models.
    pub fn diarizer(&self) -> Result<headroom_speech::asr::diarize::Diarizer, ServicesError> {
        let vad_dir =
            models::locate(&self.env.models_dir, models::VAD_MODEL).map_err(SpeechError::from)?;
        Ok(headroom_speech::asr::diarize::Diarizer::new(
            self.embedder()?,
            self.speech.loaded_vad(&vad_dir)?,
        ))
    }

    /// The speech service that speaks `voice`, and the voice name to pass it: a neural voice
    /// (`kokoro`, `kokoro-<style>`, `piper-joe`) gets its model, loaded when it is not in
    /// memory; anything else is an espeak-ng voice.
    pub fn speech_for_voice(
        &self,
        voice: Option<&str>,
    ) -> Result<(Arc<SpeechService>, Option<String>), ServicesError> {
        if let Some(v) = voice.filter(|v| *v == KOKORO_VOICE || v.starts_with("kokoro-")) {
            let service = self.speech.with_synthesizer(self.kokoro()?);
            return Ok((Arc::new(service), Some(v.to_string())));
        }
        let Some(model) = voice.filter(|v| v.starts_with(NEURAL_VOICE_PREFIX)) else {
            return Ok((self.speech.clone(), voice.map(str::to_string)));
        };
        models::spec(model).map_err(SpeechError::from)?;
        let piper = self
            .residency
            .slot::<Piper>(model, "voice")
            .get_or_load(|| {
                let dir = models::locate(&self.env.models_dir, model)?;
                let name = &model[NEURAL_VOICE_PREFIX.len()..];
                Ok::<_, SpeechError>(Piper::load(&dir, name, &self.env.espeak)?)
            })?;
        Ok((Arc::new(self.speech.with_synthesizer(piper)), None))
    }

    /// Device memory readings (NVML, or the replay named by `HEADROOM_GPU_REPLAY`), started on
    /// first use.
    pub fn gpu(&self) -> &GpuSampler {
        self.gpu.get_or_init(|| gpu_sampler(&self.env))
    }

    /// Occupancy, rejections and completions of every lane, as they happen.
    pub fn subscribe_lanes(&self) -> broadcast::Receiver<LaneEvent> {
        self.lane_events.subscribe()
    }

    /// A client for `url`, with the configured key only when `url` is a configured server
    /// (same scheme, host and port as `llm.url` or one of `llm.upstreams`): a project's own
    /// server elsewhere never receives it.
    pub fn client(&self, url: &str) -> Result<LlmClient, ServicesError> {
        let config = self.config();
        let key = config
            .llm
            .api_key()
            .filter(|_| config.llm.fleet().iter().any(|u| same_origin(url, &u.url)));
        LlmClient::new(url, key).map_err(|source| ServicesError::Server {
            url: url.into(),
            source,
        })
    }

    /// The text lane in front of `url`, created on first use: it yields to the audio lane's
    /// interactive jobs and, when `text_lane.audio_headroom_mib` is set, refuses new work under
    /// GPU memory pressure. The configured server's lane (`llm.url`) spans every configured
    /// upstream (`llm.upstreams`), whose health is checked every few seconds. A lane that would
    /// send to a server on another machine needs `consent` for every such upstream: there is
    /// no way to a lane without saying what the caller allows.
    pub fn text_lane(&self, url: &str, consent: &RemoteConsent) -> Result<TextLane, ServicesError> {
        self.text_lane_for(std::slice::from_ref(&url.to_string()), consent)
    }

    /// The text lane over `urls`: [`Services::text_lane`] for one (the configured lane for
    /// none), else one lane over them all (a project's own fleet), created on first use and
    /// checked every few seconds; refused, as `text_lane` is, without consent for each upstream
    /// off this machine.
    pub fn text_lane_for(
        &self,
        urls: &[String],
        consent: &RemoteConsent,
    ) -> Result<TextLane, ServicesError> {
        let lane = self.shared_text_lane(urls)?;
        for upstream in self.text_lane_urls(urls) {
            if let Err(refused) = consent.check(Role::TextModel, &upstream, &[Payload::Text]) {
                let rejection =
                    lane.record_rejection(RejectReason::RemoteNotAllowed, refused.to_string());
                return Err(ServicesError::NotAllowed(Box::new(rejection)));
            }
        }
        Ok(lane)
    }

    /// The text lane in front of the configured server (`llm.url`), with `consent` for its
    /// upstreams off this machine.
    pub fn default_text_lane(&self, consent: &RemoteConsent) -> Result<TextLane, ServicesError> {
        self.text_lane_for(&[], consent)
    }

    /// Every server the lane over `urls` sends to: the configured fleet for none or for the
    /// configured server, else `urls`.
    pub fn text_lane_urls(&self, urls: &[String]) -> Vec<String> {
        let config = self.config();
        match urls {
            [] => config.llm.fleet().into_iter().map(|u| u.url).collect(),
            [one] if *one == config.llm.url => {
                config.llm.fleet().into_iter().map(|u| u.url).collect()
            }
            several => several.to_vec(),
        }
    }

    /// The shared lane over `urls`, made on first use (consent is the public callers' check).
    fn shared_text_lane(&self, urls: &[String]) -> Result<TextLane, ServicesError> {
        let config = self.config();
        let key = match urls {
            [] => config.llm.url.clone(),
            several => several.join(" "),
        };
        let mut lanes = self.text_lanes.locked();
        if let Some(lane) = lanes.get(&key) {
            return Ok(lane.clone());
        }
        let upstreams = if key == config.llm.url {
            config
                .llm
                .fleet()
                .into_iter()
                .map(|u| {
                    Ok(UpstreamSpec {
                        client: self.client(&u.url)?,
                        capacity: u.capacity,
                    })
                })
                .collect::<Result<Vec<_>, ServicesError>>()?
        } else {
            urls.iter()
                .map(|url| Ok(UpstreamSpec::new(self.client(url)?)))
                .collect::<Result<Vec<_>, ServicesError>>()?
        };
        let lane = self.text_lane_over(upstreams, config.text_lane()?);
        self.runtime
            .spawn(check_health_while_used(lane.downgrade()));
        lanes.insert(key, lane.clone());
        Ok(lane)
    }

    /// A text lane with limits of its own (a benchmark's), not shared with other callers but
    /// wired like every other: beside the one audio lane, reporting to the same metrics and
    /// lane events, with the GPU gate when its config asks for one.
    pub fn dedicated_text_lane(&self, client: LlmClient, config: TextLaneConfig) -> TextLane {
        self.text_lane_over(vec![UpstreamSpec::new(client)], config)
    }

    /// [`Services::dedicated_text_lane`] over several upstreams (a benchmark's fleet).
    pub fn text_lane_over(&self, upstreams: Vec<UpstreamSpec>, config: TextLaneConfig) -> TextLane {
        let gauge = config
            .audio_headroom_mib
            .map(|_| Arc::new(SampledGpuMemory(self.gpu().clone())) as Arc<dyn MemoryGauge>);
        let lane = TextLane::over_fleet(
            upstreams,
            config,
            self.metrics.clone(),
            self.audio_lane.activity(),
            gauge,
        );
        forward_events(&self.runtime, lane.subscribe(), self.lane_events.clone());
        lane
    }

    /// Applies new settings (checked first). Text lanes are rebuilt with the new limits on
    /// next use; requests already running keep their slots until they end.
    pub fn replace_config(&self, mut new: Config) -> Result<(), ServicesError> {
        new.check()?;
        let mut config = self.config.locked();
        // The key comes from the environment or the file, never from a front end's settings
        // form: settings without one keep the key in use.
        if new.llm.api_key.is_none() {
            new.llm.api_key = config.llm.api_key.take();
        }
        self.residency.set_idle_after(new.audio_lane.model_idle());
        *config = new;
        drop(config);
        self.text_lanes.locked().clear();
        Ok(())
    }

    /// Every lane's current state: the audio lane, then each shared text lane in use (at
    /// least the configured server's).
    pub fn lanes(&self) -> Result<Vec<LaneView>, ServicesError> {
        // Made to be shown, not used: nothing is sent through it here.
        self.shared_text_lane(&[])?;
        let mut views = vec![LaneView {
            server_url: None,
            snapshot: self.audio_lane.snapshot(),
            cpu: Some(self.audio_lane.cpu_share()),
            signals: Vec::new(),
        }];
        let configured = self.config().llm.url;
        let lanes = self.text_lanes.locked();
        let mut urls: Vec<&String> = lanes.keys().collect();
        urls.sort();
        for url in urls {
            views.push(LaneView {
                server_url: Some(headroom_base::redact::urls(url)),
                snapshot: lanes[url].snapshot(),
                cpu: None,
                signals: if **url == configured {
                    self.crossed_signals()
                } else {
                    Vec::new()
                },
            });
        }
        Ok(views)
    }
}

/// NVML, or a recorded trace (for demonstrations and UI tests on machines without a GPU; the
/// panel says it is a replay).
fn gpu_sampler(env: &Environment) -> GpuSampler {
    if let Some(path) = &env.gpu_replay {
        match ReplayReader::open(path) {
            Ok(reader) => {
                return GpuSampler::with_reader(reader, DEFAULT_PERIOD, DEFAULT_CAPACITY, true)
            }
            Err(e) => tracing::error!("HEADROOM_GPU_REPLAY ignored: {e}"),
        }
    }
    GpuSampler::start(DEFAULT_PERIOD, DEFAULT_CAPACITY)
}

/// Lets go of idle models about every tenth of the idle time (at least every second, at most
/// every minute), for as long as the services live.
fn release_idle_models(runtime: &tokio::runtime::Handle, residency: std::sync::Weak<Residency>) {
    runtime.spawn(async move {
        loop {
            let Some(residency) = residency.upgrade() else {
                break;
            };
            let every = residency
                .idle_after()
                .map(|idle| (idle / 10).clamp(Duration::from_secs(1), Duration::from_secs(60)))
                .unwrap_or(Duration::from_secs(60));
            for model in residency.release_idle() {
                tracing::info!(model = %model.name, idle_secs = model.idle_secs, "released an idle model");
            }
            drop(residency);
            tokio::time::sleep(every).await;
        }
    });
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

/// Exports the GPU memory in use and its floor over the readings kept, when there are any.
pub fn publish_gpu_memory(metrics: &Metrics, gpu: &GpuSampler) {
    if let (Some(latest), Some(floor)) = (gpu.latest(), gpu.floor_bytes()) {
        metrics.set_gpu_memory(latest.memory.used_bytes, floor);
    }
}

/// How often the signals read the metrics: their windows are minutes long, and one reading
/// every few seconds is what they keep at most.
const SIGNALS_EVERY: Duration = Duration::from_secs(5);

/// Reads the metrics into the signals every few seconds while the services live.
async fn watch_signals(services: std::sync::Weak<Services>) {
    let mut every = tokio::time::interval(SIGNALS_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(services) = services.upgrade() else {
            return;
        };
        services.observe_signals();
    }
}

/// How often the upstreams of a shared fleet lane are checked while it is in use.
const HEALTH_CHECK_EVERY: Duration = Duration::from_secs(5);

/// Checks a shared lane's upstreams every few seconds once it has been used (never before:
/// a server the user has not allowed is not even asked), so one that comes back is seen as up
/// again without a request having to find out; ends when the lane is dropped.
async fn check_health_while_used(lane: WeakTextLane) {
    let mut every = tokio::time::interval(HEALTH_CHECK_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(lane) = lane.upgrade() else { return };
        if lane.in_use() {
            lane.check_health().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_core::admission::{Priority, RejectReason};
    use headroom_core::llm::{ChatMessage, ChatRequest};
    use std::ffi::OsString;

    fn env() -> Environment {
        Environment::from_vars(
            |name| match name {
                "HEADROOM_MODELS_DIR" => Some(OsString::from("/nonexistent/models")),
                "HEADROOM_ESPEAK" => Some(OsString::from("")),
                _ => None,
            },
            std::env::temp_dir,
        )
    }

    #[test]
    fn the_environment_is_resolved_from_the_lookup_given() {
        let env = env();
        assert_eq!(env.models_dir, PathBuf::from("/nonexistent/models"));
        assert_eq!(env.espeak, "espeak-ng", "an empty value counts as unset");
        assert_eq!(env.python, "python3");
        assert!(env.config_file.is_none() && env.audio_api_key.is_none());
    }

    #[test]
    fn the_temp_folder_is_tmpdir_else_the_one_the_binary_passes_in() {
        let platform = || PathBuf::from("/platform/tmp");
        let with_tmpdir = |value: &'static str| {
            move |name: &str| (name == "TMPDIR").then(|| OsString::from(value))
        };
        assert_eq!(
            Environment::from_vars(with_tmpdir("/mine"), platform).temp_dir,
            PathBuf::from("/mine")
        );
        assert_eq!(
            Environment::from_vars(with_tmpdir(""), platform).temp_dir,
            PathBuf::from("/platform/tmp"),
            "an empty TMPDIR counts as unset"
        );
        assert_eq!(
            Environment::from_vars(|_| None, platform).temp_dir,
            PathBuf::from("/platform/tmp")
        );
    }

    #[tokio::test]
    async fn live_transcription_says_which_model_to_install_before_recording() {
        let services = Services::new(Config::default(), env());
        let missing = services.speech().live_ready("whisper-tiny.en").unwrap_err();
        assert_eq!(
            missing.to_string(),
            "the model whisper-tiny.en is not installed; install it with `headroom models install whisper-tiny.en`"
        );
    }

    #[tokio::test]
    async fn a_text_lane_to_another_machine_needs_consent_for_every_upstream() {
        let services = Services::new(Config::default(), env());
        let several = [
            "http://127.0.0.1:9/v1".to_string(),
            "http://192.0.2.1:8000/v1".to_string(),
            "http://192.0.2.2:8000/v1".to_string(),
        ];
        let none = RemoteConsent::none();
        assert!(services.text_lane("http://127.0.0.1:9/v1", &none).is_ok());
        let refused = |consent: &RemoteConsent| match services.text_lane_for(&several, consent) {
            Err(ServicesError::NotAllowed(rejection)) => rejection,
            other => panic!("{:?}", other.map(|_| ())),
        };
        let rejection = refused(&none);
        assert_eq!(rejection.reason, RejectReason::RemoteNotAllowed);
        assert!(rejection.to_string().contains("192.0.2.1"), "{rejection}");
        // Consent to one origin of a lane is not consent to its others.
        let one = RemoteConsent::allowing(["http://192.0.2.1:8000"]);
        assert!(refused(&one).to_string().contains("192.0.2.2"));
        let both = RemoteConsent::allowing(["http://192.0.2.1:8000", "http://192.0.2.2:8000"]);
        let lane = services.text_lane_for(&several, &both).unwrap();
        assert_eq!(
            lane.snapshot()
                .rejected_total
                .get(&RejectReason::RemoteNotAllowed),
            Some(&2),
            "each refusal is in the lane's history"
        );
    }

    #[tokio::test]
    async fn every_text_lane_yields_to_the_one_audio_lane() {
        let services = Services::new(Config::default(), env());
        // Nothing listens on port 9: the gate refuses before any request would be sent.
        let lane = services
            .text_lane("http://127.0.0.1:9/v1", &RemoteConsent::none())
            .unwrap();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let audio = services.audio_lane().clone();
        let job = tokio::spawn(async move {
            audio
                .run(
                    "test",
                    Priority::Interactive,
                    Default::default(),
                    move |_| {
                        let _ = started_tx.send(());
                        let _ = release_rx.recv();
                    },
                )
                .await
        });
        started_rx.await.unwrap();
        let request = ChatRequest::new(vec![ChatMessage::new("user", "hello")]);
        let refused = lane.submit(request).await.err().expect("refused");
        assert_eq!(refused.reason, RejectReason::AudioPriority);
        assert_eq!(
            services.metrics().rejections(
                headroom_core::admission::Lane::Text,
                RejectReason::AudioPriority
            ),
            1
        );
        release_tx.send(()).unwrap();
        job.await.unwrap().unwrap();
        // The same lane is handed out again for the same server.
        let again = services
            .text_lane("http://127.0.0.1:9/v1", &RemoteConsent::none())
            .unwrap();
        assert_eq!(
            again.snapshot().rejected_total,
            lane.snapshot().rejected_total
        );
    }
}
