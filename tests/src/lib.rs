//! Helpers for Headroom's cross-process tests: a fault-injecting OpenAI-compatible server on
//! loopback, a real llama-server, LiteLLM's proxy in front of them, and a microphone that speaks a
//! file.

pub mod chat;
pub mod conversation;
pub mod fake_cloning;
pub mod fake_upstream;
pub mod litellm;
pub mod llama;
pub mod microphone;
pub mod python_client;
pub mod redirector;
pub mod serve_process;

use headroom_core::config::Config;
use headroom_server::{RunningServer, ServerState};
use headroom_services::{Environment, Services};
use std::sync::Arc;

/// The services as a binary builds them, from this test process's environment (read here, at
/// the edge, as the binaries do).
pub fn services(config: Config) -> Arc<Services> {
    Services::new(
        config,
        Environment::from_vars(|name| std::env::var_os(name), std::env::temp_dir),
    )
}

/// Services whose configured text model server is `url`.
pub fn services_for(url: &str) -> Arc<Services> {
    let mut config = Config::default();
    config.llm.url = url.to_string();
    services(config)
}

/// `headroom serve` in process on an ephemeral loopback port, over `services`' configured text
/// lane (asked for its model and context first, as `headroom serve` does).
pub async fn serve(services: &Services) -> RunningServer {
    let state = ServerState::from_services(services).expect("the configured URL is valid");
    let _ = state.text_lane.discover().await;
    RunningServer::ephemeral(state)
        .await
        .expect("a loopback port")
}

/// A loopback URL where nothing listens (a server that is down).
pub fn closed_port_url() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}/v1")
}

/// How long [`until`] waits for a condition before failing the test.
pub const UNTIL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// Polls `holds` until it is true; fails the test naming `what` after [`UNTIL_DEADLINE`], so a
/// regression fails CI instead of hanging it. For conditions nothing announces (a lane's
/// occupancy, a server's count); where a channel announces the change, wait on it instead.
pub async fn until<F, Fut>(what: &str, mut holds: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let give_up = tokio::time::Instant::now() + UNTIL_DEADLINE;
    while !holds().await {
        assert!(
            tokio::time::Instant::now() < give_up,
            "waited {UNTIL_DEADLINE:?} for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// [`until`] for a condition read without waiting (a count, a file's length).
pub async fn until_true(what: &str, mut holds: impl FnMut() -> bool) {
    until(what, || std::future::ready(holds())).await
}

/// The folder `scripts/test` installs the speech models into (`HEADROOM_MODELS_DIR`); fails
/// the test saying how to run it when it is not set, rather than letting a model's absence
/// look like a bug.
pub fn models_dir() -> std::path::PathBuf {
    std::env::var_os("HEADROOM_MODELS_DIR")
        .map(std::path::PathBuf::from)
        .expect("HEADROOM_MODELS_DIR is not set: run the tests with scripts/test, which installs the models")
}
