//! A controllable OpenAI-compatible server on loopback for fault injection: slow first token,
//! held headers, stalls after headers, hangs, resets, malformed SSE, invalid JSON, error
//! statuses and error chunks. It records what it received and how many response streams are
//! still open, so tests can observe that a dropped request really closed its upstream
//! connection.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Notify};

/// How the fake answers one chat request.
#[derive(Clone)]
pub enum Behavior {
    /// Streams a reply: "clean: " + the last user message, in small pieces.
    Echo,
    /// As `Echo`, except that a last user message containing "forever" gets a reply that never
    /// ends (this piece, again and again): one server for clients that finish and clients
    /// that go away mid-stream.
    EchoOrEndless(String),
    /// Streams these content pieces.
    Reply(Vec<String>),
    /// Streams a stand-in translation of the last user message: each word of letters spelled
    /// backwards, numbers as they are, so a translation's checks pass and the result is plainly
    /// not the input.
    Translate,
    /// Sends headers and the role chunk, then waits for `gate` before any content.
    SlowFirstToken(Arc<Notify>),
    /// Sends no headers until `gate` opens (like llama-server with every slot busy).
    HoldHeaders(Arc<Notify>),
    /// Sends `chunks` content chunks, then keeps the stream open without content.
    HangAfter(usize),
    /// Sends `chunks` content chunks, then breaks the connection once `gate` opens (so the
    /// client has surely read them).
    ResetAfter(usize, Arc<Notify>),
    /// Sends a `data:` line that is not JSON.
    Malformed,
    /// Answers 200 `application/json` with a body that is not JSON (no event stream at all).
    InvalidJson,
    /// Sends its headers, then nothing but an SSE comment now and then: no event, ever.
    StallAfterHeaders,
    /// Answers with this status, body and optional Retry-After header.
    Status {
        status: u16,
        body: String,
        retry_after: Option<u64>,
    },
    /// Sends one content chunk, then an error object inside the 200 stream, then [DONE].
    ErrorInStream(Value),
    /// Answers 200 with an HTML page instead of an event stream (a proxy's login page, say).
    WrongContentType,
    /// Sends the role chunk, then one `data:` line of this many bytes, and never ends it.
    EnormousChunk(usize),
    /// Sends a whole reply and `[DONE]`, then keeps the connection open without a byte more.
    DoneButOpen,
    /// Streams this content piece again and again, as fast as the client reads, never ending.
    Endless(String),
    /// Streams these content pieces with each chunk's JSON pretty-printed over several
    /// `data:` lines (one event; the SSE standard joins the lines with `\n`).
    MultiLineData(Vec<String>),
}

#[derive(Default)]
struct Recorder {
    bodies: Mutex<Vec<Value>>,
    authorizations: Mutex<Vec<Option<String>>>,
    queue: Mutex<VecDeque<Behavior>>,
    open_streams: AtomicUsize,
    max_concurrent: AtomicUsize,
    /// Requests for anything but a chat: `/health` and `/v1/models`.
    other_requests: AtomicUsize,
}

struct Shared {
    recorder: Recorder,
    default: Behavior,
    context: u32,
    open_tx: watch::Sender<usize>,
}

/// The fake server; stops when dropped.
pub struct FakeUpstream {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    open_rx: watch::Receiver<usize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Decrements the open-stream count when the response body is dropped (stream ended or the
/// client went away).
struct OpenGuard(Arc<Shared>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        let n = self.0.recorder.open_streams.fetch_sub(1, Ordering::SeqCst) - 1;
        self.0.open_tx.send_replace(n);
    }
}

impl FakeUpstream {
    /// Starts on an ephemeral loopback port; `context` is reported as `max_model_len`.
    pub async fn start(default: Behavior, context: u32) -> FakeUpstream {
        let (open_tx, open_rx) = watch::channel(0);
        let shared = Arc::new(Shared {
            recorder: Recorder::default(),
            default,
            context,
            open_tx,
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .route(
                "/health",
                get(|State(shared): State<Arc<Shared>>| async move {
                    shared
                        .recorder
                        .other_requests
                        .fetch_add(1, Ordering::SeqCst);
                    "ok"
                }),
            )
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeUpstream {
            addr,
            shared,
            open_rx,
            task,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The behavior for the next request (then the default again).
    pub fn push(&self, behavior: Behavior) {
        self.shared
            .recorder
            .queue
            .lock()
            .unwrap()
            .push_back(behavior);
    }

    /// Requests for its health or its models received so far.
    pub fn other_requests(&self) -> usize {
        self.shared.recorder.other_requests.load(Ordering::SeqCst)
    }

    /// Chat requests received so far.
    pub fn requests(&self) -> usize {
        self.shared.recorder.bodies.lock().unwrap().len()
    }

    /// The Authorization header of each chat request.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.shared.recorder.authorizations.lock().unwrap().clone()
    }

    pub fn bodies(&self) -> Vec<Value> {
        self.shared.recorder.bodies.lock().unwrap().clone()
    }

    pub fn open_streams(&self) -> usize {
        self.shared.recorder.open_streams.load(Ordering::SeqCst)
    }

    /// The most response streams that were open at once.
    pub fn max_concurrent(&self) -> usize {
        self.shared.recorder.max_concurrent.load(Ordering::SeqCst)
    }

    /// Waits until exactly `n` response streams are open; fails the test after
    /// [`crate::UNTIL_DEADLINE`] rather than hang it.
    pub async fn until_open_streams(&self, n: usize) {
        let mut rx = self.open_rx.clone();
        tokio::time::timeout(crate::UNTIL_DEADLINE, rx.wait_for(|open| *open == n))
            .await
            .unwrap_or_else(|_| panic!("waited {:?} for {n} open streams", crate::UNTIL_DEADLINE))
            .unwrap();
    }
}

async fn models(State(shared): State<Arc<Shared>>) -> Json<Value> {
    shared
        .recorder
        .other_requests
        .fetch_add(1, Ordering::SeqCst);
    Json(
        json!({"object": "list", "data": [{"id": "fake-model", "object": "model", "max_model_len": shared.context}]}),
    )
}

fn chunk(content: Option<&str>, role: Option<&str>, finish: Option<&str>) -> Bytes {
    let mut delta = json!({});
    if let Some(r) = role {
        delta["role"] = json!(r);
    }
    if let Some(c) = content {
        delta["content"] = json!(c);
    }
    let v = json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    Bytes::from(format!("data: {v}\n\n"))
}

/// One chunk's JSON spread over one `data:` line per line of its pretty-printed form.
fn multi_line_chunk(content: &str) -> Bytes {
    let v = json!({
        "id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake-model",
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]
    });
    let pretty = serde_json::to_string_pretty(&v).unwrap();
    let lines: String = pretty.lines().map(|l| format!("data: {l}\n")).collect();
    Bytes::from(format!("{lines}\n"))
}

fn finish_chunks() -> Vec<Bytes> {
    let usage = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake-model",
        "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}});
    vec![
        chunk(None, None, Some("stop")),
        Bytes::from(format!("data: {usage}\n\n")),
        Bytes::from_static(b"data: [DONE]\n\n"),
    ]
}

/// A stream that never ends but writes an SSE comment now and then, so a closed client
/// connection is noticed (as real servers' keep-alives do).
fn keepalive_forever() -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::unfold((), |()| async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        Some((Ok(Bytes::from_static(b": keep-alive\n\n")), ()))
    })
}

fn sse(
    shared: &Arc<Shared>,
    body: impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
) -> Response {
    let open = shared.recorder.open_streams.fetch_add(1, Ordering::SeqCst) + 1;
    shared
        .recorder
        .max_concurrent
        .fetch_max(open, Ordering::SeqCst);
    shared.open_tx.send_replace(open);
    let guard = OpenGuard(shared.clone());
    let body = body.map(move |item| {
        let _keep = &guard;
        item
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(body))
        .unwrap()
}

fn last_user_message(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string()
}

fn ok_stream(
    items: Vec<Bytes>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::iter(items.into_iter().map(Ok))
}

async fn chat(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    shared.recorder.authorizations.lock().unwrap().push(auth);
    shared.recorder.bodies.lock().unwrap().push(body.clone());
    let behavior = shared
        .recorder
        .queue
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| shared.default.clone());
    let role = chunk(None, Some("assistant"), None);
    match behavior {
        Behavior::EchoOrEndless(piece) if last_user_message(&body).contains("forever") => {
            let forever = futures::stream::repeat_with(move || Ok(chunk(Some(&piece), None, None)));
            sse(&shared, ok_stream(vec![role]).chain(forever))
        }
        Behavior::Echo | Behavior::EchoOrEndless(_) => {
            let reply = format!("clean: {}", last_user_message(&body));
            let mut items = vec![role];
            for word in reply.split_inclusive(' ') {
                items.push(chunk(Some(word), None, None));
            }
            items.extend(finish_chunks());
            sse(&shared, ok_stream(items))
        }
        Behavior::Translate => {
            let reply: Vec<String> = last_user_message(&body)
                .split(' ')
                .map(|word| {
                    if word.chars().any(|c| c.is_ascii_digit()) {
                        word.to_string()
                    } else {
                        word.chars().rev().collect()
                    }
                })
                .collect();
            let mut items = vec![role];
            for word in reply.join(" ").split_inclusive(' ') {
                items.push(chunk(Some(word), None, None));
            }
            items.extend(finish_chunks());
            sse(&shared, ok_stream(items))
        }
        Behavior::Reply(pieces) => {
            let mut items = vec![role];
            items.extend(pieces.iter().map(|p| chunk(Some(p), None, None)));
            items.extend(finish_chunks());
            sse(&shared, ok_stream(items))
        }
        Behavior::SlowFirstToken(gate) => {
            let rest = futures::stream::once(async move {
                gate.notified().await;
                Ok::<_, std::io::Error>(chunk(Some("late"), None, None))
            })
            .chain(ok_stream(finish_chunks()));
            sse(&shared, ok_stream(vec![role]).chain(rest))
        }
        Behavior::HoldHeaders(gate) => {
            gate.notified().await;
            let mut items = vec![role, chunk(Some("finally"), None, None)];
            items.extend(finish_chunks());
            sse(&shared, ok_stream(items))
        }
        Behavior::HangAfter(n) => {
            let mut items = vec![role];
            items.extend((0..n).map(|i| chunk(Some(&format!("w{i} ")), None, None)));
            sse(&shared, ok_stream(items).chain(keepalive_forever()))
        }
        Behavior::Endless(piece) => {
            let forever = futures::stream::repeat_with(move || Ok(chunk(Some(&piece), None, None)));
            sse(&shared, ok_stream(vec![role]).chain(forever))
        }
        Behavior::ResetAfter(n, gate) => {
            let mut items = vec![role];
            items.extend((0..n).map(|i| chunk(Some(&format!("w{i} ")), None, None)));
            let broken = futures::stream::once(async move {
                gate.notified().await;
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "injected reset",
                ))
            });
            sse(&shared, ok_stream(items).chain(broken))
        }
        Behavior::WrongContentType => Response::builder()
            .header(header::CONTENT_TYPE, "text/html; charset=utf-8")
            .body(Body::from("<html><body>Please sign in</body></html>"))
            .unwrap(),
        Behavior::EnormousChunk(bytes) => {
            let start = Bytes::from_static(b"data: {\"choices\": [{\"delta\": {\"content\": \"");
            let filler = futures::stream::iter(
                (0..bytes / 65_536).map(|_| Ok(Bytes::from(vec![b'a'; 65_536]))),
            );
            sse(
                &shared,
                ok_stream(vec![role, start])
                    .chain(filler)
                    .chain(futures::stream::pending()),
            )
        }
        Behavior::DoneButOpen => sse(
            &shared,
            ok_stream(vec![
                role,
                chunk(Some("all "), None, None),
                chunk(Some("done"), None, Some("stop")),
                Bytes::from_static(b"data: [DONE]\n\n"),
            ])
            .chain(futures::stream::pending()),
        ),
        Behavior::Malformed => sse(
            &shared,
            ok_stream(vec![
                role,
                Bytes::from_static(b"data: {\"choices\": [oops\n\n"),
            ]),
        ),
        Behavior::InvalidJson => Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(
                r#"{"id": "chatcmpl-fake", "choices": [{"message": "#,
            ))
            .unwrap(),
        Behavior::StallAfterHeaders => sse(&shared, keepalive_forever()),
        Behavior::Status {
            status,
            body,
            retry_after,
        } => {
            let mut resp = (StatusCode::from_u16(status).unwrap(), body).into_response();
            resp.headers_mut()
                .insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
            if let Some(secs) = retry_after {
                resp.headers_mut().insert(header::RETRY_AFTER, secs.into());
            }
            resp
        }
        Behavior::MultiLineData(pieces) => {
            let mut items = vec![role];
            items.extend(pieces.iter().map(|p| multi_line_chunk(p)));
            items.extend(finish_chunks());
            sse(&shared, ok_stream(items))
        }
        Behavior::ErrorInStream(error) => {
            let items = vec![
                role,
                chunk(Some("partial "), None, None),
                Bytes::from(format!("data: {error}\n\n")),
                Bytes::from_static(b"data: [DONE]\n\n"),
            ];
            sse(&shared, ok_stream(items))
        }
    }
}
