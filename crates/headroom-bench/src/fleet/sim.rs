//! A simulated OpenAI-compatible text server on loopback, for `headroom bench fleet`'s
//! simulated mode: `slots` requests generate at once, each at a fixed token rate after a fixed
//! first-token delay, whatever the machine's CPU is doing, so the lane's routing can be
//! measured apart from the CPU (three real llama-servers on two cores mostly measure the
//! cores). Further requests wait for a slot without an answer, as llama-server's deferred ones
//! do. It answers `/v1/models`, `/props` (its slots, as llama-server says them), `/health` and
//! streamed `/v1/chat/completions`; [`SimulatedUpstream::kill`] drops its listener and every
//! connection mid-stream, as a killed server does.
//!
//! Plain HTTP/1.1 over tokio, one request per connection: the bench links no HTTP server.

use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a simulated server generates.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct SimulatedServer {
    /// Requests generating at once (llama-server's `--parallel`).
    pub slots: usize,
    /// Tokens a second each request gets, however many run.
    pub tokens_per_s: f64,
    /// From a slot to the first token (prefill).
    pub first_token_ms: u64,
    /// The context it says it has, per slot.
    pub context_tokens: u32,
}

impl Default for SimulatedServer {
    fn default() -> Self {
        SimulatedServer {
            slots: 2,
            tokens_per_s: 100.0,
            first_token_ms: 20,
            context_tokens: 2048,
        }
    }
}

/// The longest request head and body the simulated server reads.
const MAX_REQUEST_BYTES: usize = 1 << 20;

/// One simulated server, running until killed or dropped.
pub struct SimulatedUpstream {
    addr: SocketAddr,
    stop: CancellationToken,
    accept: Option<JoinHandle<()>>,
    served: Arc<AtomicUsize>,
}

impl SimulatedUpstream {
    /// Starts one on a free loopback port.
    pub async fn start(server: SimulatedServer) -> std::io::Result<SimulatedUpstream> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let served = Arc::new(AtomicUsize::new(0));
        let shared = Arc::new(Shared {
            server,
            slots: Semaphore::new(server.slots.max(1)),
            served: served.clone(),
        });
        let accept = tokio::spawn(accept_loop(listener, shared, stop.clone()));
        Ok(SimulatedUpstream {
            addr,
            stop,
            accept: Some(accept),
            served,
        })
    }

    /// Its OpenAI-compatible base URL.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Chat requests it answered.
    pub fn served(&self) -> usize {
        self.served.load(Ordering::Relaxed)
    }

    /// Stops at once: the port refuses connections and every open stream breaks off.
    pub async fn kill(&mut self) {
        self.stop.cancel();
        if let Some(accept) = self.accept.take() {
            let _ = accept.await;
        }
    }
}

impl Drop for SimulatedUpstream {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(accept) = self.accept.take() {
            accept.abort();
        }
    }
}

struct Shared {
    server: SimulatedServer,
    slots: Semaphore,
    served: Arc<AtomicUsize>,
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: CancellationToken) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => {
                    let _ = socket.set_nodelay(true);
                    connections.spawn(serve_connection(socket, shared.clone()));
                }
                Err(e) => tracing::debug!(error = %e, "simulated upstream: accept failed"),
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    // Every connection ends with the server: open streams break off mid-reply.
    connections.shutdown().await;
}

/// Reads one request: its method, path and body.
async fn read_request(socket: &mut TcpStream) -> Option<(String, String, Vec<u8>)> {
    let mut buf = Vec::with_capacity(4096);
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > MAX_REQUEST_BYTES {
            return None;
        }
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split_whitespace();
    let (method, path) = (first.next()?.to_string(), first.next()?.to_string());
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST_BYTES);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 4096];
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Some((method, path, body))
}

async fn respond_json(socket: &mut TcpStream, status: &str, body: &Value) {
    let body = body.to_string();
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = socket.write_all(response.as_bytes()).await;
    let _ = socket.shutdown().await;
}

/// One HTTP/1.1 chunk of the event stream.
fn event(data: &str) -> Vec<u8> {
    let payload = format!("data: {data}\n\n");
    let mut out = format!("{:x}\r\n", payload.len()).into_bytes();
    out.extend_from_slice(payload.as_bytes());
    out.extend_from_slice(b"\r\n");
    out
}

async fn serve_connection(mut socket: TcpStream, shared: Arc<Shared>) {
    let Some((method, path, body)) = read_request(&mut socket).await else {
        return;
    };
    let server = shared.server;
    let path = path.split('?').next().unwrap_or_default();
    match (method.as_str(), path) {
        ("GET", "/health") => respond_json(&mut socket, "200 OK", &json!({"status": "ok"})).await,
        ("GET", "/props") => {
            respond_json(
                &mut socket,
                "200 OK",
                &json!({
                    "total_slots": server.slots,
                    "default_generation_settings": {"n_ctx": server.context_tokens},
                }),
            )
            .await
        }
        ("GET", "/v1/models") => {
            respond_json(
                &mut socket,
                "200 OK",
                &json!({"object": "list", "data": [{"id": "simulated", "object": "model"}]}),
            )
            .await
        }
        ("POST", "/v1/chat/completions") => {
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let tokens = request
                .get("max_tokens")
                .or_else(|| request.get("max_completion_tokens"))
                .and_then(Value::as_u64)
                .unwrap_or(16)
                .clamp(1, 100_000);
            // Wait for a slot before answering, as llama-server holds a deferred request.
            let Ok(_slot) = shared.slots.acquire().await else {
                return;
            };
            shared.served.fetch_add(1, Ordering::Relaxed);
            stream_reply(&mut socket, server, tokens).await;
        }
        _ => {
            respond_json(
                &mut socket,
                "404 Not Found",
                &json!({"error": {"message": "not found"}}),
            )
            .await
        }
    }
}

async fn stream_reply(socket: &mut TcpStream, server: SimulatedServer, tokens: u64) {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let started = Instant::now();
    let first = Duration::from_millis(server.first_token_ms);
    let per_token = Duration::from_secs_f64(1.0 / server.tokens_per_s.max(0.001));
    let chunk = |delta: Value, finish: Value| {
        json!({
            "object": "chat.completion.chunk",
            "model": "simulated",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
        .to_string()
    };
    for i in 0..tokens {
        // On a fixed schedule from the slot's start, so the rate holds however late a wake-up.
        tokio::time::sleep_until(started + first + per_token.mul_f64(i as f64)).await;
        let piece = chunk(json!({"content": format!("tok{i} ")}), Value::Null);
        if socket.write_all(&event(&piece)).await.is_err() {
            return;
        }
    }
    let mut tail = event(&chunk(json!({}), json!("length")));
    tail.extend(event(
        &json!({
            "object": "chat.completion.chunk",
            "model": "simulated",
            "choices": [],
            "usage": {"prompt_tokens": 16, "completion_tokens": tokens, "total_tokens": 16 + tokens},
        })
        .to_string(),
    ));
    tail.extend(event("[DONE]"));
    tail.extend_from_slice(b"0\r\n\r\n");
    let _ = socket.write_all(&tail).await;
    let _ = socket.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use headroom_core::llm::{ChatMessage, ChatRequest, LlmClient};

    fn request(max_tokens: u32) -> ChatRequest {
        let mut r = ChatRequest::new(vec![ChatMessage::new("user", "hello")]);
        r.max_tokens = Some(max_tokens);
        r
    }

    #[tokio::test]
    async fn it_says_its_slots_and_streams_the_tokens_asked_for() {
        let sim = SimulatedUpstream::start(SimulatedServer {
            slots: 3,
            tokens_per_s: 1000.0,
            first_token_ms: 1,
            context_tokens: 1024,
        })
        .await
        .unwrap();
        let client = LlmClient::new(&sim.base_url(), None).unwrap();
        let info = client.server_info().await.unwrap();
        assert_eq!((info.slots, info.context_tokens), (Some(3), Some(1024)));
        assert_eq!(info.models[0].id, "simulated");
        client.health().await.unwrap();
        let mut stream = client.stream_chat(&request(5)).await.unwrap();
        let mut texts = 0;
        let mut usage = None;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.unwrap();
            texts += usize::from(chunk.text().is_some());
            usage = usage.or(chunk.usage);
        }
        assert_eq!(texts, 5);
        assert_eq!(usage.unwrap().completion_tokens, 5);
        assert_eq!(sim.served(), 1);
    }

    #[tokio::test]
    async fn a_killed_server_breaks_its_streams_and_refuses_connections() {
        let mut sim = SimulatedUpstream::start(SimulatedServer {
            tokens_per_s: 50.0,
            ..SimulatedServer::default()
        })
        .await
        .unwrap();
        let client = LlmClient::new(&sim.base_url(), None).unwrap();
        let mut stream = client.stream_chat(&request(1000)).await.unwrap();
        while stream.next().await.unwrap().unwrap().text().is_none() {}
        sim.kill().await;
        let mut broke = false;
        while let Some(item) = stream.next().await {
            broke |= item.is_err();
        }
        assert!(broke, "the stream ends with an error, not a clean end");
        assert!(client.stream_chat(&request(5)).await.is_err());
    }
}
