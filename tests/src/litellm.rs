//! LiteLLM's proxy (PyPI `litellm[proxy]`, as `scripts/install-test-deps` installs it in a venv
//! of its own) as a router in front of real llama-servers, the way a studio already runs one.
//! Each test starts its own on a free loopback port, offline; dropping it stops it.
//!
//! It serves two model groups over the same llama-servers, least-busy routing:
//! - [`LiteLlmProxy::MODEL`], no limits of its own: each request goes to the deployment with
//!   the fewest in flight;
//! - [`LiteLlmProxy::RATIONED`], one request a minute per deployment (`rpm: 1`): once each has
//!   had its request, the router has no deployment left and answers 429.

use crate::llama::LlamaServer;
use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct LiteLlmProxy {
    child: Child,
    pub port: u16,
    /// The proxy's master key: clients (Headroom) send it as their bearer key.
    pub key: String,
    pub log: PathBuf,
    config: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl LiteLlmProxy {
    /// The model group with no limits of its own.
    pub const MODEL: &'static str = "smollm2";
    /// The model group whose deployments take one request a minute each.
    pub const RATIONED: &'static str = "smollm2-rationed";

    /// Starts `litellm --config` in front of `servers` and waits (bounded) until it answers
    /// `/health/readiness` and lists its models.
    pub async fn in_front_of(servers: &[&LlamaServer]) -> LiteLlmProxy {
        let mut yaml = String::from("model_list:\n");
        for (group, limit) in [(Self::MODEL, ""), (Self::RATIONED, ", rpm: 1")] {
            for server in servers {
                writeln!(
                    yaml,
                    "  - model_name: {group}\n    litellm_params: {{model: openai/smollm2, \
                     api_base: \"{}\", api_key: not-needed{limit}}}",
                    server.base_url()
                )
                .unwrap();
            }
        }
        // Pre-call checks make the router skip a deployment over its rpm (without them only
        // the usage-based strategies look at it).
        yaml.push_str(
            "router_settings:\n  routing_strategy: least-busy\n  enable_pre_call_checks: true\n",
        );
        Self::start(yaml).await
    }

    /// The model group of [`LiteLlmProxy::for_transcription`].
    pub const TRANSCRIPTION: &'static str = "whisper";

    /// Starts the proxy in front of OpenAI-compatible transcription servers (`headroom serve`
    /// workers, by base URL), as one model group, least-busy routing.
    pub async fn for_transcription(servers: &[String]) -> LiteLlmProxy {
        let mut yaml = String::from("model_list:\n");
        for base in servers {
            writeln!(
                yaml,
                "  - model_name: {}\n    litellm_params: {{model: openai/whisper-1, \
                 api_base: \"{base}\", api_key: not-needed}}\n    model_info: {{mode: audio_transcription}}",
                Self::TRANSCRIPTION
            )
            .unwrap();
        }
        yaml.push_str("router_settings:\n  routing_strategy: least-busy\n");
        Self::start(yaml).await
    }

    /// Starts `litellm --config` with `model_list` (and its router settings) and waits (bounded)
    /// until it answers `/health/readiness` and lists its models.
    async fn start(model_list: String) -> LiteLlmProxy {
        let litellm = std::env::var_os("HEADROOM_LITELLM").unwrap_or_else(|| {
            panic!(
                "HEADROOM_LITELLM is not set: run the tests with scripts/test, which installs \
                 LiteLLM's proxy (or eval \"$(scripts/install-test-deps)\" first)"
            )
        });
        let litellm = PathBuf::from(litellm);
        assert!(
            litellm.exists(),
            "HEADROOM_LITELLM points to {}, which does not exist",
            litellm.display()
        );
        let port = free_port();
        let mut yaml = model_list;
        yaml.push_str("litellm_settings:\n  telemetry: false\n");
        let config = std::env::temp_dir().join(format!("headroom-litellm-{port}.yaml"));
        std::fs::write(&config, yaml).unwrap();
        let log = std::env::temp_dir().join(format!("headroom-litellm-{port}.log"));
        let log_file = std::fs::File::create(&log).unwrap();
        let key = format!("sk-headroom-test-{port}");
        let child = Command::new(&litellm)
            .arg("--config")
            .arg(&config)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--num_workers", "1"])
            .env("LITELLM_MASTER_KEY", &key)
            // Offline: the model cost map bundled with the package, not fetched at start
            // (LITELLM_OFFLINE_MODE is the newer releases' switch for every such fetch); its
            // tiktoken files are bundled too.
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            .env("LITELLM_OFFLINE_MODE", "true")
            .env("NO_PROXY", "127.0.0.1,localhost")
            .env("no_proxy", "127.0.0.1,localhost")
            .env_remove("DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().unwrap())
            .stderr(log_file)
            .spawn()
            .expect("litellm starts");
        let proxy = LiteLlmProxy {
            child,
            port,
            key,
            log,
            config,
        };
        proxy.wait_ready().await;
        proxy
    }

    async fn wait_ready(&self) {
        let http = reqwest::Client::new();
        let readiness = format!("http://127.0.0.1:{}/health/readiness", self.port);
        let models = format!("{}/models", self.base_url());
        let deadline = Instant::now() + Duration::from_secs(180);
        // Polling an external process until it reports ready: there is no event to wait on.
        // Importing the proxy takes 5 to 30 s on 2 cores.
        loop {
            let ready = match http.get(&readiness).send().await {
                Ok(r) if r.status().is_success() => http
                    .get(&models)
                    .bearer_auth(&self.key)
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success()),
                _ => false,
            };
            if ready {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "LiteLLM's proxy did not become ready in 180 s; see {}",
                self.log.display()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Its OpenAI-compatible base URL, e.g. `http://127.0.0.1:41234/v1`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// What it has logged so far (for failure messages).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for LiteLlmProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.config);
    }
}
