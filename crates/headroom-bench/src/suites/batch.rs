//! A batch spread over audio servers, run as a person runs it: `headroom transcribe FOLDER
//! --out OUT --server-url A --server-url B …` against 1, 2 and 3 local `headroom serve`
//! workers (whole processes, each loading its own model once before the clock starts), on
//! conversations of held-out voices made here. Per worker count: the time, hours of audio an
//! hour, the speed-up over one worker and the transcripts' word errors; then what a worker
//! killed a third of the way through costs (time, and files lost: none should be).
//!
//! The workers share this machine's cores, so the speed-up here is bounded by them: the
//! report gives the cores, and the figure that matters across machines is the one measured
//! with a worker per machine.

use super::speakers::{
    available_voices, choose_voices, make_conversation, sentence_cache, VoiceSet,
};
use super::{Progress, SuiteError};
use headroom_base::consent::RemoteConsent;
use headroom_base::process::{Running, Tool};
use headroom_services::Services;
use headroom_speech::asr::{normalized_word_error_rate, TranscribeOptions, Transcript};
use headroom_speech::audio::write_wav;
use headroom_speech::remote::RemoteTranscriber;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What the batch suite makes and measures.
#[derive(Debug, Clone)]
pub struct BatchBenchConfig {
    /// The `headroom` program: the workers (`serve`) and the batch (`transcribe`).
    pub headroom: PathBuf,
    /// Recordings in the batch.
    pub files: usize,
    /// Each recording's length, in minutes.
    pub minutes: f64,
    /// Worker counts measured, in order (the first is the speed-up's base).
    pub workers: Vec<usize>,
    /// Measure a run on the most workers with one killed a third of the way through.
    pub kill_one: bool,
    /// Give each worker cores of its own (`taskset`), this many each, in turn; `None`: the
    /// workers share every core. Pinned, the speed-up shows how the work spreads, apart from
    /// the cores the workers would otherwise fight over (as workers on machines of their own
    /// do not).
    pub cores_per_worker: Option<usize>,
    pub model: String,
    pub set: VoiceSet,
    pub speakers: usize,
    pub seed: u64,
    /// Where synthesized sentences are kept between runs.
    pub cache: Option<PathBuf>,
}

impl BatchBenchConfig {
    pub fn new(headroom: PathBuf) -> BatchBenchConfig {
        BatchBenchConfig {
            headroom,
            files: 4,
            minutes: 5.0,
            workers: vec![1, 2, 3],
            kill_one: true,
            cores_per_worker: None,
            model: headroom_speech::models::DEFAULT_MODEL.into(),
            set: VoiceSet::Test,
            speakers: 3,
            seed: 41,
            cache: None,
        }
    }
}

/// One batch, start to end.
#[derive(Debug, Clone, Serialize)]
pub struct BatchRun {
    pub workers: usize,
    pub secs: f64,
    /// Hours of audio transcribed per hour of the batch.
    pub audio_hours_per_hour: f64,
    /// Over the first worker count's time.
    pub speed_up: f64,
    /// Transcripts written (of the batch's files).
    pub written: usize,
    /// Normalized word errors of all transcripts together against what was said.
    pub wer: f64,
}

/// The most workers, one killed a third of the way through.
#[derive(Debug, Clone, Serialize)]
pub struct KilledRun {
    pub run: BatchRun,
    pub killed_after_secs: f64,
    /// Over the same workers left alone.
    pub extra_secs: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BatchBenchReport {
    pub model: String,
    pub files: usize,
    pub audio_secs: f64,
    pub voices: Vec<String>,
    pub cores: usize,
    /// Cores each worker had to itself (`None`: they shared all).
    pub cores_per_worker: Option<usize>,
    /// The same batch on this machine's embedded engine, no server (`workers` 0, its speed-up
    /// over one worker): what a server's round trips and the cuts at pauses cost, and the
    /// word errors to compare.
    pub local: BatchRun,
    pub runs: Vec<BatchRun>,
    pub killed: Option<KilledRun>,
}

/// A `headroom serve` on loopback, killed when dropped.
struct Worker {
    running: Running,
    url: String,
}

/// How long a worker may take to answer after it starts.
const READY_LIMIT: Duration = Duration::from_secs(120);

impl Worker {
    /// Starts a worker, on `cores` only when given (a `taskset` list such as `2-3`), its
    /// output in `log`; once it listens.
    async fn start(
        headroom: &Path,
        config_file: Option<&Path>,
        cores: Option<String>,
        log: &Path,
    ) -> Result<Worker, SuiteError> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let tool = match cores {
            Some(list) => Tool::new("taskset").option("-c", list).path(headroom),
            None => Tool::new(headroom),
        };
        let mut tool = tool.subcommand("serve");
        if let Some(path) = config_file {
            tool = tool.path_option("--config", path);
        }
        // No text model: the workers serve audio only (nothing listens on port 9).
        let mut running = tool
            .option("--listen", format!("127.0.0.1:{port}"))
            .option("--upstream", "http://127.0.0.1:9/v1")
            .start(Some(log))?;
        let url = format!("http://127.0.0.1:{port}/v1");
        let deadline = Instant::now() + READY_LIMIT;
        // Polling another process until it listens: it sends no event to wait on. (Its model
        // list is no sign: with no text model it answers 502.)
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if let Some(status) = running.exited() {
                return Err(SuiteError::Measurement(format!(
                    "headroom serve exited ({status}); see {}",
                    log.display()
                )));
            }
            if Instant::now() >= deadline {
                return Err(SuiteError::Measurement(format!(
                    "headroom serve did not answer in {} s; see {}",
                    READY_LIMIT.as_secs(),
                    log.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Worker { running, url })
    }

    /// Loads its model with a request of two seconds, so the batch's clock counts work only.
    async fn warm(&self, model: &str) -> Result<(), SuiteError> {
        let server = RemoteTranscriber::new(&self.url, model, None, &RemoteConsent::default())
            .map_err(|e| SuiteError::Measurement(e.to_string()))?;
        let tone: Vec<f32> = (0..32_000).map(|i| (i as f32 * 0.05).sin() * 0.1).collect();
        server
            .request(&tone, &TranscribeOptions::default())
            .await
            .map_err(|e| SuiteError::Measurement(format!("warming {}: {e}", self.url)))?;
        Ok(())
    }
}

/// Makes the batch's recordings, then runs it on each worker count and once with a worker
/// killed.
pub async fn run(
    services: &Services,
    config: &BatchBenchConfig,
    progress: Progress<'_>,
) -> Result<BatchBenchReport, SuiteError> {
    if config.workers.is_empty() || config.workers.contains(&0) || config.files == 0 {
        return Err(SuiteError::Unavailable(
            "a batch needs at least one file and one worker in each run".into(),
        ));
    }
    let (cache, _private) = sentence_cache(config.cache.as_deref())?;
    let voices = available_voices(services, config.set, config.speakers)?;
    let mut rng = StdRng::seed_from_u64(config.seed);
    let chosen = choose_voices(&voices, config.speakers, &mut rng);
    let work = tempfile::Builder::new()
        .prefix("headroom-bench-batch-")
        .tempdir()?;
    let inputs = work.path().join("in");
    std::fs::create_dir(&inputs)?;
    let mut said = Vec::new();
    let mut audio_secs = 0.0;
    for file in 0..config.files {
        progress(&format!(
            "making recording {} of {} ({} min, {})",
            file + 1,
            config.files,
            config.minutes,
            chosen.join(", ")
        ));
        let conversation =
            make_conversation(services, &cache, &chosen, config.minutes * 60.0, &mut rng).await?;
        audio_secs += conversation.audio.duration_secs();
        write_wav(&inputs.join(format!("{file:02}.wav")), &conversation.audio)?;
        let text: Vec<&str> = conversation
            .utterances
            .iter()
            .map(|u| u.text.as_str())
            .collect();
        said.push(text.join(" "));
    }
    let config_file = services.env().config_file.clone();
    progress("this machine alone (the embedded engine, no server)");
    let local = batch(
        config,
        config_file.as_deref(),
        &inputs,
        &work.path().join("out-local"),
        &mut [],
        &said,
        audio_secs,
        None,
    )
    .await?;
    progress(&format!(
        "this machine alone: {:.1} s, {:.1} h of audio an hour, WER {:.3}",
        local.secs, local.audio_hours_per_hour, local.wer
    ));
    let mut runs: Vec<BatchRun> = Vec::new();
    for &count in &config.workers {
        let mut workers =
            started(config, config_file.as_deref(), count, work.path(), progress).await?;
        let out = work.path().join(format!("out-{count}"));
        let run = batch(
            config,
            config_file.as_deref(),
            &inputs,
            &out,
            &mut workers,
            &said,
            audio_secs,
            None,
        )
        .await?;
        let run = BatchRun {
            speed_up: runs.first().map_or(1.0, |base| base.secs / run.secs),
            ..run
        };
        progress(&format!(
            "{count} worker(s): {:.1} s, {:.1} h of audio an hour, {:.2}× one worker, WER {:.3}",
            run.secs, run.audio_hours_per_hour, run.speed_up, run.wer
        ));
        runs.push(run);
    }
    let local = BatchRun {
        speed_up: runs[0].secs / local.secs,
        ..local
    };
    let killed = match (config.kill_one, runs.last()) {
        (true, Some(whole)) if whole.workers > 1 => {
            let mut workers = started(
                config,
                config_file.as_deref(),
                whole.workers,
                work.path(),
                progress,
            )
            .await?;
            let after = Duration::from_secs_f64(whole.secs / 3.0);
            let out = work.path().join("out-killed");
            let run = batch(
                config,
                config_file.as_deref(),
                &inputs,
                &out,
                &mut workers,
                &said,
                audio_secs,
                Some(after),
            )
            .await?;
            let killed = KilledRun {
                extra_secs: run.secs - whole.secs,
                killed_after_secs: after.as_secs_f64(),
                run: BatchRun {
                    speed_up: runs[0].secs / run.secs,
                    ..run
                },
            };
            progress(&format!(
                "{} workers, one killed after {:.1} s: {:.1} s ({:+.1} s), {} of {} transcripts, WER {:.3}",
                whole.workers,
                killed.killed_after_secs,
                killed.run.secs,
                killed.extra_secs,
                killed.run.written,
                config.files,
                killed.run.wer
            ));
            Some(killed)
        }
        _ => None,
    };
    Ok(BatchBenchReport {
        model: config.model.clone(),
        files: config.files,
        audio_secs,
        voices: chosen.iter().map(|v| v.to_string()).collect(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cores_per_worker: config.cores_per_worker,
        local,
        runs,
        killed,
    })
}

/// `count` fresh workers, each with its model loaded.
async fn started(
    config: &BatchBenchConfig,
    config_file: Option<&Path>,
    count: usize,
    logs: &Path,
    progress: Progress<'_>,
) -> Result<Vec<Worker>, SuiteError> {
    progress(&format!("starting {count} worker(s)"));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut workers = Vec::new();
    for i in 0..count {
        let pinned = config.cores_per_worker.map(|each| {
            let first = (i * each) % cores;
            let last = (first + each.max(1) - 1).min(cores - 1);
            format!("{first}-{last}")
        });
        let log = logs.join(format!("worker-{count}-{i}.log"));
        let worker = Worker::start(&config.headroom, config_file, pinned, &log).await?;
        worker.warm(&config.model).await?;
        workers.push(worker);
    }
    Ok(workers)
}

/// `headroom transcribe` on the folder over `workers` (none: on the embedded engine); with
/// `kill_after`, the last worker is killed that long after the batch starts.
#[allow(clippy::too_many_arguments)]
async fn batch(
    config: &BatchBenchConfig,
    config_file: Option<&Path>,
    inputs: &Path,
    out: &Path,
    workers: &mut [Worker],
    said: &[String],
    audio_secs: f64,
    kill_after: Option<Duration>,
) -> Result<BatchRun, SuiteError> {
    let mut tool = Tool::new(&config.headroom).subcommand("transcribe");
    if let Some(path) = config_file {
        tool = tool.path_option("--config", path);
    }
    tool = tool
        .option("--model", &config.model)
        .option("--format", "json")
        .path_option("--out", out);
    for worker in workers.iter() {
        tool = tool.option("--server-url", &worker.url);
    }
    if !workers.is_empty() {
        // One worker is heard as several are (pieces cut at pauses), so the runs differ only
        // in the workers.
        tool = tool.option("--per-server", "1");
    }
    let tool = tool.operands([inputs]);
    let count = workers.len();
    let started = Instant::now();
    let mut running = tokio::task::spawn_blocking(move || tool.run(b""));
    let finished = match kill_after {
        None => running.await??,
        Some(after) => {
            tokio::select! {
                done = &mut running => done??,
                _ = tokio::time::sleep(after) => {
                    // SIGKILL, as a machine that loses power: no goodbye.
                    let victim = workers.last_mut().expect("workers");
                    victim.running.kill()?;
                    running.await??
                }
            }
        }
    };
    let secs = started.elapsed().as_secs_f64();
    let stderr = String::from_utf8_lossy(&finished.stderr);
    let mut written = 0;
    let mut heard = Vec::new();
    for file in 0..said.len() {
        let path = out.join(format!("{file:02}.json"));
        let Ok(bytes) = std::fs::read(&path) else {
            heard.push(String::new());
            continue;
        };
        let transcript: Transcript = serde_json::from_slice(&bytes).map_err(|e| {
            SuiteError::Measurement(format!("{}: not a transcript: {e}", path.display()))
        })?;
        written += 1;
        let text: Vec<&str> = transcript
            .segments
            .iter()
            .map(|s| s.text.as_str())
            .collect();
        heard.push(text.join(" "));
    }
    if written == 0 {
        let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" / ");
        return Err(SuiteError::Measurement(format!(
            "headroom transcribe wrote no transcript ({}): {tail}",
            finished.status
        )));
    }
    Ok(BatchRun {
        workers: count,
        secs,
        audio_hours_per_hour: audio_secs / secs.max(1e-9),
        speed_up: 1.0,
        written,
        wer: normalized_word_error_rate(&said.join(" "), &heard.join(" ")),
    })
}

/// The report as the README shows it.
pub fn render_text(r: &BatchBenchReport) -> String {
    let mut out = String::new();
    let workers = match r.cores_per_worker {
        Some(each) => format!("each pinned to {each} of {} cores", r.cores),
        None => format!("sharing {} cores", r.cores),
    };
    let _ = writeln!(
        out,
        "{} · {} recordings, {:.1} min of audio in all ({}) · local `headroom serve` workers {workers}",
        r.model,
        r.files,
        r.audio_secs / 60.0,
        r.voices.join(", "),
    );
    let _ = writeln!(
        out,
        "| workers | batch time | hours of audio an hour | speed-up | transcripts | WER |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    let row = |out: &mut String, label: String, run: &BatchRun| {
        let _ = writeln!(
            out,
            "| {label} | {:.1} s | {:.1} | {:.2}× | {} of {} | {:.3} |",
            run.secs, run.audio_hours_per_hour, run.speed_up, run.written, r.files, run.wer
        );
    };
    row(&mut out, "none: this machine's engine".into(), &r.local);
    for run in &r.runs {
        row(&mut out, run.workers.to_string(), run);
    }
    if let Some(k) = &r.killed {
        row(
            &mut out,
            format!(
                "{}, one killed after {:.0} s ({:+.1} s)",
                k.run.workers, k.killed_after_secs, k.extra_secs
            ),
            &k.run,
        );
    }
    out
}
