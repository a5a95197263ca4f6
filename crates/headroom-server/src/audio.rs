//! OpenAI-compatible audio endpoints on `headroom serve`, backed by the embedded engines on
//! the audio lane: `POST /v1/audio/transcriptions` (multipart) and `POST /v1/audio/speech`.
//! A client that disconnects cancels its job.

use crate::{HttpError, ServerState};
use axum::extract::{DefaultBodyLimit, Multipart, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use headroom_core::admission::Priority;
use headroom_services::speech::AudioInput;
use headroom_speech::asr::export::{render, ExportFormat};
use headroom_speech::asr::TranscribeOptions;
use headroom_speech::audio::wav_bytes;
use headroom_speech::models::{self, DEFAULT_MODEL};
use serde::Deserialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// OpenAI's voice names; requests that use them get the default voice.
const OPENAI_VOICES: &[&str] = &[
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse",
];
/// The longest text `/v1/audio/speech` takes, as OpenAI's endpoint does.
const MAX_SPEECH_CHARS: usize = 4096;

pub fn routes(state: Arc<ServerState>) -> Router<Arc<ServerState>> {
    Router::new()
        .route(
            "/v1/audio/transcriptions",
            post(transcriptions).layer(DefaultBodyLimit::max(state.max_upload_bytes)),
        )
        .route("/v1/audio/speech", post(speech))
}

fn too_large(state: &ServerState) -> HttpError {
    HttpError::UploadTooLarge {
        message: format!(
            "the upload is over the {} MiB limit",
            state.max_upload_bytes / (1024 * 1024)
        ),
    }
}

/// `model` as clients send it: ours by name, anything else (e.g. `whisper-1`) means the default.
fn transcription_model(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|m| models::spec(m).ok())
        .map(|spec| spec.name)
        .unwrap_or(DEFAULT_MODEL)
}

async fn transcriptions(
    State(state): State<Arc<ServerState>>,
    mut form: Multipart,
) -> Result<Response, HttpError> {
    let mut file: Option<(String, Vec<u8>)> = None;
    let mut model = None;
    let mut format = "json".to_string();
    let mut language = None;
    // Uploads are batch work unless the client says a person is waiting.
    let mut priority = Priority::Normal;
    loop {
        let field = match form.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large(&state)),
            Err(e) => {
                return Err(HttpError::bad_request(
                    "invalid_multipart",
                    format!("cannot read the form: {e}"),
                ))
            }
        };
        let name = field.name().unwrap_or_default().to_string();
        let file_name = field.file_name().map(str::to_string);
        let bytes = match field.bytes().await {
            Ok(b) => b,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large(&state)),
            Err(e) => {
                return Err(HttpError::bad_request(
                    "invalid_multipart",
                    format!("cannot read field {name}: {e}"),
                ))
            }
        };
        let text = || String::from_utf8_lossy(&bytes).trim().to_string();
        match name.as_str() {
            "file" => file = Some((file_name.unwrap_or_else(|| "upload".into()), bytes.to_vec())),
            "model" => model = Some(text()),
            "response_format" => format = text(),
            "language" => language = Some(text()).filter(|l| !l.is_empty()),
            "priority" if text() == "interactive" => priority = Priority::Interactive,
            _ => {} // temperature, prompt, timestamp_granularities: accepted, not used
        }
    }
    let Some((file_name, bytes)) = file else {
        return Err(HttpError::bad_request(
            "missing_file",
            "the form has no `file` field",
        ));
    };
    let export = match format.as_str() {
        "json" | "verbose_json" => None,
        other => Some(other.parse::<ExportFormat>().map_err(|e| {
            HttpError::bad_request(
                "invalid_response_format",
                format!("{e}, json or verbose_json"),
            )
        })?),
    };
    // Dropping this guard (the client went away) cancels the job.
    let cancel = CancellationToken::new();
    let _guard = cancel.clone().drop_guard();
    let input = AudioInput {
        bytes,
        name: PathBuf::from(file_name),
    };
    let options = TranscribeOptions { language };
    let model = transcription_model(model.as_deref());
    let transcript = state
        .speech
        .transcribe(input, model, options, priority, Arc::new(|_| {}), cancel)
        .await?;
    Ok(match (export, format.as_str()) {
        (Some(f), _) => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            render(&transcript, f),
        )
            .into_response(),
        (None, "verbose_json") => Json(json!({
            "task": "transcribe",
            "language": transcript.language,
            "duration": transcript.duration,
            "text": transcript.text(),
            "segments": transcript.segments.iter().enumerate().map(|(id, s)| json!({
                "id": id, "start": s.start, "end": s.end, "text": s.text,
            })).collect::<Vec<_>>(),
        }))
        .into_response(),
        (None, _) => Json(json!({ "text": transcript.text() })).into_response(),
    })
}

#[derive(Deserialize)]
struct SpeechRequest {
    input: String,
    #[serde(default)]
    voice: Option<String>,
    #[serde(default)]
    response_format: Option<String>,
}

async fn speech(
    State(state): State<Arc<ServerState>>,
    body: axum::body::Bytes,
) -> Result<Response, HttpError> {
    let request: SpeechRequest = serde_json::from_slice(&body).map_err(|e| {
        HttpError::bad_request("invalid_request", format!("not a speech request: {e}"))
    })?;
    if let Some(format) = request.response_format.as_deref().filter(|f| *f != "wav") {
        return Err(HttpError::bad_request(
            "invalid_response_format",
            format!("response_format {format:?} is not supported; use wav"),
        ));
    }
    if request.input.chars().count() > MAX_SPEECH_CHARS {
        return Err(HttpError::bad_request(
            "input_too_long",
            format!("the input is over {MAX_SPEECH_CHARS} characters"),
        ));
    }
    let voice = request
        .voice
        .filter(|v| !OPENAI_VOICES.contains(&v.as_str()));
    let cancel = CancellationToken::new();
    let _guard = cancel.clone().drop_guard();
    let audio = state
        .speech
        .synthesize(request.input, voice, cancel)
        .await?;
    Ok(([(header::CONTENT_TYPE, "audio/wav")], wav_bytes(&audio)).into_response())
}
