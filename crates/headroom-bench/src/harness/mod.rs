//! `headroom bench run`: the reference article's serving harness and what it leaves out.
//!
//! Parity: concurrency 2, 3 batches, streamed, temperature 0, the same synthetic prompt, TTFT
//! to the first non-empty delta, full-stream latency, device memory sampled every 200 ms with
//! the absolute baseline, the peak and peak − baseline; one warm-up batch excluded.
//! Additions: TPOT and ITL (as vLLM's `bench serve` defines them), mean/std/p50/p95/p99,
//! failures and rejections by reason (requests go through a text lane with the app's
//! admission stack), a real audio job alongside (`with_audio_job`: audio latency idle vs under
//! text load, and the text figures with and without it), and a soak (`soak_runs`) whose
//! per-run memory floor and throughput feed the leak detector.

mod report;

pub use report::{render_html, render_text};

use crate::boundary::{
    chat_request, summarize, time_transcription, BenchError, LatencySummary, BENCH_PROMPT,
};
use crate::leak::{analyze, LeakReport, LeakThresholds, RunObservation};
use futures::StreamExt;
use headroom_base::redact::SecretUrl;
use headroom_base::sync::Locked;
use headroom_core::admission::YieldRule;
use headroom_core::lanes::{TextLane, TextLaneConfig};
use headroom_core::llm::{is_loopback, ChatRequest, LlmClient};
use headroom_gpu::{GpuSampler, MemorySample, MemoryWindow};
use headroom_services::speech::{AudioInput, SpeechService};
use headroom_services::{Services, ServicesError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A real audio job to run beside the text load.
#[derive(Clone)]
pub struct AudioJob {
    pub clip: AudioInput,
    pub model: String,
    /// Timed transcriptions when idle (after one warm-up).
    pub runs: usize,
}

/// What to run.
#[derive(Clone)]
pub struct HarnessConfig {
    pub concurrency: usize,
    pub batches: usize,
    pub warmup_batches: usize,
    pub max_tokens: u32,
    /// The prompts, used in turn. `custom_prompts` marks prompts that are not the harness's own.
    pub prompts: Vec<String>,
    pub custom_prompts: bool,
    pub audio: Option<AudioJob>,
    /// Repeat the measured pass this many times and judge the memory floor.
    pub soak_runs: Option<usize>,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        HarnessConfig {
            concurrency: 2,
            batches: 3,
            warmup_batches: 1,
            max_tokens: 128,
            prompts: vec![BENCH_PROMPT.to_string()],
            custom_prompts: false,
            audio: None,
            soak_runs: None,
        }
    }
}

/// One request's figures.
#[derive(Debug, Clone, Serialize)]
pub struct RequestResult {
    pub batch: usize,
    /// `ok`, or the rejection/failure reason code.
    pub outcome: String,
    pub ttft_ms: Option<f64>,
    pub latency_ms: f64,
    pub completion_tokens: Option<u64>,
    pub prompt_tokens: Option<u64>,
    pub tpot_ms: Option<f64>,
    /// Gaps between content chunks.
    pub itl_ms: Vec<f64>,
}

/// Device memory over a pass: absent without a GPU (or a process to watch).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum MemoryFigures {
    Measured {
        /// What was sampled: a GPU, or a process's resident memory on CPU machines.
        source: String,
        #[serde(flatten)]
        window: MemoryWindow,
    },
    Absent {
        reason: String,
    },
}

/// One measured pass (all batches).
#[derive(Debug, Clone, Serialize)]
pub struct PassReport {
    pub label: String,
    pub requests: Vec<RequestResult>,
    pub ttft: Option<LatencySummary>,
    pub latency: Option<LatencySummary>,
    pub tpot: Option<LatencySummary>,
    pub itl: Option<LatencySummary>,
    pub requests_per_s: f64,
    pub output_tokens_per_s: f64,
    pub wall_ms: f64,
    pub succeeded: usize,
    /// Failures and rejections by reason code.
    pub failures: BTreeMap<String, usize>,
    pub memory: MemoryFigures,
    /// (ms since the pass started, MiB) for the report's timeline.
    pub memory_timeline: Vec<(u64, f64)>,
}

/// Audio latency idle and under text load.
#[derive(Debug, Clone, Serialize)]
pub struct AudioFigures {
    pub clip_seconds: f64,
    pub idle: Option<LatencySummary>,
    pub under_text_load: Option<LatencySummary>,
    /// Median under load over median idle.
    pub p50_ratio: Option<f64>,
}

/// The soak: per-run observations and the leak detector's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct SoakFigures {
    pub runs: Vec<RunObservation>,
    pub report: LeakReport,
}

/// Everything `headroom bench run` measured.
#[derive(Debug, Clone, Serialize)]
pub struct HarnessReport {
    /// The server measured, shown and serialized without its secrets.
    pub target: SecretUrl,
    pub model: Option<String>,
    pub loopback: bool,
    pub concurrency: usize,
    pub batches: usize,
    pub warmup_batches: usize,
    pub max_tokens: u32,
    pub temperature: f64,
    pub sample_period_ms: u64,
    pub started_unix_ms: u64,
    /// Without an audio job.
    pub text_only: PassReport,
    /// With the audio job looping alongside (when asked).
    pub with_audio: Option<PassReport>,
    pub audio: Option<AudioFigures>,
    pub soak: Option<SoakFigures>,
}

/// Sends one streamed request through the lane and times it as the article and vLLM do.
async fn timed_request(lane: &TextLane, req: ChatRequest, batch: usize) -> RequestResult {
    let started = Instant::now();
    let ms = |at: Instant| (at - started).as_secs_f64() * 1000.0;
    let mut result = RequestResult {
        batch,
        outcome: "ok".into(),
        ttft_ms: None,
        latency_ms: 0.0,
        completion_tokens: None,
        prompt_tokens: None,
        tpot_ms: None,
        itl_ms: Vec::new(),
    };
    let mut stream = match lane.submit(req).await {
        Ok(s) => s,
        Err(r) => {
            result.outcome = r.reason.code().to_string();
            result.latency_ms = ms(Instant::now());
            return result;
        }
    };
    let mut last_content: Option<Instant> = None;
    let mut chunks = 0u64;
    while let Some(item) = stream.next().await {
        match item {
            Ok(chunk) => {
                if let Some(usage) = &chunk.usage {
                    result.completion_tokens = Some(usage.completion_tokens);
                    result.prompt_tokens = Some(usage.prompt_tokens);
                }
                if chunk.text().is_some_and(|t| !t.is_empty()) {
                    let now = Instant::now();
                    match last_content {
                        None => result.ttft_ms = Some(ms(now)),
                        Some(prev) => result.itl_ms.push((now - prev).as_secs_f64() * 1000.0),
                    }
                    last_content = Some(now);
                    chunks += 1;
                }
            }
            Err(r) => {
                result.outcome = r.reason.code().to_string();
                break;
            }
        }
    }
    // E2E: send → last content chunk (the usage chunk excluded).
    result.latency_ms = last_content.map(ms).unwrap_or_else(|| ms(Instant::now()));
    if result.outcome == "ok" && result.ttft_ms.is_none() {
        result.outcome = "no_content".into();
    }
    let tokens = result.completion_tokens.unwrap_or(chunks);
    if let (Some(ttft), true) = (result.ttft_ms, tokens > 1) {
        result.tpot_ms = Some((result.latency_ms - ttft) / (tokens - 1) as f64);
    }
    result
}

fn durations(values: impl Iterator<Item = f64>) -> Vec<Duration> {
    values
        .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0))
        .collect()
}

/// Runs `batches` batches of `concurrency` simultaneous requests.
async fn run_batches(
    lane: &TextLane,
    config: &HarnessConfig,
    model: &Option<String>,
    batches: usize,
    first_batch: usize,
) -> Vec<RequestResult> {
    let mut results = Vec::new();
    let mut n = 0;
    for batch in first_batch..first_batch + batches {
        let requests: Vec<_> = (0..config.concurrency)
            .map(|_| {
                let prompt = &config.prompts[n % config.prompts.len()];
                n += 1;
                timed_request(
                    lane,
                    chat_request(prompt, model.clone(), config.max_tokens),
                    batch,
                )
            })
            .collect();
        results.extend(futures::future::join_all(requests).await);
    }
    results
}

/// A measured pass: the figures of `batches` batches and the memory window around them.
async fn measured_pass(
    label: &str,
    lane: &TextLane,
    config: &HarnessConfig,
    model: &Option<String>,
    memory: &Option<(GpuSampler, String)>,
    absent_reason: &str,
) -> PassReport {
    let window_start = memory.as_ref().map(|(s, _)| s.mark());
    let started = Instant::now();
    let requests = run_batches(lane, config, model, config.batches, 0).await;
    let wall = started.elapsed();
    let ok: Vec<&RequestResult> = requests.iter().filter(|r| r.outcome == "ok").collect();
    let mut failures = BTreeMap::new();
    for r in requests.iter().filter(|r| r.outcome != "ok") {
        *failures.entry(r.outcome.clone()).or_default() += 1;
    }
    let output_tokens: u64 = ok
        .iter()
        .map(|r| r.completion_tokens.unwrap_or(r.itl_ms.len() as u64 + 1))
        .sum();
    let (figures, timeline) = match (memory, window_start) {
        (Some((sampler, source)), Some(start)) => match sampler.window(start) {
            Some(window) => {
                let timeline = sampler
                    .samples_from(start.seq)
                    .iter()
                    .map(|s: &MemorySample| (s.at_ms.saturating_sub(start.at_ms), s.used_mib()))
                    .collect();
                (
                    MemoryFigures::Measured {
                        source: source.clone(),
                        window,
                    },
                    timeline,
                )
            }
            None => (
                MemoryFigures::Absent {
                    reason: "no memory readings during the pass".into(),
                },
                Vec::new(),
            ),
        },
        _ => (
            MemoryFigures::Absent {
                reason: absent_reason.to_string(),
            },
            Vec::new(),
        ),
    };
    let secs = wall.as_secs_f64().max(1e-9);
    PassReport {
        label: label.to_string(),
        ttft: summarize(&durations(ok.iter().filter_map(|r| r.ttft_ms))),
        latency: summarize(&durations(ok.iter().map(|r| r.latency_ms))),
        tpot: summarize(&durations(ok.iter().filter_map(|r| r.tpot_ms))),
        itl: summarize(&durations(ok.iter().flat_map(|r| r.itl_ms.iter().copied()))),
        requests_per_s: ok.len() as f64 / secs,
        output_tokens_per_s: output_tokens as f64 / secs,
        wall_ms: wall.as_secs_f64() * 1000.0,
        succeeded: ok.len(),
        failures,
        memory: figures,
        memory_timeline: timeline,
        requests,
    }
}

async fn transcribe_once(
    speech: &SpeechService,
    job: &AudioJob,
) -> Result<(Duration, f64), BenchError> {
    time_transcription(speech, &job.clip, &job.model).await
}

/// Runs the harness against `upstream`. `memory` is what to sample (a GPU, or a CPU server's
/// process), with its description; `None` marks the memory figures absent with
/// `absent_reason`. `progress` gets one line per step.
pub async fn run(
    services: &Services,
    upstream: &LlmClient,
    config: HarnessConfig,
    memory: Option<(GpuSampler, String)>,
    absent_reason: &str,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<HarnessReport, BenchError> {
    let loopback = is_loopback(upstream.base_url());
    if !loopback && config.custom_prompts {
        return Err(BenchError::PromptsToRemote {
            url: upstream.base_url().to_string(),
        });
    }
    if config.concurrency == 0 || config.batches == 0 || config.prompts.is_empty() {
        return Err(BenchError::EmptyWorkload);
    }
    // The app's admission stack with room for exactly the harness's concurrency; the audio job
    // is measured beside the text, so the lane does not yield to it.
    let lane = services.dedicated_text_lane(
        upstream.clone(),
        TextLaneConfig {
            max_in_flight: config.concurrency,
            max_waiting: 0,
            default_max_tokens: config.max_tokens,
            yield_rule: YieldRule::None,
            ..TextLaneConfig::default()
        },
    );
    lane.discover().await?;
    let model = lane.model();
    let started_unix_ms = headroom_base::clock::unix_ms();
    if config.warmup_batches > 0 {
        progress(&format!(
            "warm-up: {} batch(es) of {} (excluded)",
            config.warmup_batches, config.concurrency
        ));
        let warm = run_batches(&lane, &config, &model, config.warmup_batches, 0).await;
        if let Some(bad) = warm.iter().find(|r| r.outcome != "ok") {
            progress(&format!("warm-up request ended with {}", bad.outcome));
        }
    }
    progress(&format!(
        "measuring: {} batches of {} streamed requests",
        config.batches, config.concurrency
    ));
    let text_only =
        measured_pass("text only", &lane, &config, &model, &memory, absent_reason).await;

    let (with_audio, audio) = match &config.audio {
        None => (None, None),
        Some(job) => {
            let speech = services.speech().clone();
            progress("audio job: warm-up transcription (model load, excluded)");
            let (_, clip_seconds) = transcribe_once(&speech, job).await?;
            progress(&format!("audio job: {} idle transcriptions", job.runs));
            let mut idle = Vec::new();
            for _ in 0..job.runs {
                idle.push(transcribe_once(&speech, job).await?.0);
            }
            progress("measuring again with the audio job looping alongside");
            let stop = CancellationToken::new();
            let finished: Arc<std::sync::Mutex<Vec<(Instant, Instant)>>> = Default::default();
            let looped = {
                let stop = stop.clone();
                let job = job.clone();
                let finished = finished.clone();
                let speech = speech.clone();
                tokio::spawn(async move {
                    while !stop.is_cancelled() {
                        let began = Instant::now();
                        transcribe_once(&speech, &job).await?;
                        finished.locked().push((began, Instant::now()));
                    }
                    Ok::<(), BenchError>(())
                })
            };
            let pass = measured_pass(
                "with audio job",
                &lane,
                &config,
                &model,
                &memory,
                absent_reason,
            )
            .await;
            // Keep the text load going (unmeasured) until as many audio jobs have run under it
            // as were timed idle, so the two medians compare like with like.
            while finished.locked().len() < job.runs && !looped.is_finished() {
                run_batches(&lane, &config, &model, 1, 0).await;
            }
            let load_ended = Instant::now();
            stop.cancel();
            looped.await.map_err(BenchError::AudioTask)??;
            let under: Vec<Duration> = finished
                .locked()
                .iter()
                .filter(|(_, end)| *end <= load_ended)
                .map(|(began, end)| *end - *began)
                .collect();
            let idle_s = summarize(&idle);
            let under_s = summarize(&under);
            let ratio = match (&idle_s, &under_s) {
                (Some(i), Some(u)) if i.p50_ms > 0.0 => Some(u.p50_ms / i.p50_ms),
                _ => None,
            };
            (
                Some(pass),
                Some(AudioFigures {
                    clip_seconds,
                    idle: idle_s,
                    under_text_load: under_s,
                    p50_ratio: ratio,
                }),
            )
        }
    };

    let soak = match config.soak_runs {
        None => None,
        Some(runs) => {
            let mut observations = Vec::new();
            let baseline = memory
                .as_ref()
                .and_then(|(s, _)| s.sample_now())
                .map(|s| s.used_mib());
            let mut queue_known = false;
            for i in 0..runs {
                progress(&format!("soak run {}/{runs}", i + 1));
                let (pass, queue_depth) = with_queue_depth(
                    upstream,
                    measured_pass("soak", &lane, &config, &model, &memory, absent_reason),
                )
                .await;
                queue_known |= queue_depth.is_some();
                let floor = match &memory {
                    Some((sampler, _)) => settle_floor(sampler).await,
                    None => None,
                };
                let context = pass
                    .requests
                    .iter()
                    .filter_map(|r| Some(r.prompt_tokens? + r.completion_tokens?))
                    .map(|t| t as f64)
                    .collect::<Vec<_>>();
                observations.push(RunObservation {
                    floor_mib: floor.unwrap_or(f64::NAN),
                    throughput: pass.output_tokens_per_s,
                    queue_depth: queue_depth.unwrap_or(0.0),
                    context_tokens: if context.is_empty() {
                        0.0
                    } else {
                        context.iter().sum::<f64>() / context.len() as f64
                    },
                });
            }
            let mut report = if observations.iter().all(|o| o.floor_mib.is_finite()) {
                analyze(&observations, baseline, LeakThresholds::default())
            } else {
                // Without memory readings only throughput can be judged.
                let mut flat = observations.clone();
                flat.iter_mut().for_each(|o| o.floor_mib = 0.0);
                let mut r = analyze(&flat, None, LeakThresholds::default());
                r.reasoning.insert(
                    0,
                    format!("no memory readings ({absent_reason}): only throughput was judged"),
                );
                r
            };
            report.reasoning.push(format!(
                "each run: {} batches of {} identical requests, max_tokens {}, temperature 0",
                config.batches, config.concurrency, config.max_tokens
            ));
            if !queue_known {
                report.reasoning.push(
                    "the server exports no waiting-request gauge, so its queue depth was taken as 0"
                        .into(),
                );
            }
            Some(SoakFigures {
                runs: observations,
                report,
            })
        }
    };

    Ok(HarnessReport {
        target: upstream.base_url().as_str().into(),
        model,
        loopback,
        concurrency: config.concurrency,
        batches: config.batches,
        warmup_batches: config.warmup_batches,
        max_tokens: config.max_tokens,
        temperature: 0.0,
        sample_period_ms: memory
            .as_ref()
            .map(|(s, _)| s.period().as_millis() as u64)
            .unwrap_or(200),
        started_unix_ms,
        text_only,
        with_audio,
        audio,
        soak,
    })
}

/// Runs `work` while sampling the server's own waiting-request gauge every 200 ms; the mean,
/// or `None` when the server does not export one.
async fn with_queue_depth<T>(
    upstream: &LlmClient,
    work: impl std::future::Future<Output = T>,
) -> (T, Option<f64>) {
    let mut readings = Vec::new();
    let mut ticker = tokio::time::interval(Duration::from_millis(200));
    tokio::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => {
                let mean = (!readings.is_empty())
                    .then(|| readings.iter().sum::<f64>() / readings.len() as f64);
                return (out, mean);
            }
            _ = ticker.tick() => {
                if let Some(v) = upstream.waiting_requests().await {
                    readings.push(v);
                }
            }
        }
    }
}

/// Writes `report.json` and `report.html` into `dir` (atomically); returns their paths.
pub fn write_reports(
    dir: &std::path::Path,
    report: &HarnessReport,
) -> std::io::Result<(std::path::PathBuf, std::path::PathBuf)> {
    std::fs::create_dir_all(dir)?;
    let json = dir.join("report.json");
    let html = dir.join("report.html");
    let text = serde_json::to_string_pretty(report).expect("a report serializes");
    headroom_base::fsutil::write_atomic(&json, text.as_bytes())?;
    headroom_base::fsutil::write_atomic(&html, render_html(report).as_bytes())?;
    Ok((json, html))
}

/// The memory floor after a run: the lowest reading over the next five sampling periods.
async fn settle_floor(sampler: &GpuSampler) -> Option<f64> {
    let start = sampler.mark();
    let mut ticker = tokio::time::interval(sampler.period());
    for _ in 0..5 {
        ticker.tick().await;
        sampler.sample_now();
    }
    sampler
        .samples_from(start.seq)
        .iter()
        .map(MemorySample::used_mib)
        .reduce(f64::min)
}

/// A finished benchmark of the configured server, and where its reports are.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct BenchmarkRun {
    pub summary: String,
    pub html: PathBuf,
    pub json: PathBuf,
}

/// Why a benchmark of the configured server did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ConfiguredRunError {
    /// The configured server cannot be used (its URL, or no consent for it).
    #[error(transparent)]
    Services(#[from] ServicesError),
    #[error("the benchmark failed: {0}")]
    Run(#[from] BenchError),
    #[error("cannot write the reports into {dir}: {source}")]
    Reports {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Runs the harness against `services`' configured text model server (the article's
/// configuration: 2 concurrent, 3 batches, one warm-up) with its GPU sampler, and writes
/// `report.json` and `report.html` into a new folder under `reports_dir`: the app's
/// Benchmark panel.
pub async fn run_configured(
    services: &Services,
    reports_dir: &Path,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<BenchmarkRun, ConfiguredRunError> {
    let client = services.client(&services.config().llm.url)?;
    let gpu = services.gpu();
    let (memory, absent) = match gpu.status() {
        headroom_gpu::SamplerStatus::Sampling { device, .. } => {
            (Some((gpu.clone(), device)), String::new())
        }
        headroom_gpu::SamplerStatus::NoGpu { reason } => (None, format!("no NVIDIA GPU: {reason}")),
    };
    let report = run(
        services,
        &client,
        HarnessConfig::default(),
        memory,
        &absent,
        progress,
    )
    .await?;
    let dir = reports_dir.join(format!("bench-{}", headroom_base::clock::unix_ms()));
    let written = tokio::task::spawn_blocking(move || {
        let written =
            write_reports(&dir, &report).map_err(|source| ConfiguredRunError::Reports {
                dir: dir.clone(),
                source,
            })?;
        Ok::<_, ConfiguredRunError>((written, render_text(&report)))
    })
    .await;
    let ((json, html), summary) = match written {
        Ok(done) => done?,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    };
    Ok(BenchmarkRun {
        summary,
        html,
        json,
    })
}
