//! Which speech models are in memory, and for how long. Every model (a Whisper engine, the
//! voice activity detector, a neural voice, the speaker embedder) is loaded on first use into
//! a [`Resident`] slot, registered with the one [`Residency`] of the process. A model nobody
//! has used for the idle time is let go, and "free memory" lets go of every model no job is
//! using at once; either way it is loaded again when next needed.
//!
//! What each model costs is measured, not estimated: the process's resident memory before and
//! after it loads (models load one at a time, on the audio lane).

use headroom_base::sync::Locked;
use serde::Serialize;
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A model in memory (or being loaded into it), as the app and CLI show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ResidentModel {
    /// The model and how it is held, e.g. `whisper-base (int8)`.
    pub name: String,
    /// What it is for: `transcription`, `voice activity`, `voice`, `speaker embedding`.
    pub role: String,
    /// Resident memory the process gained when it loaded, in MiB (`None` where the system
    /// does not say, and while it loads).
    pub resident_mib: Option<f64>,
    /// Seconds since a job last took it.
    pub idle_secs: f64,
    /// Whether a job holds it now (it is then never let go).
    pub in_use: bool,
    /// Whether it is being loaded now (for a job waiting on it); it is then not yet usable.
    pub loading: bool,
}

/// The process's memory and the models in it, as the app and CLI show them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct MemoryView {
    /// The whole process's resident memory now, in MiB (`None` where the system does not say).
    pub process_mib: Option<f64>,
    /// How long an unused model stays loaded; `None`: until memory is freed by hand.
    pub idle_after_secs: Option<f64>,
    pub models: Vec<ResidentModel>,
    /// The models just let go, when this answers "free memory".
    pub released: Vec<ResidentModel>,
}

/// One model's place in memory: empty until first used.
///
/// Two locks: `load` is held for a whole load (seconds, for Whisper or Kokoro), so jobs
/// asking for the model at once load it once; `state` is held only to read or change what is
/// in memory, never during a load, so reading what is resident (the app's Memory panel, `GET
/// /v1/headroom/memory`) and freeing memory never wait for a load.
pub struct Resident<T> {
    name: String,
    role: &'static str,
    load: Mutex<()>,
    state: Mutex<State<T>>,
}

struct State<T> {
    held: Option<Held<T>>,
    /// A load is running (`held` is then empty).
    loading: bool,
}

struct Held<T> {
    value: Arc<T>,
    last_used: Instant,
    resident_bytes: Option<u64>,
}

/// Marks a slot as loading for as long as it lives, however the load ends (a panic included).
struct Loading<'a, T> {
    state: &'a Mutex<State<T>>,
}

impl<T> Drop for Loading<'_, T> {
    fn drop(&mut self) {
        lock(self.state).loading = false;
    }
}

/// A lock whose data stays consistent whatever panicked while it was held (every change under
/// these locks is one assignment).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.locked()
}

impl<T> Resident<T> {
    fn new(name: String, role: &'static str) -> Resident<T> {
        Resident {
            name,
            role,
            load: Mutex::new(()),
            state: Mutex::new(State {
                held: None,
                loading: false,
            }),
        }
    }

    /// The model if it is in memory, marked as used now.
    fn take(&self) -> Option<Arc<T>> {
        let mut state = lock(&self.state);
        let held = state.held.as_mut()?;
        held.last_used = Instant::now();
        Some(held.value.clone())
    }

    /// The model, loaded by `load` (on the calling thread) when it is not in memory. A caller
    /// asking while another loads it waits for that load and shares its model; a failed load
    /// leaves the slot empty, for the next caller to try again.
    pub fn get_or_load<E>(&self, load: impl FnOnce() -> Result<T, E>) -> Result<Arc<T>, E> {
        if let Some(value) = self.take() {
            return Ok(value);
        }
        let _loader = lock(&self.load);
        // Loaded by the caller this one waited for.
        if let Some(value) = self.take() {
            return Ok(value);
        }
        lock(&self.state).loading = true;
        let loading = Loading { state: &self.state };
        let before = resident_bytes();
        let started = Instant::now();
        let span = tracing::info_span!("load model", model = %self.name);
        let value = Arc::new(span.in_scope(load)?);
        let after = resident_bytes();
        let resident = before.zip(after).map(|(b, a)| a.saturating_sub(b));
        tracing::info!(
            model = %self.name,
            resident_mib = resident.map(|b| b as f64 / MIB),
            load_ms = started.elapsed().as_millis() as u64,
            "model loaded"
        );
        lock(&self.state).held = Some(Held {
            value: value.clone(),
            last_used: Instant::now(),
            resident_bytes: resident,
        });
        drop(loading);
        Ok(value)
    }

    fn view_of(&self, state: &State<T>, now: Instant) -> Option<ResidentModel> {
        let Some(h) = state.held.as_ref() else {
            return state.loading.then(|| ResidentModel {
                name: self.name.clone(),
                role: self.role.to_string(),
                resident_mib: None,
                idle_secs: 0.0,
                in_use: true,
                loading: true,
            });
        };
        let in_use = Arc::strong_count(&h.value) > 1;
        Some(ResidentModel {
            name: self.name.clone(),
            role: self.role.to_string(),
            resident_mib: h.resident_bytes.map(|b| b as f64 / MIB),
            idle_secs: if in_use {
                0.0
            } else {
                now.saturating_duration_since(h.last_used).as_secs_f64()
            },
            in_use,
            loading: false,
        })
    }
}

const MIB: f64 = 1024.0 * 1024.0;

fn resident_bytes() -> Option<u64> {
    headroom_gpu::process_resident_bytes(std::process::id()).ok()
}

/// What [`Residency`] needs of a slot, whatever model it holds.
trait Slot: Send + Sync {
    fn view(&self, now: Instant) -> Option<ResidentModel>;
    /// Lets go of the model if no job holds it and (with `idle`) it has been idle that long.
    fn release(&self, idle: Option<Duration>, now: Instant) -> Option<ResidentModel>;
}

impl<T: Send + Sync> Slot for Resident<T> {
    fn view(&self, now: Instant) -> Option<ResidentModel> {
        self.view_of(&lock(&self.state), now)
    }

    fn release(&self, idle: Option<Duration>, now: Instant) -> Option<ResidentModel> {
        let mut state = lock(&self.state);
        // Nothing to let go while it loads: the model is not in memory yet.
        let view = self.view_of(&state, now).filter(|v| !v.loading)?;
        let h = state.held.as_mut()?;
        if Arc::strong_count(&h.value) > 1 {
            // A job is using it: its idle time starts when the job lets go.
            h.last_used = now;
            return None;
        }
        if idle.is_some_and(|idle| now.saturating_duration_since(h.last_used) < idle) {
            return None;
        }
        // Dropped outside the lock: a model's own teardown may take a while.
        let model = state.held.take();
        drop(state);
        drop(model);
        tracing::info!(model = %self.name, "model released");
        Some(view)
    }
}

/// Every model slot of the process, and how long an unused model stays.
pub struct Residency {
    slots: Mutex<BTreeMap<String, Registered>>,
    idle_after: Mutex<Option<Duration>>,
}

struct Registered {
    slot: Arc<dyn Slot>,
    typed: Arc<dyn Any + Send + Sync>,
}

impl Residency {
    /// Models are let go after `idle_after` unused (`None`: only when asked to free memory).
    pub fn new(idle_after: Option<Duration>) -> Residency {
        Residency {
            slots: Mutex::new(BTreeMap::new()),
            idle_after: Mutex::new(idle_after),
        }
    }

    /// The slot for the model called `name`, created empty the first time.
    ///
    /// # Panics
    /// If `name` was first registered for another type of model: names are unique per model.
    pub fn slot<T: Send + Sync + 'static>(
        &self,
        name: &str,
        role: &'static str,
    ) -> Arc<Resident<T>> {
        let mut slots = lock(&self.slots);
        if let Some(registered) = slots.get(name) {
            return registered
                .typed
                .clone()
                .downcast::<Resident<T>>()
                .unwrap_or_else(|_| panic!("{name} is registered for another kind of model"));
        }
        let slot = Arc::new(Resident::<T>::new(name.to_string(), role));
        slots.insert(
            name.to_string(),
            Registered {
                slot: slot.clone(),
                typed: slot.clone(),
            },
        );
        slot
    }

    /// The models in memory now, by name.
    pub fn resident(&self) -> Vec<ResidentModel> {
        let now = Instant::now();
        self.slots()
            .iter()
            .filter_map(|slot| slot.view(now))
            .collect()
    }

    /// The process's memory and its models now, with `released` (what was just let go).
    pub fn view(&self, released: Vec<ResidentModel>) -> MemoryView {
        MemoryView {
            process_mib: resident_bytes().map(|b| b as f64 / MIB),
            idle_after_secs: self.idle_after().map(|d| d.as_secs_f64()),
            models: self.resident(),
            released,
        }
    }

    pub fn idle_after(&self) -> Option<Duration> {
        *lock(&self.idle_after)
    }

    pub fn set_idle_after(&self, idle_after: Option<Duration>) {
        *lock(&self.idle_after) = idle_after;
    }

    /// Lets go of the models idle for the idle time; returns them.
    pub fn release_idle(&self) -> Vec<ResidentModel> {
        match self.idle_after() {
            Some(idle) => self.release(Some(idle), Instant::now()),
            None => Vec::new(),
        }
    }

    /// "Free memory": lets go of every model no job is using now; returns them.
    pub fn free_memory(&self) -> Vec<ResidentModel> {
        self.release(None, Instant::now())
    }

    fn release(&self, idle: Option<Duration>, now: Instant) -> Vec<ResidentModel> {
        let released: Vec<ResidentModel> = self
            .slots()
            .iter()
            .filter_map(|slot| slot.release(idle, now))
            .collect();
        if !released.is_empty() {
            headroom_base::allocator::return_free_memory();
        }
        released
    }

    /// The slots, copied out so no model's lock is taken under the registry's.
    fn slots(&self) -> Vec<Arc<dyn Slot>> {
        let slots = lock(&self.slots);
        slots.values().map(|r| r.slot.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(value: u32) -> impl FnOnce() -> Result<u32, std::convert::Infallible> {
        move || Ok(value)
    }

    #[test]
    fn a_model_loads_once_and_is_let_go_only_when_idle_and_unused() {
        let residency = Residency::new(Some(Duration::from_secs(60)));
        let slot = residency.slot::<u32>("model-a", "transcription");
        let mut loads = 0;
        let first = slot
            .get_or_load(|| {
                loads += 1;
                load(7)()
            })
            .unwrap();
        let again = slot.get_or_load(load(8)).unwrap();
        assert_eq!((*first, *again, loads), (7, 7, 1), "loaded once");
        assert!(Arc::ptr_eq(&residency.slot::<u32>("model-a", "x"), &slot));

        let later = Instant::now() + Duration::from_secs(120);
        assert!(
            residency
                .release(Some(Duration::from_secs(60)), later)
                .is_empty(),
            "a job holds it"
        );
        let view = &residency.resident()[0];
        assert!(view.in_use && view.name == "model-a" && view.role == "transcription");
        drop((first, again));
        // Held until now by a job, so its idle time started at `later`.
        assert!(residency
            .release(
                Some(Duration::from_secs(60)),
                later + Duration::from_secs(30)
            )
            .is_empty());
        let released = residency.release(
            Some(Duration::from_secs(60)),
            later + Duration::from_secs(61),
        );
        assert_eq!(released.len(), 1);
        assert!(residency.resident().is_empty());
        // Loaded again when next needed.
        assert_eq!(*slot.get_or_load(load(9)).unwrap(), 9);
    }

    #[test]
    fn free_memory_lets_go_of_every_unused_model_and_keeps_the_used_ones() {
        let residency = Residency::new(None);
        let a = residency.slot::<u32>("a", "voice");
        let b = residency.slot::<String>("b", "voice activity");
        let _a = a.get_or_load(load(1)).unwrap();
        b.get_or_load(|| Ok::<_, std::convert::Infallible>("vad".to_string()))
            .unwrap();
        assert!(residency.release_idle().is_empty(), "no idle time: kept");
        let freed = residency.free_memory();
        assert_eq!(
            freed.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["b"]
        );
        let left = residency.resident();
        assert_eq!(left.len(), 1);
        assert!(left[0].name == "a" && left[0].in_use);
    }

    #[test]
    fn a_failed_load_leaves_the_slot_empty() {
        let residency = Residency::new(None);
        let slot = residency.slot::<u32>("a", "voice");
        assert!(slot.get_or_load(|| Err("no such file")).is_err());
        assert!(residency.resident().is_empty());
        assert_eq!(*slot.get_or_load(load(3)).unwrap(), 3);
    }

    /// A load that runs until the test lets it finish: `started` says it is running.
    fn blocked_load(
        started: std::sync::mpsc::Sender<()>,
        finish: std::sync::mpsc::Receiver<u32>,
    ) -> impl FnOnce() -> Result<u32, std::convert::Infallible> {
        move || {
            started.send(()).unwrap();
            Ok(finish.recv().unwrap())
        }
    }

    #[test]
    fn reading_and_freeing_memory_never_wait_for_a_load() {
        use std::sync::mpsc::{channel, RecvTimeoutError};
        let residency = Arc::new(Residency::new(None));
        let idle = residency.slot::<u32>("idle", "voice");
        idle.get_or_load(load(1)).unwrap();
        let slot = residency.slot::<u32>("whisper", "transcription");
        let (started, load_started) = channel();
        let (finish, load_finishes) = channel();
        let loader = {
            let slot = slot.clone();
            std::thread::spawn(move || {
                *slot
                    .get_or_load(blocked_load(started, load_finishes))
                    .unwrap()
            })
        };
        load_started.recv().unwrap();

        // From another thread, as the app's window asks: each answer comes while the load is
        // still blocked. (A timeout is the failure, never the synchronization: the load only
        // ends when this test sends it a value.)
        let (answers, answered) = channel();
        {
            let residency = residency.clone();
            std::thread::spawn(move || {
                let resident = residency.resident();
                let freed = residency.free_memory();
                let view = residency.view(Vec::new());
                answers.send((resident, freed, view)).unwrap();
            });
        }
        let (resident, freed, view) = match answered.recv_timeout(Duration::from_secs(30)) {
            Ok(answers) => answers,
            Err(RecvTimeoutError::Timeout) => panic!("reading what is resident waited for a load"),
            Err(e) => panic!("{e}"),
        };
        let whisper = resident.iter().find(|m| m.name == "whisper").unwrap();
        assert!(
            whisper.loading && whisper.resident_mib.is_none(),
            "{whisper:?}"
        );
        assert_eq!(
            freed.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            ["idle"],
            "the idle model is let go; the loading one is not (it is not in memory yet)"
        );
        assert_eq!(view.models.len(), 1);
        assert!(view.models[0].loading);

        // A second job asking for the model meanwhile waits for this load and shares it.
        let (asked, second_asked) = channel();
        let second = {
            let slot = slot.clone();
            std::thread::spawn(move || {
                asked.send(()).unwrap();
                slot.get_or_load(|| -> Result<u32, std::convert::Infallible> {
                    panic!("the model was loaded twice")
                })
                .map(|m| *m)
            })
        };
        second_asked.recv().unwrap();
        finish.send(7).unwrap();
        assert_eq!(loader.join().unwrap(), 7);
        assert_eq!(second.join().unwrap().unwrap(), 7);
        let loaded = residency.resident();
        assert_eq!(loaded.len(), 1);
        assert!(!loaded[0].loading && loaded[0].name == "whisper");
    }

    #[test]
    fn a_load_that_panics_leaves_the_slot_empty_and_usable() {
        let residency = Residency::new(None);
        let slot = residency.slot::<u32>("a", "voice");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            slot.get_or_load(|| -> Result<u32, std::convert::Infallible> { panic!("bad model") })
        }));
        assert!(panicked.is_err());
        assert!(residency.resident().is_empty(), "not shown as loading");
        assert_eq!(*slot.get_or_load(load(4)).unwrap(), 4);
    }

    #[test]
    #[should_panic(expected = "another kind of model")]
    fn one_name_is_one_kind_of_model() {
        let residency = Residency::new(None);
        residency.slot::<u32>("a", "voice");
        residency.slot::<String>("a", "voice");
    }
}
