//! A real llama-server (llama.cpp) with SmolLM2-135M, as `scripts/install-test-deps` builds
//! and caches it. Each test starts its own on a free loopback port; dropping it stops it.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct LlamaServer {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

fn required_env(name: &str) -> PathBuf {
    let value = std::env::var_os(name).unwrap_or_else(|| {
        panic!(
            "{name} is not set: run the tests with scripts/test, which builds llama-server and \
             fetches the model (or eval \"$(scripts/install-test-deps)\" first)"
        )
    });
    let path = PathBuf::from(value);
    assert!(
        path.exists(),
        "{name} points to {}, which does not exist",
        path.display()
    );
    path
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl LlamaServer {
    /// Starts llama-server with 2 slots (like `--max-num-seqs 2`) and waits until `/health`
    /// answers 200.
    pub async fn start() -> LlamaServer {
        Self::start_with_context(8192).await
    }

    /// Starts llama-server with `-c context -np 2`: each slot gets half the context.
    pub async fn start_with_context(context: u32) -> LlamaServer {
        let binary = required_env("HEADROOM_LLAMA_SERVER");
        let model = required_env("HEADROOM_TEST_GGUF");
        let port = free_port();
        let log = std::env::temp_dir().join(format!("headroom-llama-{port}.log"));
        let log_file = std::fs::File::create(&log).unwrap();
        let child = Command::new(binary)
            .args(["-m"])
            .arg(model)
            .args([
                "--alias",
                "smollm2",
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .args([
                "-c",
                &context.to_string(),
                "-np",
                "2",
                "-t",
                "1",
                "--metrics",
            ])
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .expect("llama-server starts");
        let server = LlamaServer { child, port, log };
        server.wait_ready().await;
        server
    }

    async fn wait_ready(&self) {
        let url = format!("http://127.0.0.1:{}/health", self.port);
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        // Polling an external process until it reports ready: there is no event to wait on.
        loop {
            if let Ok(r) = http.get(&url).send().await {
                if r.status().is_success() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "llama-server did not become ready in 120 s; see {}",
                self.log.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The server's process id (to sample its resident memory on CPU machines).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// One value from llama-server's Prometheus metrics, e.g. `llamacpp:requests_processing`.
    pub async fn metric(&self, name: &str) -> f64 {
        let text = reqwest::get(format!("http://127.0.0.1:{}/metrics", self.port))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|rest| rest.trim().parse().ok())
            })
            .unwrap_or_else(|| panic!("metric {name} not found in:\n{text}"))
    }

    /// Waits (bounded) until a metric satisfies `pred`; llama-server updates its counters
    /// asynchronously, so the test polls the server's own report.
    pub async fn until_metric(
        &self,
        name: &str,
        within: Duration,
        pred: impl Fn(f64) -> bool,
    ) -> f64 {
        let deadline = Instant::now() + within;
        loop {
            let v = self.metric(name).await;
            if pred(v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{name} stayed at {v} for {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Fills `servers`' slots through `proxy`: `each` streams per server, each read until its
/// first words, then checks that every server runs exactly `each` and queues none (the streams
/// are spread, nothing waits behind them). Returns the streams, which hold the slots until dropped.
pub async fn fill_every_slot(
    proxy: &headroom_core::llm::LlmClient,
    servers: &[&LlamaServer],
    each: usize,
) -> Vec<headroom_core::llm::ChatStream> {
    let mut holders = Vec::new();
    for _ in 0..servers.len() * each {
        let mut s = proxy
            .stream_chat(&crate::chat::long_story(400))
            .await
            .unwrap();
        crate::chat::until_first_words(&mut s).await;
        holders.push(s);
    }
    for llama in servers {
        llama
            .until_metric(
                "llamacpp:requests_processing",
                Duration::from_secs(10),
                |v| v == each as f64,
            )
            .await;
        assert_eq!(llama.metric("llamacpp:requests_deferred").await, 0.0);
    }
    holders
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
