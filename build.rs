// Tauri's build step (config, capabilities, embedded assets). The front end is embedded, so it
// is built first: by scripts/build-ui, or here on a fresh checkout when npm is installed.
use std::path::Path;
use std::process::{exit, Command};

const BUILD_UI: &str = "scripts/build-ui";

fn main() {
    println!("cargo:rerun-if-changed=ui/dist");
    if !Path::new("ui/dist/index.html").exists() {
        build_front_end();
    }
    tauri_build::build()
}

/// Builds `ui/dist` with the repository's own script (exact packages from the lock file, the
/// type check, the front end's tests, the bundle); without npm, or when that fails, stops with
/// one line that says what to run, not a panic.
fn build_front_end() {
    let has_npm = Command::new("npm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_npm {
        stop("the desktop front end (ui/dist) is not built and npm is not installed: install Node.js 20+ with npm, then run scripts/build-ui");
    }
    println!("cargo:warning=ui/dist is missing: building the front end with {BUILD_UI} (npm ci, type check, tests, bundle)");
    match Command::new("bash").arg(BUILD_UI).status() {
        Ok(status) if status.success() => {}
        Ok(status) => stop(&format!(
            "{BUILD_UI} failed ({status}); run it yourself to see why, then build again"
        )),
        Err(e) => stop(&format!("cannot run {BUILD_UI}: {e}")),
    }
}

fn stop(message: &str) -> ! {
    eprintln!("error: {message}");
    exit(1)
}
