//! The official Python clients (openai, mcp) driven from tests: a script of `tests/python/`
//! run against a server, and the JSON it prints read back.

use serde_json::Value;
use std::ffi::OsStr;
use std::path::PathBuf;

/// The path of `name` in `tests/python/`.
pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(name)
}

/// Runs `tests/python/<name>` with `args` and reads the JSON it prints. A script that fails
/// fails the test with its stderr and `context` (a server's log, say); one that prints no JSON
/// fails it with what it printed.
pub async fn run(name: &str, args: &[&OsStr], context: &str) -> Value {
    let out = tokio::process::Command::new("python3")
        .arg(script(name))
        .args(args)
        .output()
        .await
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{name} failed (are its packages installed? scripts/install-test-deps does it):\n{}\n{context}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{name} printed no JSON ({e}):\n{stdout}"))
}
