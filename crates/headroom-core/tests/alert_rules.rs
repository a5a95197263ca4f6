//! The committed Prometheus rules are valid and behave as their unit tests say:
//! `promtool check rules` and `promtool test rules` (Debian's `prometheus` package).

use headroom_base::process::Tool;
use std::path::{Path, PathBuf};

fn deploy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/prometheus")
        .canonicalize()
        .expect("deploy/prometheus exists")
}

fn promtool(subcommand: &'static str, file: &Path) -> String {
    let finished = Tool::new("promtool")
        .subcommand(subcommand)
        .subcommand("rules")
        .path(file)
        .run(b"")
        .unwrap_or_else(|e| {
            if e.is_not_found() {
                panic!(
                    "promtool is not installed: install prometheus (Debian package) or run \
                     scripts/install-test-deps"
                )
            }
            panic!("promtool: {e}")
        });
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&finished.stdout),
        String::from_utf8_lossy(&finished.stderr)
    );
    assert!(
        finished.status.success(),
        "promtool {subcommand} rules {} failed:\n{output}",
        file.display()
    );
    output
}

#[test]
fn signals_rules_pass_promtool_check() {
    let output = promtool("check", &deploy().join("headroom-rules.yml"));
    assert!(output.contains("SUCCESS"), "{output}");
}

#[test]
fn signals_rules_pass_their_promtool_unit_tests() {
    let output = promtool("test", &deploy().join("headroom-rules.test.yml"));
    assert!(output.contains("SUCCESS"), "{output}");
}
