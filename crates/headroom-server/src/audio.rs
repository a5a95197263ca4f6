//! OpenAI-compatible audio endpoints on `headroom serve`, backed by the embedded engines on
//! the audio lane: `POST /v1/audio/transcriptions` (multipart) and `POST /v1/audio/speech`.
//! A client that disconnects cancels its job.

use crate::body_budget::read_body;
use crate::chat::unread_error;
use crate::min_rate::is_too_slow;
use crate::{HttpError, ServerState};
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Multipart, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use headroom_core::admission::{Lane, Priority, RejectReason, Rejection};
use headroom_services::speech::AudioInput;
use headroom_speech::asr::export::{render, ExportFormat};
use headroom_speech::asr::TranscribeOptions;
use headroom_speech::audio::wav_bytes;
use headroom_speech::models::{self, DEFAULT_MODEL};
use serde::Deserialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
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

/// The most a form's text field (model, language, format...) may hold.
const MAX_TEXT_FIELD_BYTES: usize = 64 * 1024;

fn form_error(
    state: &ServerState,
    name: &str,
    e: axum::extract::multipart::MultipartError,
) -> HttpError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return too_large(state);
    }
    if let Some(slow) = is_too_slow(&e) {
        let error = HttpError::BodyTooSlow(slow.clone());
        state.count_refusal(&error);
        tracing::warn!(%error, "dropped an upload that arrived too slowly");
        return error;
    }
    HttpError::bad_request(
        "invalid_multipart",
        format!("cannot read the form's {name}: {}", e.body_text()),
    )
}

/// Receives the `file` field into a temporary file as it arrives, never holding it in memory.
async fn receive_file(
    state: &ServerState,
    mut field: axum::extract::multipart::Field<'_>,
) -> Result<tempfile::TempPath, HttpError> {
    let storage = |e: std::io::Error| HttpError::Storage {
        message: format!(
            "cannot store the upload in {}: {e}",
            state.upload_dir.display()
        ),
    };
    let temp = tempfile::Builder::new()
        .prefix("headroom-upload-")
        .tempfile_in(&state.upload_dir)
        .map_err(storage)?;
    let (file, path) = temp.into_parts();
    let mut file = tokio::fs::File::from_std(file);
    let mut received = 0usize;
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|e| form_error(state, "file", e))?
    {
        received += chunk.len();
        if received > state.max_upload_bytes {
            return Err(too_large(state));
        }
        file.write_all(&chunk).await.map_err(storage)?;
    }
    file.flush().await.map_err(storage)?;
    Ok(path)
}

/// Reads a text field, refusing one larger than any real value.
async fn receive_text(
    state: &ServerState,
    name: &str,
    mut field: axum::extract::multipart::Field<'_>,
) -> Result<String, HttpError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field
        .chunk()
        .await
        .map_err(|e| form_error(state, name, e))?
    {
        if bytes.len() + chunk.len() > MAX_TEXT_FIELD_BYTES {
            return Err(HttpError::bad_request(
                "field_too_large",
                format!(
                    "the form field {name:?} is over {} KiB",
                    MAX_TEXT_FIELD_BYTES / 1024
                ),
            ));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(String::from_utf8_lossy(&bytes).trim().to_string())
}

async fn transcriptions(
    State(state): State<Arc<ServerState>>,
    mut form: Multipart,
) -> Result<Response, HttpError> {
    // A bounded number of uploads are received at once; the rest are refused before their
    // bodies are read.
    let Ok(receiving) = state.upload_slots.clone().try_acquire_owned() else {
        let limit = state.max_concurrent_uploads;
        let mut rejection = Rejection::new(Lane::Audio, RejectReason::AudioLaneFull)
            .with_detail(format!(
                "{limit} uploads are being received; at most {limit} at once"
            ))
            .with_retry_after(Some(Duration::from_secs(1)));
        rejection.in_flight = limit;
        rejection.limit = limit;
        state
            .metrics
            .count_rejection(Lane::Audio, RejectReason::AudioLaneFull);
        return Err(rejection.into());
    };
    let mut file: Option<(String, tempfile::TempPath)> = None;
    let mut model = None;
    let mut format = "json".to_string();
    let mut language = None;
    let mut prompt = None;
    let mut word_timestamps = false;
    // Uploads are batch work unless the client says a person is waiting.
    let mut priority = Priority::Normal;
    while let Some(field) = form
        .next_field()
        .await
        .map_err(|e| form_error(&state, "fields", e))?
    {
        let name = field.name().unwrap_or_default().to_string();
        if name == "file" {
            let file_name = field.file_name().unwrap_or("upload").to_string();
            file = Some((file_name, receive_file(&state, field).await?));
            continue;
        }
        let text = receive_text(&state, &name, field).await?;
        match name.as_str() {
            "model" => model = Some(text),
            "response_format" => format = text,
            "language" => language = Some(text).filter(|l| !l.is_empty()),
            "priority" if text == "interactive" => priority = Priority::Interactive,
            "prompt" => prompt = Some(text).filter(|p| !p.trim().is_empty()),
            // OpenAI's clients send the list as repeated `timestamp_granularities[]` fields.
            "timestamp_granularities[]" | "timestamp_granularities" if text == "word" => {
                word_timestamps = true
            }
            _ => {} // temperature: accepted, not used
        }
    }
    drop(receiving);
    let Some((file_name, upload)) = file else {
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
    let input = AudioInput::from_temporary(upload, PathBuf::from(file_name));
    let options = TranscribeOptions {
        initial_prompt: prompt,
        word_timestamps,
        ..TranscribeOptions::in_language(language)
    };
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
            "words": transcript.segments.iter().flat_map(|s| &s.words).map(|w| json!({
                "word": w.text, "start": w.start, "end": w.end, "probability": w.probability,
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
    headers: HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let limit = state.max_body_bytes;
    let buffered = read_body(&state.body_budget, &headers, body, limit)
        .await
        .map_err(|unread| {
            unread_error(&state, unread, || {
                HttpError::bad_request(
                    "input_too_long",
                    format!("the request body is over the {limit} byte limit"),
                )
            })
        })?;
    let request: SpeechRequest = serde_json::from_slice(&buffered.bytes).map_err(|e| {
        HttpError::bad_request("invalid_request", format!("not a speech request: {e}"))
    })?;
    drop(buffered);
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
    // A voice profile's name: cloned through the configured server, else its voice match.
    if let Some(name) = voice.as_deref() {
        if state.voices.library().open(name).is_ok() {
            let take = state
                .voices
                .speak(name, request.input, cancel)
                .await
                .map_err(HttpError::from)?;
            return Ok((
                [
                    (header::CONTENT_TYPE, "audio/wav".to_string()),
                    (
                        header::HeaderName::from_static("x-headroom-voice-method"),
                        take.method.label(),
                    ),
                    (
                        header::HeaderName::from_static("x-headroom-similarity"),
                        format!("{:.3}", take.closeness.similarity),
                    ),
                    (
                        header::HeaderName::from_static("x-headroom-default-similarity"),
                        format!("{:.3}", take.closeness.default_similarity),
                    ),
                    // By the independent embedder (Resemblyzer's), which the voice match never
                    // searched against; "none" when it is not installed.
                    (
                        header::HeaderName::from_static("x-headroom-similarity-independent"),
                        take.closeness
                            .similarity_independent
                            .map_or("none".into(), |s| format!("{s:.3}")),
                    ),
                ],
                wav_bytes(&take.audio),
            )
                .into_response());
        }
    }
    let audio = state
        .speech
        .synthesize(request.input, voice, cancel)
        .await?;
    Ok(([(header::CONTENT_TYPE, "audio/wav")], wav_bytes(&audio)).into_response())
}
