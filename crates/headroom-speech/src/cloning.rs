//! Voice cloning through the user's own server, by URL: no registry ships cloning weights that
//! run offline, so the cloning itself happens where the user's GPU is, and Headroom sends the
//! profile's reference clip with each request (or names it, where the server keeps speakers).
//!
//! | kind | request | reference |
//! |---|---|---|
//! | [`CloningKind::Chatterbox`] | `POST /v1/audio/speech/upload`, multipart `input`, `voice_file` | the clip, uploaded |
//! | [`CloningKind::Xtts`] | `POST /tts_to_audio/`, JSON `text`, `speaker_wav`, `language` | a speaker in its folder (`GET /speakers_list`), else the clip's path on a loopback server |
//! | [`CloningKind::OpenAi`] | `POST /v1/audio/speech`, JSON `model`, `input`, `voice` | a voice name the server knows |

use crate::audio::{decode_bytes, Audio, DecodeLimits};
use crate::remote_error::RemoteError;
use crate::tts::TtsError;
use headroom_base::consent::{Destination, NotAllowed, Payload, RemoteConsent, Role};
use headroom_base::openai::ApiKey;
use headroom_base::redact::SecretUrl;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;
use url::Url;

/// The largest reference upload Chatterbox-TTS-API takes.
pub const MAX_REFERENCE_BYTES: u64 = 10 * 1024 * 1024;
/// How long a health check may take.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(5);

/// Which protocol a cloning server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum CloningKind {
    /// Chatterbox-TTS-API: the reference uploaded with each request.
    #[default]
    Chatterbox,
    /// The XTTS API server: speakers kept in its folder.
    Xtts,
    /// An OpenAI-style speech server with server-side voice names (openedai-speech, ...).
    #[serde(rename = "openai")]
    OpenAi,
}

impl CloningKind {
    pub fn label(&self) -> &'static str {
        match self {
            CloningKind::Chatterbox => "Chatterbox-TTS-API",
            CloningKind::Xtts => "XTTS API server",
            CloningKind::OpenAi => "OpenAI-style speech server",
        }
    }
}

/// What a cloning request is made from: the profile's name, its reference clip (a WAV file)
/// and, for servers that want it, the clip's transcript.
#[derive(Debug, Clone)]
pub struct Reference {
    pub name: String,
    pub clip: PathBuf,
    pub transcript: Option<String>,
    /// A server-side voice name (OpenAI-style servers); the profile's name when `None`.
    pub server_voice: Option<String>,
}

/// What a health check found.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Health {
    pub kind: CloningKind,
    /// Shown and serialized without its secrets.
    #[cfg_attr(feature = "typescript", ts(type = "string"))]
    pub url: SecretUrl,
    /// What the server said, in a line (its status, or the speakers it has).
    pub detail: String,
}

/// Why a cloning request failed.
#[derive(Debug, thiserror::Error)]
pub enum CloningError {
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error("the reference clip {path} cannot be read: {message}")]
    Reference { path: PathBuf, message: String },
    #[error("the reference clip {path} is {bytes} bytes; {kind} takes at most {limit} bytes: use a shorter clip")]
    ReferenceTooLarge {
        path: PathBuf,
        bytes: u64,
        limit: u64,
        kind: &'static str,
    },
    #[error("the XTTS server at {url} has no speaker {name:?} and is not on this machine, so it cannot read the clip: copy {clip} into its speakers folder as {name}.wav")]
    XttsSpeakerMissing {
        url: SecretUrl,
        name: String,
        clip: PathBuf,
    },
    /// The server is on another machine that was not allowed: nothing was sent.
    #[error(transparent)]
    NotAllowed(#[from] NotAllowed),
    #[error("cloning cancelled")]
    Cancelled,
}

impl From<CloningError> for TtsError {
    fn from(e: CloningError) -> Self {
        match e {
            CloningError::Remote(r) => TtsError::Remote(Box::new(r)),
            CloningError::Cancelled => TtsError::Cancelled,
            other => TtsError::Engine {
                engine: "cloning server".into(),
                message: other.to_string(),
            },
        }
    }
}

/// A cloning server.
pub struct CloningServer {
    kind: CloningKind,
    /// The server's root (`http://host:port/`); OpenAI paths go under `v1/`.
    root: Url,
    http: reqwest::Client,
    api_key: Option<ApiKey>,
    /// The model name OpenAI-style servers are sent.
    model: String,
    /// The language XTTS is told the text is in.
    language: String,
    runtime: Handle,
}

impl CloningServer {
    /// A server of `kind` at `url` (its root, or its OpenAI base ending in `/v1`); made inside the
    /// async runtime, whose handle drives its requests from the audio lane's thread. Each
    /// take sends the text and the reference clip there, so a server on another machine must
    /// be allowed by `consent`.
    pub fn new(
        kind: CloningKind,
        url: &str,
        api_key: Option<ApiKey>,
        language: &str,
        consent: &RemoteConsent,
    ) -> Result<CloningServer, CloningError> {
        consent.check(
            Role::CloningServer,
            url,
            &[Payload::Text, Payload::VoiceClips],
        )?;
        let mut root = Url::parse(url.trim()).map_err(|source| RemoteError::InvalidUrl {
            url: url.into(),
            source,
        })?;
        let path = root
            .path()
            .trim_end_matches('/')
            .trim_end_matches("/v1")
            .to_string();
        root.set_path(&format!("{path}/"));
        let runtime = Handle::try_current().map_err(|_| RemoteError::NoRuntime)?;
        Ok(CloningServer {
            kind,
            root,
            http: headroom_base::http::client(),
            api_key,
            model: "tts-1".into(),
            language: language.to_string(),
            runtime,
        })
    }

    pub fn kind(&self) -> CloningKind {
        self.kind
    }

    /// The server's root; it prints without user information or secret parameters.
    pub fn url(&self) -> SecretUrl {
        SecretUrl::new(self.root.as_str())
    }

    fn url_of(&self, path: &str) -> Url {
        self.root.join(path).expect("a relative path")
    }

    fn request(&self, method: reqwest::Method, path: &str) -> (reqwest::RequestBuilder, Url) {
        let url = self.url_of(path);
        let req = self.http.request(method, url.clone());
        let req = match &self.api_key {
            Some(key) => req.bearer_auth(key.expose()),
            None => req,
        };
        (req, url)
    }

    fn block_on<T>(
        &self,
        cancel: &CancellationToken,
        work: impl std::future::Future<Output = Result<T, CloningError>>,
    ) -> Result<T, CloningError> {
        self.runtime.block_on(async {
            tokio::select! {
                r = work => r,
                _ = cancel.cancelled() => Err(CloningError::Cancelled),
            }
        })
    }

    /// Asks the server whether it is up (Chatterbox `GET /health`, XTTS `GET /speakers_list`,
    /// OpenAI-style `GET /v1/models`). Called from async code.
    pub async fn health(&self) -> Result<Health, CloningError> {
        let path = match self.kind {
            CloningKind::Chatterbox => "health",
            CloningKind::Xtts => "speakers_list",
            CloningKind::OpenAi => "v1/models",
        };
        let (req, url) = self.request(reqwest::Method::GET, path);
        let resp = checked(req.timeout(HEALTH_TIMEOUT).send().await, &url).await?;
        let body: serde_json::Value = resp.json().await.unwrap_or_default();
        let detail = match self.kind {
            CloningKind::Chatterbox => body["status"].as_str().unwrap_or("answering").to_string(),
            CloningKind::Xtts => {
                let speakers = speaker_names(&body);
                format!("{} speakers: {}", speakers.len(), speakers.join(", "))
            }
            CloningKind::OpenAi => {
                let models: Vec<&str> = body["data"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m["id"].as_str())
                    .collect();
                format!("models: {}", models.join(", "))
            }
        };
        Ok(Health {
            kind: self.kind,
            url: self.url(),
            detail,
        })
    }

    /// Speaks `text` in the reference's voice. Runs on the audio lane's thread.
    pub fn speak(
        &self,
        text: &str,
        reference: &Reference,
        cancel: &CancellationToken,
    ) -> Result<Audio, CloningError> {
        let bytes = self.block_on(cancel, async {
            match self.kind {
                CloningKind::Chatterbox => self.chatterbox(text, reference).await,
                CloningKind::Xtts => self.xtts(text, reference).await,
                CloningKind::OpenAi => self.openai(text, reference).await,
            }
        })?;
        let url = self.url();
        decode_bytes(
            bytes,
            Some("wav"),
            Path::new("the cloning server's audio"),
            DecodeLimits::default(),
        )
        .map_err(|source| RemoteError::BadAudio { url, source }.into())
    }

    fn reference_bytes(&self, reference: &Reference) -> Result<Vec<u8>, CloningError> {
        let unreadable = |e: std::io::Error| CloningError::Reference {
            path: reference.clip.clone(),
            message: e.to_string(),
        };
        let bytes = headroom_base::input::open_regular(&reference.clip)
            .and_then(|file| file.metadata())
            .map_err(unreadable)?
            .len();
        if bytes > MAX_REFERENCE_BYTES {
            return Err(CloningError::ReferenceTooLarge {
                path: reference.clip.clone(),
                bytes,
                limit: MAX_REFERENCE_BYTES,
                kind: self.kind.label(),
            });
        }
        headroom_base::input::read_regular(&reference.clip, MAX_REFERENCE_BYTES).map_err(unreadable)
    }

    async fn chatterbox(&self, text: &str, reference: &Reference) -> Result<Vec<u8>, CloningError> {
        let clip = self.reference_bytes(reference)?;
        let form = reqwest::multipart::Form::new()
            .text("input", text.to_string())
            .text("response_format", "wav")
            .part(
                "voice_file",
                reqwest::multipart::Part::bytes(clip)
                    .file_name(format!("{}.wav", reference.name))
                    .mime_str("audio/wav")
                    .expect("a valid mime type"),
            );
        let (req, url) = self.request(reqwest::Method::POST, "v1/audio/speech/upload");
        body_bytes(checked(req.multipart(form).send().await, &url).await?, &url).await
    }

    async fn xtts(&self, text: &str, reference: &Reference) -> Result<Vec<u8>, CloningError> {
        // A speaker the server keeps under the profile's name, else the clip by its path when
        // the server runs on this machine (it reads `speaker_wav` as a path then).
        let (req, url) = self.request(reqwest::Method::GET, "speakers_list");
        let listed = checked(req.send().await, &url).await?;
        let speakers = speaker_names(&listed.json().await.unwrap_or_default());
        let speaker = if speakers.iter().any(|s| s == &reference.name) {
            reference.name.clone()
        } else if self.on_loopback() {
            let clip =
                std::fs::canonicalize(&reference.clip).map_err(|e| CloningError::Reference {
                    path: reference.clip.clone(),
                    message: e.to_string(),
                })?;
            clip.display().to_string()
        } else {
            return Err(CloningError::XttsSpeakerMissing {
                url: self.url(),
                name: reference.name.clone(),
                clip: reference.clip.clone(),
            });
        };
        let body = serde_json::json!({
            "text": text,
            "speaker_wav": speaker,
            "language": self.language,
        });
        let (req, url) = self.request(reqwest::Method::POST, "tts_to_audio/");
        body_bytes(checked(req.json(&body).send().await, &url).await?, &url).await
    }

    async fn openai(&self, text: &str, reference: &Reference) -> Result<Vec<u8>, CloningError> {
        let body = serde_json::json!({
            "model": self.model,
            "input": text,
            "voice": reference.server_voice.as_deref().unwrap_or(&reference.name),
            "response_format": "wav",
        });
        let (req, url) = self.request(reqwest::Method::POST, "v1/audio/speech");
        body_bytes(checked(req.json(&body).send().await, &url).await?, &url).await
    }

    fn on_loopback(&self) -> bool {
        Destination::of(self.root.as_str()).on_this_machine
    }
}

/// Speaker names from XTTS's `/speakers_list` (a list of names) or `/speakers` (objects).
fn speaker_names(body: &serde_json::Value) -> Vec<String> {
    body.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            s.as_str()
                .or_else(|| s["name"].as_str())
                .or_else(|| s["voice_id"].as_str())
                .map(str::to_string)
        })
        .collect()
}

async fn checked(
    resp: Result<reqwest::Response, reqwest::Error>,
    url: &Url,
) -> Result<reqwest::Response, CloningError> {
    Ok(crate::remote::checked(resp, url).await?)
}

async fn body_bytes(resp: reqwest::Response, url: &Url) -> Result<Vec<u8>, CloningError> {
    Ok(resp
        .bytes()
        .await
        .map_err(|e| RemoteError::unreadable(url, &e))?
        .to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn urls_are_taken_at_the_root_or_the_openai_base() {
        let none = RemoteConsent::none();
        for url in [
            "http://127.0.0.1:4123",
            "http://127.0.0.1:4123/",
            "http://127.0.0.1:4123/v1",
        ] {
            let server =
                CloningServer::new(CloningKind::Chatterbox, url, None, "en", &none).unwrap();
            assert_eq!(server.url().expose(), "http://127.0.0.1:4123/");
            assert_eq!(
                server.url_of("v1/audio/speech/upload").as_str(),
                "http://127.0.0.1:4123/v1/audio/speech/upload"
            );
            assert!(server.on_loopback());
        }
        let far = "http://gpu-box:8020";
        let refused = CloningServer::new(CloningKind::Xtts, far, None, "en", &none);
        assert!(matches!(refused, Err(CloningError::NotAllowed(_))));
        let allowed = RemoteConsent::allowing([far]);
        let far = CloningServer::new(CloningKind::Xtts, far, None, "en", &allowed).unwrap();
        assert!(!far.on_loopback());
        assert!(CloningServer::new(CloningKind::Xtts, "not a url", None, "en", &allowed).is_err());
    }

    #[test]
    fn speakers_are_read_from_either_listing() {
        let names = speaker_names(&serde_json::json!(["anna", "ben"]));
        assert_eq!(names, ["anna", "ben"]);
        let names = speaker_names(&serde_json::json!([{"name": "anna", "voice_id": "anna"}]));
        assert_eq!(names, ["anna"]);
    }
}
