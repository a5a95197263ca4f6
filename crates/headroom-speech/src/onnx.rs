//! ONNX Runtime, loaded at run time from the `libonnxruntime.so` installed beside a model (the
//! PyPI `onnxruntime` wheel's), so Headroom neither links nor bundles it. The neural voices and
//! the speaker embedder share one runtime per process.

use ort::session::Session;
use std::path::Path;
use std::sync::OnceLock;

/// The runtime can be initialised once per process; the first library loaded serves every model.
static RUNTIME: OnceLock<Result<(), String>> = OnceLock::new();

/// Loads ONNX Runtime from `dir/libonnxruntime.so` (once), then the model `dir/file` with as many
/// intra-op threads as `threads` (0: every core).
pub fn session(dir: &Path, file: &str, threads: usize) -> Result<Session, String> {
    let lib = dir.join("libonnxruntime.so");
    RUNTIME
        .get_or_init(|| {
            ort::init_from(lib.display().to_string())
                .commit()
                .map(|_| ())
                .map_err(|e| format!("cannot load ONNX Runtime from {}: {e}", lib.display()))
        })
        .clone()?;
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    let path = dir.join(file);
    Session::builder()
        .and_then(|b| b.with_intra_threads(threads))
        .and_then(|b| b.commit_from_file(&path))
        .map_err(|e| format!("cannot load {}: {e}", path.display()))
}
