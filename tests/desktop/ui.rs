//! The desktop app driven as QA drives it: the real binary under Xvfb, its real web view
//! through tauri-driver and WebKitWebDriver, every step by `data-testid`. Named scenarios
//! (`scenarios/mod.rs`, each a trial of its own: `cargo test --test desktop_ui -- --list`)
//! walk the whole workflow on one app session (the app owns one window and one WebDriver
//! port, and its start and model loads are the expensive part): projects, transcription and
//! SRT export, the main path by keyboard alone (focus and announcements asserted), cleanup off
//! (nothing sent), a flooded text lane (the rejection and its reason
//! on screen), cleanup on against the real llama-server (streamed, accepted), the GPU panel's
//! no-GPU state, synthesis and a saved WAV, a voice profile, the project narrated (timeline
//! states, waveform A/B, a segment re-run), speakers (a two-voice conversation: named lanes,
//! rename, per-speaker narration, split and merge), the benchmark run from the app, a live
//! recording, the Memory panel, every view in each language and the pseudo-locale with no text
//! cut off; then a second session on a replayed GPU trace: interrupted
//! jobs, the memory chart with baseline and peak, a `gpu_memory_pressure` refusal at the
//! segment, and a cloning server elsewhere held back until allowed.
//! The window's responsiveness is measured while the first model loads and while the narration
//! runs (batch work): a command's round trip and view changes within 100 ms each; and with a
//! three-hour project (made once by the fixture): open, scroll to the end, search, typing and
//! save, each within 100 ms at the 95th percentile.
//! A screenshot of each view lands in `target/ui-screenshots/`; cold start, idle memory and
//! the responsiveness figures (idle too, for comparison) in `target/ui-measurements.json`.
//! The window is drawn on the CPU, so no GL driver is loaded in the app's process.
//!
//! The harness (libtest-mimic) makes the shared fixture ([`fixture::World`]: scratch folders,
//! the fake and the real text servers; then Xvfb, tauri-driver and the app) when the first
//! scenario runs, runs the scenarios one after another in their order, and reports each by
//! name. A filter (`-- <part of a name>`) picks scenarios; those they need run first, in the
//! suite's order, as their setup (named on stderr, not reported as trials).

mod fixture;
mod scenarios;

use fixture::{Desktop, World};
use libtest_mimic::{Arguments, Failed, Trial};
use scenarios::{Session, SCENARIOS};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    /// The run's state; the trials run one at a time on the main thread.
    static SUITE: RefCell<Option<Suite>> = const { RefCell::new(None) };
}

fn main() {
    let mut args = Arguments::from_args();
    // One app, one window: the scenarios take turns on it, in order, on this thread.
    args.test_threads = Some(1);
    let trials: Vec<Trial> = SCENARIOS
        .iter()
        .enumerate()
        .map(|(i, scenario)| {
            Trial::test(scenario.name, move || {
                SUITE.with_borrow_mut(|suite| suite.as_mut().expect("the suite is set").trial(i))
            })
        })
        .collect();
    let selected: Vec<bool> = trials
        .iter()
        .map(|t| !args.is_filtered_out(t) && !args.is_ignored(t))
        .collect();
    SUITE.set(Some(Suite::new(selected)));
    let conclusion = libtest_mimic::run(&args, trials);
    // Stops the app, the servers and Xvfb before the process exits.
    if let Some(suite) = SUITE.take() {
        suite.finish();
    }
    conclusion.exit();
}

/// The scenarios' outcomes and the shared fixture, made when the first scenario runs (so
/// `--list` starts nothing).
struct Suite {
    runtime: tokio::runtime::Runtime,
    /// Picked by the command line's filter.
    selected: Vec<bool>,
    /// Picked, or needed by one picked (directly or not).
    planned: Vec<bool>,
    /// `None` until run; `Err` says why it failed or was skipped.
    outcomes: Vec<Option<Result<(), String>>>,
    world: Option<Result<World, String>>,
    session: Option<(Session, Result<Desktop, String>)>,
}

impl Suite {
    fn new(selected: Vec<bool>) -> Suite {
        let index = |name: &str| {
            SCENARIOS
                .iter()
                .position(|s| s.name == name)
                .unwrap_or_else(|| panic!("no scenario {name}"))
        };
        let mut planned = selected.clone();
        // The scenarios come in order (each after those it needs), so one pass from the last
        // marks every prerequisite of a planned one.
        for (i, scenario) in SCENARIOS.iter().enumerate().rev() {
            for need in scenario.needs {
                let j = index(need);
                assert!(
                    j < i,
                    "{} needs {need}, which must come before it",
                    scenario.name
                );
                if planned[i] {
                    planned[j] = true;
                }
            }
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        Suite {
            runtime,
            selected,
            planned,
            outcomes: vec![None; SCENARIOS.len()],
            world: None,
            session: None,
        }
    }

    /// Runs scenario `i` as a trial: first the prerequisites the filter left out that come
    /// before it, then it, unless a scenario it needs did not pass.
    fn trial(&mut self, i: usize) -> Result<(), Failed> {
        let name = SCENARIOS[i].name;
        for (j, setup) in SCENARIOS.iter().enumerate().take(i) {
            if self.planned[j] && !self.selected[j] && self.outcomes[j].is_none() {
                eprintln!("{name}: first {}, which it needs", setup.name);
                match self.prerequisites_passed(j) {
                    Ok(()) => self.run(j),
                    Err(skipped) => self.outcomes[j] = Some(Err(skipped)),
                }
            }
        }
        self.prerequisites_passed(i)?;
        self.run(i);
        self.outcomes[i].clone().unwrap().map_err(Failed::from)
    }

    fn prerequisites_passed(&self, i: usize) -> Result<(), String> {
        for need in SCENARIOS[i].needs {
            let j = SCENARIOS.iter().position(|s| s.name == *need).unwrap();
            match &self.outcomes[j] {
                Some(Ok(())) => {}
                Some(Err(why)) if why.starts_with("skipped") => {
                    return Err(format!("skipped: needs {need} (itself {why})"))
                }
                Some(Err(_)) => return Err(format!("skipped: needs {need}, which failed")),
                None => return Err(format!("skipped: needs {need}, which did not run")),
            }
        }
        Ok(())
    }

    fn run(&mut self, i: usize) {
        let scenario = &SCENARIOS[i];
        let outcome = self.prepare(scenario.session).and_then(|()| {
            let Suite {
                runtime,
                world,
                session,
                ..
            } = self;
            let world = world.as_mut().unwrap().as_mut().unwrap();
            let ui = session.as_ref().unwrap().1.as_ref().unwrap();
            caught(|| runtime.block_on((scenario.run)(ui, world)))
        });
        self.outcomes[i] = Some(outcome);
    }

    /// Makes the shared fixture when first needed, and the app session the scenario runs in
    /// (ending the first when the second begins).
    fn prepare(&mut self, wanted: Session) -> Result<(), String> {
        let runtime = &self.runtime;
        let world = self.world.get_or_insert_with(|| {
            caught(|| runtime.block_on(World::new()))
                .map_err(|e| format!("the shared fixture was not made: {e}"))
        });
        let world = world.as_mut().map_err(|e| e.clone())?;
        match &self.session {
            Some((current, _)) if *current == wanted => {}
            Some((Session::Second, _)) => {
                return Err("the first session has ended".to_string());
            }
            _ => {
                if let Some((_, ui)) = self.session.take() {
                    end_session(runtime, world, Session::First, ui);
                }
                let ui = caught(|| {
                    runtime.block_on(async {
                        match wanted {
                            Session::First => world.first_session().await,
                            Session::Second => world.second_session().await,
                        }
                    })
                })
                .map_err(|e| format!("the {wanted:?} session did not start: {e}"));
                self.session = Some((wanted, ui));
            }
        }
        self.session
            .as_ref()
            .unwrap()
            .1
            .as_ref()
            .map(|_| ())
            .map_err(|e| e.clone())
    }

    /// Ends the session (the measurements of the first are written), stops the servers, and
    /// removes the scratch folders unless a scenario failed (they are kept for its reader).
    fn finish(mut self) {
        let Some(Ok(mut world)) = self.world.take() else {
            return;
        };
        if let Some((which, ui)) = self.session.take() {
            end_session(&self.runtime, &mut world, which, ui);
        }
        let failed = self.outcomes.iter().any(|o| matches!(o, Some(Err(_))));
        let home = world.home.clone();
        {
            let _inside = self.runtime.enter();
            drop(world);
        }
        if failed {
            eprintln!("the scratch folders are kept: {}", home.display());
        } else {
            let _ = std::fs::remove_dir_all(&home);
        }
    }
}

/// Ends the WebDriver session (the app exits); after the first, writes its measurements.
fn end_session(
    runtime: &tokio::runtime::Runtime,
    world: &mut World,
    which: Session,
    ui: Result<Desktop, String>,
) {
    if let Ok(ui) = ui {
        runtime.block_on(ui.close());
        if which == Session::First {
            world.measurements.write();
        }
    }
}

/// Runs `f`, turning a panic (a failed assertion) into its message.
fn caught<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".to_string())
    })
}
