//! `headroom serve` as its own process, the way a user starts it, for tests that load it from
//! another process.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, BufReader};

/// A running `headroom serve`, killed when dropped.
pub struct ServeProcess {
    child: tokio::process::Child,
    /// Its base URL, e.g. `http://127.0.0.1:41234/v1`.
    pub base: String,
    /// Everything it has written to stderr so far.
    stderr: Arc<Mutex<String>>,
}

/// How to start it beyond the defaults.
#[derive(Debug, Default, Clone)]
pub struct ServeOptions<'a> {
    /// Further command-line arguments.
    pub args: &'a [&'a str],
    /// The config file's text (`# defaults` when empty).
    pub config: &'a str,
    /// Environment variables to set.
    pub env: &'a [(&'a str, &'a str)],
}

/// A process's resident memory now and at its peak (`VmRSS`, `VmHWM`), in KiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resident {
    pub now_kib: u64,
    pub peak_kib: u64,
}

impl ServeProcess {
    /// Starts `binary serve --listen 127.0.0.1:0 --upstream URL` plus `args`, with an empty
    /// config file of its own, and returns once it has printed its address.
    pub async fn start(binary: &Path, upstream: &str, args: &[&str]) -> ServeProcess {
        Self::start_with(
            binary,
            upstream,
            ServeOptions {
                args,
                ..ServeOptions::default()
            },
        )
        .await
    }

    /// As [`ServeProcess::start`], with a config file's text and environment variables.
    pub async fn start_with(
        binary: &Path,
        upstream: &str,
        options: ServeOptions<'_>,
    ) -> ServeProcess {
        crate::models_dir();
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        let config = std::env::temp_dir().join(format!(
            "headroom-serve-process-{}-{}.toml",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        let text = if options.config.is_empty() {
            "# defaults\n"
        } else {
            options.config
        };
        std::fs::write(&config, text).unwrap();
        let mut command = tokio::process::Command::new(binary);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--upstream", upstream])
            .args(options.args)
            .env("HEADROOM_CONFIG", &config)
            .env_remove("HEADROOM_LLM_URL")
            .env_remove("HEADROOM_SERVE_TOKEN");
        for (name, value) in options.env {
            command.env(name, value);
        }
        let mut child = command
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("headroom runs");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let base = loop {
            let line = lines.next_line().await.unwrap().unwrap_or_else(|| {
                panic!(
                    "serve exited before printing its address:\n{}",
                    stderr.lock().unwrap()
                )
            });
            stderr.lock().unwrap().push_str(&format!("{line}\n"));
            if let Some(rest) = line.strip_prefix("headroom: serving ") {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        let kept = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut kept = kept.lock().unwrap();
                // Enough to search; a long run's log is not kept whole.
                if kept.len() < 4 * 1024 * 1024 {
                    kept.push_str(&line);
                    kept.push('\n');
                }
            }
        });
        ServeProcess {
            child,
            base,
            stderr,
        }
    }

    /// What the server has written to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Its resident memory now and at its peak, from `/proc` (Linux).
    pub fn resident(&self) -> Resident {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in /proc status"))
        };
        Resident {
            now_kib: field("VmRSS:"),
            peak_kib: field("VmHWM:"),
        }
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

    /// `/headroom/lanes` once neither lane has anything in flight. A job whose client went
    /// away stops at its next safe point, a moment after the client stops waiting; this waits
    /// for that, and fails the test naming the lanes when it does not come within `within`.
    pub async fn lanes_when_idle(
        &self,
        http: &reqwest::Client,
        within: std::time::Duration,
    ) -> serde_json::Value {
        let url = format!("{}/headroom/lanes", self.base);
        let deadline = std::time::Instant::now() + within;
        loop {
            let lanes: serde_json::Value =
                http.get(&url).send().await.unwrap().json().await.unwrap();
            let idle = ["text", "audio"]
                .iter()
                .all(|lane| lanes[lane]["occupancy"]["in_flight"].as_u64() == Some(0));
            if idle {
                return lanes;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the lanes were still busy {within:?} after the load stopped: {lanes}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The server root (where `/metrics` and `/health` live).
    pub fn root(&self) -> String {
        self.base.trim_end_matches("/v1").to_string()
    }
}
