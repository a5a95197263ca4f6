//! OpenAI-compatible audio endpoints on `headroom serve`, backed by the embedded engines on
//! the audio lane: `POST /v1/audio/transcriptions` (multipart) and `POST /v1/audio/speech`.
//! A client that disconnects cancels its job.

use crate::admission::Priority;
use crate::asr::export::{render, ExportFormat};
use crate::asr::{AsrError, TranscribeOptions};
use crate::audio::wav_bytes;
use crate::models::{self, ModelError, DEFAULT_MODEL};
use crate::server::{error_response, rejection_response, ServerState};
use crate::speech::{AudioInput, SpeechError};
use crate::tts::TtsError;
use axum::extract::{DefaultBodyLimit, Multipart, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
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

fn too_large(state: &ServerState) -> Response {
    error_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_request_error",
        "file_too_large",
        format!(
            "the upload is over the {} MiB limit",
            state.max_upload_bytes / (1024 * 1024)
        ),
    )
}

fn bad_request(code: &str, message: String) -> Response {
    error_response(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        code,
        message,
    )
}

fn speech_error_response(e: SpeechError) -> Response {
    match e {
        SpeechError::Rejected(r) => rejection_response(&r),
        SpeechError::Audio(e) => bad_request("invalid_audio", e.to_string()),
        SpeechError::Model(e @ ModelError::Unknown { .. }) => {
            bad_request("model_not_found", e.to_string())
        }
        SpeechError::Model(e) => error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "model_not_installed",
            e.to_string(),
        ),
        SpeechError::Asr(e @ AsrError::UnknownLanguage(_)) => {
            bad_request("invalid_language", e.to_string())
        }
        SpeechError::Asr(AsrError::Cancelled) | SpeechError::Tts(TtsError::Cancelled) => {
            error_response(
                StatusCode::REQUEST_TIMEOUT,
                "server_error",
                "cancelled",
                "cancelled".into(),
            )
        }
        SpeechError::Tts(e @ (TtsError::UnknownVoice { .. } | TtsError::EmptyText)) => {
            bad_request("invalid_voice_or_input", e.to_string())
        }
        other => error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            "engine_failed",
            other.to_string(),
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

async fn transcriptions(State(state): State<Arc<ServerState>>, mut form: Multipart) -> Response {
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
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return too_large(&state),
            Err(e) => {
                return bad_request("invalid_multipart", format!("cannot read the form: {e}"))
            }
        };
        let name = field.name().unwrap_or_default().to_string();
        let file_name = field.file_name().map(str::to_string);
        let bytes = match field.bytes().await {
            Ok(b) => b,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return too_large(&state),
            Err(e) => {
                return bad_request(
                    "invalid_multipart",
                    format!("cannot read field {name}: {e}"),
                )
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
        return bad_request("missing_file", "the form has no `file` field".into());
    };
    let export = match format.as_str() {
        "json" | "verbose_json" => None,
        other => match other.parse::<ExportFormat>() {
            Ok(f) => Some(f),
            Err(e) => {
                return bad_request(
                    "invalid_response_format",
                    format!("{e}, json or verbose_json"),
                )
            }
        },
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
    let transcript = match state
        .speech
        .transcribe(input, model, options, priority, Arc::new(|_| {}), cancel)
        .await
    {
        Ok(t) => t,
        Err(e) => return speech_error_response(e),
    };
    match (export, format.as_str()) {
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
    }
}

#[derive(Deserialize)]
struct SpeechRequest {
    input: String,
    #[serde(default)]
    voice: Option<String>,
    #[serde(default)]
    response_format: Option<String>,
}

async fn speech(State(state): State<Arc<ServerState>>, body: axum::body::Bytes) -> Response {
    let request: SpeechRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad_request("invalid_request", format!("not a speech request: {e}")),
    };
    if let Some(format) = request.response_format.as_deref().filter(|f| *f != "wav") {
        return bad_request(
            "invalid_response_format",
            format!("response_format {format:?} is not supported; use wav"),
        );
    }
    if request.input.chars().count() > MAX_SPEECH_CHARS {
        return bad_request(
            "input_too_long",
            format!("the input is over {MAX_SPEECH_CHARS} characters"),
        );
    }
    let voice = request
        .voice
        .filter(|v| !OPENAI_VOICES.contains(&v.as_str()));
    let cancel = CancellationToken::new();
    let _guard = cancel.clone().drop_guard();
    match state.speech.synthesize(request.input, voice, cancel).await {
        Ok(audio) => ([(header::CONTENT_TYPE, "audio/wav")], wav_bytes(&audio)).into_response(),
        Err(e) => speech_error_response(e),
    }
}
