//! The layout's promises, checked on the sources, the lock file and cargo's own resolution: the
//! core's dependency tree has none of the heavy or platform crates, the desktop app and the
//! workstation never link the HTTP server, no library reads the process environment, and within
//! each crate the top-level modules depend on each other without cycles.

use headroom_base::process::Tool;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The library crates (everything under `crates/` but the CLI binary).
fn library_crates() -> Vec<PathBuf> {
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("headroom-cli"))
        .collect();
    crates.sort();
    assert!(crates.len() >= 8, "{crates:?}");
    crates
}

/// Every package's dependencies, by name, from Cargo.lock (a superset of what any one build
/// uses, so a crate missing here is surely absent).
fn lock_graph() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(root().join("Cargo.lock")).unwrap();
    let lock: toml::Table = text.parse().unwrap();
    let mut graph = BTreeMap::new();
    for package in lock["package"].as_array().unwrap() {
        let name = package["name"].as_str().unwrap().to_string();
        let deps = package
            .get("dependencies")
            .and_then(|d| d.as_array())
            .map(|list| {
                list.iter()
                    .map(|d| d.as_str().unwrap().split(' ').next().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default();
        graph
            .entry(name)
            .or_insert_with(Vec::new)
            .extend::<Vec<String>>(deps);
    }
    graph
}

fn closure(graph: &BTreeMap<String, Vec<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo = vec![from.to_string()];
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone()) {
            todo.extend(graph.get(&name).cloned().unwrap_or_default());
        }
    }
    seen
}

#[test]
fn the_core_has_no_speech_gpu_device_desktop_or_archive_crates_beneath_it() {
    let graph = lock_graph();
    let core = closure(&graph, "headroom-core");
    for heavy in [
        "candle-core",
        "candle-nn",
        "ort",
        "cpal",
        "nvml-wrapper",
        "tauri",
        "zip",
        "axum",
    ] {
        assert!(!core.contains(heavy), "headroom-core depends on {heavy}");
    }
    // The speech engines do not depend on the core, so a change to admission never rebuilds
    // Whisper.
    let speech = closure(&graph, "headroom-speech");
    assert!(!speech.contains("headroom-core"));
    assert!(!closure(&graph, "headroom-gpu").contains("headroom-core"));
}

/// `cargo tree` of `package`'s normal dependencies with the features a build of it alone
/// resolves, one crate or feature a line (`hyper v1.12.0`, `hyper feature "client"`). The lock
/// file cannot say this: it lists optional dependencies whether a feature turns them on or not.
fn resolved_tree(package: &str) -> String {
    let finished = Tool::new(env!("CARGO"))
        .subcommand("tree")
        .path_option("--manifest-path", &root().join("Cargo.toml"))
        .option("--package", package)
        .option("--edges", "normal,features")
        .option("--prefix", "none")
        .flag("--locked")
        .flag("--offline")
        .run(b"")
        .unwrap();
    assert!(
        finished.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&finished.stderr)
    );
    String::from_utf8(finished.stdout).unwrap()
}

#[test]
fn the_desktop_app_and_the_workstation_never_link_the_http_server() {
    for package in ["headroom-desktop", "headroom-workstation"] {
        let tree = resolved_tree(package);
        let crates: BTreeSet<&str> = tree
            .lines()
            .filter(|line| !line.contains(" feature \""))
            .filter_map(|line| line.split(' ').next())
            .collect();
        assert!(
            crates.contains(package) && crates.contains("headroom-bench"),
            "{crates:?}"
        );
        for server in ["headroom-server", "axum", "axum-core"] {
            assert!(
                !crates.contains(server),
                "{package} depends on {server}: only the CLI serves (headroom-bench's `serve` \
                 feature is the CLI's)"
            );
        }
        for server_feature in ["hyper feature \"server\"", "hyper-util feature \"server\""] {
            assert!(
                !tree
                    .lines()
                    .any(|line| line.trim_end_matches(" (*)") == server_feature),
                "{package} builds an HTTP server: {server_feature}"
            );
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Source text without `//` comments (doc examples may show what a binary does).
fn code_of(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn libraries_never_read_the_process_environment() {
    for krate in library_crates() {
        let mut files = Vec::new();
        rust_files(&krate.join("src"), &mut files);
        for file in files {
            let code = code_of(&file);
            assert!(
                !code.contains("env::var"),
                "{} reads the environment; only the binaries may",
                file.display()
            );
        }
    }
}

/// The top-level module a file belongs to (`lanes/text.rs` → `lanes`), `None` for the crate root.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative
        .components()
        .next()?
        .as_os_str()
        .to_str()?
        .to_string();
    match first.strip_suffix(".rs") {
        Some("lib") | Some("main") => None,
        Some(name) => Some(name.to_string()),
        None => Some(first),
    }
}

fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, graph, &mut Vec::new(), &mut done) {
            return Some(cycle);
        }
    }
    None
}

#[test]
fn cycles_are_found() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["a".to_string()])),
    ]
    .into();
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
}

#[test]
fn module_graphs_are_acyclic() {
    for krate in library_crates() {
        let src = krate.join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for file in &files {
            let Some(from) = module_of(&src, file) else {
                continue;
            };
            let code = code_of(file);
            let uses = graph.entry(from.clone()).or_default();
            for (i, _) in code.match_indices("crate::") {
                let to: String = code[i + "crate::".len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                let is_module = src.join(format!("{to}.rs")).exists() || src.join(&to).is_dir();
                if to != from && is_module {
                    uses.insert(to);
                }
            }
        }
        assert_eq!(
            find_cycle(&graph),
            None,
            "module cycle in {}",
            krate.display()
        );
    }
}

/// Every non-test source file of the product: the libraries, the CLI and the desktop shell.
fn product_sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root().join("crates")).unwrap() {
        rust_files(&krate.unwrap().path().join("src"), &mut files);
    }
    rust_files(&root().join("src-tauri"), &mut files);
    files.sort();
    files
}

/// The code of `file` before its `#[cfg(test)]` module (tests may start helpers as they like).
fn product_code_of(file: &Path) -> String {
    let code = code_of(file);
    match code.find("#[cfg(test)]") {
        Some(at) => code[..at].to_string(),
        None => code,
    }
}

#[test]
fn every_subprocess_starts_through_the_one_tool_that_keeps_data_out_of_options() {
    let allowed = root().join("crates/headroom-base/src/process.rs");
    let mut found = Vec::new();
    for file in product_sources() {
        if file == allowed {
            continue;
        }
        let code = product_code_of(&file);
        for pattern in [
            "Command::new",
            "process::Command",
            ".spawn()",
            "Command::from",
        ] {
            if code.contains(pattern) {
                found.push(format!("{}: {pattern}", file.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "start programs with headroom_base::process::Tool (data on stdin, as option values \
         or after `--`), not directly: {found:#?}"
    );
}

#[test]
fn every_outbound_http_client_refuses_redirects_to_another_origin() {
    let allowed = root().join("crates/headroom-base/src/http.rs");
    let mut found = Vec::new();
    for file in product_sources() {
        if file == allowed {
            continue;
        }
        let code = product_code_of(&file);
        for pattern in ["Client::new(", "Client::builder(", "ClientBuilder::new("] {
            // `LlmClient::new(` is Headroom's own type, built on the policy's client.
            let constructed = code.match_indices(pattern).any(|(at, _)| {
                code[..at]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
            });
            if constructed {
                found.push(format!("{}: {pattern}", file.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "build HTTP clients with headroom_base::http (no redirect to another origin): {found:#?}"
    );
}

/// The functions marked `#[tauri::command]` in `code`, each as (name, whether it is `async`).
fn tauri_commands(code: &str) -> Vec<(String, bool)> {
    let mut commands = Vec::new();
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        if !line.trim_start().starts_with("#[tauri::command") {
            continue;
        }
        // The signature follows, after any other attributes.
        let signature = lines
            .by_ref()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with("#["))
            .unwrap_or_default();
        let before_fn = signature.split("fn ").next().unwrap_or_default();
        let name: String = signature
            .split("fn ")
            .nth(1)
            .unwrap_or(signature)
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        commands.push((name, before_fn.split_whitespace().any(|w| w == "async")));
    }
    commands
}

#[test]
fn tauri_commands_are_found_with_whether_they_are_async() {
    let code = "#[tauri::command]\npub fn a(x: u8) -> u8 {}\n\
                #[tauri::command(rename_all = \"snake_case\")]\n#[allow(x)]\npub async fn b() {}\n\
                #[tauri::command]\nasync fn c() {}";
    assert_eq!(
        tauri_commands(code),
        [
            ("a".to_string(), false),
            ("b".to_string(), true),
            ("c".to_string(), true)
        ]
    );
}

/// Tauri runs a synchronous command on the main thread, which draws the window and delivers
/// its input: a command there that reads a file, runs a program or waits on a lock a model
/// load or a job holds freezes the window for as long. Every command is `async` (run on the
/// async runtime, its blocking work on the blocking pool), none excepted: even the cheap ones
/// gain nothing from the main thread, and a rule with no exceptions cannot drift.
#[test]
fn every_desktop_command_is_async_so_the_window_never_waits() {
    let mut files = Vec::new();
    rust_files(&root().join("src-tauri"), &mut files);
    let mut all = Vec::new();
    for file in files {
        for (name, is_async) in tauri_commands(&product_code_of(&file)) {
            all.push((format!("{}: {name}", file.display()), is_async));
        }
    }
    assert!(
        all.len() > 40,
        "the desktop's commands were not found: {all:?}"
    );
    let synchronous: Vec<&String> = all.iter().filter(|(_, a)| !a).map(|(n, _)| n).collect();
    assert!(
        synchronous.is_empty(),
        "synchronous Tauri commands run on the main thread and freeze the window while they \
         work or wait; make them `async` (blocking work through `blocking()`): {synchronous:#?}"
    );
}
