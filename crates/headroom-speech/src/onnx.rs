//! ONNX Runtime, loaded at run time from the `libonnxruntime.so` installed beside a model (the
//! PyPI `onnxruntime` wheel's), so Headroom neither links nor bundles it. The neural voices and
//! the speaker embedder share one runtime per process.
//!
//! Every model run goes through [`run`], where batch work gives way to interactive work
//! ([`headroom_base::cpu`]): it waits before a run while an interactive job runs, and a run
//! an interactive job interrupts is stopped and made again after it.

use headroom_base::cpu;
use ort::session::{RunOptions, Session, SessionInputValue, SessionOutputs};
use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

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
        // Idle workers sleep instead of spinning: the cores they would burn are the ones
        // another job (or another program) is waiting for.
        .and_then(|b| b.with_intra_op_spinning(false))
        .and_then(|b| b.commit_from_file(&path))
        .map_err(|e| format!("cannot load {}: {e}", path.display()))
}

/// A model run's named inputs, as `ort::inputs!` makes them.
pub type Inputs = Vec<(Cow<'static, str>, SessionInputValue<'static>)>;

/// Runs `session` on what `inputs` makes and reads the outputs with `read`. In batch work it
/// first gives way to interactive work, and a run stopped part-way for an interactive job is
/// made again once that job is done (with new inputs: a run consumes its own).
pub fn run<R>(
    session: &Mutex<Session>,
    inputs: impl Fn() -> ort::Result<Inputs>,
    read: impl FnOnce(&SessionOutputs<'_>) -> ort::Result<R>,
) -> Result<R, String> {
    let mut read = Some(read);
    loop {
        cpu::give_way();
        let mut session = session
            .lock()
            .map_err(|_| "the model's session is poisoned".to_string())?;
        let options = Arc::new(RunOptions::new().map_err(|e| e.to_string())?);
        let stop = options.clone();
        let attempt = cpu::preemptible(
            move || {
                let _ = stop.terminate();
            },
            || -> ort::Result<R> {
                let outputs = session.run_with_options(inputs()?, &*options)?;
                let read = read
                    .take()
                    .expect("read once, after the one run that finished");
                read(&outputs)
            },
        );
        match attempt.result {
            Err(_) if attempt.stopped && read.is_some() => continue,
            result => return result.map_err(|e| e.to_string()),
        }
    }
}
