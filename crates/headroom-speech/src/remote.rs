//! External speech servers that speak OpenAI's audio API, plugged in by URL:
//! `POST /v1/audio/transcriptions` and `POST /v1/audio/speech` (another `headroom serve`,
//! openedai-speech, a Whisper server, Chatterbox's OpenAI route, ...).
//!
//! The traits are synchronous (engines run on the audio lane's worker thread), so these
//! backends drive their HTTP calls on the runtime they were created in.

use crate::asr::{
    rest_as_one_window, AsrError, Segment, TranscribeOptions, Transcriber, Transcript, WindowDone,
    SAMPLE_RATE,
};
use crate::audio::{decode_bytes, wav_bytes, Audio, DecodeLimits, SampleSource};
pub use crate::remote_error::RemoteError;
use crate::tts::{Synthesizer, TtsError, Voice};
use headroom_base::consent::{Payload, RemoteConsent, Role};
use headroom_base::openai::{ApiError, ApiKey};
use headroom_base::redact::SecretUrl;
use serde_json::Value;
use std::future::Future;
use std::path::Path;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;
use url::Url;

struct Remote {
    base: Url,
    http: reqwest::Client,
    api_key: Option<ApiKey>,
    model: String,
    runtime: Handle,
}

impl Remote {
    fn new(
        base_url: &str,
        model: &str,
        api_key: Option<ApiKey>,
        consent: &RemoteConsent,
        sends: Payload,
    ) -> Result<Remote, RemoteError> {
        consent.check(Role::SpeechServer, base_url, &[sends])?;
        let mut base = Url::parse(base_url.trim()).map_err(|source| RemoteError::InvalidUrl {
            url: base_url.into(),
            source,
        })?;
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let runtime = Handle::try_current().map_err(|_| RemoteError::NoRuntime)?;
        Ok(Remote {
            base,
            http: headroom_base::http::client(),
            api_key,
            model: model.to_string(),
            runtime,
        })
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.post(self.base.join(path).expect("relative path"));
        match &self.api_key {
            Some(key) => req.bearer_auth(key.expose()),
            None => req,
        }
    }

    /// Runs `request` on the runtime from this worker thread, giving up when `cancel` fires.
    fn block_on<T>(
        &self,
        cancel: &CancellationToken,
        request: impl Future<Output = Result<T, RemoteError>>,
    ) -> Option<Result<T, RemoteError>> {
        self.runtime.block_on(async {
            tokio::select! {
                r = request => Some(r),
                _ = cancel.cancelled() => None,
            }
        })
    }
}

/// The response, or the server's error (status and its own words) when it is not a success;
/// a connection that failed is `Unreachable`.
pub(crate) async fn checked(
    resp: Result<reqwest::Response, reqwest::Error>,
    url: &Url,
) -> Result<reqwest::Response, RemoteError> {
    let resp = resp.map_err(|e| RemoteError::unreachable(url, &e))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    if let Some(redirect) = headroom_base::http::unfollowed_redirect(&resp) {
        return Err(RemoteError::Redirected {
            url: url.as_str().into(),
            redirect,
        });
    }
    // An error's words are short; a server that sends more is not read further (nor held).
    let body = read_bounded(resp, MAX_ERROR_ANSWER, url)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default();
    Err(RemoteError::Status {
        url: url.as_str().into(),
        status: status.as_u16(),
        error: Box::new(ApiError::from_body(&body)),
    })
}

/// Transcription by an OpenAI-compatible server.
pub struct RemoteTranscriber {
    remote: Remote,
}

impl RemoteTranscriber {
    /// `base_url` like `http://127.0.0.1:8089/v1`; `model` is sent as the request's `model`.
    /// The audio goes there, so a server on another machine must be allowed by `consent`.
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: Option<ApiKey>,
        consent: &RemoteConsent,
    ) -> Result<Self, RemoteError> {
        Ok(RemoteTranscriber {
            remote: Remote::new(base_url, model, api_key, consent, Payload::Audio)?,
        })
    }
}

impl Transcriber for RemoteTranscriber {
    fn name(&self) -> &str {
        &self.remote.model
    }

    /// The server takes whole files: the rest of the audio is one window.
    fn transcribe_from(
        &self,
        samples: &dyn SampleSource,
        from_secs: f64,
        options: &TranscribeOptions,
        window_done: &mut dyn FnMut(WindowDone<'_>),
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Transcript, AsrError> {
        rest_as_one_window(samples, from_secs, window_done, |rest| {
            self.transcribe_whole(rest, options, progress, cancel)
        })
    }
}

/// The most of a transcription server's answer that is read (a day of speech as JSON with
/// every segment is a few megabytes); a longer one is unreadable, not held.
const MAX_TRANSCRIPTION_ANSWER: usize = 32 << 20;
/// The most of an error answer that is read for its message.
const MAX_ERROR_ANSWER: usize = 64 << 10;

impl RemoteTranscriber {
    /// The server's URL as it may be shown (no secrets).
    pub fn shown_url(&self) -> String {
        SecretUrl::new(self.remote.base.as_str().trim_end_matches('/')).redacted()
    }

    /// `samples` sent whole to the server's `audio/transcriptions`, blocking this worker
    /// thread.
    fn transcribe_whole(
        &self,
        samples: &[f32],
        options: &TranscribeOptions,
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Transcript, AsrError> {
        let transcript = match self.remote.block_on(cancel, self.request(samples, options)) {
            None => return Err(AsrError::Cancelled),
            Some(r) => r?,
        };
        progress(1.0);
        Ok(transcript)
    }

    /// 16 kHz `samples` sent to the server's `audio/transcriptions`: the transcript, timed
    /// from the first sample. What the server says is checked: times are kept inside the
    /// audio sent and in order, and an answer past [`MAX_TRANSCRIPTION_ANSWER`] is refused.
    pub async fn request(
        &self,
        samples: &[f32],
        options: &TranscribeOptions,
    ) -> Result<Transcript, RemoteError> {
        let wav = wav_bytes(&Audio {
            samples: samples.to_vec(),
            sample_rate: SAMPLE_RATE,
        });
        let url = self
            .remote
            .base
            .join("audio/transcriptions")
            .expect("relative path");
        let mut form = reqwest::multipart::Form::new()
            .part(
                "file",
                reqwest::multipart::Part::bytes(wav)
                    .file_name("audio.wav")
                    .mime_str("audio/wav")
                    .expect("valid mime"),
            )
            .text("model", self.remote.model.clone())
            .text("response_format", "verbose_json");
        if let Some(language) = &options.language {
            form = form.text("language", language.clone());
        }
        let resp = checked(
            self.remote
                .post("audio/transcriptions")
                .multipart(form)
                .send()
                .await,
            &url,
        )
        .await?;
        let body = read_bounded(resp, MAX_TRANSCRIPTION_ANSWER, &url).await?;
        let body: Value = serde_json::from_slice(&body).map_err(|e| RemoteError::Unreadable {
            url: SecretUrl::new(url.as_str()),
            message: format!("not the JSON of a transcription: {e}"),
        })?;
        let duration = samples.len() as f64 / SAMPLE_RATE as f64;
        Ok(transcript_of(&body, duration, options))
    }
}

/// The body of `resp`, refused once it passes `limit` bytes (read no further).
async fn read_bounded(
    mut resp: reqwest::Response,
    limit: usize,
    url: &Url,
) -> Result<Vec<u8>, RemoteError> {
    let mut body = Vec::new();
    // A connection broken while the answer comes is the server gone, not garbage from it.
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| RemoteError::unreachable(url, &e))?
    {
        if body.len() + chunk.len() > limit {
            return Err(RemoteError::Unreadable {
                url: SecretUrl::new(url.as_str()),
                message: format!("the answer is longer than {} MiB", limit >> 20),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A transcription server's `verbose_json` (or plain `json`) answer for `duration` seconds of
/// audio: its segments, each inside the audio and none before the one it follows.
fn transcript_of(body: &Value, duration: f64, options: &TranscribeOptions) -> Transcript {
    let inside = |t: Option<f64>, default: f64| {
        t.filter(|t| t.is_finite())
            .unwrap_or(default)
            .clamp(0.0, duration)
    };
    let segments = match body.get("segments").and_then(Value::as_array) {
        Some(list) => {
            let mut after = 0.0f64;
            list.iter()
                .map(|s| {
                    let start = inside(s["start"].as_f64(), after).max(after);
                    let end = inside(s["end"].as_f64(), duration).max(start);
                    after = start;
                    Segment {
                        speaker: None,
                        start,
                        end,
                        text: s["text"].as_str().unwrap_or("").trim().to_string(),
                        words: Vec::new(),
                    }
                })
                .filter(|s| !s.text.is_empty())
                .collect()
        }
        // A server that only answers `text`: one segment for the whole clip.
        None => vec![Segment {
            speaker: None,
            start: 0.0,
            end: duration,
            text: body["text"].as_str().unwrap_or("").trim().to_string(),
            words: Vec::new(),
        }]
        .into_iter()
        .filter(|s| !s.text.is_empty())
        .collect(),
    };
    Transcript {
        speakers: Vec::new(),
        language: body["language"]
            .as_str()
            .map(str::to_string)
            .or_else(|| options.language.clone()),
        duration,
        segments,
    }
}

/// Speech synthesis by an OpenAI-compatible server.
pub struct RemoteSynthesizer {
    remote: Remote,
}

impl RemoteSynthesizer {
    /// The text goes there, so a server on another machine must be allowed by `consent`.
    pub fn new(
        base_url: &str,
        model: &str,
        api_key: Option<ApiKey>,
        consent: &RemoteConsent,
    ) -> Result<Self, RemoteError> {
        Ok(RemoteSynthesizer {
            remote: Remote::new(base_url, model, api_key, consent, Payload::Text)?,
        })
    }
}

impl Synthesizer for RemoteSynthesizer {
    fn name(&self) -> &str {
        &self.remote.model
    }

    /// OpenAI's API has no voice list; these are the names its servers accept.
    fn voices(&self) -> Result<Vec<Voice>, TtsError> {
        Ok(["alloy", "echo", "fable", "onyx", "nova", "shimmer"]
            .iter()
            .map(|v| Voice {
                id: v.to_string(),
                language: "en".into(),
                name: v.to_string(),
            })
            .collect())
    }

    fn synthesize(
        &self,
        text: &str,
        voice: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Audio, TtsError> {
        if text.trim().is_empty() {
            return Err(TtsError::EmptyText);
        }
        let url = self
            .remote
            .base
            .join("audio/speech")
            .expect("relative path");
        let body = serde_json::json!({
            "model": self.remote.model,
            "input": text,
            "voice": voice.unwrap_or("alloy"),
            "response_format": "wav",
        });
        let request = async {
            let resp = checked(
                self.remote.post("audio/speech").json(&body).send().await,
                &url,
            )
            .await?;
            resp.bytes()
                .await
                .map(|b| b.to_vec())
                .map_err(|e| RemoteError::unreadable(&url, &e))
        };
        let bytes = match self.remote.block_on(cancel, request) {
            None => return Err(TtsError::Cancelled),
            Some(r) => r?,
        };
        decode_bytes(
            bytes,
            Some("wav"),
            Path::new("the server's audio"),
            DecodeLimits::default(),
        )
        .map_err(|source| {
            RemoteError::BadAudio {
                url: url.as_str().into(),
                source,
            }
            .into()
        })
    }
}
