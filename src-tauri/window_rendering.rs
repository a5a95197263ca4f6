//! How the window is drawn. By default on the CPU: Headroom's window is forms, text and SVG,
//! and the GPU belongs to the speech and text models. Left to its defaults, WebKitGTK opens an
//! EGL display in the app's own process at start-up, only to learn which renderer and DRM
//! device to use; that loads the system's GL driver (with Mesa, libLLVM and the gallium
//! driver: about 55 MiB resident on the development machine) into a process that then never
//! draws with it. Drawn on the CPU, the app idles at 108 MiB instead of 167 MiB, and its web
//! process at 172 MiB instead of 266 MiB (`scripts/measure-desktop`). The same setting is what
//! Tauri apps ship where WebKit's DMA-BUF renderer leaves a blank window (NVIDIA's driver,
//! which is the GPU this product is for, among them).
//!
//! `HEADROOM_WINDOW_RENDERING=gpu` gives the window back to WebKit's defaults. The toolkit
//! reads these variables once, before the first window, so the choice is made at the edge
//! ([`plan`], applied by `main` before any thread starts) and holds until the app restarts.

use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use ts_rs::TS;

/// The variable that chooses how the window is drawn.
pub const VARIABLE: &str = "HEADROOM_WINDOW_RENDERING";

/// How the window is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "snake_case")]
pub enum WindowRendering {
    /// On the CPU, with no GL driver in the app's process (the default).
    Software,
    /// As the web view chooses (WebKitGTK: DMA-BUF buffers and the system's GL driver); the
    /// only mode off Linux.
    Gpu,
}

/// A value of [`VARIABLE`] that names no mode.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{VARIABLE} must be \"software\" or \"gpu\", got {0:?}; using the default")]
pub struct UnknownRendering(pub String);

/// What `main` does to the environment before the toolkit starts, and why.
#[derive(Debug, PartialEq, Eq)]
pub struct WindowSetup {
    pub rendering: WindowRendering,
    /// The variables to set, in order; each one the user had set is left out (theirs holds).
    pub variables: Vec<(&'static str, OsString)>,
    /// A value of [`VARIABLE`] that was not understood (reported once logging is up).
    pub problem: Option<UnknownRendering>,
}

/// The value named when no DRM render node exists (no GPU, a virtual machine, Xvfb): WebKit
/// then has no device to hand its web process either way, and finds none by this name.
pub const NO_RENDER_NODE: &str = "none";

/// Decides how the window is drawn from the process environment (`var`, the binary passes
/// `std::env::var_os`) and the machine's DRM render nodes ([`render_nodes`]).
pub fn plan(var: impl Fn(&str) -> Option<OsString>, render_nodes: &[PathBuf]) -> WindowSetup {
    let (rendering, problem) = match var(VARIABLE) {
        None => (WindowRendering::Software, None),
        Some(value) => match value.to_string_lossy().trim().to_ascii_lowercase().as_str() {
            "" | "software" => (WindowRendering::Software, None),
            "gpu" => (WindowRendering::Gpu, None),
            _ => (
                WindowRendering::Software,
                Some(UnknownRendering(value.to_string_lossy().into_owned())),
            ),
        },
    };
    if !cfg!(target_os = "linux") {
        return WindowSetup {
            rendering: WindowRendering::Gpu,
            variables: Vec::new(),
            problem,
        };
    }
    let mut variables = Vec::new();
    if rendering == WindowRendering::Software {
        let render_node = render_nodes
            .first()
            .map(|node| node.clone().into_os_string())
            .unwrap_or_else(|| NO_RENDER_NODE.into());
        let wanted: [(&'static str, OsString); 3] = [
            // GTK's display start-up probes GLX for GL visuals the window never uses.
            ("GDK_GL", "disable".into()),
            // WebKit's UI process takes each frame as a shared-memory bitmap instead of
            // importing DMA-BUF buffers through EGL.
            ("WEBKIT_DISABLE_DMABUF_RENDERER", "1".into()),
            // The DRM device WebKit hands its web process; named here, WebKit does not open an
            // EGL display in the app's process to ask for it.
            ("WEBKIT_WEB_RENDER_DEVICE_FILE", render_node),
        ];
        variables.extend(
            wanted
                .into_iter()
                .filter(|(name, _)| var(name).is_none_or(|v| v.is_empty())),
        );
    }
    WindowSetup {
        rendering,
        variables,
        problem,
    }
}

/// The DRM render nodes under `dri` (`/dev/dri` on Linux), in name order; none where the
/// directory is missing (no GPU driver loaded, a container, another OS).
pub fn render_nodes(dri: &Path) -> Vec<PathBuf> {
    let mut nodes: Vec<PathBuf> = std::fs::read_dir(dri)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().starts_with("renderD"))
        .map(|entry| entry.path())
        .collect();
    nodes.sort();
    nodes
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn names(setup: &WindowSetup) -> Vec<&'static str> {
        setup.variables.iter().map(|(name, _)| *name).collect()
    }

    #[test]
    fn by_default_the_window_is_drawn_on_the_cpu_with_no_gl_probe() {
        let setup = plan(env(&[]), &[]);
        assert_eq!(setup.rendering, WindowRendering::Software);
        assert_eq!(setup.problem, None);
        assert_eq!(
            setup.variables,
            vec![
                ("GDK_GL", OsString::from("disable")),
                ("WEBKIT_DISABLE_DMABUF_RENDERER", OsString::from("1")),
                (
                    "WEBKIT_WEB_RENDER_DEVICE_FILE",
                    OsString::from(NO_RENDER_NODE)
                ),
            ]
        );
    }

    #[test]
    fn the_first_render_node_is_the_one_handed_to_the_web_process() {
        let nodes = [
            PathBuf::from("/dev/dri/renderD128"),
            PathBuf::from("/dev/dri/renderD129"),
        ];
        let setup = plan(env(&[]), &nodes);
        let device = setup
            .variables
            .iter()
            .find(|(name, _)| *name == "WEBKIT_WEB_RENDER_DEVICE_FILE")
            .map(|(_, value)| value.clone());
        assert_eq!(device, Some(OsString::from("/dev/dri/renderD128")));
    }

    #[test]
    fn what_the_user_set_holds() {
        let setup = plan(
            env(&[("WEBKIT_DISABLE_DMABUF_RENDERER", "0"), ("GDK_GL", "")]),
            &[],
        );
        assert_eq!(names(&setup), ["GDK_GL", "WEBKIT_WEB_RENDER_DEVICE_FILE"]);
    }

    #[test]
    fn gpu_leaves_the_environment_to_webkit() {
        for value in ["gpu", "GPU", " gpu "] {
            let setup = plan(env(&[(VARIABLE, value)]), &[]);
            assert_eq!(setup.rendering, WindowRendering::Gpu, "{value:?}");
            assert!(setup.variables.is_empty(), "{value:?}");
        }
    }

    #[test]
    fn an_unknown_mode_is_reported_and_the_window_drawn_on_the_cpu() {
        let setup = plan(env(&[(VARIABLE, "vulkan")]), &[]);
        assert_eq!(setup.rendering, WindowRendering::Software);
        assert_eq!(setup.problem, Some(UnknownRendering("vulkan".into())));
        assert_eq!(setup.variables.len(), 3);
        let message = setup.problem.unwrap().to_string();
        assert!(
            message.contains(VARIABLE) && message.contains("\"vulkan\""),
            "{message}"
        );
    }

    #[test]
    fn render_nodes_are_the_render_devices_in_name_order() {
        let dri = tempfile::tempdir().unwrap();
        for name in ["card0", "renderD129", "renderD128", "by-path"] {
            std::fs::write(dri.path().join(name), b"").unwrap();
        }
        assert_eq!(
            render_nodes(dri.path()),
            [dri.path().join("renderD128"), dri.path().join("renderD129")]
        );
        assert!(render_nodes(&dri.path().join("missing")).is_empty());
    }
}
