//! `/v1/chat/completions` through the text lane, and the endpoints that describe the server:
//! models, health, metrics and lane snapshots.

use crate::body_budget::{read_body, Unread};
use crate::min_rate::is_too_slow;
use crate::{HttpError, ServerState};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use headroom_base::redact;
use headroom_core::admission::RejectReason;
use headroom_core::lanes::TextStream;
use headroom_core::llm::{ChatChunk, ChatRequest, Usage};
use serde::Deserialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;

/// A chat completion as a client sends it. Headroom reads what admission needs (through
/// [`ChatRequest`]); every field it does not know (`top_p`, `seed`, `tools`, ...) stays in
/// `request.extra` and reaches the upstream untouched. `stream` and `stream_options` describe
/// how this client wants its answer: Headroom always streams from the upstream itself.
#[derive(Debug, Deserialize)]
pub struct InboundChat {
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
    #[serde(flatten)]
    pub request: ChatRequest,
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

impl InboundChat {
    /// Parses and checks a request body.
    pub fn parse(bytes: &[u8]) -> Result<InboundChat, HttpError> {
        // One parse: the JSON tree tells bad JSON from a JSON body that is not a request.
        let value: Value = serde_json::from_slice(bytes).map_err(|e| {
            HttpError::bad_request(
                "invalid_json",
                format!("the request body is not valid JSON: {e}"),
            )
        })?;
        let chat: InboundChat = serde_json::from_value(value).map_err(|e| {
            HttpError::bad_request(
                "invalid_request",
                format!("not a chat completion request: {e}"),
            )
        })?;
        if chat.request.messages.is_empty() {
            return Err(HttpError::bad_request(
                "invalid_request",
                "`messages` must not be empty",
            ));
        }
        Ok(chat)
    }
}

/// The answer to a body that was not read: `too_large` for one over its limit, else the
/// budget's, the minimum rate's or a broken connection's, counted in the metrics.
pub(crate) fn unread_error(
    state: &ServerState,
    unread: Unread,
    too_large: impl FnOnce() -> HttpError,
) -> HttpError {
    let error = match unread {
        Unread::TooLarge => too_large(),
        Unread::NoBudget(e) => HttpError::RequestMemoryFull(e),
        Unread::Broken(e) => match is_too_slow(&e) {
            Some(slow) => HttpError::BodyTooSlow(slow.clone()),
            None => HttpError::bad_request(
                "body_unreadable",
                format!("the request body could not be read: {e}"),
            ),
        },
    };
    state.count_refusal(&error);
    if matches!(
        error,
        HttpError::RequestMemoryFull(_) | HttpError::BodyTooSlow(_)
    ) {
        tracing::warn!(%error, "refused a request body");
    }
    error
}

pub(crate) async fn completions(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, HttpError> {
    let lane = &state.text_lane;
    let buffered = read_body(&state.body_budget, &headers, body, state.max_body_bytes)
        .await
        .map_err(|unread| {
            unread_error(&state, unread, || {
                HttpError::BodyTooLarge(Box::new(lane.record_rejection(
                    RejectReason::InputTooLong,
                    format!(
                        "the request body is over the {} byte limit",
                        state.max_body_bytes
                    ),
                )))
            })
        })?;
    // The buffered body (and the memory budget it holds) goes once it is parsed.
    let chat = InboundChat::parse(&buffered.bytes)?;
    drop(buffered);
    let wants_usage = chat.stream_options.unwrap_or_default().include_usage;
    let stream = lane.submit(chat.request).await?;
    if !chat.stream {
        return collect_completion(stream).await;
    }
    // `Event::data` writes one `data:` line per line of the payload, so a multi-line event
    // from the upstream reaches the client whole.
    let events = stream
        .filter_map(move |item| async move {
            match item {
                Ok(chunk) if chunk_is_usage_only(&chunk) && !wants_usage => None,
                Ok(chunk) => Some(Event::default().data(chunk.raw)),
                Err(r) => Some(Event::default().data(HttpError::from(r).body().to_string())),
            }
        })
        .chain(futures::stream::once(async {
            Event::default().data("[DONE]")
        }))
        .map(Ok::<_, Infallible>);
    Ok(Sse::new(events).into_response())
}

fn chunk_is_usage_only(chunk: &ChatChunk) -> bool {
    chunk.usage.is_some() && chunk.content.is_none() && chunk.finish_reason.is_none()
}

/// Answers a non-streaming client from the upstream stream (Headroom always streams upstream,
/// so the same deadlines apply to both kinds of client).
async fn collect_completion(mut stream: TextStream) -> Result<Response, HttpError> {
    let mut content = String::new();
    let mut finish_reason = None;
    let mut usage: Option<Usage> = None;
    let mut id = None;
    let mut model = None;
    while let Some(item) = stream.next().await {
        let chunk = item?;
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
    let created = headroom_base::clock::unix_ms() / 1000;
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
    Ok(Json(body).into_response())
}

/// `/v1/models`: the models of the first upstream the fleet holds up (a down one is not
/// asked; when none is up, the first is asked all the same, and its failure is the answer).
pub(crate) async fn models(State(state): State<Arc<ServerState>>) -> Result<Response, HttpError> {
    let fleet = state.text_lane.fleet();
    let asked = fleet
        .upstreams()
        .zip(fleet.views())
        .find(|(_, view)| view.up)
        .map_or_else(|| fleet.primary(), |(upstream, _)| upstream.client());
    let cards = asked.models().await.map_err(|e| HttpError::Upstream {
        message: format!("cannot list the text model server's models: {e}"),
    })?;
    Ok(Json(json!({"object": "list", "data": cards})).into_response())
}

/// `/health`, the one route open without the token, answered from the fleet's own state (its
/// breakers and periodic health checks): no request goes upstream, so however often it is
/// asked it costs the text servers nothing. 200 while any upstream is up, else 503. With a
/// token set it says only up or down (nothing of an upstream's own words, which may name
/// hosts and paths); without one, each upstream by its shown name and, when down, why (URLs
/// redacted).
pub(crate) async fn health(State(state): State<Arc<ServerState>>) -> Response {
    let views = state.text_lane.fleet().views();
    let any_up = views.iter().any(|v| v.up);
    let (status, overall) = match any_up {
        true => (StatusCode::OK, "ok"),
        false => (StatusCode::SERVICE_UNAVAILABLE, "degraded"),
    };
    let body = if state.token.token.is_some() {
        json!({"status": overall, "upstream": if any_up { "up" } else { "down" }})
    } else {
        let why = |v: &headroom_core::lanes::UpstreamView| {
            v.down_reason
                .as_deref()
                .map(redact::urls)
                .unwrap_or_default()
        };
        // With none up, the first one's reason (each is listed below).
        let upstream = match any_up {
            true => "ok".to_string(),
            false => views.first().map(why).unwrap_or_default(),
        };
        let upstreams: Vec<Value> = views
            .iter()
            .map(|v| match v.up {
                true => json!({"name": v.name, "up": true}),
                false => json!({"name": v.name, "up": false, "down_reason": why(v)}),
            })
            .collect();
        json!({"status": overall, "upstream": upstream, "upstreams": upstreams})
    };
    (status, Json(body)).into_response()
}

pub(crate) async fn metrics(State(state): State<Arc<ServerState>>) -> Response {
    state.metrics.set_runtime_tasks(
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
    );
    headroom_services::publish_gpu_memory(&state.metrics, &state.gpu);
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

pub(crate) async fn lanes(State(state): State<Arc<ServerState>>) -> Response {
    Json(json!({
        "text": state.text_lane.snapshot(),
        "audio": state.speech.lane().snapshot(),
        "signals": state.services.crossed_signals(),
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_pass_through_and_client_only_fields_do_not() {
        let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],
            "stream":true,"stream_options":{"include_usage":true},
            "top_p":0.5,"seed":7,"tools":[{"type":"function","function":{"name":"f"}}]}"#;
        let chat = InboundChat::parse(body).unwrap();
        assert!(chat.stream);
        assert!(chat.stream_options.unwrap().include_usage);
        let extra = &chat.request.extra;
        assert_eq!(extra["top_p"], 0.5);
        assert_eq!(extra["seed"], 7);
        assert_eq!(extra["tools"][0]["function"]["name"], "f");
        assert!(!extra.contains_key("stream") && !extra.contains_key("stream_options"));
    }

    #[test]
    fn bad_bodies_are_named() {
        let code =
            |body: &[u8]| InboundChat::parse(body).unwrap_err().body()["error"]["code"].clone();
        assert_eq!(code(b"{not json"), "invalid_json");
        assert_eq!(code(br#"{"messages": 3}"#), "invalid_request");
        assert_eq!(code(br#"{"messages": []}"#), "invalid_request");
    }
}
