//! Settings: built-in defaults, then a TOML file, then environment variables; the CLI applies
//! its flags last. The file lives at `<config dir>/headroom/config.toml`
//! (`~/.config/headroom/config.toml` on Linux) unless the binary names another (`--config`,
//! `HEADROOM_CONFIG`). The library reads no environment itself: the binaries pass a lookup.

use crate::admission::{Deadlines, YieldRule};
use crate::cleanup::{CleanupMode, FailurePolicy, RetrySettings};
use crate::lanes::{AudioLaneConfig, TextLaneConfig};
use crate::llm::ApiKey;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the text model's server is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct LlmSettings {
    /// Base URL of an OpenAI-compatible server, ending in `/v1`.
    pub url: String,
    /// Model name; the server's first model when unset.
    pub model: Option<String>,
    /// Bearer key. Prefer the `HEADROOM_API_KEY` environment variable.
    #[serde(skip_serializing)]
    pub api_key: Option<String>,
    /// Requests `url` is given at once, for a router or a server that does not say (vLLM);
    /// unset: `text_lane.max_in_flight`. Never more than the slots the server says it has.
    pub capacity: Option<usize>,
    /// More servers behind the same text lane, beside `url`: each has its own slots, health
    /// and breaker, and a request goes to one with a free slot.
    pub upstreams: Vec<UpstreamSettings>,
}

/// One more upstream of the text lane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct UpstreamSettings {
    pub url: String,
    #[serde(default)]
    pub capacity: Option<usize>,
}

impl Default for LlmSettings {
    fn default() -> Self {
        LlmSettings {
            url: "http://127.0.0.1:8000/v1".into(),
            model: None,
            api_key: None,
            capacity: None,
            upstreams: Vec::new(),
        }
    }
}

impl LlmSettings {
    pub fn api_key(&self) -> Option<ApiKey> {
        self.api_key.clone().and_then(ApiKey::new)
    }

    /// Every upstream of the configured text lane: `url` first, then `upstreams`.
    pub fn fleet(&self) -> Vec<UpstreamSettings> {
        std::iter::once(UpstreamSettings {
            url: self.url.clone(),
            capacity: self.capacity,
        })
        .chain(self.upstreams.iter().cloned())
        .collect()
    }
}

/// The text lane's limits, as a person writes them (durations in seconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct TextLaneSettings {
    pub max_in_flight: usize,
    pub max_waiting: usize,
    pub context_tokens: Option<u32>,
    pub max_input_chars: usize,
    pub max_tokens: u32,
    pub queue_wait_secs: f64,
    pub first_chunk_secs: f64,
    pub total_secs: f64,
    /// While interactive audio runs: none, gate (no new text requests) or preempt (also stop
    /// running ones).
    pub yield_to_audio: YieldRule,
    /// With an NVIDIA GPU: free device memory (MiB) kept for audio; below it new text work is
    /// refused with `gpu_memory_pressure`. Unset or 0: no GPU gate.
    pub audio_headroom_mib: Option<u64>,
}

impl Default for TextLaneSettings {
    fn default() -> Self {
        let lane = TextLaneConfig::default();
        TextLaneSettings {
            max_in_flight: lane.max_in_flight,
            max_waiting: lane.max_waiting,
            context_tokens: lane.context_tokens,
            max_input_chars: lane.max_input_chars,
            max_tokens: lane.default_max_tokens,
            queue_wait_secs: lane.deadlines.queue_wait.as_secs_f64(),
            first_chunk_secs: lane.deadlines.first_chunk.as_secs_f64(),
            total_secs: lane.deadlines.total.as_secs_f64(),
            yield_to_audio: lane.yield_rule,
            audio_headroom_mib: lane.audio_headroom_mib,
        }
    }
}

/// Cleanup defaults for requests that do not choose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct CleanupSettings {
    pub mode: CleanupMode,
    pub policy: FailurePolicy,
    pub retry_attempts: u32,
}

impl Default for CleanupSettings {
    fn default() -> Self {
        CleanupSettings {
            mode: CleanupMode::Cleanup,
            policy: FailurePolicy::Reject,
            retry_attempts: RetrySettings::default().max_attempts,
        }
    }
}

/// `headroom serve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    /// Loopback address only.
    pub listen: String,
    /// Largest chat request body accepted.
    pub max_body_bytes: usize,
    /// Largest audio upload accepted for transcription.
    pub max_upload_bytes: usize,
    /// Uploads received at once; more are refused at once (each is written to a temporary
    /// file as it arrives, so this bounds open files and disk writes, not memory).
    pub max_concurrent_uploads: usize,
    /// Browser origins (e.g. `http://localhost:5173`) allowed to call the server; requests
    /// from any other web page are refused. None by default.
    pub allowed_origins: Vec<String>,
    /// Connections open at once; one more is answered 503 `too_many_connections` and closed.
    pub max_connections: usize,
    /// A client must send a request's headers within this many seconds, and its body at no
    /// less than `min_read_bytes_per_sec` over each window this long; else it is dropped and
    /// whatever it held (an upload slot, body memory, its connection) is freed.
    pub read_timeout_secs: f64,
    /// The slowest body accepted, in bytes a second averaged over `read_timeout_secs`.
    pub min_read_bytes_per_sec: usize,
    /// A client that takes none of an answer waiting for it for this many seconds (a
    /// streamed take it stopped reading) is disconnected, and the work for it stopped.
    pub write_timeout_secs: f64,
    /// Request bodies held in memory at once, across all requests (chat and speech bodies;
    /// uploads go to disk). A body that does not fit is refused at once (503
    /// `request_memory_full`), never queued.
    pub max_buffered_body_bytes: usize,
    /// A bearer token every route but `/health` requires (`Authorization: Bearer TOKEN`).
    /// None by default: any local process may call the server. Prefer the
    /// `HEADROOM_SERVE_TOKEN` environment variable; never written by [`Config::save`].
    #[serde(skip_serializing)]
    #[cfg_attr(feature = "typescript", ts(skip))]
    pub token: Option<ServeToken>,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            listen: "127.0.0.1:8089".into(),
            max_body_bytes: 1024 * 1024,
            max_upload_bytes: 200 * 1024 * 1024,
            max_concurrent_uploads: 4,
            allowed_origins: Vec::new(),
            max_connections: 512,
            read_timeout_secs: 10.0,
            min_read_bytes_per_sec: 1024,
            write_timeout_secs: 10.0,
            max_buffered_body_bytes: 32 * 1024 * 1024,
            token: None,
        }
    }
}

impl ServerSettings {
    /// How long a client may take over a request's headers, and the window its body's rate is
    /// measured over; `None` for a value [`Config::check`] refuses.
    pub fn read_timeout(&self) -> Option<Duration> {
        Duration::try_from_secs_f64(self.read_timeout_secs)
            .ok()
            .filter(|d| !d.is_zero())
    }

    /// How long a client may take none of an answer waiting for it; `None` for a value
    /// [`Config::check`] refuses.
    pub fn write_timeout(&self) -> Option<Duration> {
        Duration::try_from_secs_f64(self.write_timeout_secs)
            .ok()
            .filter(|d| !d.is_zero())
    }
}

/// `headroom serve`'s bearer token. Its `Debug` never shows it; compare it with
/// [`ServeToken::matches`], which takes the same time wherever the first difference is.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ServeToken(String);

impl ServeToken {
    /// A token, or `None` for an empty one (an empty flag or variable turns nothing on).
    pub fn new(token: impl Into<String>) -> Option<ServeToken> {
        let token = token.into();
        (!token.trim().is_empty()).then(|| ServeToken(token.trim().to_string()))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `request` carrying this token as `Authorization: Bearer`: how a client of `serve` on
    /// this machine (the CLI's `memory`) presents the token `serve` was configured with.
    pub fn authorize(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        request.bearer_auth(&self.0)
    }

    /// Whether `presented` is this token, in time that depends on the lengths only.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let expected = self.0.as_bytes();
        let longest = expected.len().max(presented.len());
        let mut difference = expected.len() ^ presented.len();
        for i in 0..longest {
            let a = expected.get(i).copied().unwrap_or(0);
            let b = presented.get(i).copied().unwrap_or(0);
            difference |= usize::from(a ^ b);
        }
        std::hint::black_box(difference) == 0
    }
}

impl std::fmt::Debug for ServeToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServeToken(<redacted>)")
    }
}

impl From<String> for ServeToken {
    /// For the command line; an empty value becomes a token nothing matches but the empty
    /// header, so prefer [`ServeToken::new`] where "none" is possible.
    fn from(token: String) -> Self {
        ServeToken(token.trim().to_string())
    }
}

/// The audio lane's limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct AudioLaneSettings {
    /// Heavy audio jobs at once.
    pub max_in_flight: usize,
    /// Further slots only interactive work may take, beside running batch work.
    pub interactive_reserve: usize,
    /// Places in the lane the later sentences of streamed speech hold at once, all streams
    /// together; other streams wait their turn outside the queue, which stays for requests a
    /// person is waiting on.
    pub stream_places: usize,
    pub max_waiting: usize,
    pub queue_wait_secs: f64,
    /// Speech models (Whisper, voices, VAD, embedder) unused this long are let go, and loaded
    /// again when next needed; 0 keeps them until memory is freed by hand.
    pub model_idle_secs: f64,
    /// Batch audio work (uploads at batch priority, narration, voice match searches, cloning
    /// takes) gives the CPU to interactive work while both run. Off only to compare.
    pub batch_gives_way: bool,
}

/// How long an unused speech model stays in memory by default.
pub const DEFAULT_MODEL_IDLE_SECS: f64 = 300.0;

impl Default for AudioLaneSettings {
    fn default() -> Self {
        let lane = AudioLaneConfig::default();
        AudioLaneSettings {
            max_in_flight: lane.max_in_flight,
            interactive_reserve: lane.interactive_reserve,
            stream_places: lane.stream_places,
            max_waiting: lane.max_waiting,
            queue_wait_secs: lane.queue_wait.as_secs_f64(),
            model_idle_secs: DEFAULT_MODEL_IDLE_SECS,
            batch_gives_way: lane.batch_gives_way,
        }
    }
}

impl AudioLaneSettings {
    /// How long an unused model stays loaded; `None`: until memory is freed by hand (also
    /// for a value [`Config::check`] refuses).
    pub fn model_idle(&self) -> Option<Duration> {
        Duration::try_from_secs_f64(self.model_idle_secs)
            .ok()
            .filter(|d| !d.is_zero())
    }
}

/// The user's voice cloning server (see `headroom_speech::cloning`): none when `url` is empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct CloningSettings {
    /// `chatterbox` (Chatterbox-TTS-API), `xtts` (the XTTS API server) or `openai` (an
    /// OpenAI-style speech server with server-side voice names).
    pub kind: String,
    /// The server's root URL, e.g. `http://127.0.0.1:4123`; empty: no cloning server.
    pub url: String,
    /// The language the text is in, for servers that ask (XTTS).
    pub language: String,
}

impl Default for CloningSettings {
    fn default() -> Self {
        CloningSettings {
            kind: "chatterbox".into(),
            url: String::new(),
            language: "en".into(),
        }
    }
}

/// The cloning server kinds `cloning.kind` may name.
pub const CLONING_KINDS: [&str; 3] = ["chatterbox", "xtts", "openai"];

/// Everything configurable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub llm: LlmSettings,
    pub text_lane: TextLaneSettings,
    pub audio_lane: AudioLaneSettings,
    pub cleanup: CleanupSettings,
    pub server: ServerSettings,
    pub cloning: CloningSettings,
    pub privacy: PrivacySettings,
}

/// What may leave this machine (see [`headroom_base::consent`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(default, deny_unknown_fields)]
pub struct PrivacySettings {
    /// Servers on other machines (origins such as `https://gpu.example:8000`) that text, voice
    /// clips and audio may be sent to from the CLI and `headroom serve`. Servers on this
    /// machine need no entry. The desktop asks per project instead.
    pub allow_remote: Vec<String>,
}

impl PrivacySettings {
    pub fn consent(&self) -> headroom_base::consent::RemoteConsent {
        headroom_base::consent::RemoteConsent::allowing(&self.allow_remote)
    }
}

/// A settings problem, naming the file and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the config file {path} is not valid: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{name} must be {expected}, got {value:?}")]
    Invalid {
        name: &'static str,
        expected: &'static str,
        value: String,
    },
    #[error("the settings cannot be written as TOML: {0}")]
    Serialize(#[from] toml::ser::Error),
    #[error("cannot write the config file {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn seconds(name: &'static str, secs: f64) -> Result<Duration, ConfigError> {
    Duration::try_from_secs_f64(secs)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or(ConfigError::Invalid {
            name,
            expected: "a positive number of seconds",
            value: secs.to_string(),
        })
}

impl Config {
    /// `<config dir>/headroom/config.toml`.
    pub fn default_path() -> Option<PathBuf> {
        directories::ProjectDirs::from("", "", "headroom")
            .map(|d| d.config_dir().join("config.toml"))
    }

    /// Reads the file at `explicit` (it must exist), or the default file if there is one, then
    /// applies the environment through `env` (the binary passes its process environment).
    pub fn load(
        explicit: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut config = match (explicit, Self::default_path()) {
            (Some(p), _) => Self::from_file(p)?,
            (None, Some(p)) if p.exists() => Self::from_file(&p)?,
            _ => Config::default(),
        };
        config.apply_env(env);
        Ok(config)
    }

    /// Whether the settings can be used: lane limits and deadlines, retries, the server URLs.
    pub fn check(&self) -> Result<(), ConfigError> {
        self.text_lane()?;
        self.retry()?;
        if !CLONING_KINDS.contains(&self.cloning.kind.as_str()) {
            return Err(ConfigError::Invalid {
                name: "cloning.kind",
                expected: "chatterbox, xtts or openai",
                value: self.cloning.kind.clone(),
            });
        }
        let url = self.cloning.url.trim();
        if !(url.is_empty() || url.starts_with("http://") || url.starts_with("https://")) {
            return Err(ConfigError::Invalid {
                name: "cloning.url",
                expected: "empty, or an http:// URL such as http://127.0.0.1:4123",
                value: headroom_base::redact::urls(&self.cloning.url),
            });
        }
        if !(self.audio_lane.model_idle_secs.is_finite() && self.audio_lane.model_idle_secs >= 0.0)
        {
            return Err(ConfigError::Invalid {
                name: "audio_lane.model_idle_secs",
                expected: "0 (keep models loaded) or a positive number of seconds",
                value: self.audio_lane.model_idle_secs.to_string(),
            });
        }
        if self.server.max_concurrent_uploads == 0 {
            return Err(ConfigError::Invalid {
                name: "server.max_concurrent_uploads",
                expected: "at least 1",
                value: "0".into(),
            });
        }
        if self.server.max_connections == 0 {
            return Err(ConfigError::Invalid {
                name: "server.max_connections",
                expected: "at least 1",
                value: "0".into(),
            });
        }
        if self.server.read_timeout().is_none() {
            return Err(ConfigError::Invalid {
                name: "server.read_timeout_secs",
                expected: "a positive number of seconds",
                value: self.server.read_timeout_secs.to_string(),
            });
        }
        if self.server.write_timeout().is_none() {
            return Err(ConfigError::Invalid {
                name: "server.write_timeout_secs",
                expected: "a positive number of seconds",
                value: self.server.write_timeout_secs.to_string(),
            });
        }
        if self.server.max_buffered_body_bytes < self.server.max_body_bytes {
            return Err(ConfigError::Invalid {
                name: "server.max_buffered_body_bytes",
                expected: "at least server.max_body_bytes (else a largest body never fits)",
                value: self.server.max_buffered_body_bytes.to_string(),
            });
        }
        for (index, upstream) in self.llm.fleet().iter().enumerate() {
            let name = if index == 0 {
                "llm.url"
            } else {
                "llm.upstreams.url"
            };
            crate::llm::LlmClient::new(&upstream.url, None).map_err(|_| ConfigError::Invalid {
                name,
                expected: "an http:// or https:// URL such as http://127.0.0.1:8000/v1",
                value: headroom_base::redact::urls(&upstream.url),
            })?;
            if upstream.capacity == Some(0) {
                return Err(ConfigError::Invalid {
                    name: if index == 0 {
                        "llm.capacity"
                    } else {
                        "llm.upstreams.capacity"
                    },
                    expected: "at least 1",
                    value: "0".into(),
                });
            }
        }
        Ok(())
    }

    /// Checks the settings, then writes them to `path` atomically. An API key already in the
    /// file is kept; this never writes one of its own (keys belong in `HEADROOM_API_KEY`).
    pub fn save(&self, path: &Path) -> Result<(), ConfigError> {
        self.check()?;
        let mut table = toml::Table::try_from(self)?;
        let old = std::fs::read_to_string(path)
            .ok()
            .and_then(|old| old.parse::<toml::Table>().ok());
        let kept = |section: &str, key: &str| old.as_ref()?.get(section)?.get(key).cloned();
        // The text model's API key and serve's token: kept from the file, never added.
        let mut holds_key = false;
        for (section, key) in [("llm", "api_key"), ("server", "token")] {
            if let (Some(value), Some(toml::Value::Table(t))) =
                (kept(section, key), table.get_mut(section))
            {
                t.insert(key.into(), value);
                holds_key = true;
            }
        }
        let write_error = |source| ConfigError::Write {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(write_error)?;
        }
        let text = table.to_string();
        // A file that holds a key is the owner's alone; any other keeps the mode it had.
        if holds_key {
            headroom_base::fsutil::write_atomic_private(path, text.as_bytes()).map_err(write_error)
        } else {
            headroom_base::fsutil::write_atomic(path, text.as_bytes()).map_err(write_error)
        }
    }

    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let read = |source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        };
        let mut text = String::new();
        std::io::Read::read_to_string(
            &mut headroom_base::input::open_regular(path).map_err(read)?,
            &mut text,
        )
        .map_err(read)?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// `HEADROOM_LLM_URL`, `HEADROOM_MODEL`, `HEADROOM_API_KEY`, `HEADROOM_CLONING_URL`,
    /// `HEADROOM_CLONING_KIND`, `HEADROOM_SERVE_TOKEN`.
    pub fn apply_env(&mut self, var: impl Fn(&str) -> Option<String>) {
        if let Some(url) = var("HEADROOM_LLM_URL").filter(|v| !v.is_empty()) {
            self.llm.url = url;
        }
        if let Some(model) = var("HEADROOM_MODEL").filter(|v| !v.is_empty()) {
            self.llm.model = Some(model);
        }
        if let Some(key) = var("HEADROOM_API_KEY").filter(|v| !v.is_empty()) {
            self.llm.api_key = Some(key);
        }
        if let Some(token) = var("HEADROOM_SERVE_TOKEN").and_then(ServeToken::new) {
            self.server.token = Some(token);
        }
        if let Some(url) = var("HEADROOM_CLONING_URL").filter(|v| !v.is_empty()) {
            self.cloning.url = url;
        }
        if let Some(kind) = var("HEADROOM_CLONING_KIND").filter(|v| !v.is_empty()) {
            self.cloning.kind = kind;
        }
    }

    /// The text lane's configuration, checked.
    pub fn text_lane(&self) -> Result<TextLaneConfig, ConfigError> {
        let t = &self.text_lane;
        // Zero would refuse every request as too long, or ask for empty replies.
        for (name, value) in [
            ("text_lane.max_in_flight", t.max_in_flight),
            ("text_lane.max_input_chars", t.max_input_chars),
            ("text_lane.max_tokens", t.max_tokens as usize),
        ] {
            if value == 0 {
                return Err(ConfigError::Invalid {
                    name,
                    expected: "at least 1",
                    value: "0".into(),
                });
            }
        }
        Ok(TextLaneConfig {
            max_in_flight: t.max_in_flight,
            max_waiting: t.max_waiting,
            context_tokens: t.context_tokens,
            max_input_chars: t.max_input_chars,
            default_max_tokens: t.max_tokens,
            deadlines: Deadlines {
                queue_wait: seconds("text_lane.queue_wait_secs", t.queue_wait_secs)?,
                first_chunk: seconds("text_lane.first_chunk_secs", t.first_chunk_secs)?,
                total: seconds("text_lane.total_secs", t.total_secs)?,
            },
            model: self.llm.model.clone(),
            yield_rule: t.yield_to_audio,
            audio_headroom_mib: t.audio_headroom_mib.filter(|&mib| mib > 0),
        })
    }

    /// The audio lane's configuration. Values a lane cannot use (0 slots, a non-positive
    /// wait) fall back to the defaults, with a warning in the log.
    pub fn audio_lane(&self) -> AudioLaneConfig {
        let a = &self.audio_lane;
        let defaults = AudioLaneConfig::default();
        let queue_wait =
            seconds("audio_lane.queue_wait_secs", a.queue_wait_secs).unwrap_or_else(|e| {
                tracing::warn!("{e}; using {} s", defaults.queue_wait.as_secs());
                defaults.queue_wait
            });
        AudioLaneConfig {
            max_in_flight: a.max_in_flight.max(1),
            interactive_reserve: a.interactive_reserve,
            stream_places: a.stream_places.max(1),
            max_waiting: a.max_waiting,
            queue_wait,
            batch_gives_way: a.batch_gives_way,
        }
    }

    pub fn retry(&self) -> Result<RetrySettings, ConfigError> {
        Ok(RetrySettings {
            max_attempts: self.cleanup.retry_attempts.max(1),
            budget: seconds("text_lane.total_secs", self.text_lane.total_secs)?,
            ..RetrySettings::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_bounded_starting_configuration() {
        let lane = Config::default().text_lane().unwrap();
        assert_eq!((lane.max_in_flight, lane.max_waiting), (2, 0));
        assert_eq!(lane.context_tokens, None);
        assert_eq!(Config::default().cleanup.policy, FailurePolicy::Reject);
        let audio = Config::default().audio_lane();
        assert_eq!((audio.max_in_flight, audio.max_waiting), (1, 8));
    }

    #[test]
    fn audio_lane_limits_come_from_the_file() {
        let config: Config =
            toml::from_str("[audio_lane]\nmax_in_flight = 2\nqueue_wait_secs = 5\n").unwrap();
        let audio = config.audio_lane();
        assert_eq!(audio.max_in_flight, 2);
        assert_eq!(audio.queue_wait, Duration::from_secs(5));
    }

    #[test]
    fn file_values_then_environment() {
        let dir = std::env::temp_dir().join(format!("headroom-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.toml");
        std::fs::write(
            &path,
            "[llm]\nurl = \"http://127.0.0.1:9000/v1\"\n[text_lane]\nmax_waiting = 2\nqueue_wait_secs = 1.5\n[cleanup]\npolicy = \"fallback\"\n",
        )
        .unwrap();
        let mut config = Config::from_file(&path).unwrap();
        assert_eq!(config.llm.url, "http://127.0.0.1:9000/v1");
        assert_eq!(config.cleanup.policy, FailurePolicy::Fallback);
        let lane = config.text_lane().unwrap();
        assert_eq!(lane.max_waiting, 2);
        assert_eq!(lane.deadlines.queue_wait, Duration::from_millis(1500));
        config.apply_env(|name| match name {
            "HEADROOM_LLM_URL" => Some("http://127.0.0.1:7000/v1".into()),
            "HEADROOM_API_KEY" => Some("sk-test".into()),
            _ => None,
        });
        assert_eq!(config.llm.url, "http://127.0.0.1:7000/v1");
        assert!(config.llm.api_key().is_some());
        assert!(
            !toml::to_string(&config).unwrap().contains("sk-test"),
            "keys are never written back"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn saving_keeps_the_key_already_in_the_file_and_writes_none_of_its_own() {
        let dir = std::env::temp_dir().join(format!("headroom-config-save-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("sub/config.toml");
        let mut config = Config::default();
        config.llm.api_key = Some("sk-from-env".into());
        config.text_lane.max_waiting = 3;
        config.save(&path).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(!written.contains("sk-from-env"), "{written}");
        assert_eq!(Config::from_file(&path).unwrap().text_lane.max_waiting, 3);
        std::fs::write(&path, "[llm]\napi_key = \"sk-in-file\"\n").unwrap();
        config.save(&path).unwrap();
        let reread = Config::from_file(&path).unwrap();
        assert_eq!(reread.llm.api_key.as_deref(), Some("sk-in-file"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "a file holding a key is the owner's alone");
        }
        assert_eq!(reread.text_lane.max_waiting, 3);
        config.text_lane.max_in_flight = 0;
        assert!(matches!(
            config.save(&path),
            Err(ConfigError::Invalid { .. })
        ));
        let mut bad_url = Config::default();
        bad_url.llm.url = "not a url".into();
        let err = bad_url.save(&path).unwrap_err().to_string();
        assert!(err.contains("llm.url"), "{err}");
        assert_eq!(
            Config::from_file(&path).unwrap().text_lane.max_in_flight,
            2,
            "a bad config is not written"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn serves_token_comes_from_the_file_or_the_environment_and_is_never_written_or_shown() {
        let dir = std::env::temp_dir().join(format!("headroom-serve-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.toml");
        std::fs::write(&path, "[server]\ntoken = \"tok-in-file\"\n").unwrap();
        let from_file = Config::load(Some(&path), |_| None).unwrap();
        let token = from_file.server.token.clone().unwrap();
        assert!(token.matches(b"tok-in-file"));
        for wrong in [&b"tok-in-fil"[..], b"tok-in-filE", b"tok-in-file2", b""] {
            assert!(!token.matches(wrong));
        }
        let from_env = Config::load(Some(&path), |name| {
            (name == "HEADROOM_SERVE_TOKEN").then(|| "tok-from-env".to_string())
        })
        .unwrap();
        let token = from_env.server.token.clone().unwrap();
        assert!(token.matches(b"tok-from-env") && !token.matches(b"tok-in-file"));
        let empty = Config::load(Some(&path), |name| {
            (name == "HEADROOM_SERVE_TOKEN").then(String::new)
        })
        .unwrap();
        assert!(empty.server.token.unwrap().matches(b"tok-in-file"));
        assert!(!format!("{from_env:?}").contains("tok-from-env"));
        // Saving keeps the file's token, writes none of its own, and keeps the file private.
        from_env.save(&path).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.contains("tok-in-file") && !written.contains("tok-from-env"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "a file holding a token is the owner's alone");
        }
        std::fs::remove_file(&path).unwrap();
        from_env.save(&path).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(
            !written.contains("tok-")
                && !written.lines().any(|l| l.trim_start().starts_with("token")),
            "{written}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn serves_limits_are_checked() {
        let mut config = Config::default();
        config.server.read_timeout_secs = 0.0;
        assert!(config
            .check()
            .unwrap_err()
            .to_string()
            .contains("read_timeout_secs"));
        for bad in [0.0, -1.0, f64::NAN] {
            let mut config = Config::default();
            config.server.write_timeout_secs = bad;
            assert!(config
                .check()
                .unwrap_err()
                .to_string()
                .contains("write_timeout_secs"));
        }
        for zero in ["max_input_chars", "max_tokens"] {
            let mut config = Config::default();
            match zero {
                "max_input_chars" => config.text_lane.max_input_chars = 0,
                _ => config.text_lane.max_tokens = 0,
            }
            let refused = config.text_lane().unwrap_err().to_string();
            assert!(refused.contains(&format!("text_lane.{zero}")), "{refused}");
        }
        let mut config = Config::default();
        config.server.max_connections = 0;
        assert!(config
            .check()
            .unwrap_err()
            .to_string()
            .contains("max_connections"));
        let mut config = Config::default();
        config.server.max_buffered_body_bytes = config.server.max_body_bytes - 1;
        assert!(config
            .check()
            .unwrap_err()
            .to_string()
            .contains("max_buffered_body_bytes"));
        assert!(Config::default().check().is_ok());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_explained() {
        let dir = std::env::temp_dir().join(format!("headroom-config-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.toml");
        std::fs::write(&path, "[text_lane]\nmax_in_flite = 3\n").unwrap();
        let err = Config::from_file(&path).unwrap_err().to_string();
        assert!(
            err.contains("config.toml") && err.contains("max_in_flite"),
            "{err}"
        );
        let mut config = Config::default();
        config.text_lane.total_secs = -1.0;
        let err = config.text_lane().unwrap_err().to_string();
        assert!(err.contains("text_lane.total_secs"), "{err}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_fleet_is_the_url_then_more_upstreams_each_with_an_optional_capacity() {
        let config: Config = toml::from_str(
            r#"
            [llm]
            url = "http://127.0.0.1:8001/v1"
            capacity = 4
            [[llm.upstreams]]
            url = "http://127.0.0.1:8002/v1"
            [[llm.upstreams]]
            url = "http://127.0.0.1:8003/v1"
            capacity = 1
            "#,
        )
        .unwrap();
        config.check().unwrap();
        let fleet: Vec<(String, Option<usize>)> = config
            .llm
            .fleet()
            .into_iter()
            .map(|u| (u.url, u.capacity))
            .collect();
        assert_eq!(
            fleet,
            vec![
                ("http://127.0.0.1:8001/v1".to_string(), Some(4)),
                ("http://127.0.0.1:8002/v1".to_string(), None),
                ("http://127.0.0.1:8003/v1".to_string(), Some(1)),
            ]
        );
        let mut bad = config.clone();
        bad.llm.upstreams[0].url = "ftp://x".into();
        let err = bad.check().unwrap_err().to_string();
        assert!(err.contains("llm.upstreams.url"), "{err}");
        bad.llm.upstreams[0].url = "http://127.0.0.1:8002/v1".into();
        bad.llm.upstreams[1].capacity = Some(0);
        assert!(bad
            .check()
            .unwrap_err()
            .to_string()
            .contains("llm.upstreams.capacity"));
    }
}
