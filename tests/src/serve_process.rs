//! `headroom serve` as its own process, the way a user starts it, for tests that load it from
//! another process.

use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, BufReader};

/// A running `headroom serve`, killed when dropped.
pub struct ServeProcess {
    child: tokio::process::Child,
    /// Its base URL, e.g. `http://127.0.0.1:41234/v1`.
    pub base: String,
}

impl ServeProcess {
    /// Starts `binary serve --listen 127.0.0.1:0 --upstream URL` plus `args`, with an empty
    /// config file of its own, and returns once it has printed its address.
    pub async fn start(binary: &Path, upstream: &str, args: &[&str]) -> ServeProcess {
        assert!(
            std::env::var_os("HEADROOM_MODELS_DIR").is_some(),
            "HEADROOM_MODELS_DIR is not set: run the tests with scripts/test"
        );
        let config = std::env::temp_dir().join(format!(
            "headroom-serve-process-{}.toml",
            std::process::id()
        ));
        std::fs::write(&config, "# defaults\n").unwrap();
        let mut child = tokio::process::Command::new(binary)
            .args(["serve", "--listen", "127.0.0.1:0", "--upstream", upstream])
            .args(args)
            .env("HEADROOM_CONFIG", &config)
            .env_remove("HEADROOM_LLM_URL")
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("headroom runs");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let base = loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("serve printed its address before exiting");
            if let Some(rest) = line.strip_prefix("headroom: serving ") {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        ServeProcess { child, base }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("the server is running")
    }

    /// The value of one series in `/metrics`, named with its labels as exposed (e.g.
    /// `headroom_runtime_tasks`); fails the test when the server does not export it.
    pub async fn metric(&self, http: &reqwest::Client, series: &str) -> f64 {
        let text = http
            .get(format!("{}/metrics", self.root()))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let prefix = format!("{series} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    }

    /// The server root (where `/metrics` and `/health` live).
    pub fn root(&self) -> String {
        self.base.trim_end_matches("/v1").to_string()
    }
}
