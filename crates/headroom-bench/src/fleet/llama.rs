//! Real llama-servers the fleet benchmark starts on free loopback ports (through
//! [`headroom_base::process::Tool`], like every program Headroom starts) and can kill.

use super::FleetBenchError;
use headroom_base::process::{Running, Tool};
use headroom_core::llm::LlmClient;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How to start each llama-server.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LlamaServerConfig {
    pub binary: PathBuf,
    pub gguf: PathBuf,
    /// `-c`: the whole context, split among the slots.
    pub context: u32,
    /// `-np`: requests it runs at once.
    pub slots: usize,
    /// `-t`: threads each server computes with.
    pub threads: usize,
    /// Where each server's output goes (`llama-PORT.log`); discarded without one.
    pub log_dir: Option<PathBuf>,
}

/// How long a llama-server may take to load its model and answer `/health`.
const READY_LIMIT: Duration = Duration::from_secs(120);

/// One running llama-server; killed when dropped.
pub struct LlamaServer {
    running: Running,
    port: u16,
    log: Option<PathBuf>,
}

fn free_port() -> Result<u16, FleetBenchError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(FleetBenchError::Io)?;
    Ok(listener.local_addr().map_err(FleetBenchError::Io)?.port())
}

impl LlamaServer {
    /// Starts one and waits until it answers `/health` (bounded, cancellable).
    pub async fn start(
        config: &LlamaServerConfig,
        cancel: &CancellationToken,
    ) -> Result<LlamaServer, FleetBenchError> {
        let port = free_port()?;
        let log = match &config.log_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).map_err(FleetBenchError::Io)?;
                let log = dir.join(format!("llama-{port}.log"));
                let _ = std::fs::remove_file(&log);
                Some(log)
            }
            None => None,
        };
        let running = Tool::new(&config.binary)
            .path_option("-m", &config.gguf)
            .option("--host", "127.0.0.1")
            .option("--port", port.to_string())
            .option("-c", config.context.to_string())
            .option("-np", config.slots.to_string())
            .option("-t", config.threads.to_string())
            .flag("--metrics")
            .start(log.as_deref())?;
        let mut server = LlamaServer { running, port, log };
        server.wait_ready(cancel).await?;
        Ok(server)
    }

    async fn wait_ready(&mut self, cancel: &CancellationToken) -> Result<(), FleetBenchError> {
        let client = LlmClient::new(&self.base_url(), None)?;
        let deadline = Instant::now() + READY_LIMIT;
        // Polling another process until it says it is ready: it sends no event to wait on.
        loop {
            if client.health().await.is_ok() {
                return Ok(());
            }
            let why = if let Some(status) = self.running.exited() {
                format!("it exited ({status})")
            } else if Instant::now() >= deadline {
                format!("not ready after {} s", READY_LIMIT.as_secs())
            } else {
                tokio::select! {
                    _ = cancel.cancelled() => return Err(FleetBenchError::Cancelled),
                    _ = tokio::time::sleep(Duration::from_millis(100)) => continue,
                }
            };
            return Err(FleetBenchError::NotReady {
                url: self.base_url(),
                why,
                log: self.log_hint(),
            });
        }
    }

    fn log_hint(&self) -> String {
        match &self.log {
            Some(log) => format!("; see {}", log.display()),
            None => String::new(),
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn log(&self) -> Option<&Path> {
        self.log.as_deref()
    }

    /// SIGKILL, as a lost machine: its connections break without a goodbye.
    pub fn kill(&mut self) -> Result<(), FleetBenchError> {
        self.running.kill().map_err(FleetBenchError::Io)?;
        Ok(())
    }
}
