//! The one error every handler returns. It renders each rejection and error the same way: an
//! OpenAI-shaped body (`{"error": {message, type, param, code}}`), the status, and
//! `Retry-After` when a retry makes sense; a rejection also carries its full typed form under
//! `error.headroom`, with the actions a client can offer.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use headroom_core::admission::{DeadlineKind, RejectReason, Rejection};
use headroom_services::speech::SpeechError;
use headroom_services::voice_work::VoiceWorkError;
use headroom_services::voices::LibraryError;
use headroom_speech::asr::AsrError;
use headroom_speech::audio::AudioError;
use headroom_speech::cloning::CloningError;
use headroom_speech::models::ModelError;
use headroom_speech::tts::TtsError;
use serde_json::{json, Value};

/// Why a request was not answered with what it asked for.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// A lane refused the work (overload, deadline, input too long, audio priority, ...).
    #[error("{}", .0.message())]
    Rejected(Box<Rejection>),
    /// The request body was over the limit: a rejection (it counts in metrics) answered 413.
    #[error("{}", .0.message())]
    BodyTooLarge(Box<Rejection>),
    /// The client must change the request.
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    /// An upload over the configured limit.
    #[error("{message}")]
    UploadTooLarge { message: String },
    /// An upload could not be stored while it was received.
    #[error("{message}")]
    Storage { message: String },
    /// The text model's server could not answer a pass-through call.
    #[error("{message}")]
    Upstream { message: String },
    /// Speech that could not be encoded in the asked format.
    #[error(transparent)]
    Encode(headroom_speech::audio::EncodeError),
    /// A speech job failed.
    #[error(transparent)]
    Speech(SpeechError),
    /// The `Host` header names no loopback host with this server's port (DNS rebinding).
    #[error("this server answers only requests addressed to it on this machine (localhost, 127.0.0.1 or [::1] with its port), not Host {host:?}")]
    ForeignHost { host: String },
    /// The work would send data to a server on another machine that was not allowed
    /// (`privacy.allow_remote`); nothing was sent.
    #[error(transparent)]
    RemoteNotAllowed(headroom_base::consent::NotAllowed),
    /// A browser page of an origin the user did not allow.
    #[error("requests from web pages are refused (Origin {origin:?}); allow an origin with server.allowed_origins")]
    ForeignOrigin { origin: String },
    /// A body that is neither JSON nor a multipart form.
    #[error(
        "the request body must be application/json or multipart/form-data, not {content_type:?}"
    )]
    UnsupportedMediaType { content_type: String },
    /// Every connection place is taken (`server.max_connections`).
    #[error("the server has {limit} connections open, as many as it takes (server.max_connections); try again shortly")]
    TooManyConnections { limit: usize },
    /// The bodies held in memory leave no room for this one (`server.max_buffered_body_bytes`).
    #[error("{0}; try again shortly (server.max_buffered_body_bytes)")]
    RequestMemoryFull(#[from] crate::body_budget::BudgetExhausted),
    /// The client sent its body below the minimum rate (`server.min_read_bytes_per_sec`).
    #[error(transparent)]
    BodyTooSlow(#[from] crate::min_rate::BodyTooSlow),
    /// No bearer token, or not the server's (the token is never echoed).
    #[error("this server requires its token: send `Authorization: Bearer TOKEN` with the token headroom serve was given (server.token, HEADROOM_SERVE_TOKEN or --token)")]
    InvalidApiKey,
}

/// The code of a connection beyond `server.max_connections`.
pub const TOO_MANY_CONNECTIONS: &str = "too_many_connections";
/// The code of a body refused for want of memory (`server.max_buffered_body_bytes`).
pub const REQUEST_MEMORY_FULL: &str = "request_memory_full";
/// The code of a body cut off for arriving too slowly.
pub const BODY_TOO_SLOW: &str = "body_too_slow";
/// The metric reason of a connection closed because no whole request head arrived within the
/// read timeout: a slow or silent client, or a keep-alive connection left idle that long.
pub const HEADER_TIMEOUT: &str = "header_timeout";
/// The code of a request without the server's token (OpenAI's for a bad key).
pub const INVALID_API_KEY: &str = "invalid_api_key";
/// The metric reason of a connection closed because its client took none of its answer for
/// the write timeout (a streamed take nobody reads; [`crate::write_deadline`]).
pub const CLIENT_NOT_READING: &str = "client_not_reading";
/// Every reason `headroom_connection_refusals` counts.
pub const CONNECTION_REFUSALS: &[&str] = &[
    TOO_MANY_CONNECTIONS,
    REQUEST_MEMORY_FULL,
    BODY_TOO_SLOW,
    HEADER_TIMEOUT,
    INVALID_API_KEY,
    CLIENT_NOT_READING,
];

impl From<Rejection> for HttpError {
    fn from(r: Rejection) -> Self {
        HttpError::Rejected(Box::new(r))
    }
}

impl From<VoiceWorkError> for HttpError {
    fn from(e: VoiceWorkError) -> Self {
        match e {
            VoiceWorkError::Rejected(r) => r.into(),
            VoiceWorkError::Speech(s)
            | VoiceWorkError::Services(headroom_services::ServicesError::Speech(s)) => s.into(),
            VoiceWorkError::Cloning(CloningError::NotAllowed(refused)) => {
                HttpError::RemoteNotAllowed(refused)
            }
            VoiceWorkError::NoMatch(_) | VoiceWorkError::NoClips(_) => {
                HttpError::bad_request("voice_not_ready", e.to_string())
            }
            // `profile:<id>` naming no profile, as an unknown engine voice is answered.
            VoiceWorkError::Library(LibraryError::NotFound(_)) => {
                HttpError::bad_request("invalid_voice_or_input", e.to_string())
            }
            other => HttpError::Upstream {
                message: other.to_string(),
            },
        }
    }
}

impl From<SpeechError> for HttpError {
    fn from(e: SpeechError) -> Self {
        match e {
            SpeechError::Rejected(r) => r.into(),
            other => HttpError::Speech(other),
        }
    }
}

impl HttpError {
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        HttpError::BadRequest {
            code,
            message: message.into(),
        }
    }

    /// Status, OpenAI `type` and `code`.
    fn classify(&self) -> (StatusCode, &'static str, &'static str) {
        use StatusCode as S;
        const INVALID: &str = "invalid_request_error";
        const SERVER: &str = "server_error";
        match self {
            HttpError::Rejected(r) => {
                let status = rejection_status(r);
                (status, kind_for(status), r.reason.code())
            }
            HttpError::BodyTooLarge(r) => (S::PAYLOAD_TOO_LARGE, INVALID, r.reason.code()),
            HttpError::BadRequest { code, .. } => (S::BAD_REQUEST, INVALID, code),
            HttpError::UploadTooLarge { .. } => (S::PAYLOAD_TOO_LARGE, INVALID, "file_too_large"),
            HttpError::Storage { .. } => (S::INTERNAL_SERVER_ERROR, SERVER, "upload_not_stored"),
            HttpError::Encode(headroom_speech::audio::EncodeError::Unavailable { .. }) => {
                (S::BAD_REQUEST, INVALID, "response_format_unavailable")
            }
            HttpError::Encode(_) => (S::INTERNAL_SERVER_ERROR, SERVER, "encode_failed"),
            HttpError::Upstream { .. } => (
                S::BAD_GATEWAY,
                SERVER,
                RejectReason::UpstreamUnavailable.code(),
            ),
            HttpError::ForeignHost { .. } => (S::MISDIRECTED_REQUEST, INVALID, "host_not_allowed"),
            HttpError::ForeignOrigin { .. } => (S::FORBIDDEN, INVALID, "origin_not_allowed"),
            HttpError::RemoteNotAllowed(_) => (S::FORBIDDEN, INVALID, "remote_not_allowed"),
            HttpError::UnsupportedMediaType { .. } => {
                (S::UNSUPPORTED_MEDIA_TYPE, INVALID, "unsupported_media_type")
            }
            HttpError::TooManyConnections { .. } => {
                (S::SERVICE_UNAVAILABLE, SERVER, TOO_MANY_CONNECTIONS)
            }
            HttpError::RequestMemoryFull(_) => {
                (S::SERVICE_UNAVAILABLE, SERVER, REQUEST_MEMORY_FULL)
            }
            HttpError::BodyTooSlow(_) => (S::REQUEST_TIMEOUT, INVALID, BODY_TOO_SLOW),
            HttpError::InvalidApiKey => (S::UNAUTHORIZED, INVALID, INVALID_API_KEY),
            HttpError::Speech(e) => match e {
                SpeechError::Audio(AudioError::Cancelled { .. }) => {
                    (S::REQUEST_TIMEOUT, SERVER, "cancelled")
                }
                SpeechError::Audio(_) => (S::BAD_REQUEST, INVALID, "invalid_audio"),
                SpeechError::KnownSpeaker { .. } => {
                    (S::BAD_REQUEST, INVALID, "invalid_known_speaker_reference")
                }
                SpeechError::Model(ModelError::Unknown { .. }) => {
                    (S::BAD_REQUEST, INVALID, "model_not_found")
                }
                SpeechError::Model(_) => (S::SERVICE_UNAVAILABLE, SERVER, "model_not_installed"),
                SpeechError::Asr(AsrError::UnknownLanguage(_)) => {
                    (S::BAD_REQUEST, INVALID, "invalid_language")
                }
                SpeechError::Asr(AsrError::CannotTranslate) => {
                    (S::BAD_REQUEST, INVALID, "model_not_multilingual")
                }
                SpeechError::Asr(AsrError::Cancelled) | SpeechError::Tts(TtsError::Cancelled) => {
                    (S::REQUEST_TIMEOUT, SERVER, "cancelled")
                }
                SpeechError::InputTooLong { .. } => (S::BAD_REQUEST, INVALID, "input_too_long"),
                SpeechError::Tts(TtsError::UnknownVoice { .. } | TtsError::EmptyText) => {
                    (S::BAD_REQUEST, INVALID, "invalid_voice_or_input")
                }
                SpeechError::Rejected(r) => {
                    let status = rejection_status(r);
                    (status, kind_for(status), r.reason.code())
                }
                _ => (S::INTERNAL_SERVER_ERROR, SERVER, "engine_failed"),
            },
        }
    }

    fn rejection(&self) -> Option<&Rejection> {
        match self {
            HttpError::Rejected(r) | HttpError::BodyTooLarge(r) => Some(r),
            HttpError::Speech(SpeechError::Rejected(r)) => Some(r),
            _ => None,
        }
    }

    /// The OpenAI-shaped body.
    pub fn body(&self) -> Value {
        let (_, kind, code) = self.classify();
        let mut error = json!({
            "message": self.to_string(),
            "type": kind,
            "param": null,
            "code": code,
        });
        if let Some(r) = self.rejection() {
            let mut headroom = serde_json::to_value(r).expect("a rejection serializes");
            headroom["actions"] =
                serde_json::to_value(r.suggested_actions()).expect("actions serialize");
            error["headroom"] = headroom;
        }
        json!({ "error": error })
    }

    pub fn status(&self) -> StatusCode {
        self.classify().0
    }

    /// The OpenAI-shaped `code`.
    pub fn code(&self) -> &'static str {
        self.classify().2
    }

    /// When a retry makes sense: a retryable rejection's estimate, or a moment for a server
    /// that had no room for this connection or body.
    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            HttpError::TooManyConnections { .. } | HttpError::RequestMemoryFull(_) => {
                Some(std::time::Duration::from_secs(1))
            }
            _ => self
                .rejection()
                .filter(|r| r.is_retryable())
                .and_then(|r| r.retry_after),
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let mut resp = (self.status(), Json(self.body())).into_response();
        if let Some(after) = self.retry_after() {
            let secs = after.as_secs_f64().ceil().max(1.0) as u64;
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if matches!(self, HttpError::InvalidApiKey) {
            resp.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

fn kind_for(status: StatusCode) -> &'static str {
    match status {
        StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
        StatusCode::BAD_REQUEST => "invalid_request_error",
        StatusCode::GATEWAY_TIMEOUT => "timeout_error",
        _ => "server_error",
    }
}

/// The HTTP status a rejection maps to.
pub fn rejection_status(r: &Rejection) -> StatusCode {
    match r.reason {
        RejectReason::TextLaneFull
        | RejectReason::AudioLaneFull
        | RejectReason::GpuMemoryPressure => StatusCode::TOO_MANY_REQUESTS,
        RejectReason::DeadlineExceeded if r.deadline == Some(DeadlineKind::QueueWait) => {
            StatusCode::TOO_MANY_REQUESTS
        }
        RejectReason::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        RejectReason::InputTooLong => StatusCode::BAD_REQUEST,
        RejectReason::UpstreamUnavailable
        | RejectReason::UpstreamError
        | RejectReason::UnusableReply => StatusCode::BAD_GATEWAY,
        RejectReason::UpstreamBusy | RejectReason::AudioPriority => StatusCode::SERVICE_UNAVAILABLE,
        RejectReason::Cancelled => StatusCode::REQUEST_TIMEOUT,
        RejectReason::RemoteNotAllowed => StatusCode::FORBIDDEN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_core::admission::Lane;
    use std::time::Duration;

    #[test]
    fn overload_maps_to_429_with_retry_after_and_reason_code() {
        let r = Rejection::new(Lane::Text, RejectReason::TextLaneFull)
            .with_retry_after(Some(Duration::from_millis(1500)));
        let error = HttpError::from(r);
        let body = error.body();
        assert_eq!(body["error"]["code"], "text_lane_full");
        assert_eq!(body["error"]["type"], "rate_limit_error");
        assert_eq!(body["error"]["headroom"]["retry_after_ms"], 1500);
        assert!(body["error"]["headroom"]["actions"].is_array());
        let resp = error.into_response();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "2");
    }

    #[test]
    fn a_rejected_speech_job_renders_as_the_rejection() {
        let r = Rejection::new(Lane::Audio, RejectReason::AudioLaneFull);
        let error = HttpError::from(SpeechError::Rejected(r));
        assert!(matches!(error, HttpError::Rejected(_)));
        assert_eq!(error.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(error.body()["error"]["code"], "audio_lane_full");
    }

    #[test]
    fn plain_errors_have_no_retry_after_and_no_rejection() {
        let resp = HttpError::bad_request("invalid_json", "not JSON").into_response();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        assert!(resp.headers().get(header::RETRY_AFTER).is_none());
        let body = HttpError::bad_request("invalid_json", "not JSON").body();
        assert_eq!(body["error"]["message"], "not JSON");
        assert!(body["error"].get("headroom").is_none());
    }

    #[test]
    fn refusals_before_any_lane_are_openai_shaped() {
        let cases: [(HttpError, u16, &str, bool); 4] = [
            (
                HttpError::TooManyConnections { limit: 512 },
                503,
                "too_many_connections",
                true,
            ),
            (
                crate::body_budget::BudgetExhausted {
                    wanted: 10,
                    held: 95,
                    total: 100,
                }
                .into(),
                503,
                "request_memory_full",
                true,
            ),
            (
                crate::min_rate::BodyTooSlow {
                    received: 3,
                    window: Duration::from_secs(10),
                    min_bytes: 10240,
                }
                .into(),
                408,
                "body_too_slow",
                false,
            ),
            (HttpError::InvalidApiKey, 401, "invalid_api_key", false),
        ];
        for (error, status, code, retry) in cases {
            let body = error.body();
            assert_eq!(body["error"]["code"], code);
            assert!(body["error"]["message"].as_str().unwrap().len() > 20);
            assert!(body["error"]["param"].is_null());
            assert!(CONNECTION_REFUSALS.contains(&error.code()));
            let resp = error.into_response();
            assert_eq!(resp.status().as_u16(), status, "{code}");
            assert_eq!(
                resp.headers().contains_key(header::RETRY_AFTER),
                retry,
                "{code}"
            );
        }
        let resp = HttpError::InvalidApiKey.into_response();
        assert_eq!(resp.headers()[header::WWW_AUTHENTICATE], "Bearer");
    }

    #[test]
    fn statuses_by_reason() {
        let status = |reason, deadline| {
            let mut r = Rejection::new(Lane::Text, reason);
            r.deadline = deadline;
            rejection_status(&r)
        };
        assert_eq!(
            status(RejectReason::InputTooLong, None),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status(RejectReason::UpstreamUnavailable, None),
            StatusCode::BAD_GATEWAY
        );
        assert_eq!(
            status(RejectReason::UpstreamBusy, None),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            status(
                RejectReason::DeadlineExceeded,
                Some(DeadlineKind::FirstChunk)
            ),
            StatusCode::GATEWAY_TIMEOUT
        );
        assert_eq!(
            status(
                RejectReason::DeadlineExceeded,
                Some(DeadlineKind::QueueWait)
            ),
            StatusCode::TOO_MANY_REQUESTS
        );
    }
}
