//! Fake voice cloning servers on loopback that replay the documented request and response
//! shapes of Chatterbox-TTS-API, the XTTS API server and OpenAI-style speech servers, errors
//! included (no registry lets us run the real ones: their weights download at run time). Each
//! "clones" by answering with the reference audio it was given (an upload, a speaker file, a
//! named voice's file), so a client's similarity measurement has something true to find.

use axum::body::Bytes;
use axum::extract::{Multipart, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Which server the fake plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Chatterbox,
    Xtts,
    OpenAi,
}

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    /// Form fields (name → text, or `<N bytes, file NAME>` for files) or the JSON body's fields.
    pub fields: HashMap<String, String>,
}

#[derive(Default)]
struct Inner {
    seen: Vec<Seen>,
    /// Answer the next speech request with this status and body instead.
    fail_next: Option<(u16, Value)>,
}

struct Fake {
    kind: Kind,
    /// XTTS speakers and OpenAI voices: name → WAV file.
    voices: HashMap<String, PathBuf>,
    inner: Mutex<Inner>,
}

/// A running fake cloning server.
pub struct FakeCloning {
    addr: SocketAddr,
    fake: Arc<Fake>,
    _task: tokio::task::JoinHandle<()>,
}

fn wav(bytes: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "audio/wav")], bytes).into_response()
}

fn error(status: u16, body: Value) -> Response {
    (StatusCode::from_u16(status).expect("a status"), Json(body)).into_response()
}

impl Fake {
    fn record(&self, path: &str, fields: HashMap<String, String>) -> Option<Response> {
        let mut inner = self.inner.lock().unwrap();
        inner.seen.push(Seen {
            path: path.to_string(),
            fields,
        });
        inner.fail_next.take().map(|(s, b)| error(s, b))
    }
}

/// A JSON body's fields as text, as the fake records them.
fn text_fields(body: &Value) -> HashMap<String, String> {
    body.as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
        .collect()
}

async fn chatterbox_health() -> Json<Value> {
    Json(json!({"status": "healthy", "model_loaded": true}))
}

async fn chatterbox_upload(State(fake): State<Arc<Fake>>, mut form: Multipart) -> Response {
    let mut fields = HashMap::new();
    let mut voice = None;
    while let Ok(Some(field)) = form.next_field().await {
        let name = field.name().unwrap_or("").to_string();
        let file_name = field.file_name().map(str::to_string);
        let Ok(bytes) = field.bytes().await else {
            return error(400, json!({"detail": "the form could not be read"}));
        };
        match file_name {
            Some(file) => {
                fields.insert(
                    name.clone(),
                    format!("<{} bytes, file {file}>", bytes.len()),
                );
                if name == "voice_file" {
                    voice = Some(bytes);
                }
            }
            None => {
                fields.insert(name, String::from_utf8_lossy(&bytes).into_owned());
            }
        }
    }
    let input_given = fields.get("input").is_some_and(|t| !t.trim().is_empty());
    if let Some(failure) = fake.record("/v1/audio/speech/upload", fields) {
        return failure;
    }
    if !input_given {
        return error(
            422,
            json!({"detail": [{"loc": ["body", "input"], "msg": "Field required", "type": "missing"}]}),
        );
    }
    match voice {
        Some(v) if v.len() > 10 * 1024 * 1024 => error(
            413,
            json!({"error": {"message": "voice file too large (max 10MB)", "type": "invalid_request_error"}}),
        ),
        Some(v) => wav(v.to_vec()),
        None => error(
            400,
            json!({"error": {"message": "voice_file is required", "type": "invalid_request_error"}}),
        ),
    }
}

async fn xtts_speakers(State(fake): State<Arc<Fake>>) -> Json<Value> {
    let mut names: Vec<&String> = fake.voices.keys().collect();
    names.sort();
    Json(json!(names))
}

async fn xtts_tts(State(fake): State<Arc<Fake>>, body: Bytes) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return error(
            422,
            json!({"detail": [{"loc": ["body"], "msg": "JSON decode error", "type": "json_invalid"}]}),
        );
    };
    let fields = text_fields(&body);
    if let Some(failure) = fake.record("/tts_to_audio/", fields.clone()) {
        return failure;
    }
    for required in ["text", "language"] {
        if !fields.contains_key(required) {
            return error(
                422,
                json!({"detail": [{"loc": ["body", required], "msg": "Field required", "type": "missing"}]}),
            );
        }
    }
    if !["en", "de", "fr", "es", "it"].contains(&fields["language"].as_str()) {
        return error(
            400,
            json!({"detail": "Language code sent is either unsupported or misspelled."}),
        );
    }
    let speaker = fields.get("speaker_wav").cloned().unwrap_or_default();
    // A name in its speakers folder, or a path it can read (it runs on this machine).
    let file = fake
        .voices
        .get(&speaker)
        .cloned()
        .or_else(|| Some(PathBuf::from(&speaker)).filter(|p| p.is_absolute() && p.exists()));
    match file.and_then(|f| std::fs::read(f).ok()) {
        Some(bytes) => wav(bytes),
        None => error(
            500,
            json!({"detail": format!("Error: Speaker {speaker} not found")}),
        ),
    }
}

async fn openai_models() -> Json<Value> {
    Json(json!({"object": "list", "data": [{"id": "tts-1", "object": "model"}]}))
}

async fn openai_speech(State(fake): State<Arc<Fake>>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or_default();
    let fields = text_fields(&body);
    if let Some(failure) = fake.record("/v1/audio/speech", fields.clone()) {
        return failure;
    }
    let voice = fields.get("voice").cloned().unwrap_or_default();
    match fake.voices.get(&voice).and_then(|f| std::fs::read(f).ok()) {
        Some(bytes) => wav(bytes),
        None => error(
            400,
            json!({"error": {"message": format!("voice {voice:?} is not configured"), "type": "invalid_request_error", "param": "voice"}}),
        ),
    }
}

impl FakeCloning {
    /// Starts a fake of `kind`; `voices` are its speakers (XTTS) or named voices (OpenAI).
    pub async fn start(kind: Kind, voices: HashMap<String, PathBuf>) -> FakeCloning {
        let fake = Arc::new(Fake {
            kind,
            voices,
            inner: Mutex::new(Inner::default()),
        });
        let app = match kind {
            Kind::Chatterbox => Router::new()
                .route("/health", get(chatterbox_health))
                .route("/v1/audio/speech/upload", post(chatterbox_upload))
                // Chatterbox takes uploads up to 10 MB, more than axum's default body limit.
                .layer(axum::extract::DefaultBodyLimit::max(12 * 1024 * 1024)),
            Kind::Xtts => Router::new()
                .route("/speakers_list", get(xtts_speakers))
                .route("/tts_to_audio/", post(xtts_tts)),
            Kind::OpenAi => Router::new()
                .route("/v1/models", get(openai_models))
                .route("/v1/audio/speech", post(openai_speech)),
        }
        .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeCloning {
            addr,
            fake,
            _task: task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn kind(&self) -> Kind {
        self.fake.kind
    }

    /// The requests so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.fake.inner.lock().unwrap().seen.clone()
    }

    /// The next speech request gets this status and JSON body.
    pub fn fail_next(&self, status: u16, body: Value) {
        self.fake.inner.lock().unwrap().fail_next = Some((status, body));
    }
}
