//! Whether interactive work stays interactive while Headroom's own
//! batch work runs. Every interactive probe (a line in espeak-ng, a line in Kokoro, a voice
//! profile's take, a 6 s transcription, a live-transcription partial) is timed idle and again
//! under each kind of batch work (batch transcription, narration, a voice match search,
//! cloning takes), which is kept going, restarted whenever it ends, on the same lanes. Each
//! probe's p50 and p95 are set against idle (the goal: within 1.15× and 1.3×), and each kind of
//! batch work's own slowdown is how much longer the same work took while the probes ran than
//! alone.
//!
//! Every model is loaded (and kept loaded) before anything is timed; the probes run one after
//! another, with a pause between them as between a person's requests. Every unit of batch work
//! is the same work (a narration's earlier takes are forgotten first, so each run makes them
//! all), so a fresh run alone and a fresh run under the probes can be compared on the work both
//! reached.

use super::{
    espeak, first_seconds, installed, narration_voices, scratch_project, Choice, Progress,
    SuiteError, REFERENCE,
};
use crate::boundary::{summarize, time_transcription, LatencySummary};
use headroom_base::sync::Locked;
use headroom_core::admission::Priority;
use headroom_core::cleanup::FailurePolicy;
use headroom_services::speaking_voice::{profile_voice_name, SpeakingVoice};
use headroom_services::speech::{AudioInput, SpeechService};
use headroom_services::Services;
use headroom_speech::asr::live::{LiveParams, LiveTranscriber, LiveUpdate};
use headroom_speech::asr::{TranscribeOptions, Transcriber, SAMPLE_RATE};
use headroom_speech::audio::{write_wav, Decode, DecodeLimits};
use headroom_speech::models::{self, DEFAULT_MODEL, VAD_MODEL};
use headroom_speech::voice::matching::{MatchProgress, MatchSettings};
use headroom_workstation::narration::{NarrationEvent, NarrationMode, NarrationOptions};
use headroom_workstation::workstation::Workstation;
use serde::Serialize;
use std::fmt::Write;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio_util::sync::CancellationToken;

/// The goal: every probe's median and p95 under batch work within these multiples of idle.
const GOAL_P50: f64 = 1.15;
const GOAL_P95: f64 = 1.3;
/// The line the speaking probes say.
const LINE: &str = "One short line, please.";
/// The phrase a live partial is made of, in seconds of speech.
const PARTIAL_SECS: f64 = 3.0;

/// What the isolation suite measures and for how long.
#[derive(Debug, Clone)]
pub struct IsolationBenchConfig {
    /// The interactive probes (empty: all).
    pub probes: Vec<ProbeKind>,
    /// The kinds of batch work run under them (empty: all).
    pub batch: Vec<BatchKind>,
    /// Timed runs of each probe, idle and under each kind of batch work.
    pub runs: usize,
    /// Seconds each kind of batch work runs alone, for its own speed.
    pub alone_secs: f64,
    /// Pause between probes, as between a person's requests.
    pub pause_ms: u64,
    /// The recording batch work transcribes and narrates, and the probes' clips are cut from.
    pub clip: PathBuf,
    /// Batch work competes for the CPU instead of giving way to interactive work
    /// (`audio_lane.batch_gives_way = false`): the figures without the mechanism.
    pub batch_competes: bool,
    /// The text model's server for the narrations' text stage (LLM cleanup on); `None`: the
    /// rules clean the text.
    pub upstream: Option<String>,
}

impl IsolationBenchConfig {
    /// The full measurement (8 runs, 20 s alone, 250 ms apart), or with `quick` a smoke test
    /// of about 3 minutes on 2 cores (3 runs, 5 s, 100 ms).
    pub fn new(clip: PathBuf, quick: bool) -> IsolationBenchConfig {
        IsolationBenchConfig {
            probes: Vec::new(),
            batch: Vec::new(),
            runs: if quick { 3 } else { 8 },
            alone_secs: if quick { 5.0 } else { 20.0 },
            pause_ms: if quick { 100 } else { 250 },
            clip,
            batch_competes: false,
            upstream: None,
        }
    }
}

/// An interactive job a person waits for (each described by its `Choice::help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    Espeak,
    Kokoro,
    Take,
    Transcribe,
    Partial,
}

impl Choice for ProbeKind {
    const ALL: &'static [ProbeKind] = &[
        ProbeKind::Espeak,
        ProbeKind::Kokoro,
        ProbeKind::Take,
        ProbeKind::Transcribe,
        ProbeKind::Partial,
    ];

    fn name(self) -> &'static str {
        match self {
            ProbeKind::Espeak => "espeak",
            ProbeKind::Kokoro => "kokoro",
            ProbeKind::Take => "take",
            ProbeKind::Transcribe => "transcribe",
            ProbeKind::Partial => "partial",
        }
    }

    fn help(self) -> &'static str {
        match self {
            ProbeKind::Espeak => "a line spoken by espeak-ng",
            ProbeKind::Kokoro => "a line spoken by Kokoro",
            ProbeKind::Take => {
                "a line spoken as a voice profile (cloned by the cloning server) and scored"
            }
            ProbeKind::Transcribe => "the clip's first 6 s transcribed",
            ProbeKind::Partial => "a live transcription's partial text of a 3 s phrase",
        }
    }
}

impl ProbeKind {
    /// The probe as the tables name it.
    pub fn label(self) -> String {
        match self {
            ProbeKind::Espeak => "speak a line, espeak-ng".into(),
            ProbeKind::Kokoro => "speak a line, Kokoro".into(),
            ProbeKind::Take => "a voice profile's take (cloned, scored)".into(),
            ProbeKind::Transcribe => format!("transcribe 6 s, {DEFAULT_MODEL}"),
            ProbeKind::Partial => format!("live partial, {PARTIAL_SECS:.0} s phrase"),
        }
    }

    fn models(self) -> &'static [&'static str] {
        match self {
            ProbeKind::Espeak => &[],
            ProbeKind::Kokoro => &["kokoro"],
            ProbeKind::Take => &["speaker-embedder"],
            ProbeKind::Transcribe => &[DEFAULT_MODEL],
            ProbeKind::Partial => &[DEFAULT_MODEL, VAD_MODEL],
        }
    }
}

/// Headroom's own batch work (each described by its `Choice::help`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchKind {
    Transcription,
    Narration,
    Match,
    Cloning,
}

impl Choice for BatchKind {
    const ALL: &'static [BatchKind] = &[
        BatchKind::Transcription,
        BatchKind::Narration,
        BatchKind::Match,
        BatchKind::Cloning,
    ];

    fn name(self) -> &'static str {
        match self {
            BatchKind::Transcription => "transcription",
            BatchKind::Narration => "narration",
            BatchKind::Match => "match",
            BatchKind::Cloning => "cloning",
        }
    }

    fn help(self) -> &'static str {
        match self {
            BatchKind::Transcription => "the clip transcribed at batch priority (serve's uploads, a project's transcribe-all)",
            BatchKind::Narration => "a project narrated (text stage by the rules, takes in Kokoro, fitted, files written)",
            BatchKind::Match => "a voice profile's approximate voice match searched for",
            BatchKind::Cloning => "a project narrated in a voice profile cloned by a cloning server on loopback",
        }
    }
}

impl BatchKind {
    /// The batch work as the tables name it.
    pub fn label(self) -> &'static str {
        match self {
            BatchKind::Transcription => "batch transcription",
            BatchKind::Narration => "narration",
            BatchKind::Match => "voice match search",
            BatchKind::Cloning => "cloning takes",
        }
    }

    /// What its work is counted in.
    fn work_unit(self) -> &'static str {
        match self {
            BatchKind::Transcription => "transcriptions of the clip",
            BatchKind::Narration => "segments narrated",
            BatchKind::Match => "candidate takes judged",
            BatchKind::Cloning => "segments narrated in a cloned voice",
        }
    }

    fn models(self) -> &'static [&'static str] {
        match self {
            // The narrated project is transcribed first.
            BatchKind::Transcription | BatchKind::Narration => &[DEFAULT_MODEL],
            BatchKind::Match => &["speaker-embedder", "kokoro", DEFAULT_MODEL],
            BatchKind::Cloning => &["speaker-embedder", DEFAULT_MODEL],
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Skipped {
    pub what: String,
    pub why: String,
}

#[derive(Debug, Serialize)]
pub struct Goal {
    pub p50_ratio: f64,
    pub p95_ratio: f64,
}

#[derive(Debug, Serialize)]
pub struct IdleProbe {
    pub probe: ProbeKind,
    pub job: String,
    pub idle: Option<LatencySummary>,
}

/// One probe under one kind of batch work.
#[derive(Debug, Serialize)]
pub struct Row {
    pub probe: ProbeKind,
    pub batch: BatchKind,
    pub idle: LatencySummary,
    pub during: LatencySummary,
    pub p50_ratio: f64,
    pub p95_ratio: f64,
    pub within_goal: bool,
}

/// The same work (from a fresh start) done alone and while the probes ran.
#[derive(Debug, Serialize)]
pub struct Slowdown {
    /// How much work both reached, in the kind's `work_unit` (when the probes left it no time
    /// to reach any, the first report alone).
    pub work: f64,
    pub alone_secs: f64,
    /// `None`: not reached while the probes ran.
    pub during_probes_secs: Option<f64>,
    /// during / alone; with `at_least`, the probes' window / alone: the work was not done in
    /// it, so it was slowed at least this much.
    pub ratio: f64,
    pub at_least: bool,
}

#[derive(Debug, Serialize)]
pub struct BatchReport {
    pub kind: BatchKind,
    pub work_unit: &'static str,
    pub alone_window_secs: f64,
    pub alone_work: f64,
    pub during_window_secs: f64,
    pub during_work: f64,
    /// Units of work started while the probes ran (each restarted when the last ended).
    pub units_during: usize,
    pub slowdown: Option<Slowdown>,
    /// The share of the window in which a probe ran: batch work that gave way whenever one ran
    /// would be slowed 1 / (1 - share).
    pub interactive_share: f64,
}

#[derive(Debug, Serialize)]
pub struct IsolationBenchReport {
    pub cpus: usize,
    /// /proc/loadavg's 1, 5 and 15 minute figures before and after: other work on the machine.
    pub load_average_before: Option<[f64; 3]>,
    pub load_average_after: Option<[f64; 3]>,
    pub clip: String,
    /// The narrations' text model; `None`: the rules.
    pub text_model: Option<String>,
    /// Whether batch work gave way to interactive work (`audio_lane.batch_gives_way`).
    pub batch_gives_way: bool,
    pub runs: usize,
    pub pause_ms: u64,
    pub alone_secs: f64,
    pub goal: Goal,
    pub probes: Vec<IdleProbe>,
    pub batch: Vec<BatchReport>,
    pub results: Vec<Row>,
    pub skipped: Vec<Skipped>,
    pub all_within_goal: bool,
    pub total_secs: f64,
}

/// A batch run's progress: work done so far at each report, from the run's start.
#[derive(Clone)]
struct WorkLog {
    started: Instant,
    /// Work of the units already finished.
    base: f64,
    /// (seconds since the start, work done), rising.
    reports: Vec<(f64, f64)>,
}

impl WorkLog {
    fn new() -> WorkLog {
        WorkLog {
            started: Instant::now(),
            base: 0.0,
            reports: Vec::new(),
        }
    }

    /// The unit in progress has done `within` of its work (reported when it is more than
    /// before).
    fn at(&mut self, within: f64) {
        let work = self.base + within;
        if work > self.done() {
            self.reports
                .push((self.started.elapsed().as_secs_f64(), work));
        }
    }

    /// The unit in progress, `size` work in all, finished.
    fn unit_done(&mut self, size: f64) {
        self.base += size;
        self.at(0.0);
    }

    fn done(&self) -> f64 {
        self.reports.last().map_or(0.0, |&(_, w)| w)
    }

    /// When `work` was first reached.
    fn reached(&self, work: f64) -> Option<f64> {
        self.reports
            .iter()
            .find(|&&(_, w)| w >= work - 1e-9)
            .map(|&(t, _)| t)
    }
}

/// The same work's time alone and under the probes (a window of `window` seconds).
fn slowdown(alone: &WorkLog, during: &WorkLog, window: f64) -> Option<Slowdown> {
    if during.done() <= 0.0 {
        let &(alone_secs, work) = alone.reports.first()?;
        return Some(Slowdown {
            work,
            alone_secs,
            during_probes_secs: None,
            ratio: window / alone_secs.max(1e-9),
            at_least: true,
        });
    }
    let work = alone.done().min(during.done());
    let (alone_secs, during_secs) = (alone.reached(work)?, during.reached(work)?);
    Some(Slowdown {
        work,
        alone_secs,
        during_probes_secs: Some(during_secs),
        ratio: during_secs / alone_secs.max(1e-9),
        at_least: false,
    })
}

type Log = Arc<Mutex<WorkLog>>;

/// Batch work kept going, one unit after another, until stopped.
struct Runner {
    kind: BatchKind,
    /// No further unit starts.
    finish: CancellationToken,
    /// The unit under way stops.
    cancel: CancellationToken,
    log: Log,
    task: tokio::task::JoinHandle<Result<usize, SuiteError>>,
}

impl Runner {
    /// Waits until the work has done some of its work (so its models are loaded).
    async fn until_working(&self) {
        while self.log.locked().done() <= 0.0 && !self.task.is_finished() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The progress so far.
    fn snapshot(&self) -> WorkLog {
        self.log.locked().clone()
    }

    /// Stops the work (a narration finishes the unit under way); the units it started.
    async fn stop(self) -> Result<usize, SuiteError> {
        self.finish.cancel();
        // A narration cancelled while its text stage waits to hand the audio stage a segment
        // never returns (the text stage's send waits on a receiver nobody reads), so it is
        // let finish.
        if !matches!(self.kind, BatchKind::Narration | BatchKind::Cloning) {
            self.cancel.cancel();
        }
        self.task.await?
    }
}

/// What the probes and the batch work use, set up once.
struct Bench {
    services: Arc<Services>,
    kokoro: Option<(Arc<SpeechService>, Option<String>)>,
    short_clip: Option<AudioInput>,
    /// The clip at 16 kHz, fed to live transcription as a recording would be.
    live_audio: Arc<Vec<f32>>,
    /// The voice profile (its id) the take probe speaks as, matched and cloned by batch work.
    profile: Option<String>,
    /// The narrated project.
    project: Option<(Arc<Workstation>, String)>,
    clip: AudioInput,
    narration_voice: String,
    pause: Duration,
}

async fn timed<T, E>(work: impl Future<Output = Result<T, E>>) -> Result<Duration, E> {
    let started = Instant::now();
    work.await?;
    Ok(started.elapsed())
}

impl Bench {
    fn profile(&self) -> &str {
        self.profile.as_deref().expect("a voice profile was made")
    }

    /// One run of a probe, timed.
    async fn time(&self, probe: ProbeKind) -> Result<Duration, SuiteError> {
        let cancel = CancellationToken::new;
        Ok(match probe {
            ProbeKind::Espeak => {
                timed(
                    self.services
                        .speech()
                        .synthesize(LINE.into(), None, cancel()),
                )
                .await?
            }
            ProbeKind::Kokoro => {
                let (speech, voice) = self.kokoro.as_ref().expect("Kokoro was loaded");
                timed(speech.synthesize(LINE.into(), voice.clone(), cancel())).await?
            }
            // As a person asks for it: the voice by name, then its take.
            ProbeKind::Take => {
                timed(async {
                    let voice = self.services.resolve_voice(Some(self.profile())).await?;
                    let SpeakingVoice::Profile(profile) = voice else {
                        return Err(SuiteError::Measurement(
                            "the probe's voice profile is gone".into(),
                        ));
                    };
                    Ok(self
                        .services
                        .voices()
                        .speak(&profile, LINE.into(), cancel())
                        .await?)
                })
                .await?
            }
            ProbeKind::Transcribe => {
                let clip = self.short_clip.as_ref().expect("the short clip was cut");
                time_transcription(self.services.speech(), clip, DEFAULT_MODEL)
                    .await?
                    .0
            }
            ProbeKind::Partial => self.time_partial().await?,
        })
    }

    /// A live transcription on the audio lane as interactive work, as a recording's is: the
    /// clip fed a tenth of a second at a time, each step taken as soon as its audio is in; the
    /// time from the audio that completes a 3 s phrase to the phrase's partial text.
    async fn time_partial(&self) -> Result<Duration, SuiteError> {
        let speech = self.services.speech().clone();
        let models_dir = &self.services.env().models_dir;
        let model_dir = models::locate(models_dir, DEFAULT_MODEL)?;
        let vad_dir = models::locate(models_dir, VAD_MODEL)?;
        let audio = self.live_audio.clone();
        let lane = speech.lane().clone();
        let job = move |cancel: &CancellationToken| -> Result<Duration, SuiteError> {
            let options = TranscribeOptions::default();
            let engine: Arc<dyn Transcriber> =
                speech.loaded_engine(DEFAULT_MODEL, &model_dir, options.precision)?;
            let vad = speech.loaded_vad(&vad_dir)?;
            let params = LiveParams {
                partial_every_secs: PARTIAL_SECS,
                ..LiveParams::default()
            };
            let mut live = LiveTranscriber::new(engine, vad, options, params);
            for piece in audio.chunks(SAMPLE_RATE as usize / 10) {
                let mut started = Instant::now();
                live.push(piece)?;
                while let Some(update) = live.step(cancel)? {
                    match update {
                        LiveUpdate::Partial { .. } => return Ok(started.elapsed()),
                        // A pause ended a phrase first: only the partial is timed.
                        LiveUpdate::Final { .. } => started = Instant::now(),
                    }
                }
            }
            Err(SuiteError::Measurement(format!(
                "the clip has no {PARTIAL_SECS} s phrase for a live partial"
            )))
        };
        lane.run(
            "live transcription",
            Priority::Interactive,
            CancellationToken::new(),
            job,
        )
        .await?
    }

    /// Each probe `runs` times, one after another; the times by probe.
    async fn rounds(
        &self,
        probes: &[ProbeKind],
        runs: usize,
        label: &str,
        progress: Progress<'_>,
    ) -> Result<Vec<Vec<Duration>>, SuiteError> {
        let mut times = vec![Vec::new(); probes.len()];
        for run in 0..runs {
            for (k, probe) in probes.iter().enumerate() {
                times[k].push(self.time(*probe).await?);
                tokio::time::sleep(self.pause).await;
            }
            let last: Vec<Duration> = times.iter().filter_map(|t| t.last().copied()).collect();
            progress(&format!("  {label} {}/{runs}: {last:.2?}", run + 1));
        }
        Ok(times)
    }

    /// One unit of batch work; returns its size (in the kind's work unit), reporting progress
    /// into `log` as it goes.
    async fn unit(
        &self,
        kind: BatchKind,
        log: &Log,
        cancel: &CancellationToken,
    ) -> Result<f64, SuiteError> {
        match kind {
            BatchKind::Transcription => {
                let log = log.clone();
                self.services
                    .speech()
                    .transcribe(
                        self.clip.clone(),
                        DEFAULT_MODEL,
                        TranscribeOptions::default(),
                        Priority::Normal,
                        Arc::new(move |done: f32| log.locked().at(done as f64)),
                        cancel.clone(),
                    )
                    .await?;
                Ok(1.0)
            }
            BatchKind::Narration | BatchKind::Cloning => {
                let (ws, id) = self.project.as_ref().expect("a project was made");
                let voice = match kind {
                    BatchKind::Narration => self.narration_voice.clone(),
                    _ => profile_voice_name(self.profile()),
                };
                // Every run makes every take: the last run's are forgotten.
                ws.update_project(id, |p| {
                    p.narration = None;
                    Ok(())
                })
                .await?;
                let segments = AtomicUsize::new(1);
                let on_event = |event: NarrationEvent| {
                    if let NarrationEvent::Segment { done, of, .. } = event {
                        segments.store(of.max(1), Ordering::Relaxed);
                        log.locked().at(done as f64);
                    }
                };
                let options = NarrationOptions {
                    mode: Some(NarrationMode::Cleanup),
                    to: None,
                    voice: Some(voice),
                    policy: Some(FailurePolicy::Fallback),
                    mix: Some(false),
                    speaker_voices: None,
                };
                ws.narrate(id, options, &on_event, cancel).await?;
                Ok(segments.load(Ordering::Relaxed) as f64)
            }
            BatchKind::Match => {
                let total = Arc::new(AtomicUsize::new(1));
                let (log, all) = (log.clone(), total.clone());
                let progress = Arc::new(move |p: MatchProgress| {
                    all.store(p.total.max(1), Ordering::Relaxed);
                    log.locked().at(p.evaluations as f64);
                });
                self.services
                    .voices()
                    .match_voice(
                        self.profile(),
                        MatchSettings::default(),
                        progress,
                        cancel.clone(),
                    )
                    .await?;
                Ok(total.load(Ordering::Relaxed) as f64)
            }
        }
    }

    /// Starts `kind` of batch work, restarted whenever a unit ends, until stopped.
    fn start(self: &Arc<Self>, kind: BatchKind) -> Runner {
        let log = Arc::new(Mutex::new(WorkLog::new()));
        let (finish, cancel) = (CancellationToken::new(), CancellationToken::new());
        let (bench, work_log) = (self.clone(), log.clone());
        let (finished, stop) = (finish.clone(), cancel.clone());
        let task = tokio::spawn(async move {
            let mut units = 0;
            while !finished.is_cancelled() {
                units += 1;
                match bench.unit(kind, &work_log, &stop).await {
                    Ok(size) => work_log.locked().unit_done(size),
                    Err(_) if stop.is_cancelled() => break,
                    Err(e) => {
                        return Err(SuiteError::Work {
                            what: kind.label(),
                            source: Box::new(e),
                        })
                    }
                }
            }
            Ok(units)
        });
        Runner {
            kind,
            finish,
            cancel,
            log,
            task,
        }
    }

    /// Waits (a few seconds at most) until batch work is on the audio lane.
    async fn until_on_lane(&self, runner: &Runner) {
        let lane = self.services.audio_lane();
        let deadline = Instant::now() + Duration::from_secs(5);
        while lane.snapshot().occupancy.in_flight == 0
            && !runner.task.is_finished()
            && Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// A cloning server on loopback in Chatterbox-TTS-API's shape that answers every take at once
/// with `take`, the reference clip: what the bench times is Headroom's own work on a cloned
/// take (the upload, decoding, fitting, scoring), not a cloning model's, which would compete
/// for the CPU as any other program does.
async fn start_cloning_server(
    take: Vec<u8>,
) -> Result<(String, tokio::task::JoinHandle<()>), SuiteError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let take = Arc::new(take);
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let take = take.clone();
            tokio::spawn(async move {
                let _ = answer(stream, &take).await;
            });
        }
    });
    Ok((url, task))
}

/// Answers one connection's requests in turn until the client closes it: `GET /health` and
/// `POST /v1/audio/speech/upload` (its body read and dropped; the answer is `take`).
async fn answer(stream: tokio::net::TcpStream, take: &[u8]) -> std::io::Result<()> {
    let mut stream = BufReader::new(stream);
    loop {
        let mut request = String::new();
        if stream.read_line(&mut request).await? == 0 {
            return Ok(());
        }
        let (mut length, mut chunked) = (0u64, false);
        loop {
            let mut line = String::new();
            if stream.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap_or((line, ""));
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.to_ascii_lowercase().contains("chunked");
            }
        }
        let mut sink = tokio::io::sink();
        if chunked {
            loop {
                let mut size = String::new();
                stream.read_line(&mut size).await?;
                let size = size.trim().split(';').next().unwrap_or("0");
                let size = u64::from_str_radix(size, 16).unwrap_or(0);
                // The chunk and its line end (after the last chunk: the body's end).
                tokio::io::copy(&mut (&mut stream).take(size + 2), &mut sink).await?;
                if size == 0 {
                    break;
                }
            }
        } else {
            tokio::io::copy(&mut (&mut stream).take(length), &mut sink).await?;
        }
        let route: Vec<&str> = request.split_whitespace().take(2).collect();
        let (status, kind, body): (&str, &str, &[u8]) = match route[..] {
            ["POST", "/v1/audio/speech/upload"] => ("200 OK", "audio/wav", take),
            ["GET", "/health"] => (
                "200 OK",
                "application/json",
                &br#"{"status":"healthy"}"#[..],
            ),
            _ => (
                "404 Not Found",
                "application/json",
                &br#"{"detail":"Not Found"}"#[..],
            ),
        };
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        let out = stream.get_mut();
        out.write_all(head.as_bytes()).await?;
        out.write_all(body).await?;
    }
}

fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut figures = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([figures.next()??, figures.next()??, figures.next()??])
}

/// Milliseconds as the tables show them.
fn ms(value: f64) -> String {
    if value < 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.0}")
    }
}

/// `chosen`, in the order given and each once, or `all` when none was chosen.
fn chosen<T: Copy + PartialEq>(chosen: &[T], all: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in if chosen.is_empty() { all } else { chosen } {
        if !out.contains(item) {
            out.push(*item);
        }
    }
    out
}

/// Times every probe idle and under each kind of batch work, and the batch work's own slowdown.
pub async fn run(
    shared: Arc<Services>,
    args: &IsolationBenchConfig,
    progress: Progress<'_>,
) -> Result<IsolationBenchReport, SuiteError> {
    let begun = Instant::now();
    let runs = args.runs.max(1);
    let alone_secs = args.alone_secs.max(0.5);
    let pause_ms = args.pause_ms;
    let load_average_before = load_average();

    // What can run here: a probe or batch work whose models are missing is skipped.
    let installed = |m: &str| installed(&shared, m);
    let missing = |needed: &[&str]| -> Option<String> {
        let absent: Vec<&str> = needed.iter().copied().filter(|&m| !installed(m)).collect();
        (!absent.is_empty()).then(|| {
            format!(
                "not installed: {} (headroom models install {})",
                absent.join(", "),
                absent.join(" ")
            )
        })
    };
    let mut skipped = Vec::new();
    let mut probes = chosen(&args.probes, ProbeKind::ALL);
    probes.retain(|p| match missing(p.models()) {
        Some(why) => {
            skipped.push(Skipped {
                what: p.label(),
                why,
            });
            false
        }
        None => true,
    });
    let mut kinds = chosen(&args.batch, BatchKind::ALL);
    kinds.retain(|k| match missing(k.models()) {
        Some(why) => {
            skipped.push(Skipped {
                what: k.label().into(),
                why,
            });
            false
        }
        None => true,
    });
    for s in &skipped {
        progress(&format!("skipped {}: {}", s.what, s.why));
    }
    if probes.is_empty() || kinds.is_empty() {
        return Err(SuiteError::Unavailable(
            "nothing to measure: no probe or no batch work can run here".into(),
        ));
    }

    // The bench's own services: a scratch voice library, the loopback cloning server, and
    // models kept loaded for the whole run (a reload would be timed as slowness).
    let scratch = tempfile::tempdir()?;
    let with_profile = probes.contains(&ProbeKind::Take)
        || kinds.contains(&BatchKind::Match)
        || kinds.contains(&BatchKind::Cloning);
    let with_server = probes.contains(&ProbeKind::Take) || kinds.contains(&BatchKind::Cloning);
    let reference = scratch.path().join("reference.wav");
    if with_profile {
        write_wav(&reference, &espeak("en-us+m3", 40, REFERENCE)?)?;
    }
    let mut config = shared.config();
    config.audio_lane.model_idle_secs = 0.0;
    if args.batch_competes {
        config.audio_lane.batch_gives_way = false;
    }
    let batch_gives_way = config.audio_lane.batch_gives_way;
    let _server = if with_server {
        let (url, task) = start_cloning_server(std::fs::read(&reference)?).await?;
        config.cloning.kind = "chatterbox".into();
        config.cloning.url = url;
        Some(task)
    } else {
        None
    };
    let mut env = shared.env().clone();
    env.voices_dir = scratch.path().join("voices");
    let services = Services::new(config, env);

    let profile = if with_profile {
        let voices = services.voices();
        let profile = voices.library().create("Bench voice")?;
        voices
            .add_clip(
                &profile.id,
                AudioInput::from_file(&reference)?,
                Some(REFERENCE.into()),
                CancellationToken::new(),
            )
            .await?;
        Some(profile.id)
    } else {
        None
    };
    let project = if kinds.contains(&BatchKind::Narration) || kinds.contains(&BatchKind::Cloning) {
        let (ws, project) = scratch_project(
            &services,
            &args.clip,
            scratch.path(),
            args.upstream.clone(),
            progress,
        )
        .await?;
        Some((ws, project.id))
    } else {
        None
    };
    let short_clip = probes
        .contains(&ProbeKind::Transcribe)
        .then(|| first_seconds(&args.clip, 6, scratch.path()))
        .transpose()?;
    let live_audio = if probes.contains(&ProbeKind::Partial) {
        let decode = Decode {
            limits: DecodeLimits::default(),
            to_rate: Some(SAMPLE_RATE),
            cancel: CancellationToken::new(),
        };
        AudioInput::from_file(&args.clip)?.decode(&decode)?.samples
    } else {
        Vec::new()
    };
    let kokoro = probes
        .contains(&ProbeKind::Kokoro)
        .then(|| services.speech_for_voice(Some("kokoro")))
        .transpose()?;
    let bench = Arc::new(Bench {
        narration_voice: narration_voices(&services)[0].clone(),
        services: services.clone(),
        kokoro,
        short_clip,
        live_audio: Arc::new(live_audio),
        profile,
        project,
        clip: AudioInput::from_file(&args.clip)?,
        pause: Duration::from_millis(pause_ms),
    });

    progress("warm-up (excluded): every probe once, and each kind of batch work until it has done some work");
    for probe in &probes {
        bench.time(*probe).await?;
    }
    for kind in &kinds {
        let runner = bench.start(*kind);
        runner.until_working().await;
        runner.stop().await?;
    }

    progress(&format!("{runs} idle runs of each probe"));
    let idle = bench.rounds(&probes, runs, "idle", progress).await?;
    let mut batch = Vec::new();
    let mut during = Vec::new();
    for kind in &kinds {
        progress(&format!("{} alone for {alone_secs:.0} s", kind.label()));
        let runner = bench.start(*kind);
        tokio::time::sleep(Duration::from_secs_f64(alone_secs)).await;
        let alone = runner.snapshot();
        runner.stop().await?;
        progress(&format!(
            "{runs} runs of each probe during {}",
            kind.label()
        ));
        let runner = bench.start(*kind);
        bench.until_on_lane(&runner).await;
        let times = bench.rounds(&probes, runs, kind.label(), progress).await?;
        // What it did while the probes ran (not what a narration does after, to finish).
        let busy = runner.snapshot();
        let window = busy.started.elapsed().as_secs_f64();
        let units_during = runner.stop().await?;
        let report = BatchReport {
            kind: *kind,
            work_unit: kind.work_unit(),
            alone_window_secs: alone_secs,
            alone_work: alone.done(),
            during_window_secs: window,
            during_work: busy.done(),
            units_during,
            slowdown: slowdown(&alone, &busy, window),
            interactive_share: times.iter().flatten().sum::<Duration>().as_secs_f64()
                / window.max(1e-9),
        };
        progress(&format!(
            "  {}: {:.2} {} alone in {alone_secs:.0} s, {:.2} in {window:.0} s under the probes",
            kind.label(),
            report.alone_work,
            report.work_unit,
            report.during_work
        ));
        batch.push(report);
        during.push(times);
    }

    let idle_summaries: Vec<Option<LatencySummary>> = idle.iter().map(|t| summarize(t)).collect();
    let mut results = Vec::new();
    for (kind, times) in kinds.iter().zip(&during) {
        for (k, probe) in probes.iter().enumerate() {
            let (Some(i), Some(d)) = (idle_summaries[k].clone(), summarize(&times[k])) else {
                continue;
            };
            let (p50_ratio, p95_ratio) = (d.p50_ms / i.p50_ms, d.p95_ms / i.p95_ms);
            results.push(Row {
                probe: *probe,
                batch: *kind,
                within_goal: p50_ratio <= GOAL_P50 && p95_ratio <= GOAL_P95,
                p50_ratio,
                p95_ratio,
                idle: i,
                during: d,
            });
        }
    }
    Ok(IsolationBenchReport {
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_average_before,
        load_average_after: load_average(),
        clip: args.clip.display().to_string(),
        text_model: args.upstream.clone(),
        batch_gives_way,
        runs,
        pause_ms,
        alone_secs,
        goal: Goal {
            p50_ratio: GOAL_P50,
            p95_ratio: GOAL_P95,
        },
        probes: probes
            .iter()
            .zip(idle_summaries)
            .map(|(probe, idle)| IdleProbe {
                probe: *probe,
                job: probe.label(),
                idle,
            })
            .collect(),
        all_within_goal: results.iter().all(|r| r.within_goal),
        batch,
        results,
        skipped,
        total_secs: begun.elapsed().as_secs_f64(),
    })
}

/// The report as the README shows it: the probes' ratios, then the batch work's slowdown.
pub fn render_text(report: &IsolationBenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| interactive probe | batch work | idle p50 / p95 | during p50 / p95 | ratio p50 / p95 | within {GOAL_P50}× / {GOAL_P95}× |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for r in &report.results {
        let _ = writeln!(
            out,
            "| {} | {} | {} / {} ms | {} / {} ms | {:.2} / {:.2} | {} |",
            r.probe.label(),
            r.batch.label(),
            ms(r.idle.p50_ms),
            ms(r.idle.p95_ms),
            ms(r.during.p50_ms),
            ms(r.during.p95_ms),
            r.p50_ratio,
            r.p95_ratio,
            if r.within_goal { "PASS" } else { "FAIL" }
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "| batch work | same work | alone | while the probes ran | slowdown | probes' share of the time (full give-way) |");
    let _ = writeln!(out, "|---|---|---|---|---|---|");
    for b in &report.batch {
        let share = format!(
            "{:.0} % ({:.1}×)",
            100.0 * b.interactive_share,
            1.0 / (1.0 - b.interactive_share).max(1e-3)
        );
        let _ = match &b.slowdown {
            Some(s) => writeln!(
                out,
                "| {} | {:.1} {} | {:.1} s | {} | {}{:.2}× | {share} |",
                b.kind.label(),
                s.work,
                b.work_unit,
                s.alone_secs,
                match s.during_probes_secs {
                    Some(secs) => format!("{secs:.1} s"),
                    None => format!("not done in {:.1} s", b.during_window_secs),
                },
                if s.at_least { "≥ " } else { "" },
                s.ratio
            ),
            None => writeln!(
                out,
                "| {} | none done alone in {:.0} s | | | | {share} |",
                b.kind.label(),
                b.alone_window_secs
            ),
        };
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "{} runs of each probe, {} ms apart; batch work {}; {} CPUs, load average before {:?}, after {:?}; {}",
        report.runs,
        report.pause_ms,
        if report.batch_gives_way {
            "gives way"
        } else {
            "competes"
        },
        report.cpus,
        report.load_average_before,
        report.load_average_after,
        if report.all_within_goal {
            "every probe within the goal"
        } else {
            "some probes NOT within the goal"
        }
    );
    out
}
