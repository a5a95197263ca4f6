//! What every scenario shares: the app's window driven through WebDriver ([`Desktop`]), the
//! scratch folders, the servers and the app's settings ([`World`]), made once for the run, and
//! the measurements the scenarios take ([`Measurements`]).

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use headroom_tests::llama::LlamaServer;
use headroom_tests::microphone::SpeakingMicrophone;
use headroom_workstation::jobs::JobKind;
use headroom_workstation::projects::{ProjectError, ProjectStore};
use hyper_util::client::legacy::connect::HttpConnector;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

pub const WAIT: Duration = Duration::from_secs(60);
/// A keyboard user reaches any control of a view within this many Tab presses.
pub const MAX_TABS: usize = 80;

/// WebDriver's codes for the keys the keyboard scenarios press.
pub mod keys {
    pub const TAB: &str = "\u{E004}";
    pub const ENTER: &str = "\u{E007}";
    pub const SPACE: &str = " ";
    /// Ctrl+End: the end of a text field, then Ctrl released.
    pub const CTRL_END: &str = "\u{E009}\u{E010}\u{E000}";
    /// Ctrl+A: the whole of a text field selected, then Ctrl released.
    pub const SELECT_ALL: &str = "\u{E009}a\u{E000}";
    pub const RIGHT: &str = "\u{E014}";
    pub const HOME: &str = "\u{E011}";
    pub const END: &str = "\u{E010}";
    pub const DELETE: &str = "\u{E017}";
    /// Shift+Right twice: the selection extended by two, then Shift released.
    pub const SHIFT_RIGHT_TWICE: &str = "\u{E008}\u{E014}\u{E014}\u{E000}";
    /// Ctrl+Z: undo.
    pub const UNDO: &str = "\u{E009}z\u{E000}";
    /// Ctrl+Y: redo.
    pub const REDO: &str = "\u{E009}y\u{E000}";
}

/// Transcription of the sample and first model load on a 2-core machine in a debug build.
pub const LONG_WAIT: Duration = Duration::from_secs(240);

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Stops a child with SIGTERM (SIGKILL would orphan WebKitWebDriver and the app) and reaps it.
pub struct Terminated(Child);

impl Drop for Terminated {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::park_timeout(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn require_tool(name: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join(name))
            .find(|p| p.is_file())
    });
    found.unwrap_or_else(|| {
        panic!("{name} is not installed; scripts/install-test-deps installs the UI test tools")
    })
}

/// A private X display for the app.
pub fn start_xvfb() -> (Terminated, String) {
    require_tool("Xvfb");
    for n in 0..50 {
        let display = 90 + (std::process::id() % 400) + n;
        if Path::new(&format!("/tmp/.X11-unix/X{display}")).exists() {
            continue;
        }
        let child = Command::new("Xvfb")
            .arg(format!(":{display}"))
            .args(["-screen", "0", "1440x1000x24", "-nolisten", "tcp"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb starts");
        let mut child = Terminated(child);
        let socket = PathBuf::from(format!("/tmp/.X11-unix/X{display}"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if socket.exists() {
                return (child, format!(":{display}"));
            }
            if let Ok(Some(_)) = child.0.try_wait() {
                break; // Display taken: try the next one.
            }
            std::thread::park_timeout(Duration::from_millis(50));
        }
    }
    panic!("Xvfb did not start");
}

pub struct Desktop {
    pub client: Client,
    _driver: Terminated,
    _xvfb: Terminated,
    pub screenshots: PathBuf,
    pub cold_start_ms: u128,
}

impl Desktop {
    pub async fn start(env: &[(&str, &Path)]) -> Desktop {
        require_tool("WebKitWebDriver");
        let driver_bin = require_tool("tauri-driver");
        let (xvfb, display) = start_xvfb();
        let port = free_port();
        let native_port = free_port();
        let mut cmd = Command::new(driver_bin);
        cmd.args(["--port", &port.to_string()])
            .args(["--native-port", &native_port.to_string()])
            .env("DISPLAY", &display)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let driver = Terminated(cmd.spawn().expect("tauri-driver starts"));
        let app = PathBuf::from(env!("CARGO_BIN_EXE_headroom-desktop"));
        let mut caps = serde_json::Map::new();
        caps.insert(
            "tauri:options".into(),
            serde_json::json!({ "application": app }),
        );
        let url = format!("http://127.0.0.1:{port}");
        let started = Instant::now();
        let client = loop {
            match ClientBuilder::new(HttpConnector::new())
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(_) if started.elapsed() < Duration::from_secs(60) => retry_pause().await,
                Err(e) => panic!("no WebDriver session: {e}"),
            }
        };
        client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css("body[data-ready='true']"))
            .await
            .expect("the window becomes interactive");
        let cold_start_ms = started.elapsed().as_millis();
        let screenshots = repo_root().join("target/ui-screenshots");
        std::fs::create_dir_all(&screenshots).unwrap();
        Desktop {
            client,
            _driver: driver,
            _xvfb: xvfb,
            screenshots,
            cold_start_ms,
        }
    }

    pub async fn find(&self, testid: &str) -> Element {
        self.find_within(testid, WAIT).await
    }

    pub async fn find_within(&self, testid: &str, wait: Duration) -> Element {
        self.find_css_within(&format!("[data-testid='{testid}']"), wait)
            .await
    }

    /// The first element matching `css`, waited for.
    pub async fn find_css_within(&self, css: &str, wait: Duration) -> Element {
        match self
            .client
            .wait()
            .at_most(wait)
            .for_element(Locator::Css(css))
            .await
        {
            Ok(e) => e,
            Err(e) => {
                self.failure_screenshot().await;
                panic!("no element {css} within {wait:?}: {e}")
            }
        }
    }

    /// The window as it was when a step failed, for the CI log's reader.
    pub async fn failure_screenshot(&self) {
        if let Ok(png) = self.client.screenshot().await {
            let path = self.screenshots.join("failure.png");
            let _ = std::fs::write(&path, png);
            eprintln!("screenshot of the failure: {}", path.display());
        }
    }

    pub async fn click(&self, testid: &str) {
        self.find(testid)
            .await
            .click()
            .await
            .unwrap_or_else(|e| panic!("cannot click {testid}: {e}"));
    }

    pub async fn type_into(&self, testid: &str, text: &str) {
        let field = self.find(testid).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    /// The element's text content (WebKitWebDriver's visible-text algorithm misses some
    /// styled elements; the screenshots show what is on screen).
    pub async fn text(&self, testid: &str) -> String {
        content(&self.find(testid).await).await
    }

    /// Waits until the element's text satisfies `ok`.
    pub async fn until_text(
        &self,
        testid: &str,
        wait: Duration,
        ok: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + wait;
        loop {
            let text = match self
                .client
                .find(Locator::Css(&format!("[data-testid='{testid}']")))
                .await
            {
                Ok(e) => content(&e).await,
                Err(_) => String::new(),
            };
            if ok(&text) {
                return text;
            }
            if Instant::now() >= deadline {
                self.failure_screenshot().await;
                panic!("{testid} never matched; last text {text:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the element's attribute `name` satisfies `ok` (absent: the empty string).
    pub async fn until_attr(
        &self,
        testid: &str,
        name: &str,
        wait: Duration,
        ok: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + wait;
        loop {
            let value = match self
                .client
                .find(Locator::Css(&format!("[data-testid='{testid}']")))
                .await
            {
                Ok(e) => e.attr(name).await.ok().flatten().unwrap_or_default(),
                Err(_) => String::new(),
            };
            if ok(&value) {
                return value;
            }
            if Instant::now() >= deadline {
                self.failure_screenshot().await;
                panic!("{testid}'s {name} never matched; last {value:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until no element has this test id.
    pub async fn until_gone(&self, testid: &str, wait: Duration) {
        let deadline = Instant::now() + wait;
        while !self.gone(testid).await {
            if Instant::now() >= deadline {
                self.failure_screenshot().await;
                panic!("{testid} never went away");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn gone(&self, testid: &str) -> bool {
        self.client
            .find(Locator::Css(&format!("[data-testid='{testid}']")))
            .await
            .is_err()
    }

    /// Ends the WebDriver session (the app exits), then stops tauri-driver and Xvfb.
    pub async fn close(self) {
        let Desktop {
            client,
            _driver,
            _xvfb,
            ..
        } = self;
        let _ = client.close().await;
    }

    /// A round trip of `resident_models` (the Memory panel's poll) through the web view's IPC,
    /// timed from this test (the WebDriver request included: a window whose main thread is
    /// busy does not start the script either) and in the page; with whether a model was being
    /// loaded when the app answered.
    pub async fn memory_round_trip(&self) -> RoundTrip {
        let started = Instant::now();
        let answer = self
            .client
            .execute_async(
                r#"const done = arguments[arguments.length - 1];
                   const t0 = performance.now();
                   window.__TAURI_INTERNALS__.invoke("resident_models").then(
                     (v) => done({ ms: performance.now() - t0, loading: v.models.some((m) => m.loading) }),
                     (e) => done({ ms: -1, error: String(e) }));"#,
                vec![],
            )
            .await
            .expect("the round trip's script runs");
        let total_ms = started.elapsed().as_secs_f64() * 1000.0;
        assert!(
            answer["error"].is_null(),
            "resident_models failed: {answer}"
        );
        RoundTrip {
            total_ms,
            in_page_ms: answer["ms"].as_f64().unwrap(),
            loading: answer["loading"].as_bool().unwrap(),
        }
    }

    /// A UI interaction: clicks `element` and waits until an element matching `css` is shown
    /// (or, with `shown` false, no longer is), then for the frame that draws it. Timed in the
    /// window, from the input event (the earliest mousedown, click, input or change it gets;
    /// its timestamp is when the event was made) to that frame, and from this test, WebDriver
    /// requests included.
    pub async fn interaction(
        &self,
        what: &str,
        element: &Element,
        css: &str,
        shown: bool,
    ) -> Interaction {
        self.timed_click(what, element, &[css], shown).await
    }

    /// [`Desktop::interaction`] until every one of `css` is shown.
    pub async fn interaction_until(
        &self,
        what: &str,
        element: &Element,
        css: &[&str],
    ) -> Interaction {
        self.timed_click(what, element, css, true).await
    }

    async fn timed_click(
        &self,
        what: &str,
        element: &Element,
        css: &[&str],
        shown: bool,
    ) -> Interaction {
        // Watched from inside the window, from the input event on (each change to the page, and
        // every few ms for what changes no element, as focus): the frame after the one that
        // first meets the condition is stamped as it comes, so the time does not include the
        // WebDriver request that collects it.
        self.client
            .execute(
                r#"const [css, shown] = arguments;
                   window.__headroomInput = null;
                   window.__headroomShownAt = null;
                   window.__headroomWatch?.disconnect();
                   let stamping = false;
                   const met = () => css.every((c) => (document.querySelector(c) !== null) === shown);
                   const check = () => {
                     if (window.__headroomInput === null || stamping) return;
                     if (met()) {
                       stamping = true;
                       window.__headroomWatch.disconnect();
                       requestAnimationFrame(() => { window.__headroomShownAt = performance.now(); });
                     } else {
                       setTimeout(check, 2);
                     }
                   };
                   window.__headroomWatch = new MutationObserver(check);
                   window.__headroomWatch.observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
                   window.__headroomCheck = check;
                   if (!window.__headroomListening) {
                     window.__headroomListening = true;
                     for (const type of ["mousedown", "click", "input", "change"]) {
                       document.addEventListener(type, (e) => {
                         const at = window.__headroomInput;
                         if (at === null || e.timeStamp < at) window.__headroomInput = e.timeStamp;
                         queueMicrotask(() => window.__headroomCheck());
                       }, { capture: true });
                     }
                   }"#,
                vec![serde_json::json!(css), shown.into()],
            )
            .await
            .expect("the input listener is set");
        let started = Instant::now();
        element.click().await.expect("the click is delivered");
        let reached = self
            .client
            .execute_async(
                r#"const done = arguments[arguments.length - 1];
                   const deadline = performance.now() + 10000;
                   const collect = () => {
                     if (window.__headroomShownAt !== null) {
                       return done({ at: window.__headroomShownAt, input: window.__headroomInput });
                     }
                     if (performance.now() > deadline) return done({ at: null });
                     setTimeout(collect, 5);
                   };
                   collect();"#,
                vec![],
            )
            .await
            .expect("the wait's script runs");
        let total_ms = started.elapsed().as_secs_f64() * 1000.0;
        let at = reached["at"].as_f64();
        assert!(at.is_some(), "{what}: {css:?} never shown={shown}");
        let input = reached["input"].as_f64();
        assert!(input.is_some(), "{what}: the window got no input event");
        Interaction {
            what: what.to_string(),
            in_window_ms: at.unwrap() - input.unwrap(),
            total_ms,
            loading_after: false,
        }
    }

    /// How many elements match `css`.
    pub async fn count(&self, css: &str) -> usize {
        self.client
            .execute(
                "return document.querySelectorAll(arguments[0]).length;",
                vec![css.into()],
            )
            .await
            .expect("the count's script runs")
            .as_u64()
            .unwrap() as usize
    }

    /// Scrolls the view holding the list `testid` to its end (or its start) as a scroll bar
    /// dragged there does, and times, in the window, from the scroll to the frame that shows
    /// the list's last (or first) row; with that row's index.
    pub async fn scroll_list(&self, testid: &str, to_end: bool) -> (f64, usize) {
        let answer = self
            .client
            .execute_async(
                r#"const [testid, toEnd, done] = arguments;
                   const list = document.querySelector(`[data-testid='${testid}']`);
                   let scroller = list.parentElement;
                   while (scroller && !/(auto|scroll)/.test(getComputedStyle(scroller).overflowY)) {
                     scroller = scroller.parentElement;
                   }
                   const count = Number(list.dataset.count);
                   const wanted = toEnd ? count - 1 : 0;
                   const t0 = performance.now();
                   scroller.scrollTop = toEnd ? scroller.scrollHeight : 0;
                   const deadline = t0 + 10000;
                   const check = () => {
                     const row = list.querySelector(`:scope > [data-index='${wanted}']`);
                     if (row !== null) {
                       return requestAnimationFrame(() => done({ ms: performance.now() - t0, row: wanted }));
                     }
                     if (performance.now() > deadline) return done({ ms: null, row: null });
                     setTimeout(check, 1);
                   };
                   check();"#,
                vec![testid.into(), to_end.into()],
            )
            .await
            .expect("the scroll's script runs");
        let ms = answer["ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("{testid}: the row never showed after the scroll"));
        (ms, answer["row"].as_u64().unwrap() as usize)
    }

    /// Types `key` at the end of the text field `testid` (focused) and times it in the window:
    /// from the key's event to the frame that shows the field with it.
    pub async fn key_latency(&self, testid: &str, key: char) -> f64 {
        self.client
            .execute(
                r#"window.__headroomKey = null;
                   if (!window.__headroomKeys) {
                     window.__headroomKeys = true;
                     document.addEventListener("keydown", (e) => {
                       if (window.__headroomKey === null) window.__headroomKey = e.timeStamp;
                     }, { capture: true });
                   }"#,
                vec![],
            )
            .await
            .expect("the key listener is set");
        let field = self.find(testid).await;
        field
            .send_keys(&key.to_string())
            .await
            .expect("the key is delivered");
        let answer = self
            .client
            .execute_async(
                r#"const [testid, key, done] = arguments;
                   const field = document.querySelector(`[data-testid='${testid}']`);
                   const deadline = performance.now() + 10000;
                   const check = () => {
                     if (field.value.endsWith(key) && window.__headroomKey !== null) {
                       return requestAnimationFrame(() => done(performance.now() - window.__headroomKey));
                     }
                     if (performance.now() > deadline) return done(null);
                     setTimeout(check, 1);
                   };
                   check();"#,
                vec![testid.into(), key.to_string().into()],
            )
            .await
            .expect("the key's script runs");
        answer
            .as_f64()
            .unwrap_or_else(|| panic!("{testid}: {key:?} never showed"))
    }

    /// A typed edit saved as the Transcribe view saves one (`edit_segment`), timed in the page.
    pub async fn save_round_trip(&self, project: &str, index: usize, text: &str) -> f64 {
        let answer = self
            .client
            .execute_async(
                r#"const [project, index, text, done] = arguments;
                   const t0 = performance.now();
                   window.__TAURI_INTERNALS__.invoke("edit_segment", { project, index, text }).then(
                     (saved) => done({ ms: performance.now() - t0, index: saved.index }),
                     (e) => done({ error: String(e) }));"#,
                vec![project.into(), index.into(), text.into()],
            )
            .await
            .expect("the save's script runs");
        assert!(answer["error"].is_null(), "edit_segment failed: {answer}");
        assert_eq!(answer["index"].as_u64(), Some(index as u64));
        answer["ms"].as_f64().unwrap()
    }

    /// Chooses `voice` in the Synthesize view once its list, which arrives after the view
    /// opens, offers it.
    pub async fn choose_synth_voice(&self, voice: &str, wait: Duration) {
        self.choose("synth-voice", voice, wait).await;
    }

    /// Chooses `value` in the select `testid` once it offers it (lists that arrive after
    /// their view opens).
    pub async fn choose(&self, testid: &str, value: &str, wait: Duration) {
        let option = format!("[data-testid='{testid}'] option[value='{value}']");
        self.client
            .wait()
            .at_most(wait)
            .for_element(Locator::Css(&option))
            .await
            .unwrap_or_else(|e| panic!("{testid} does not offer {value}: {e}"));
        self.find(testid)
            .await
            .select_by_value(value)
            .await
            .unwrap();
    }

    /// Opens the project `id` from the Projects view and waits until it is the current one
    /// (shown as `name`).
    pub async fn open_project(&self, id: &str, name: &str) {
        self.click("nav-projects").await;
        self.click(&format!("project-open-{id}")).await;
        self.until_text("current-project-name", WAIT, |t| t == name)
            .await;
    }

    /// The focused element's `data-testid`; `"body"` when nothing in the window has focus,
    /// `"<tag>"` (with its text) for a focused element without one.
    pub async fn focused(&self) -> String {
        let answer = self
            .client
            .execute(
                r#"const e = document.activeElement;
                   if (!e || e === document.body) return "body";
                   return e.dataset?.testid ?? `<${e.tagName.toLowerCase()}> ${(e.textContent ?? "").trim().slice(0, 40)}`;"#,
                vec![],
            )
            .await
            .expect("the focus query runs");
        answer.as_str().unwrap_or_default().to_string()
    }

    /// Types `keys` (WebDriver key codes: [`keys`]) into whatever has the focus, as a keyboard
    /// does (WebDriver's key actions: nothing is clicked or focused first). A modifier (Shift,
    /// Ctrl) is held until the NULL key or the end.
    pub async fn press(&self, keys: &str) {
        use fantoccini::actions::{InputSource, KeyAction, KeyActions};
        const NULL: char = '\u{E000}';
        const MODIFIERS: [char; 3] = ['\u{E008}', '\u{E009}', '\u{E00A}'];
        let mut held = Vec::new();
        let mut actions = KeyActions::new("keyboard".to_string());
        for key in keys.chars() {
            if key == NULL {
                for value in held.drain(..).rev() {
                    actions = actions.then(KeyAction::Up { value });
                }
            } else if MODIFIERS.contains(&key) {
                held.push(key);
                actions = actions.then(KeyAction::Down { value: key });
            } else {
                actions = actions
                    .then(KeyAction::Down { value: key })
                    .then(KeyAction::Up { value: key });
            }
        }
        for value in held.into_iter().rev() {
            actions = actions.then(KeyAction::Up { value });
        }
        if let Err(e) = self.client.perform_actions(actions).await {
            panic!("cannot press {keys:?} on {}: {e}", self.focused().await);
        }
    }

    /// Presses Tab until `testid` has the focus, as a keyboard user reaches a control; fails,
    /// naming the stops it passed, if it is not reached within [`MAX_TABS`] presses.
    /// (Forward only: WebKitWebDriver sends Shift+Tab as an unidentified key, which moves
    /// nothing; the window's Tab order wraps around.)
    pub async fn tab_to(&self, testid: &str) {
        let mut passed = Vec::new();
        for _ in 0..MAX_TABS {
            let now = self.focused().await;
            if now == testid {
                return;
            }
            passed.push(now);
            self.press(keys::TAB).await;
        }
        self.failure_screenshot().await;
        panic!(
            "{testid} is not reached by Tab; the focus went {}",
            passed.join(" → ")
        );
    }

    /// Waits until `testid` has the focus (moved there by the app after an action).
    pub async fn until_focused(&self, testid: &str, wait: Duration) {
        let deadline = Instant::now() + wait;
        loop {
            let now = self.focused().await;
            if now == testid {
                return;
            }
            if Instant::now() >= deadline {
                self.failure_screenshot().await;
                panic!("the focus never moved to {testid}; it is on {now}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Text the window shows cut off: an element whose text is wider than its box (and which
    /// does not scroll), or a pane that scrolls sideways. Each as `why: element: its text`.
    pub async fn cut_off_text(&self) -> Vec<String> {
        let found = self
            .client
            .execute(
                r#"const name = (el) => {
                     const id = el.dataset?.testid;
                     const cls = typeof el.className === "string" && el.className ? "." + el.className.split(" ")[0] : "";
                     return `${id ?? el.tagName.toLowerCase() + cls}: ${(el.textContent ?? "").trim().slice(0, 60)}`;
                   };
                   const out = [];
                   for (const el of document.querySelectorAll("body *")) {
                     if (el.closest(".sr-only, svg, textarea, select, input, option")) continue;
                     const style = getComputedStyle(el);
                     if (style.display === "inline" || style.visibility === "hidden") continue;
                     if (el.getClientRects().length === 0) continue;
                     const ownText = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim() !== "");
                     // Controls and badges whose words sit in inline children count too.
                     const labelled = el.matches("button, label, summary, legend, .badge") && el.textContent.trim() !== "";
                     if (!ownText && !labelled) continue;
                     const scrolls = style.overflowX === "auto" || style.overflowX === "scroll";
                     if (!scrolls && el.scrollWidth > el.clientWidth + 1) out.push("wider than its box: " + name(el));
                   }
                   for (const pane of document.querySelectorAll(".sidebar, .content, .side")) {
                     if (pane.scrollWidth > pane.clientWidth + 1) out.push("scrolls sideways: " + name(pane).slice(0, 40));
                   }
                   return out;"#,
                vec![],
            )
            .await
            .expect("the cut-off check runs");
        found
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The window's language, as its `<html lang>` says.
    pub async fn page_language(&self) -> String {
        self.client
            .execute("return document.documentElement.lang;", vec![])
            .await
            .expect("the language query runs")
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    pub async fn screenshot(&self, name: &str) {
        // Let the last state change paint before the capture.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let png = self.client.screenshot().await.expect("screenshot");
        assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
        std::fs::write(self.screenshots.join(format!("{name}.png")), png).unwrap();
        // Every view and state the suite shows is also audited for accessibility.
        self.audit(name).await;
    }

    /// Runs axe-core (the npm package the front end's dev dependencies install) inside the
    /// window on what it shows now, and keeps what it finds under `screen`.
    pub async fn audit(&self, screen: &str) {
        let axe = std::fs::read_to_string(repo_root().join("ui/node_modules/axe-core/axe.min.js"))
            .expect("axe-core is installed in ui/node_modules (scripts/build-ui runs npm ci)");
        // The library and the run in one script: WebDriver's scripts are not the page's, so
        // the window's content security policy does not apply to them.
        let script = format!(
            "{axe}\n;const done = arguments[arguments.length - 1];\n\
             window.axe.run(document, {{ resultTypes: ['violations'] }})\n\
               .then((r) => done(JSON.stringify(r.violations.map((v) => ({{\n\
                 rule: v.id, impact: v.impact, help: v.help,\n\
                 nodes: v.nodes.slice(0, 5).map((n) => n.target.join(' ')) }})))))\n\
               .catch((e) => done(JSON.stringify({{ error: String(e) }})));"
        );
        let found = self
            .client
            .execute_async(&script, vec![])
            .await
            .unwrap_or_else(|e| panic!("axe-core did not run on {screen}: {e}"));
        let found: serde_json::Value =
            serde_json::from_str(found.as_str().expect("axe's answer is a string")).unwrap();
        let violations = found
            .as_array()
            .unwrap_or_else(|| panic!("axe-core failed on {screen}: {found}"));
        let mut audits = AUDITS.lock().unwrap();
        for v in violations {
            audits.push(AxeViolation {
                screen: screen.to_string(),
                rule: v["rule"].as_str().unwrap_or_default().to_string(),
                impact: v["impact"].as_str().unwrap_or("unknown").to_string(),
                help: v["help"].as_str().unwrap_or_default().to_string(),
                nodes: v["nodes"]
                    .as_array()
                    .map(|n| {
                        n.iter()
                            .filter_map(|n| n.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
            });
        }
        AUDITED.lock().unwrap().push(screen.to_string());
    }
}

/// An accessibility rule a screen broke, as axe-core reports it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AxeViolation {
    pub screen: String,
    pub rule: String,
    /// minor, moderate, serious or critical.
    pub impact: String,
    pub help: String,
    /// The first few elements that break it (CSS selectors).
    pub nodes: Vec<String>,
}

/// What axe-core found on every screen audited so far, in both sessions.
pub static AUDITS: std::sync::Mutex<Vec<AxeViolation>> = std::sync::Mutex::new(Vec::new());
/// The screens audited so far.
pub static AUDITED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// One command round trip (see [`Desktop::memory_round_trip`]).
pub struct RoundTrip {
    pub total_ms: f64,
    pub in_page_ms: f64,
    pub loading: bool,
}

/// One UI interaction (see [`Desktop::interaction`]).
pub struct Interaction {
    pub what: String,
    pub in_window_ms: f64,
    pub total_ms: f64,
    /// Whether a model was still loading after it.
    pub loading_after: bool,
}

/// How fast the window answered while work ran: command round trips and UI interactions.
#[derive(Default)]
pub struct Responsiveness {
    pub round_trips: Vec<RoundTrip>,
    pub interactions: Vec<Interaction>,
}

/// The window answers a command and an interaction within this while work runs.
pub const RESPONSIVE_MS: f64 = 100.0;

/// The middle value; of an even count, the mean of the two middle ones (of two interactions,
/// the upper one alone would be their maximum: one slow WebDriver request would decide).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

impl Responsiveness {
    pub fn summary(&self) -> serde_json::Value {
        let mut totals: Vec<f64> = self.round_trips.iter().map(|r| r.total_ms).collect();
        let mut in_page: Vec<f64> = self.round_trips.iter().map(|r| r.in_page_ms).collect();
        let while_loading: Vec<f64> = self
            .round_trips
            .iter()
            .filter(|r| r.loading)
            .map(|r| r.total_ms)
            .collect();
        let stats = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            let at = |q: f64| {
                v.get(((v.len() as f64 - 1.0) * q).round() as usize)
                    .copied()
            };
            serde_json::json!({ "n": v.len(), "p50": at(0.5), "p95": at(0.95), "max": v.last() })
        };
        serde_json::json!({
            "command_round_trip_ms": stats(&mut totals),
            "command_round_trip_in_page_ms": stats(&mut in_page),
            "round_trips_while_a_model_loaded": while_loading.len(),
            "round_trip_while_loading_max_ms": while_loading.iter().copied().reduce(f64::max),
            "interactions": self.interactions.iter().map(|i| {
                serde_json::json!({
                    "what": i.what,
                    "in_window_ms": i.in_window_ms,
                    "from_test_ms": i.total_ms,
                    "model_loading_after": i.loading_after,
                })
            }).collect::<Vec<_>>(),
        })
    }

    /// Fails when the window took longer than [`RESPONSIVE_MS`] to answer: any command round
    /// trip (timed in the page: a command waiting on a lock, or a main thread busy with one,
    /// shows there) or interaction (from its input event to the frame that shows its result);
    /// or, timed from this test with the WebDriver requests included (tauri-driver and
    /// WebKitWebDriver, which share the two cores with the work), at the median.
    pub fn check(&self, during: &str) {
        let mut slow: Vec<String> = self
            .round_trips
            .iter()
            .filter(|r| r.in_page_ms > RESPONSIVE_MS)
            .map(|r| format!("round trip {:.0} ms (loading: {})", r.in_page_ms, r.loading))
            .chain(
                self.interactions
                    .iter()
                    .filter(|i| i.in_window_ms > RESPONSIVE_MS)
                    .map(|i| format!("{} {:.0} ms", i.what, i.in_window_ms)),
            )
            .collect();
        let from_test = [
            (
                "round trips",
                self.round_trips.iter().map(|r| r.total_ms).collect(),
            ),
            (
                "interactions",
                self.interactions.iter().map(|i| i.total_ms).collect(),
            ),
        ];
        for (what, times) in from_test {
            let median = median(times);
            if median > RESPONSIVE_MS {
                slow.push(format!("{what} from the test: median {median:.0} ms"));
            }
        }
        assert!(
            slow.is_empty(),
            "the window answered slower than {RESPONSIVE_MS} ms {during}: {slow:?}; {}",
            self.summary()
        );
    }
}

pub async fn content(e: &Element) -> String {
    e.prop("textContent")
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Between attempts to reach tauri-driver (the attempt itself is the condition waited on).
pub async fn retry_pause() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// The app's process and its web view processes (the app's descendants), the app first.
pub fn app_process_tree(app: &Path) -> Vec<u32> {
    let app = app.canonicalize().unwrap();
    let mut parents = Vec::new();
    let mut app_pid = None;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: u32 = after_name.split(' ').nth(1).unwrap().parse().unwrap();
        parents.push((pid, ppid));
        if std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .as_deref()
            == Some(app.as_path())
        {
            app_pid = Some(pid);
        }
    }
    let mut tree = vec![app_pid.expect("the app process is running")];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    tree
}

/// The resident memory of the app and its web view processes, in KiB.
pub fn app_tree_rss_kib(tree: &[u32]) -> (u64, u64) {
    // A web view process that exited since the tree was listed counts as nothing.
    let rss = |pid: u32| headroom_gpu::process_resident_bytes(pid).unwrap_or(0) / 1024;
    (rss(tree[0]), tree.iter().map(|p| rss(*p)).sum())
}

/// The GL driver files mapped into a process: Mesa's DRI/gallium drivers and the LLVM they
/// bring, or another vendor's GL driver.
pub fn gl_driver_mappings(pid: u32) -> Vec<String> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mut found: Vec<String> = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter(|path| {
            let name = path.rsplit('/').next().unwrap_or(path);
            name.contains("_dri.so")
                || name.starts_with("libgallium")
                || name.starts_with("libLLVM")
                || name.starts_with("libnvidia-glcore")
        })
        .map(str::to_string)
        .collect();
    found.dedup();
    found
}

/// The scratch folders, the servers and the app's configuration, shared by every scenario and
/// made once; with what one scenario leaves for those that need it.
pub struct World {
    pub home: PathBuf,
    pub projects: PathBuf,
    pub voices_dir: PathBuf,
    pub config: PathBuf,
    models: PathBuf,
    app: PathBuf,
    /// The app's default server (the first session's configuration): a fake that holds every
    /// request until released, so a flood keeps both text slots busy; it also proves that
    /// cleanup off sends nothing.
    pub fake: FakeUpstream,
    pub release: Arc<Notify>,
    /// The real text server the cleanup, the narration, Settings and the benchmark use.
    pub llama: LlamaServer,
    /// A microphone that speaks the interview sample (ALSA's file plugin over the null device):
    /// recording works with no sound card and hears real speech.
    microphone: SpeakingMicrophone,
    pub measurements: Measurements,
    /// The text of segment 1 as the text model cleaned it and the user accepted it.
    pub cleaned: Option<String>,
    /// The two-speaker conversation as transcribed.
    pub conversation: Option<ConversationTurns>,
    /// What the second session was started with.
    pub second: Option<SecondSession>,
}

/// The two-speaker conversation: the speaker of the second turn, and that turn's segment.
pub struct ConversationTurns {
    pub second_id: &'static str,
    pub turn: usize,
}

/// The second session's planted jobs, and the text server's prompt count before it started.
pub struct SecondSession {
    pub cleanup_job: String,
    pub speak_job: String,
    pub prompts_before: f64,
}

/// Cold start, idle memory and the window's responsiveness, written to
/// `target/ui-measurements.json` when the first session ends.
#[derive(Default)]
pub struct Measurements {
    cold_start_ms: Option<u128>,
    idle_rss_kib: Option<(u64, u64)>,
    /// The app's process and its web view processes, the app first.
    pub app_tree: Vec<u32>,
    /// The window idle, for comparison with it busy: what the measurement itself costs (the
    /// WebDriver requests through tauri-driver and WebKitWebDriver).
    pub idle: Responsiveness,
    pub during_load: Option<Responsiveness>,
    pub during_batch: Option<Responsiveness>,
    /// The three-hour project's figures (open, scroll, search, typing, save).
    pub long_project: Option<serde_json::Value>,
}

/// The three-hour project's timings, in ms, each in the window.
#[derive(Default)]
pub struct LongProjectTimes {
    pub open_ms: Vec<f64>,
    pub scroll_ms: Vec<f64>,
    pub search_ms: Vec<f64>,
    pub typing_ms: Vec<f64>,
    pub save_ms: Vec<f64>,
    /// Edit mode switched on (to the rows' words drawn) and off (to their text fields).
    pub edit_mode_ms: Vec<f64>,
    /// Commands' round trips while a cut is placed in the three-hour recording.
    pub while_cutting_ms: Vec<f64>,
}

impl Measurements {
    pub fn to_json(&self) -> serde_json::Value {
        let summary = |r: &Option<Responsiveness>| r.as_ref().map(Responsiveness::summary);
        serde_json::json!({
            "cold_start_to_interactive_ms": self.cold_start_ms,
            "idle_rss_app_kib": self.idle_rss_kib.map(|(app, _)| app),
            "idle_rss_with_webview_kib": self.idle_rss_kib.map(|(_, tree)| tree),
            "responsiveness_idle": self.idle.summary(),
            "responsiveness_while_a_model_loads": summary(&self.during_load),
            "responsiveness_while_batch_work_runs": summary(&self.during_batch),
            "three_hour_project": self.long_project,
        })
    }

    /// Prints the figures, and writes them to `target/ui-measurements.json` when the
    /// scenarios that measure the window busy ran (a run of a few keeps the last full one's).
    pub fn write(&self) {
        let measurements = self.to_json();
        eprintln!("desktop measurements: {measurements}");
        if self.during_load.is_none() || self.during_batch.is_none() || self.long_project.is_none()
        {
            eprintln!("not written to target/ui-measurements.json: the suite ran in part");
            return;
        }
        std::fs::write(
            repo_root().join("target/ui-measurements.json"),
            serde_json::to_vec_pretty(&measurements).unwrap(),
        )
        .unwrap();
    }
}

impl World {
    pub async fn new() -> World {
        let home = std::env::temp_dir().join(format!("headroom-ui-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let projects = home.join("projects");
        std::fs::create_dir_all(&projects).unwrap();
        let voices_dir = home.join("voices");
        let release = Arc::new(Notify::new());
        let fake = FakeUpstream::start(Behavior::HoldHeaders(release.clone()), 4096).await;
        let llama = LlamaServer::start().await;
        let config = home.join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[llm]\nurl = \"{}\"\n\n[text_lane]\nmax_in_flight = 2\nmax_waiting = 0\n",
                fake.base_url()
            ),
        )
        .unwrap();
        let models = std::env::var_os("HEADROOM_MODELS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(headroom_speech::models::default_models_dir);
        let microphone = headroom_tests::microphone::speaking_microphone(
            &home.join("microphone"),
            &repo_root().join("samples/interview.flac"),
            // Silence after the speech: the recording (at most 600 s) goes on past the file's end.
            5.0,
        );
        World {
            home,
            projects,
            voices_dir,
            config,
            models,
            app: PathBuf::from(env!("CARGO_BIN_EXE_headroom-desktop")),
            fake,
            release,
            llama,
            microphone,
            measurements: Measurements::default(),
            cleaned: None,
            conversation: None,
            second: None,
        }
    }

    /// The first session: the app on the fake text server, with the speaking microphone.
    /// Measures its cold start and its idle memory.
    pub async fn first_session(&mut self) -> Desktop {
        let ui = Desktop::start(&[
            ("HEADROOM_PROJECTS_DIR", &self.projects),
            ("HEADROOM_VOICES_DIR", &self.voices_dir),
            ("HEADROOM_CONFIG", &self.config),
            ("HEADROOM_MODELS_DIR", &self.models),
            ("ALSA_CONFIG_PATH", &self.microphone.config),
            ("HOME", &self.home),
        ])
        .await;
        let tree = app_process_tree(&self.app);
        self.measurements.idle_rss_kib = Some(app_tree_rss_kib(&tree));
        self.measurements.app_tree = tree;
        self.measurements.cold_start_ms = Some(ui.cold_start_ms);
        ui
    }

    /// A second session on a replayed GPU trace (this machine has no GPU), whose cloning
    /// server is on another machine (TEST-NET: nothing answers there) with a password in its
    /// URL; with two jobs a crash interrupted, left in the interview project as a killed app
    /// leaves them (one cleanup, one synthesis), and its segments' suggestions cleared.
    pub async fn second_session(&mut self) -> Desktop {
        let trace = self.home.join("gpu-trace.json");
        std::fs::write(
            &trace,
            r#"{"total_mib": 24576, "used_mib": [8000, 12000, 16000, 21000, 22000]}"#,
        )
        .unwrap();
        std::fs::write(
            &self.config,
            format!(
                "[llm]\nurl = \"{}\"\n\n[text_lane]\naudio_headroom_mib = 4096\n\n\
                 [cloning]\nurl = \"http://alice:s3cret-pw@192.0.2.1:4123\"\n",
                self.llama.base_url()
            ),
        )
        .unwrap();
        let store = self.store();
        let planted = |kind| {
            let job = store.start_job("interview", kind).unwrap();
            job.id().to_string() // dropped without end(): interrupted
        };
        let cleanup_job = planted(JobKind::Cleanup {
            rules_only: true,
            accept: false,
        });
        let speak_job = planted(JobKind::Synthesize { segment: Some(0) });
        store
            .update("interview", |p| {
                p.segments.iter_mut().for_each(|s| s.suggestion = None);
                Ok::<_, ProjectError>(())
            })
            .unwrap();
        let prompts_before = self.llama.metric("llamacpp:prompt_tokens_total").await;
        self.second = Some(SecondSession {
            cleanup_job,
            speak_job,
            prompts_before,
        });
        Desktop::start(&[
            ("HEADROOM_PROJECTS_DIR", &self.projects),
            ("HEADROOM_VOICES_DIR", &self.voices_dir),
            ("HEADROOM_CONFIG", &self.config),
            ("HEADROOM_MODELS_DIR", &self.models),
            ("HEADROOM_GPU_REPLAY", &trace),
            ("HOME", &self.home),
        ])
        .await
    }

    /// The projects folder as the app's core reads it.
    pub fn store(&self) -> ProjectStore {
        ProjectStore::new(&self.projects)
    }
}
