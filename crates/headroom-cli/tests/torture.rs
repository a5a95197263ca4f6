//! SIGKILL at random moments. Two drivers, each killed many times over one projects folder:
//! the `headroom project …` command line (renames, transcriptions, cleanups, resumes), and the
//! app's core (this test binary re-run as a worker that drives the `Workstation` directly, as
//! the desktop does: edits, settings, renames, transcriptions, cleanups, decisions, resumes).
//! After every kill: every project opens, holds either the old or the new content (a whole
//! transcript or none, names from the set written, texts from the transcript or an edit), and
//! the jobs the kills interrupted are listed, never as running.
//!
//! `HEADROOM_TORTURE_KILLS` sets the kills per driver (default 150); `HEADROOM_TORTURE_SEED`
//! replays a run. The figures are written to `target/tmp/torture-cli.md` and `torture-core.md`.

use headroom_workstation::projects::{Project, ProjectEntry, ProjectStore};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../samples/interview.flac");
const NAMES: [&str; 3] = ["Episode A", "Episode B", "Episode C"];
const WORKER_ENV: &str = "HEADROOM_TORTURE_WORKER";

/// xorshift64*: a seeded, reproducible sequence (the seed is printed).
struct Rng(u64);

impl Rng {
    fn seeded() -> (Rng, u64) {
        let seed = std::env::var("HEADROOM_TORTURE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
                    | 1
            });
        (Rng(seed), seed)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn kills_per_driver() -> usize {
    std::env::var("HEADROOM_TORTURE_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150)
}

fn headroom(projects: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_headroom"));
    let config = projects.with_file_name("config.toml");
    if !config.exists() {
        std::fs::write(&config, "# defaults\n").unwrap();
    }
    cmd.args(args)
        .env("HEADROOM_PROJECTS_DIR", projects)
        .env("HEADROOM_CONFIG", config)
        .env_remove("HEADROOM_LLM_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}

/// What the projects may hold: the reference transcript's texts, and the edits the core
/// worker makes (`edited N`).
struct Expected {
    texts: Vec<String>,
}

/// Hidden temporary files of atomic writes under `dir`, at any depth.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(temporaries(&path));
        } else if entry.file_name().to_string_lossy().ends_with(".tmp") {
            found.push(path);
        }
    }
    found
}

/// What the checks after the kills saw.
#[derive(Default)]
struct Seen {
    /// Distinct jobs found interrupted (a job stays listed until resumed or discarded).
    interrupted_jobs: std::collections::HashSet<String>,
    /// Those listed at the last check; the others were resumed to their end or discarded.
    listed_now: std::collections::HashSet<String>,
    temporaries_removed: usize,
}

/// Checks every project after a kill, after what the app does at its next start (mending
/// what the crash left); counts what it saw.
fn check(store: &ProjectStore, expected: &Expected, seen: &mut Seen) {
    seen.temporaries_removed += store.recover_after_crash().temporaries_removed;
    seen.listed_now.clear();
    let left = temporaries(store.root());
    assert!(
        left.is_empty(),
        "temporary files stay after recovery: {left:?}"
    );
    for entry in store.list().expect("the projects folder lists") {
        let id = match entry {
            ProjectEntry::Ok { id, .. } => id,
            ProjectEntry::Unreadable { id, error } => {
                panic!("project {id} cannot be opened after a kill: {error}")
            }
        };
        let project: Project = store.open(&id).expect("the project opens");
        assert!(
            NAMES.contains(&project.name.as_str()) || project.name.starts_with("Scratch"),
            "{id} is named {:?}, a name never written",
            project.name
        );
        assert!(
            project.segments.is_empty() || project.segments.len() == expected.texts.len(),
            "{id} holds {} segments: a partial transcript",
            project.segments.len()
        );
        for (segment, reference) in project.segments.iter().zip(&expected.texts) {
            assert!(
                segment.text == *reference || segment.text.starts_with("edited "),
                "{id}: segment text {:?} is neither the transcript's nor an edit",
                segment.text
            );
        }
        for job in store.jobs(&id).expect("the jobs list") {
            assert!(
                !job.running,
                "{id}: job {} is listed as running after its process died",
                job.id
            );
            seen.listed_now.insert(job.id.clone());
            seen.interrupted_jobs.insert(job.id);
        }
    }
}

/// Kills `child` with SIGKILL after `delay` unless it ended first: `None` when the kill came
/// while it ran, else how it ended.
fn kill_after(mut child: Child, delay: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + delay;
    // The moment of the kill is what is random here: polled finely, so a child that ends
    // first is told apart from one killed.
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        std::thread::sleep((deadline - now).min(Duration::from_millis(2)));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    // It may have ended between the last look and the kill.
    (status.code().is_some()).then_some(status)
}

/// The reference: the sample transcribed once, through the command line.
fn setup(name: &str) -> (tempfile::TempDir, PathBuf, ProjectStore, Expected) {
    headroom_tests::models_dir();
    let dir = tempfile::Builder::new().prefix(name).tempdir().unwrap();
    let projects = dir.path().join("projects");
    let store = ProjectStore::new(&projects);
    for name in NAMES {
        store.create(name).unwrap();
    }
    let status = headroom(&projects, &["project", "transcribe", "episode-a", SAMPLE])
        .status()
        .unwrap();
    assert!(status.success());
    let texts = store
        .open("episode-a")
        .unwrap()
        .segments
        .iter()
        .map(|s| s.text.clone())
        .collect::<Vec<_>>();
    assert!(texts.len() >= 3);
    (dir, projects, store, Expected { texts })
}

struct Tally {
    driver: &'static str,
    seed: u64,
    kills: usize,
    finished_first: usize,
    seen: Seen,
    elapsed: Duration,
}

impl Tally {
    /// The run tried what it is for: kills interrupted jobs, and some of those were resumed
    /// to their end (or discarded) afterwards.
    fn assert_exercised(&self) {
        let seen = &self.seen;
        assert!(
            !seen.interrupted_jobs.is_empty(),
            "no kill interrupted a job (seed {})",
            self.seed
        );
        assert!(
            seen.interrupted_jobs.len() > seen.listed_now.len(),
            "no interrupted job was resumed to its end (seed {})",
            self.seed
        );
    }

    fn new(driver: &'static str, seed: u64) -> Tally {
        Tally {
            driver,
            seed,
            kills: 0,
            finished_first: 0,
            seen: Seen::default(),
            elapsed: Duration::ZERO,
        }
    }

    fn line(&self) -> String {
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.0} s |",
            self.driver,
            self.seed,
            self.kills,
            self.finished_first,
            self.seen.interrupted_jobs.len(),
            self.seen.interrupted_jobs.len() - self.seen.listed_now.len(),
            self.seen.temporaries_removed,
            self.elapsed.as_secs_f64()
        )
    }
}

fn report(tally: &Tally) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/tmp");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("torture-{}.md", tally.driver));
    std::fs::write(
        &path,
        format!(
            "| driver | seed | kills while running | ended before the kill | interrupted jobs seen | of them resumed to the end or discarded | temporaries removed | time |\n|---|---|---|---|---|---|---|---|\n{}\n",
            tally.line()
        ),
    )
    .unwrap();
    eprintln!("{}", tally.line());
}

#[test]
fn the_command_line_killed_at_random_moments_loses_nothing() {
    let (_dir, projects, store, expected) = setup("headroom-torture-cli");
    let (mut rng, seed) = Rng::seeded();
    let started = Instant::now();
    let mut tally = Tally::new("cli", seed);
    let wanted = kills_per_driver();
    let mut attempts = 0;
    while tally.kills < wanted {
        attempts += 1;
        assert!(
            attempts < wanted * 4,
            "too few kills landed while a command ran"
        );
        let id = ["episode-a", "episode-b", "episode-c"][rng.below(3) as usize];
        // An interrupted job of this project, if there is one, is resumed a quarter of the time.
        let interrupted = store.jobs(id).unwrap().into_iter().find(|j| !j.running);
        let name = NAMES[rng.below(3) as usize];
        let (args, longest_ms): (Vec<&str>, u64) = match (rng.below(4), &interrupted) {
            // Long enough for some resumes to finish (a transcription takes about 5 s in a
            // test build), so resuming to the end is checked too.
            (0, Some(job)) => (vec!["project", "jobs", id, "--resume", &job.id], 7000),
            (0, None) | (1, _) => (vec!["project", "transcribe", id, SAMPLE], 2500),
            (2, _) => (
                vec!["project", "cleanup", id, "--rules-only", "--accept"],
                150,
            ),
            _ => (vec!["project", "rename", id, name], 60),
        };
        let child = headroom(&projects, &args).spawn().unwrap();
        match kill_after(child, Duration::from_millis(rng.below(longest_ms))) {
            None => tally.kills += 1,
            Some(status) => {
                tally.finished_first += 1;
                // A rename may meet a name in use and a cleanup an empty project; a
                // transcription or a resume that ran to its end succeeded.
                if matches!(args[1], "transcribe" | "jobs") {
                    assert!(status.success(), "{args:?} failed: {status} (seed {seed})");
                }
            }
        }
        check(&store, &expected, &mut tally.seen);
    }
    tally.elapsed = started.elapsed();
    report(&tally);
    tally.assert_exercised();
}

/// The worker: the app's core over the projects folder, doing random work until killed.
#[test]
#[ignore = "run by the_apps_core_killed_at_random_moments_loses_nothing as its child"]
fn core_worker() {
    let Some(projects) = std::env::var_os(WORKER_ENV) else {
        return;
    };
    let seed: u64 = std::env::var("HEADROOM_TORTURE_WORKER_SEED")
        .unwrap()
        .parse()
        .unwrap();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(core_work(PathBuf::from(projects), Rng(seed)));
}

async fn core_work(projects: PathBuf, mut rng: Rng) {
    use headroom_workstation::workstation::Workstation;
    use std::sync::Arc;
    use tokio_util::sync::CancellationToken;
    let ws = Workstation::new(
        ProjectStore::new(&projects),
        headroom_tests::services(headroom_core::config::Config::default()),
        None,
    );
    let none = CancellationToken::new;
    let mut n = 0u64;
    loop {
        n += 1;
        let id = ["episode-a", "episode-b", "episode-c"][rng.below(3) as usize];
        // As the app does at start: interrupted jobs are resumed or discarded.
        if let Some(job) = ws
            .interrupted_jobs()
            .unwrap()
            .into_iter()
            .find(|j| j.project == id)
        {
            if rng.below(4) == 0 {
                ws.discard_job(id, &job.id).unwrap();
            } else {
                let _ = ws
                    .resume_job(id, &job.id, Arc::new(|_| {}), &|_| {}, none())
                    .await;
            }
            continue;
        }
        let segments = ws.store().open(id).unwrap().segments.len();
        match rng.below(7) {
            0 => {
                ws.transcribe(id, Path::new(SAMPLE), None, Arc::new(|_| {}), none())
                    .await
                    .unwrap();
            }
            1 if segments > 0 => {
                ws.clean_all(id, true, rng.below(2) == 0, &|_| {}, &none())
                    .await
                    .unwrap();
            }
            2 if segments > 0 => {
                let index = rng.below(segments as u64) as usize;
                ws.edit_segment(id, index, format!("edited {n}"))
                    .await
                    .unwrap();
            }
            3 => {
                let shown = ws.store().open(id).unwrap().settings;
                let mut settings = shown.clone();
                settings.llm_cleanup = !settings.llm_cleanup;
                ws.update_settings(id, settings, shown).await.unwrap();
            }
            4 => {
                let _ = ws.store().rename(id, NAMES[rng.below(3) as usize]);
            }
            5 => {
                let scratch = format!("Scratch {}", rng.below(1000));
                if let Ok(p) = ws.store().create(&scratch) {
                    ws.store().delete(&p.id).unwrap();
                }
            }
            _ => {
                if let Some(version) = ws.versions(id).unwrap().first() {
                    ws.restore_version(id, &version.id).await.unwrap();
                }
            }
        }
    }
}

#[test]
fn the_apps_core_killed_at_random_moments_loses_nothing() {
    let (_dir, projects, store, expected) = setup("headroom-torture-core");
    let (mut rng, seed) = Rng::seeded();
    let started = Instant::now();
    let mut tally = Tally::new("core", seed);
    let wanted = kills_per_driver();
    while tally.kills < wanted {
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["core_worker", "--exact", "--ignored", "--nocapture"])
            .env(WORKER_ENV, &projects)
            .env("HEADROOM_TORTURE_WORKER_SEED", (rng.next() | 1).to_string())
            .env("HEADROOM_CONFIG", projects.with_file_name("config.toml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The worker never ends by itself: a panic (a failed step) ends it early.
        let ended = kill_after(child, Duration::from_millis(50 + rng.below(2000)));
        assert!(
            ended.is_none(),
            "the core worker stopped by itself: a step failed (seed {seed})"
        );
        tally.kills += 1;
        check(&store, &expected, &mut tally.seen);
    }
    tally.elapsed = started.elapsed();
    report(&tally);
    tally.assert_exercised();
}
