//! Who computes when both run: Headroom's batch work gives the CPU to a person's interactive
//! work while it runs.
//!
//! The audio lane decides who *starts*. Once a person's job and a batch job (a narration, a
//! transcription upload, a voice match search) run together they share the cores, and without
//! this the person's job slows by as much as the batch job costs: 1.5–3× on two cores. Two
//! means, each cheap and each covering what the other cannot (`headroom bench isolation`
//! measures them):
//!
//! - **Pauses at safe points.** Batch work calls [`give_way`] between steps (a Whisper window
//!   or decoder step, a sentence, a search candidate). While an interactive job runs it waits
//!   there, holding no lock, so the interactive job has the whole machine.
//! - **The system's idle priority inside a step.** [`compute`] runs a batch job's number
//!   crunching (and the programs it starts) on threads at Linux's `SCHED_IDLE`, which get a
//!   core only when nothing else wants it: a step under way when an interactive job starts
//!   costs it almost nothing, and neither does a program such as espeak-ng started by it.
//!   Model runtimes with threads of their own run batch work on threads lowered the same way
//!   ([`lower_this_thread`]; the speech crate keeps a separate ONNX Runtime session for it).
//!
//! Stopping a batch model run part-way when an interactive job starts, and making it again
//! after, was tried and measured: with interactive jobs closer together than one run (a
//! Kokoro sentence), the batch work never finished. The idle priority needs no restart.
//!
//! Batch work is never refused or abandoned for this: it goes on as soon as no interactive job
//! runs, and each batch job reports how long it gave way ([`BatchReport`]). The one
//! [`CpuShare`] of a process is owned by its audio lane; engines deep in the speech crate see
//! it only through the functions here, which do nothing outside a batch job.
//!
//! Threads at `SCHED_IDLE` cannot return to normal priority without privileges, so they are
//! kept apart: the batch pool's threads are made at start and never load a model for
//! interactive use (a model's
//! own threads would inherit the idle priority and serve interactive work at it).

use crate::sync::Locked;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How often a paused batch job looks at its cancellation while it waits.
const CANCEL_CHECK: Duration = Duration::from_millis(50);

/// Interactive jobs that ran beside batch work, kept for the lanes panel.
const RECENT: usize = 10;

/// The process's arbiter between interactive and batch work on the CPU.
pub struct CpuShare {
    state: Mutex<State>,
    changed: Condvar,
    /// Threads at the idle priority for batch compute; `None` when batch work does not give
    /// way (then it computes where it runs, as before).
    pool: Option<rayon::ThreadPool>,
}

#[derive(Default)]
struct State {
    /// Interactive jobs running now.
    interactive: usize,
    next_id: u64,
    /// Batch work running now: its name, how many jobs, how many paused.
    batch: BTreeMap<&'static str, BatchRunning>,
    /// Each interactive job running now, and the batch work it has run beside.
    turns: BTreeMap<u64, BTreeSet<&'static str>>,
    /// Time each kind of batch work has spent paused, since the process started.
    paused_total: BTreeMap<&'static str, Duration>,
    /// The last interactive jobs that ran beside batch work, newest first.
    recent: VecDeque<BesideView>,
}

#[derive(Default, Clone, Copy)]
struct BatchRunning {
    jobs: usize,
    paused: usize,
}

/// What a batch job cost by giving way.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BatchReport {
    /// Time spent paused while interactive work ran.
    pub paused: Duration,
    /// How many times it paused.
    pub pauses: u64,
}

/// Batch work running now, as the lanes panel shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct BatchWorkView {
    /// What the work is, e.g. `transcription`, `speech`, `voice match`.
    pub work: String,
    pub jobs: usize,
    /// Jobs of it paused now, giving way to interactive work.
    pub paused: usize,
}

/// An interactive job that ran while batch work was running: the work that may have slowed
/// it (by as little as a stopped step when batch work gives way).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct BesideView {
    /// The interactive job, e.g. `speech`, `transcription`.
    pub job: String,
    /// The batch work running beside it.
    pub beside: Vec<String>,
    /// When it ended, Unix milliseconds.
    #[cfg_attr(feature = "typescript", ts(type = "number"))]
    pub at_unix_ms: u64,
    #[cfg_attr(feature = "typescript", ts(type = "number"))]
    pub took_ms: u64,
}

/// Batch work's time paused for interactive work, since the process started.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct PausedTotal {
    pub work: String,
    pub paused_secs: f64,
}

/// The arbiter's state now.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct CpuShareView {
    /// Whether batch work gives way (`audio_lane.batch_gives_way`).
    pub batch_gives_way: bool,
    pub interactive_running: usize,
    pub batch: Vec<BatchWorkView>,
    pub paused_total: Vec<PausedTotal>,
    /// The last interactive jobs that ran beside batch work, newest first.
    pub recent_beside: Vec<BesideView>,
}

impl CpuShare {
    /// With `batch_gives_way` off, batch work runs as any other (for comparison in the
    /// benchmark, or where the idle priority is unwanted); interactive jobs are still counted.
    pub fn new(batch_gives_way: bool) -> Arc<CpuShare> {
        let pool = batch_gives_way.then(batch_pool).flatten();
        Arc::new(CpuShare {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
            pool,
        })
    }

    pub fn gives_way(&self) -> bool {
        self.pool.is_some()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // The state is counters only: a panic elsewhere leaves it usable.
        self.state.locked()
    }

    /// An interactive job starts: batch work pauses at its next safe point. It ends when the
    /// returned turn is dropped.
    pub fn interactive(self: &Arc<Self>, job: &'static str) -> InteractiveTurn {
        let id = {
            let mut state = self.state();
            state.interactive += 1;
            let id = state.next_id;
            state.next_id += 1;
            let beside = state.batch.keys().copied().collect();
            state.turns.insert(id, beside);
            id
        };
        InteractiveTurn {
            share: self.clone(),
            id,
            job,
            started: Instant::now(),
            beside: None,
        }
    }

    /// Runs batch work `f` on this thread as `work` (e.g. `transcription`): inside it
    /// [`give_way`], [`compute`] and [`in_batch`] act; `cancelled` is asked while paused so
    /// a cancelled job does not wait for interactive work to end.
    pub fn batch<T>(
        self: &Arc<Self>,
        work: &'static str,
        cancelled: impl Fn() -> bool + Send + Sync + 'static,
        f: impl FnOnce() -> T,
    ) -> (T, BatchReport) {
        {
            let mut state = self.state();
            state.batch.entry(work).or_default().jobs += 1;
            for beside in state.turns.values_mut() {
                beside.insert(work);
            }
        }
        let context = Batch {
            share: self.clone(),
            work,
            cancelled: Arc::new(cancelled),
            stats: Arc::new(BatchStats::default()),
        };
        let stats = context.stats.clone();
        let ended = BatchEnded {
            share: self.clone(),
            work,
        };
        let out = with_batch(Some(context), f);
        drop(ended);
        (out, stats.report())
    }

    /// The arbiter's state now.
    pub fn view(&self) -> CpuShareView {
        let state = self.state();
        CpuShareView {
            batch_gives_way: self.gives_way(),
            interactive_running: state.interactive,
            batch: state
                .batch
                .iter()
                .map(|(work, running)| BatchWorkView {
                    work: work.to_string(),
                    jobs: running.jobs,
                    paused: running.paused,
                })
                .collect(),
            paused_total: state
                .paused_total
                .iter()
                .map(|(work, paused)| PausedTotal {
                    work: work.to_string(),
                    paused_secs: paused.as_secs_f64(),
                })
                .collect(),
            recent_beside: state.recent.iter().cloned().collect(),
        }
    }
}

/// Ends a batch job's registration, however it ends.
struct BatchEnded {
    share: Arc<CpuShare>,
    work: &'static str,
}

impl Drop for BatchEnded {
    fn drop(&mut self) {
        let mut state = self.share.state();
        if let Some(running) = state.batch.get_mut(self.work) {
            running.jobs -= 1;
            if running.jobs == 0 {
                state.batch.remove(self.work);
            }
        }
    }
}

/// An interactive job running; batch work gives way until it is dropped.
pub struct InteractiveTurn {
    share: Arc<CpuShare>,
    id: u64,
    job: &'static str,
    started: Instant,
    beside: Option<BTreeSet<&'static str>>,
}

impl InteractiveTurn {
    /// Ends the turn and says which batch work ran beside it (each may have slowed it).
    pub fn end(mut self) -> BTreeSet<&'static str> {
        self.finish()
    }

    fn finish(&mut self) -> BTreeSet<&'static str> {
        if let Some(beside) = self.beside.take() {
            return beside;
        }
        let beside = {
            let mut state = self.share.state();
            state.interactive -= 1;
            let beside = state.turns.remove(&self.id).unwrap_or_default();
            if !beside.is_empty() {
                state.recent.push_front(BesideView {
                    job: self.job.to_string(),
                    beside: beside.iter().map(|w| w.to_string()).collect(),
                    at_unix_ms: crate::clock::unix_ms(),
                    took_ms: self.started.elapsed().as_millis() as u64,
                });
                state.recent.truncate(RECENT);
            }
            beside
        };
        self.share.changed.notify_all();
        self.beside = Some(BTreeSet::new());
        beside
    }
}

impl Drop for InteractiveTurn {
    fn drop(&mut self) {
        self.finish();
    }
}

#[derive(Default)]
struct BatchStats {
    paused_nanos: AtomicU64,
    pauses: AtomicU64,
}

impl BatchStats {
    fn report(&self) -> BatchReport {
        BatchReport {
            paused: Duration::from_nanos(self.paused_nanos.load(Ordering::Relaxed)),
            pauses: self.pauses.load(Ordering::Relaxed),
        }
    }
}

/// The batch job this thread works for.
#[derive(Clone)]
struct Batch {
    share: Arc<CpuShare>,
    work: &'static str,
    cancelled: Arc<dyn Fn() -> bool + Send + Sync>,
    stats: Arc<BatchStats>,
}

thread_local! {
    static BATCH: RefCell<Option<Batch>> = const { RefCell::new(None) };
}

fn current() -> Option<Batch> {
    BATCH.with(|b| b.borrow().clone())
}

/// Runs `f` with `context` as this thread's batch job, restoring the previous one after.
fn with_batch<T>(context: Option<Batch>, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<Batch>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            BATCH.with(|b| *b.borrow_mut() = previous);
        }
    }
    let previous = BATCH.with(|b| std::mem::replace(&mut *b.borrow_mut(), context));
    let _restore = Restore(previous);
    f()
}

/// The batch job the calling thread works for (if any), to carry into a thread it starts:
/// the new thread then gives way as the job does.
#[derive(Clone)]
pub struct ThisJob(Option<Batch>);

/// The calling thread's batch job, see [`ThisJob`].
pub fn this_job() -> ThisJob {
    ThisJob(current())
}

impl ThisJob {
    /// Runs `f` on this thread as part of the job.
    pub fn enter<T>(self, f: impl FnOnce() -> T) -> T {
        with_batch(self.0, f)
    }
}

/// A safe point in batch work: while an interactive job runs, waits for it to end (or for
/// the batch job to be cancelled). Does nothing outside batch work or when batch work does
/// not give way.
pub fn give_way() {
    let Some(batch) = current() else { return };
    let share = &batch.share;
    if !share.gives_way() {
        return;
    }
    let mut state = share.state();
    if state.interactive == 0 || (batch.cancelled)() {
        return;
    }
    let started = Instant::now();
    if let Some(running) = state.batch.get_mut(batch.work) {
        running.paused += 1;
    }
    tracing::debug!(work = batch.work, "batch work pauses for interactive work");
    while state.interactive > 0 && !(batch.cancelled)() {
        state = share
            .changed
            .wait_timeout(state, CANCEL_CHECK)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
    if let Some(running) = state.batch.get_mut(batch.work) {
        running.paused -= 1;
    }
    let paused = started.elapsed();
    *state.paused_total.entry(batch.work).or_default() += paused;
    drop(state);
    batch
        .stats
        .paused_nanos
        .fetch_add(paused.as_nanos() as u64, Ordering::Relaxed);
    batch.stats.pauses.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(
        work = batch.work,
        paused_ms = paused.as_millis() as u64,
        "batch work resumes"
    );
}

/// Runs compute-heavy batch work (and the parallel iterators and programs inside it) on the
/// idle-priority threads; elsewhere runs `f` where it is. `f` must not load a model, nor
/// wait for a lock another batch computation can hold: a pool thread waiting for its own
/// parallel work runs other queued work meanwhile, which would then wait for that thread.
/// Take such locks before calling `compute`.
pub fn compute<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    let Some(batch) = current() else { return f() };
    let Some(pool) = batch.share.pool.as_ref() else {
        return f();
    };
    if pool.current_thread_index().is_some() {
        return f();
    }
    let inner = batch.clone();
    pool.install(move || with_batch(Some(inner), f))
}

/// Whether the calling thread works for batch work that gives way: where a model runtime
/// chooses its threads (the speech crate's batch ONNX sessions).
pub fn in_batch() -> bool {
    current().is_some_and(|b| b.share.gives_way())
}

/// The batch pool: one thread per core, each at the idle priority from its start.
fn batch_pool() -> Option<rayon::ThreadPool> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("headroom-batch-{i}"))
        .start_handler(|_| lower_this_thread())
        .build()
        .map_err(|e| tracing::warn!("no batch threads ({e}): batch work computes where it runs"))
        .ok()
}

/// Puts the calling thread at the lowest priority the system has for it: `SCHED_IDLE` on
/// Linux (a core only when nothing else wants it; for good: an unprivileged thread cannot
/// come back). Elsewhere it is left as it is.
pub fn lower_this_thread() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sets the calling thread's own policy (pid 0); no memory is shared.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
            tracing::warn!(
                "cannot lower a batch thread's priority: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn batch_work_pauses_at_a_safe_point_while_interactive_work_runs() {
        let share = CpuShare::new(true);
        let turn = share.interactive("test");
        let (at_safe_point, reached) = mpsc::channel();
        let (resumed_tx, resumed) = mpsc::channel();
        let batch = {
            let share = share.clone();
            std::thread::spawn(move || {
                share.batch(
                    "transcription",
                    || false,
                    || {
                        at_safe_point.send(()).unwrap();
                        give_way();
                        resumed_tx.send(()).unwrap();
                    },
                )
            })
        };
        reached.recv().unwrap();
        // Paused: the lanes panel sees it, and it has not gone on.
        let paused = loop {
            let view = share.view();
            if view.batch.first().is_some_and(|b| b.paused == 1) {
                break view;
            }
            std::thread::yield_now();
        };
        assert_eq!(paused.interactive_running, 1);
        assert!(resumed.try_recv().is_err());
        let beside = turn.end();
        assert_eq!(beside.into_iter().collect::<Vec<_>>(), ["transcription"]);
        resumed.recv().unwrap();
        let ((), report) = batch.join().unwrap();
        assert_eq!(report.pauses, 1);
        let after = share.view();
        assert!(after.batch.is_empty());
        assert_eq!(after.paused_total[0].work, "transcription");
        assert_eq!(
            after.paused_total[0].paused_secs,
            report.paused.as_secs_f64()
        );
        assert_eq!(after.recent_beside[0].job, "test");
        assert_eq!(after.recent_beside[0].beside, ["transcription"]);
    }

    #[test]
    fn a_cancelled_batch_job_stops_waiting() {
        let share = CpuShare::new(true);
        let _turn = share.interactive("test");
        let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = cancelled.clone();
        let (at_safe_point, reached) = mpsc::channel();
        let batch = {
            let share = share.clone();
            std::thread::spawn(move || {
                share.batch(
                    "speech",
                    move || flag.load(Ordering::SeqCst),
                    || {
                        at_safe_point.send(()).unwrap();
                        give_way();
                    },
                )
            })
        };
        reached.recv().unwrap();
        cancelled.store(true, Ordering::SeqCst);
        batch.join().unwrap();
    }

    #[test]
    fn outside_batch_work_nothing_waits() {
        let share = CpuShare::new(true);
        let _turn = share.interactive("test");
        give_way();
        assert!(!in_batch());
        assert_eq!(compute(|| 6 * 7), 42);
    }

    #[test]
    fn batch_compute_runs_on_idle_priority_threads_and_keeps_its_job() {
        let share = CpuShare::new(true);
        let ((on_pool, policy, still_batch), _) = share.batch(
            "transcription",
            || false,
            || {
                compute(|| {
                    #[cfg(target_os = "linux")]
                    // SAFETY: reads the calling thread's own policy.
                    let policy = unsafe { libc::sched_getscheduler(0) };
                    #[cfg(not(target_os = "linux"))]
                    let policy = 0;
                    (
                        std::thread::current()
                            .name()
                            .is_some_and(|n| n.starts_with("headroom-batch-")),
                        policy,
                        current().is_some(),
                    )
                })
            },
        );
        assert!(on_pool && still_batch);
        #[cfg(target_os = "linux")]
        assert_eq!(policy, libc::SCHED_IDLE);
        let _ = policy;
        // A share that does not give way computes where it runs.
        let plain = CpuShare::new(false);
        let (name, _) = plain.batch(
            "transcription",
            || false,
            || compute(|| std::thread::current().name().map(str::to_string)),
        );
        assert!(!name.unwrap_or_default().starts_with("headroom-batch-"));
    }
}
