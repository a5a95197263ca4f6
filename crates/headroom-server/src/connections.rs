//! Connections: how many are open at once, how much each buffers, and how long a client may
//! take over a request's headers. Each accepted connection holds a [`ConnectionPermit`] for as long as it is open;
//! one beyond `server.max_connections` is answered 503 `too_many_connections` (the
//! [`HttpError`] path, with `Retry-After`) and closed without its request being read. Headers
//! must arrive within the read timeout (hyper's `header_read_timeout`, which also ends a
//! keep-alive connection left idle that long), so a client that opens a connection and sends
//! nothing, or a header a byte at a time, gives its permit back. An answer must be taken: a
//! client that takes none of one for the write timeout is disconnected
//! ([`crate::write_deadline`]), and the kernel keeps little unsent for it meanwhile.

use crate::write_deadline::{is_not_reading, limit_unsent, ClientTaking, WriteDeadline};
use crate::HttpError;
use axum::body::Body;
use axum::http::{Request, Response};
use axum::Router;
use headroom_core::metrics::Metrics;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// At most `limit` connections open at once.
#[derive(Debug, Clone)]
pub struct ConnectionLimit {
    permits: Arc<Semaphore>,
    limit: usize,
}

/// One open connection's place, given back when dropped.
#[derive(Debug)]
pub struct ConnectionPermit(#[allow(dead_code)] OwnedSemaphorePermit);

impl ConnectionLimit {
    pub fn new(limit: usize) -> ConnectionLimit {
        let limit = limit.clamp(1, Semaphore::MAX_PERMITS);
        ConnectionLimit {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }

    /// A place for one more connection, or `None` when every place is taken.
    pub fn try_admit(&self) -> Option<ConnectionPermit> {
        self.permits
            .clone()
            .try_acquire_owned()
            .ok()
            .map(ConnectionPermit)
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.limit - self.permits.available_permits()
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The answer to a connection beyond the limit.
    pub fn refusal(&self) -> HttpError {
        HttpError::TooManyConnections { limit: self.limit }
    }
}

/// The connection-level settings.
#[derive(Debug, Clone)]
pub struct ConnectionPolicy {
    pub limit: ConnectionLimit,
    /// How long a client may take over a request's headers (and idle between requests).
    pub header_timeout: Duration,
    /// How long an answer may wait on a client that takes none of it
    /// ([`crate::write_deadline`]).
    pub write_timeout: Duration,
}

/// The largest request head (request line and headers) taken; a larger one is refused (431).
pub const MAX_HEAD_BYTES: usize = 32 * 1024;
/// The most a connection buffers, reading (a request's head, a body's next bytes) or writing,
/// so 512 connections that each send a huge head slowly hold at most 32 MiB, not hyper's
/// default of ~400 KiB each.
pub const MAX_CONNECTION_BUFFER: usize = 64 * 1024;

/// Refusals being written at once; beyond them a connection is closed without a word, so
/// refusing costs a bounded amount too.
const MAX_REFUSING: usize = 64;
/// How long a refusal waits for the client to take it.
const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// `response` as HTTP/1.1 bytes, with `Connection: close`.
pub async fn response_bytes(response: Response<Body>) -> Vec<u8> {
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    let mut out = format!(
        "HTTP/1.1 {} {}\r\n",
        parts.status.as_u16(),
        parts.status.canonical_reason().unwrap_or("")
    )
    .into_bytes();
    let framing = [
        axum::http::header::CONTENT_LENGTH,
        axum::http::header::CONNECTION,
    ];
    for (name, value) in parts.headers.iter().filter(|(n, _)| !framing.contains(n)) {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(
        format!(
            "content-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    out.extend_from_slice(&body);
    out
}

/// Writes `refusal` to a connection that will not be served, then closes it, reading (and
/// discarding) a little of what the client sends meanwhile so the close does not reset the
/// connection before the client has read the answer.
async fn refuse(mut stream: TcpStream, refusal: HttpError) {
    use axum::response::IntoResponse;
    let bytes = response_bytes(refusal.into_response()).await;
    let _ = tokio::time::timeout(REFUSAL_LINGER, async {
        stream.write_all(&bytes).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 8192];
        let mut drained = 0;
        while drained < 256 * 1024 {
            match stream.read(&mut sink).await? {
                0 => break,
                n => drained += n,
            }
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
}

/// Accepts connections on `listener` and serves `app` on each under `policy`, until
/// `shutdown` resolves; then stops accepting and waits for open requests to finish.
pub async fn serve_connections(
    listener: TcpListener,
    app: Router,
    policy: ConnectionPolicy,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment rather than spin.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(permit) = policy.limit.try_admit() else {
            metrics.count_connection_refusal(crate::error::TOO_MANY_CONNECTIONS, 1);
            tracing::warn!(
                limit = policy.limit.limit(),
                "refused a connection: every place is taken"
            );
            if let Ok(place) = refusing.clone().try_acquire_owned() {
                let refusal = policy.limit.refusal();
                tokio::spawn(async move {
                    refuse(stream, refusal).await;
                    drop(place);
                });
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        if let Err(e) = limit_unsent(&stream) {
            tracing::debug!(error = %e, "cannot limit the bytes kept unsent for a connection");
        }
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(policy.header_timeout)
            .max_header_size(MAX_HEAD_BYTES)
            .max_buf_size(MAX_CONNECTION_BUFFER);
        // Each request on the connection can see whether its socket waits on the client.
        let taking = ClientTaking::new();
        let io = TokioIo::new(WriteDeadline::new(
            stream,
            policy.write_timeout,
            taking.clone(),
        ));
        let app = TowerToHyperService::new(app.clone());
        let service = hyper::service::service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(taking.clone());
            hyper::service::Service::call(&app, request)
        });
        let conn = builder.serve_connection(io, service);
        let conn = graceful.watch(conn);
        let metrics = metrics.clone();
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                if e.is_timeout() {
                    metrics.count_connection_refusal(crate::error::HEADER_TIMEOUT, 1);
                    tracing::debug!("closed a connection whose headers did not arrive in time");
                } else if let Some(not_reading) = is_not_reading(&e) {
                    metrics.count_connection_refusal(crate::error::CLIENT_NOT_READING, 1);
                    tracing::warn!("{not_reading}");
                } else {
                    tracing::debug!(error = %e, "a connection ended with an error");
                }
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;

    #[test]
    fn places_are_given_back_when_their_connections_end() {
        let limit = ConnectionLimit::new(2);
        let a = limit.try_admit().unwrap();
        let _b = limit.try_admit().unwrap();
        assert!(limit.try_admit().is_none());
        assert_eq!(limit.open(), 2);
        drop(a);
        assert_eq!(limit.open(), 1);
        assert!(limit.try_admit().is_some());
    }

    #[tokio::test]
    async fn the_refusal_is_an_openai_shaped_503_that_closes_the_connection() {
        let bytes = response_bytes(ConnectionLimit::new(3).refusal().into_response()).await;
        let text = String::from_utf8(bytes).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
            "{head}"
        );
        let head = head.to_ascii_lowercase();
        assert!(head.contains("\r\nconnection: close"), "{head}");
        assert!(head.contains("\r\nretry-after: 1"), "{head}");
        assert!(
            head.contains(&format!("\r\ncontent-length: {}", body.len())),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], "too_many_connections");
        assert_eq!(body["error"]["type"], "server_error");
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("3 connections"));
    }
}
