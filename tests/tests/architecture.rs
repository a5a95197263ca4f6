//! The layout's promises, checked on the sources, the lock file and cargo's own resolution: the
//! core's dependency tree has none of the heavy or platform crates, the desktop app and the
//! workstation never link the HTTP server, no library reads the process environment, a poisoned
//! lock is taken one way, and within each crate the top-level modules depend on each other
//! without cycles.

use headroom_base::process::Tool;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every crate under `crates/`: the libraries and the CLI.
fn all_crates() -> Vec<PathBuf> {
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    crates.sort();
    assert!(crates.len() >= 9, "{crates:?}");
    assert!(
        crates.iter().any(|p| p.ends_with("headroom-cli")),
        "{crates:?}"
    );
    crates
}

/// The library crates (everything under `crates/` but the CLI binary).
fn library_crates() -> Vec<PathBuf> {
    all_crates()
        .into_iter()
        .filter(|p| !p.ends_with("headroom-cli"))
        .collect()
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
        assert!(crates.contains(package), "{crates:?}");
        // The desktop runs the serving harness (its Benchmark panel); the workstation's
        // workflows need no benchmark at all.
        assert_eq!(
            crates.contains("headroom-bench"),
            package == "headroom-desktop",
            "{package}: {crates:?}"
        );
        for server in ["headroom-server", "axum", "axum-core"] {
            assert!(
                !crates.contains(server),
                "{package} depends on {server}: only the CLI serves (headroom-bench's `serve` \
                 feature is the CLI's)"
            );
        }
        for (feature, what) in [
            ("fleet", "the fleet benchmark's simulated servers"),
            ("suites", "the audio suites (they start serve's router)"),
        ] {
            let line = format!("headroom-bench feature \"{feature}\"");
            assert!(
                !tree.lines().any(|l| l.trim_end_matches(" (*)") == line),
                "{package} builds {what}: the feature is the CLI's"
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

/// Whether `b` can continue an identifier (any non-ASCII byte counts: only a letter would be
/// there in this codebase's code).
fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// The end (one past the closing quote) of the quoted literal whose contents start at `from`.
fn end_of_quoted(bytes: &[u8], from: usize, quote: u8) -> usize {
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// `source` twice: with its comments blanked out, and with its string and character literals'
/// contents blanked out too (a search of that one finds only code). Blanking keeps every line
/// break and every byte's position, so a position in one is the same place in the other.
fn blank_comments_and_literals(source: &str) -> (Vec<u8>, Vec<u8>) {
    let bytes = source.as_bytes();
    let mut code = bytes.to_vec();
    let mut skeleton = bytes.to_vec();
    let blank = |buffer: &mut Vec<u8>, range: std::ops::Range<usize>| {
        for b in &mut buffer[range] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        let next = bytes.get(i + 1).copied();
        let literal_end = match bytes[i] {
            b'/' if next == Some(b'/') => {
                let end = bytes[i..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(bytes.len(), |n| i + n);
                blank(&mut code, i..end);
                blank(&mut skeleton, i..end);
                i = end;
                continue;
            }
            b'/' if next == Some(b'*') => {
                // Block comments nest.
                let (mut depth, mut end) = (0usize, i);
                while end < bytes.len() {
                    if bytes[end..].starts_with(b"/*") {
                        depth += 1;
                        end += 2;
                    } else if bytes[end..].starts_with(b"*/") {
                        depth -= 1;
                        end += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        end += 1;
                    }
                }
                let end = end.min(bytes.len());
                blank(&mut code, i..end);
                blank(&mut skeleton, i..end);
                i = end;
                continue;
            }
            b'"' => Some((i + 1, end_of_quoted(bytes, i + 1, b'"'))),
            b'r' if i == 0
                || !is_ident_byte(bytes[i - 1])
                || (matches!(bytes[i - 1], b'b' | b'c')
                    && (i == 1 || !is_ident_byte(bytes[i - 2]))) =>
            {
                // A raw string, `r#"…"#` (after a `b` or `c` too), or just an identifier.
                let hashes = bytes[i + 1..].iter().take_while(|&&b| b == b'#').count();
                if bytes.get(i + 1 + hashes) == Some(&b'"') {
                    let start = i + 2 + hashes;
                    let mut closing = b"\"".to_vec();
                    closing.extend(std::iter::repeat_n(b'#', hashes));
                    let end = bytes[start..]
                        .windows(closing.len())
                        .position(|w| w == closing.as_slice())
                        .map_or(bytes.len(), |n| start + n + closing.len());
                    Some((start, end))
                } else {
                    None
                }
            }
            b'\'' if next == Some(b'\\') => {
                // An escaped character: `'\n'`, `'\''`, `'\u{7b}'`.
                Some((i + 1, end_of_quoted(bytes, i + 3, b'\'')))
            }
            b'\'' => {
                // A character (`'{'`, `'é'`) or a lifetime or label (`'a`, `'outer:`).
                let width = source[i + 1..].chars().next().map_or(0, char::len_utf8);
                (width > 0 && bytes.get(i + 1 + width) == Some(&b'\''))
                    .then_some((i + 1, i + 2 + width))
            }
            _ => None,
        };
        match literal_end {
            Some((start, end)) => {
                blank(&mut skeleton, start..end.saturating_sub(1).max(start));
                i = end;
            }
            None => i += 1,
        }
    }
    (code, skeleton)
}

/// One past the bracket that closes the group (`(…)`, `[…]` or `{…}`) opening at `at`, counting
/// only the code's brackets (`skeleton` has its literals and comments blanked out).
fn end_of_group(skeleton: &[u8], at: usize) -> usize {
    let (open, close) = match skeleton[at] {
        b'(' => (b'(', b')'),
        b'[' => (b'[', b']'),
        _ => (b'{', b'}'),
    };
    let mut depth = 0usize;
    for (i, &b) in skeleton.iter().enumerate().skip(at) {
        if b == open {
            depth += 1;
        } else if b == close {
            depth -= 1;
            if depth == 0 {
                return i + 1;
            }
        }
    }
    skeleton.len()
}

/// Whether `attribute` (`#[…]`) builds what it marks for the tests alone: `#[cfg(test)]`, or
/// `#[cfg(all(test, …))]`.
fn is_test_only(attribute: &str) -> bool {
    let compact: String = attribute.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(predicate) = compact
        .strip_prefix("#[cfg(")
        .and_then(|p| p.strip_suffix(")]"))
    else {
        return false;
    };
    let Some(terms) = predicate
        .strip_prefix("all(")
        .and_then(|p| p.strip_suffix(')'))
    else {
        return predicate == "test";
    };
    // `all`'s terms at its own level (a term may hold commas of its own).
    let mut depth = 0usize;
    let top_level = terms.split(|c| {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ => {}
        }
        c == ',' && depth == 0
    });
    top_level.into_iter().any(|term| term == "test")
}

/// Where the module that the attribute ending at `from` in `skeleton` marks ends (one past its
/// closing brace), after any other attributes and a visibility: `None` when what follows is not
/// a `mod NAME { … }`.
fn end_of_module(skeleton: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    let skip_space = |i: &mut usize| {
        while skeleton.get(*i).is_some_and(u8::is_ascii_whitespace) {
            *i += 1;
        }
    };
    let word = |i: &mut usize, word: &[u8]| {
        let found = skeleton[*i..].starts_with(word)
            && !skeleton
                .get(*i + word.len())
                .is_some_and(|&b| is_ident_byte(b));
        if found {
            *i += word.len();
        }
        found
    };
    skip_space(&mut i);
    while skeleton[i..].starts_with(b"#[") {
        i = end_of_group(skeleton, i + 1);
        skip_space(&mut i);
    }
    if word(&mut i, b"pub") {
        skip_space(&mut i);
        if skeleton.get(i) == Some(&b'(') {
            i = end_of_group(skeleton, i);
        }
        skip_space(&mut i);
    }
    if !word(&mut i, b"mod") {
        return None;
    }
    skip_space(&mut i);
    let name = skeleton[i..]
        .iter()
        .take_while(|&&b| is_ident_byte(b))
        .count();
    i += name;
    skip_space(&mut i);
    (name > 0 && skeleton.get(i) == Some(&b'{')).then(|| end_of_group(skeleton, i))
}

/// The product code in a Rust source: its comments (doc examples may show what a binary does)
/// and its test modules (`#[cfg(test)] mod NAME { … }`, `#[cfg(all(test, …))]` too) blanked
/// out, every line break kept so lines keep their numbers. Everything else stays, a
/// `#[cfg(test)]` item outside a test module included: product code may follow it.
fn product_code(source: &str) -> String {
    let (mut code, skeleton) = blank_comments_and_literals(source);
    let mut i = 0;
    while let Some(n) = skeleton[i..].windows(2).position(|w| w == b"#[") {
        let at = i + n;
        let attribute_end = end_of_group(&skeleton, at + 1);
        let attribute = String::from_utf8_lossy(&skeleton[at..attribute_end]);
        let module_end = if is_test_only(&attribute) {
            end_of_module(&skeleton, attribute_end)
        } else {
            None
        };
        i = match module_end {
            Some(end) => {
                for b in &mut code[at..end] {
                    if *b != b'\n' {
                        *b = b' ';
                    }
                }
                end
            }
            None => at + 2,
        };
    }
    String::from_utf8(code).expect("whole characters were blanked")
}

/// The product code of `file` ([`product_code`]): what every rule here checks, one decision in
/// one place.
fn product_code_of(file: &Path) -> String {
    product_code(&std::fs::read_to_string(file).unwrap())
}

#[test]
fn product_code_drops_only_test_modules_and_comments() {
    let source = r##"use std::process::Command; // Client::new( in a comment
/* a block comment: Client::builder( /* nested */ still a comment */
#[cfg(test)]
fn a_test_helper() -> usize { 1 }

fn after_a_test_item() { Command::new("after"); }

const MARKER: &str = "#[cfg(test)] mod not_a_module {";
fn after_the_marker_in_a_string() {}

#[cfg(test)]
mod tests {
    const BRACES: &str = "}}} {";
    const RAW: &str = r#"}" }"#;
    const BYTES: &[u8] = br"}";
    const CLOSE: char = '}';
    const QUOTE: char = '\'';
    // }
    /* } */
    fn spawned_in_tests<'a>(x: &'a str) -> &'a str { Command::new(x); x }
}

fn after_the_tests<'a>(x: &'a str) -> char { '{' }

#[cfg(test)]
#[allow(dead_code)]
pub(crate) mod helpers {
    fn helper_in_tests() { if true { '{'; } }
}

#[cfg(all(test, unix))]
mod unix_tests { fn only_on_unix_in_tests() {} }

#[cfg(any(test, feature = "bench"))]
mod shared { fn shared_with_a_feature() {} }

#[cfg(not(test))]
mod product { fn product_only() {} }

fn last() -> char { '}' }
"##;
    let code = product_code(source);
    assert_eq!(
        code.lines().count(),
        source.lines().count(),
        "lines keep their numbers"
    );
    for kept in [
        "use std::process::Command;",
        "fn a_test_helper() -> usize { 1 }",
        "fn after_a_test_item() { Command::new(\"after\"); }",
        "const MARKER: &str = \"#[cfg(test)] mod not_a_module {\";",
        "fn after_the_marker_in_a_string() {}",
        "fn after_the_tests<'a>(x: &'a str) -> char { '{' }",
        "fn shared_with_a_feature() {}",
        "fn product_only() {}",
        "fn last() -> char { '}' }",
    ] {
        assert!(code.contains(kept), "{kept} was dropped from:\n{code}");
    }
    for dropped in [
        "Client::new(",
        "Client::builder(",
        "mod tests",
        "BRACES",
        "RAW",
        "BYTES",
        "CLOSE",
        "QUOTE",
        "spawned_in_tests",
        "helpers",
        "helper_in_tests",
        "only_on_unix_in_tests",
    ] {
        assert!(!code.contains(dropped), "{dropped} was kept in:\n{code}");
    }
}

/// Libraries get their settings and folders from the composition root (`Environment` in
/// headroom-services, which the binaries fill in); their tests may read what they like.
#[test]
fn libraries_never_read_the_process_environment() {
    let mut found = Vec::new();
    for krate in library_crates() {
        let mut files = Vec::new();
        rust_files(&krate.join("src"), &mut files);
        for file in files {
            let code = product_code_of(&file);
            // `env::temp_dir` reads `TMPDIR` (or the platform's variables).
            for pattern in ["env::var", "env::temp_dir"] {
                if code.contains(pattern) {
                    found.push(format!("{}: {pattern}", file.display()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "libraries read the environment; only the binaries may, passing what they read in: \
         {found:#?}"
    );
}

/// A lock whose holder panicked is taken one way everywhere: with its value
/// (`headroom_base::sync::Locked::locked`, `into_value`), never by panicking the caller too.
#[test]
fn product_code_takes_a_poisoned_lock_one_way() {
    let mut found = Vec::new();
    let mut files = Vec::new();
    for krate in all_crates() {
        rust_files(&krate.join("src"), &mut files);
    }
    rust_files(&root().join("src-tauri"), &mut files);
    for file in files {
        let code: String = product_code_of(&file)
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        for pattern in [
            ".lock().unwrap()",
            ".lock().expect(",
            ".read().unwrap()",
            ".read().expect(",
            ".write().unwrap()",
            ".write().expect(",
            ".into_inner().expect(",
        ] {
            if code.contains(pattern) {
                found.push(format!("{}: {pattern}", file.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "take locks with headroom_base::sync::Locked::locked (and into_value), which keep the \
         value a panicked holder left: {found:#?}"
    );
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
    for krate in all_crates() {
        let src = krate.join("src");
        let mut files = Vec::new();
        rust_files(&src, &mut files);
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for file in &files {
            let Some(from) = module_of(&src, file) else {
                continue;
            };
            let code = product_code_of(file);
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
