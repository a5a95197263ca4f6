//! `headroom serve`: a loopback OpenAI-compatible endpoint over the same lanes, so any OpenAI
//! client gets Headroom's admission control in front of the text model.
//!
//! Overload is answered at once: HTTP 429 with `Retry-After` and an OpenAI-shaped error whose
//! `code` is the rejection's reason code, plus the full rejection under `error.headroom`.

use crate::admission::{DeadlineKind, RejectReason, Rejection};
use crate::lanes::{AudioLane, TextLane};
use crate::llm::{ChatChunk, ChatRequest, Usage};
use crate::metrics::Metrics;
use crate::speech::SpeechService;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use tokio::net::TcpListener;

/// What the handlers share.
pub struct ServerState {
    pub text_lane: TextLane,
    /// The embedded speech engines on the audio lane.
    pub speech: Arc<SpeechService>,
    pub metrics: Arc<Metrics>,
    pub max_body_bytes: usize,
    /// Largest audio upload for transcription.
    pub max_upload_bytes: usize,
}

impl ServerState {
    /// A server over a text lane, with the embedded speech engines on a default audio lane
    /// reporting to the same metrics.
    pub fn new(text_lane: TextLane) -> Self {
        let metrics = text_lane.metrics().clone();
        let defaults = crate::config::ServerSettings::default();
        ServerState {
            speech: Arc::new(SpeechService::new(AudioLane::new(
                Default::default(),
                metrics.clone(),
            ))),
            text_lane,
            metrics,
            max_body_bytes: defaults.max_body_bytes,
            max_upload_bytes: defaults.max_upload_bytes,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{addr:?} is not an address to listen on: {reason}")]
    InvalidAddress { addr: String, reason: String },
    #[error("refusing to listen on {addr}: Headroom serves loopback only (127.0.0.1, [::1] or localhost)")]
    NotLoopback { addr: SocketAddr },
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Parses `HOST:PORT` and refuses any host that is not loopback.
pub fn loopback_addr(addr: &str) -> Result<SocketAddr, ServerError> {
    let invalid = |reason: &str| ServerError::InvalidAddress {
        addr: addr.to_string(),
        reason: reason.to_string(),
    };
    let parsed = match addr.strip_prefix("localhost:") {
        Some(port) => {
            let port = port
                .parse()
                .map_err(|_| invalid("the port is not a number"))?;
            SocketAddr::from((Ipv4Addr::LOCALHOST, port))
        }
        None => addr
            .parse::<SocketAddr>()
            .map_err(|_| invalid("use IP:PORT, e.g. 127.0.0.1:8089"))?,
    };
    if !parsed.ip().is_loopback() {
        return Err(ServerError::NotLoopback { addr: parsed });
    }
    Ok(parsed)
}

/// Binds a loopback listener.
pub async fn bind_loopback(addr: &str) -> Result<TcpListener, ServerError> {
    let addr = loopback_addr(addr)?;
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, source })
}

/// The routes.
pub fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/v1/headroom/lanes", get(lanes))
        .merge(crate::server_audio::routes(state.clone()))
        .with_state(state)
}

/// Serves until `shutdown` resolves; open streams finish or are dropped with the process.
pub async fn serve(
    listener: TcpListener,
    state: Arc<ServerState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

/// A server running on a background task, stopped by [`RunningServer::stop`] or on drop.
pub struct RunningServer {
    pub addr: SocketAddr,
    shutdown: tokio_util::sync::CancellationToken,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl RunningServer {
    /// Serves `state` on `listener` in the background.
    pub fn start(listener: TcpListener, state: Arc<ServerState>) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let shutdown = tokio_util::sync::CancellationToken::new();
        let signal = shutdown.clone();
        let task = tokio::spawn(serve(
            listener,
            state,
            async move { signal.cancelled().await },
        ));
        Ok(RunningServer {
            addr,
            shutdown,
            task: Some(task),
        })
    }

    /// Serves a text lane (and an idle default audio lane) on an ephemeral loopback port: for
    /// benchmarks, tests and embedding.
    pub async fn ephemeral(text_lane: TextLane) -> Result<Self, ServerError> {
        let state = Arc::new(ServerState::new(text_lane));
        let listener = bind_loopback("127.0.0.1:0").await?;
        let addr = listener.local_addr().map_err(|source| ServerError::Bind {
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            source,
        })?;
        Self::start(listener, state).map_err(|source| ServerError::Bind { addr, source })
    }

    /// The OpenAI base URL, `http://ADDR/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub async fn stop(mut self) -> std::io::Result<()> {
        self.shutdown.cancel();
        match self.task.take() {
            Some(task) => task.await.unwrap_or(Ok(())),
            None => Ok(()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn error_body(message: String, kind: &str, code: &str, headroom: Option<Value>) -> Value {
    let mut error = json!({"message": message, "type": kind, "param": null, "code": code});
    if let Some(h) = headroom {
        error["headroom"] = h;
    }
    json!({ "error": error })
}

pub(crate) fn error_response(
    status: StatusCode,
    kind: &str,
    code: &str,
    message: String,
) -> Response {
    (status, Json(error_body(message, kind, code, None))).into_response()
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
    }
}

fn rejection_json(r: &Rejection) -> Value {
    let status = rejection_status(r);
    let kind = match status {
        StatusCode::TOO_MANY_REQUESTS => "rate_limit_error",
        StatusCode::BAD_REQUEST => "invalid_request_error",
        StatusCode::GATEWAY_TIMEOUT => "timeout_error",
        _ => "server_error",
    };
    let mut headroom = serde_json::to_value(r).expect("a rejection serializes");
    headroom["actions"] = serde_json::to_value(r.suggested_actions()).expect("actions serialize");
    error_body(r.message(), kind, r.reason.code(), Some(headroom))
}

/// A rejection as an HTTP answer, with `Retry-After` when a retry makes sense.
pub fn rejection_response(r: &Rejection) -> Response {
    let mut resp = (rejection_status(r), Json(rejection_json(r))).into_response();
    if let Some(after) = r.retry_after.filter(|_| r.is_retryable()) {
        let secs = after.as_secs_f64().ceil().max(1.0) as u64;
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

async fn chat_completions(State(state): State<Arc<ServerState>>, body: Body) -> Response {
    let lane = &state.text_lane;
    let bytes = match axum::body::to_bytes(body, state.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            let r = lane.record_rejection(
                RejectReason::InputTooLong,
                format!(
                    "the request body is over the {} byte limit",
                    state.max_body_bytes
                ),
            );
            let mut resp = rejection_response(&r);
            *resp.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
            return resp;
        }
    };
    let value: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_json",
                format!("the request body is not valid JSON: {e}"),
            )
        }
    };
    let wants_stream = value
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let wants_usage = value
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut request: ChatRequest = match serde_json::from_value(value) {
        Ok(r) => r,
        Err(e) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "invalid_request",
                format!("not a chat completion request: {e}"),
            )
        }
    };
    if request.messages.is_empty() {
        return error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "invalid_request",
            "`messages` must not be empty".into(),
        );
    }
    request.extra.remove("stream");
    request.extra.remove("stream_options");
    let stream = match lane.submit(request).await {
        Ok(s) => s,
        Err(r) => return rejection_response(&r),
    };
    if wants_stream {
        let events = stream
            .filter_map(move |item| async move {
                match item {
                    Ok(chunk) if chunk_is_usage_only(&chunk) && !wants_usage => None,
                    Ok(chunk) => Some(sse_data(&chunk.raw)),
                    Err(r) => Some(sse_data(&rejection_json(&r).to_string())),
                }
            })
            .chain(futures::stream::once(async { sse_data("[DONE]") }))
            .map(Ok::<_, Infallible>);
        return Response::builder()
            .header(header::CONTENT_TYPE, "text/event-stream")
            .header(header::CACHE_CONTROL, "no-cache")
            .body(Body::from_stream(events))
            .expect("static headers are valid");
    }
    collect_completion(stream).await
}

fn chunk_is_usage_only(chunk: &ChatChunk) -> bool {
    chunk.usage.is_some() && chunk.content.is_none() && chunk.finish_reason.is_none()
}

fn sse_data(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// Answers a non-streaming client from the upstream stream (Headroom always streams upstream,
/// so the same deadlines apply to both kinds of client).
async fn collect_completion(mut stream: crate::lanes::TextStream) -> Response {
    let mut content = String::new();
    let mut finish_reason = None;
    let mut usage: Option<Usage> = None;
    let mut id = None;
    let mut model = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(chunk) => {
                if id.is_none() {
                    id = serde_json::from_str::<Value>(&chunk.raw)
                        .ok()
                        .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_string));
                }
                model = model.or(chunk.model.clone());
                content.push_str(chunk.content.as_deref().unwrap_or(""));
                finish_reason = chunk.finish_reason.clone().or(finish_reason);
                usage = chunk.usage.or(usage);
            }
            Err(r) => return rejection_response(&r),
        }
    }
    let created = crate::clock::unix_ms() / 1000;
    let mut body = json!({
        "id": id.unwrap_or_else(|| format!("chatcmpl-headroom-{}", stream.id())),
        "object": "chat.completion",
        "created": created,
        "model": model.unwrap_or_default(),
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": finish_reason.unwrap_or_else(|| "stop".into()),
        }],
    });
    if let Some(u) = usage {
        body["usage"] = serde_json::to_value(u).expect("usage serializes");
    }
    Json(body).into_response()
}

async fn models(State(state): State<Arc<ServerState>>) -> Response {
    match state.text_lane.client().models().await {
        Ok(cards) => Json(json!({"object": "list", "data": cards})).into_response(),
        Err(e) => error_response(
            StatusCode::BAD_GATEWAY,
            "server_error",
            RejectReason::UpstreamUnavailable.code(),
            format!("cannot list the text model server's models: {e}"),
        ),
    }
}

async fn health(State(state): State<Arc<ServerState>>) -> Response {
    match state.text_lane.client().health().await {
        Ok(()) => Json(json!({"status": "ok", "upstream": "ok"})).into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "degraded", "upstream": e.to_string()})),
        )
            .into_response(),
    }
}

async fn metrics(State(state): State<Arc<ServerState>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

async fn lanes(State(state): State<Arc<ServerState>>) -> Response {
    Json(json!({
        "text": state.text_lane.snapshot(),
        "audio": state.speech.lane().snapshot(),
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Lane;
    use std::time::Duration;

    #[test]
    fn only_loopback_addresses_are_accepted() {
        assert!(loopback_addr("127.0.0.1:8089").is_ok());
        assert!(loopback_addr("[::1]:8089").is_ok());
        assert_eq!(
            loopback_addr("localhost:9").unwrap().to_string(),
            "127.0.0.1:9"
        );
        assert!(matches!(
            loopback_addr("0.0.0.0:8089"),
            Err(ServerError::NotLoopback { .. })
        ));
        assert!(matches!(
            loopback_addr("192.168.1.5:80"),
            Err(ServerError::NotLoopback { .. })
        ));
        assert!(matches!(
            loopback_addr("example.com:80"),
            Err(ServerError::InvalidAddress { .. })
        ));
    }

    #[test]
    fn overload_maps_to_429_with_retry_after_and_reason_code() {
        let r = Rejection::new(Lane::Text, RejectReason::TextLaneFull)
            .with_retry_after(Some(Duration::from_millis(1500)));
        let resp = rejection_response(&r);
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "2");
        let body = rejection_json(&r);
        assert_eq!(body["error"]["code"], "text_lane_full");
        assert_eq!(body["error"]["type"], "rate_limit_error");
        assert_eq!(body["error"]["headroom"]["retry_after_ms"], 1500);
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
