//! `headroom serve`: a loopback OpenAI-compatible endpoint over the process's shared lanes, so
//! any OpenAI client gets Headroom's admission control in front of the text model, and its
//! speech endpoints run on the same audio lane the text lane yields to.
//!
//! Overload is answered at once: HTTP 429 with `Retry-After` and an OpenAI-shaped error whose
//! `code` is the rejection's reason code, plus the full rejection under `error.headroom`
//! ([`HttpError`]).
//!
//! ```no_run
//! use headroom_core::config::Config;
//! use headroom_server::{bind_loopback, serve, ServerState};
//! use headroom_services::{Environment, Services};
//! use std::sync::Arc;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let env = Environment::from_vars(|_| None, std::env::temp_dir);
//! let services = Services::new(Config::default(), env);
//! let state = Arc::new(ServerState::from_services(&services)?);
//! let listener = bind_loopback("127.0.0.1:8089").await?;
//! serve(listener, state, async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```
//!
//! Policies compose like tower layers, each small, named and tested alone, and are stacked in
//! one place: per connection in [`serve`] ([`connections`]: a place among
//! `server.max_connections`, headers within the read timeout, answers taken within the write
//! timeout by [`write_deadline`]), per request in [`router`]
//! ([`guard`], then [`auth`], then [`min_rate`] on the body), and where a handler holds a body in
//! memory, [`body_budget`].
//!
//! | module | for |
//! |---|---|
//! | [`error`] | [`HttpError`]: every rejection and error as status, OpenAI body and `Retry-After` |
//! | [`connections`] | the connection limit, the header timeout, the accept loop |
//! | [`guard`] | loopback `Host` only, no foreign browser `Origin`, JSON or multipart bodies |
//! | [`auth`] | the optional bearer token on every route but `/health` |
//! | [`min_rate`] | a body sent below the minimum rate is cut off |
//! | [`write_deadline`] | a client that takes none of its answer for the write timeout is disconnected |
//! | [`body_budget`] | one bound on the request bodies held in memory at once |
//! | [`state`] | [`ServerState`], borrowed from the services |
//! | `chat` | `/v1/chat/completions` (typed, unknown fields passed through, SSE), models, health, metrics, lanes |
//! | `audio` | `/v1/audio/transcriptions` and `/v1/audio/speech` on the audio lane |
//! | `memory` | the speech models held (`/v1/headroom/memory`) and "free memory" |

mod audio;
pub mod auth;
pub mod body_budget;
mod chat;
pub mod connections;
pub mod error;
pub mod guard;
mod memory;
pub mod min_rate;
pub mod state;
pub mod write_deadline;

pub use error::{rejection_status, HttpError};
pub use state::ServerState;

use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::Router;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use tokio::net::TcpListener;

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

/// The routes behind the request policies, for a server listening on `port`. From the
/// outside in: the [`guard`] (loopback `Host`, no foreign `Origin`, JSON or multipart
/// bodies), the token ([`auth`]), the body's minimum rate ([`min_rate`]).
pub fn router(state: Arc<ServerState>, port: u16) -> Router {
    let guard = Arc::new(guard::LoopbackGuard {
        port,
        allowed_origins: state.allowed_origins.clone(),
    });
    let gate = (Arc::new(state.token.clone()), state.metrics.clone());
    let min_rate = state.min_rate;
    Router::new()
        .route("/v1/chat/completions", post(chat::completions))
        .route("/v1/models", get(chat::models))
        .route("/health", get(chat::health))
        .route("/metrics", get(chat::metrics))
        .route("/v1/headroom/lanes", get(chat::lanes))
        .route("/v1/headroom/memory", get(memory::memory))
        .route("/v1/headroom/memory/free", post(memory::free_memory))
        .merge(audio::routes(state.clone()))
        .with_state(state)
        .layer(from_fn_with_state(min_rate, min_rate::min_rate))
        .layer(from_fn_with_state(gate, auth::require_token))
        .layer(from_fn_with_state(guard, guard::guard))
}

/// Serves until `shutdown` resolves, each connection under the [`connections`] policy and
/// each request through the [`router`]; then stops accepting and lets open requests finish.
pub async fn serve(
    listener: TcpListener,
    state: Arc<ServerState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let port = listener.local_addr()?.port();
    let policy = state.connections.clone();
    let metrics = state.metrics.clone();
    connections::serve_connections(listener, router(state, port), policy, metrics, shutdown).await
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

    /// Serves `state` on an ephemeral loopback port: for benchmarks, tests and embedding.
    pub async fn ephemeral(state: ServerState) -> Result<Self, ServerError> {
        let state = Arc::new(state);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
