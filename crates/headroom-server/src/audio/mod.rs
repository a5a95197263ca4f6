//! OpenAI-compatible audio endpoints on `headroom serve`, backed by the embedded engines on
//! the audio lane: `POST /v1/audio/transcriptions` (multipart) and `POST /v1/audio/speech`.
//! A client that disconnects cancels its job.
//!
//! [`transcription`] holds the first (and translations), [`speech`] the second.

mod speech;
mod transcription;

use crate::{HttpError, ServerState};
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;
use std::sync::Arc;

use speech::speech;
use transcription::{transcriptions, translations};

pub fn routes(state: Arc<ServerState>) -> Router<Arc<ServerState>> {
    Router::new()
        .route(
            "/v1/audio/transcriptions",
            post(transcriptions).layer(DefaultBodyLimit::max(state.max_upload_bytes)),
        )
        .route(
            "/v1/audio/translations",
            post(translations).layer(DefaultBodyLimit::max(state.max_upload_bytes)),
        )
        .route("/v1/audio/speech", post(speech))
        .route("/v1/audio/voices", axum::routing::get(voices))
}

/// Every voice `/v1/audio/speech` speaks: voice profiles (clone or approximate), Kokoro's and
/// Piper's when installed, espeak-ng's, with language, engine and licence.
async fn voices(State(state): State<Arc<ServerState>>) -> Result<Response, HttpError> {
    let services = state.services.clone();
    let voices = blocking(move || services.voice_catalog()).await?;
    Ok(Json(json!({ "object": "list", "data": voices })).into_response())
}

/// Runs `work` on a blocking thread, passing on its panic.
pub(super) async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(value) => value,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}
