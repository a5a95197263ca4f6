//! ONNX Runtime, loaded at run time from the `libonnxruntime.so` installed beside a model (the
//! PyPI `onnxruntime` wheel's), so Headroom neither links nor bundles it. The neural voices and
//! the speaker embedder share one runtime per process.
//!
//! Every model runs through [`Model::run`]. Batch work ([`headroom_base::cpu`]) gives way to
//! interactive work there: it waits before each run while an interactive job runs, and runs
//! on a second session of the model whose threads are at the system's idle priority, made
//! the first time batch work needs it, so a batch run under way takes only the cores nothing
//! else wants.

use headroom_base::cpu;
use headroom_base::sync::Locked;
use ort::environment::{ThreadManager, ThreadWorker};
use ort::session::{Session, SessionInputValue, SessionOutputs};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// The runtime can be initialised once per process; the first library loaded serves every model.
static RUNTIME: OnceLock<Result<(), String>> = OnceLock::new();

/// Loads ONNX Runtime from `dir/libonnxruntime.so` (once), then the model `dir/file` with as many
/// intra-op threads as `threads` (0: every core).
fn session(dir: &Path, file: &str, threads: usize) -> Result<Session, String> {
    let path = dir.join(file);
    builder(dir, threads)
        .and_then(|b| b.commit_from_file(&path))
        .map_err(|e| format!("cannot load {}: {e}", path.display()))
}

/// A session builder for a model in `dir` (loading the runtime beside it, once).
fn builder(dir: &Path, threads: usize) -> ort::Result<ort::session::builder::SessionBuilder> {
    let lib = dir.join("libonnxruntime.so");
    RUNTIME
        .get_or_init(|| {
            ort::init_from(lib.display().to_string())
                .commit()
                .map(|_| ())
                .map_err(|e| format!("cannot load ONNX Runtime from {}: {e}", lib.display()))
        })
        .clone()
        .map_err(ort::Error::new)?;
    let threads = if threads == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        threads
    };
    Session::builder()?.with_intra_threads(threads)
}

/// A model run's named inputs, as `ort::inputs!` makes them.
pub type Inputs = Vec<(Cow<'static, str>, SessionInputValue<'static>)>;

/// A loaded model: its session for interactive (and any non-batch) work, and, once batch work
/// has used it, a second one for batch work on idle-priority threads.
pub struct Model {
    dir: PathBuf,
    file: &'static str,
    threads: usize,
    session: Mutex<Session>,
    batch: Mutex<Option<Arc<Mutex<Session>>>>,
}

impl Model {
    /// Loads `dir/file` with `threads` intra-op threads (0: every core).
    pub fn load(dir: &Path, file: &'static str, threads: usize) -> Result<Model, String> {
        Ok(Model {
            session: Mutex::new(session(dir, file, threads)?),
            dir: dir.to_path_buf(),
            file,
            threads,
            batch: Mutex::new(None),
        })
    }

    /// Runs the model on what `inputs` makes and reads the outputs with `read`.
    pub fn run<R: Send>(
        &self,
        inputs: impl Fn() -> ort::Result<Inputs> + Sync,
        read: impl FnOnce(&SessionOutputs<'_>) -> ort::Result<R> + Send,
    ) -> Result<R, String> {
        if !cpu::in_batch() {
            return run_on(&self.session, inputs, read);
        }
        cpu::give_way();
        let batch = self.batch_session()?;
        // The calling thread joins the run's work: an idle-priority one too.
        let inputs = &inputs;
        cpu::compute(move || run_on(&batch, inputs, read))
    }

    /// The batch session, made on first use with its threads at the idle priority.
    fn batch_session(&self) -> Result<Arc<Mutex<Session>>, String> {
        let mut batch = self.batch.locked();
        if let Some(session) = batch.as_ref() {
            return Ok(session.clone());
        }
        let session = Arc::new(Mutex::new(batch_session(
            &self.dir,
            self.file,
            self.threads,
        )?));
        tracing::info!(model = %self.dir.join(self.file).display(), "batch session made");
        *batch = Some(session.clone());
        Ok(session)
    }
}

fn run_on<R>(
    session: &Mutex<Session>,
    inputs: impl Fn() -> ort::Result<Inputs>,
    read: impl FnOnce(&SessionOutputs<'_>) -> ort::Result<R>,
) -> Result<R, String> {
    let mut session = session.locked();
    let outputs = session.run(inputs().map_err(|e| e.to_string())?);
    outputs.and_then(|o| read(&o)).map_err(|e| e.to_string())
}

/// Intra-op threads for batch sessions: each lowers itself to the idle priority first.
struct IdleThreads;

impl ThreadManager for IdleThreads {
    type Thread = std::thread::JoinHandle<()>;

    fn create(&mut self, worker: ThreadWorker) -> ort::Result<Self::Thread> {
        std::thread::Builder::new()
            .name("headroom-batch-onnx".into())
            .spawn(move || {
                cpu::lower_this_thread();
                worker.work();
            })
            .map_err(ort::Error::wrap)
    }

    fn join(thread: Self::Thread) -> ort::Result<()> {
        thread
            .join()
            .map_err(|_| ort::Error::new("a batch model thread panicked"))
    }
}

fn batch_session(dir: &Path, file: &str, threads: usize) -> Result<Session, String> {
    builder(dir, threads)
        // Idle batch workers sleep instead of spinning between a run's steps.
        .and_then(|b| b.with_intra_op_spinning(false))
        .and_then(|b| b.with_thread_manager(IdleThreads))
        .and_then(|b| b.commit_from_file(dir.join(file)))
        .map_err(|e| {
            format!(
                "cannot load {} for batch work: {e}",
                dir.join(file).display()
            )
        })
}
