//! `headroom bench`: the benchmarks' arguments, turned into `headroom_bench` configurations;
//! their reports printed. The measuring is the library's.

mod fleet;
mod report;
mod suites;

use anyhow::Context;
use clap::{Args, Subcommand};
use headroom_bench::boundary::{flood, proxy_overhead, yield_rules, LatencySummary};
use headroom_services::speech::AudioInput;
use headroom_services::Services;
use headroom_speech::asr::WordErrors;
use report::write_json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
    /// The serving harness: the reference article's figures (concurrency 2, 3 batches, TTFT,
    /// latency, memory baseline/peak/delta every 200 ms) plus TPOT, ITL, percentiles,
    /// failures by reason, an optional audio job alongside and a soak with leak detection.
    /// Writes report.json and report.html.
    Run(RunArgs),
    /// Rejection latency (p50/p99) while every text slot is held.
    Flood {
        #[command(flatten)]
        common: Common,
        /// Requests in the flood.
        #[arg(long, default_value_t = 200)]
        requests: usize,
        /// Flood requests in flight at once.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
    },
    /// Audio latency idle vs under text load, for each yield rule (none, gate, preempt).
    Yield {
        #[command(flatten)]
        common: Common,
        /// The clip the audio job transcribes.
        #[arg(long, default_value = "samples/interview.flac")]
        clip: std::path::PathBuf,
        /// Speech model.
        #[arg(long, default_value = headroom_speech::models::DEFAULT_MODEL)]
        model: String,
        /// Audio jobs timed per condition.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Long text generations kept going as load.
        #[arg(long, default_value_t = 2)]
        streams: usize,
    },
    /// The embedded voices (real-time factor, WER) and the approximate voice match against
    /// target speakers made at run time (similarity on held-out sentences, WER, time).
    Voices(suites::VoicesBenchArgs),
    /// Speaker diarization on conversations synthesized from voices of several engines:
    /// diarization error rate (0.25 s collar) per number of speakers, how often the number was
    /// estimated right, and known speakers named from voice profiles.
    Speakers(suites::SpeakersBenchArgs),
    /// Hours-long recordings as a person runs them: `headroom transcribe` (a whole process,
    /// alone and with `--speakers auto`) on conversations made at each length: time, times
    /// real time, peak memory, the speakers found and the diarization error.
    Long(suites::LongBenchArgs),
    /// Editing by text on recordings with fillers and pauses put in on purpose (held-out
    /// voices): fillers found, clean speech cut, clicks, timing, render time, fillers heard
    /// after; and pause shortening against auto-editor's default silence cutting.
    Edit(suites::EditBenchArgs),
    /// A folder transcribed over 1, 2 and 3 local `headroom serve` workers
    /// (`headroom transcribe --server-url …`, whole processes): time, hours of audio an hour,
    /// the speed-up over one worker, word errors; and a worker killed a third of the way
    /// through (its cost in time, and the files lost: none).
    Batch(suites::BatchBenchArgs),
    /// Streamed speech through `/v1/audio/speech`: time to the first audio bytes against
    /// the whole take, per voice and format, for a long text (ten sentences).
    Speech(suites::SpeechBenchArgs),
    /// Interactive audio latency idle vs while a project is narrated (the ratio), and the
    /// narration's total time vs the sum of its stages.
    Narration(suites::NarrationBenchArgs),
    /// Every interactive probe (espeak-ng, Kokoro, a voice profile's take, a 6 s transcription,
    /// a live partial) idle and under each kind of batch work (transcription, narration, a voice
    /// match search, cloning takes): p50/p95 ratios against the goal, and the batch work's own
    /// slowdown.
    Isolation(suites::IsolationBenchArgs),
    /// The text lane over 1, 2 and 3 upstreams: completed requests/s, tokens/s and TTFT
    /// p50/p99 at the same rejection rate, and the time to route around an upstream killed
    /// under load (the streams it failed, the requests refused while the fleet was smaller).
    /// On llama-servers it starts, servers you run, or simulated ones.
    Fleet(fleet::FleetBenchArgs),
    /// Word error rate of a transcript against the text that was said, raw (case and
    /// punctuation ignored) and after Whisper-style English normalization (numbers as digits,
    /// British spellings as American, contractions spelled out), with the word-by-word
    /// alignment of each: JSON on stdout. Used by scripts/bench-asr.
    Wer {
        /// A file with the text that was said.
        #[arg(long)]
        reference: PathBuf,
        /// A file with the transcript.
        #[arg(long)]
        hypothesis: PathBuf,
    },
    /// Time to first token through `headroom serve` vs directly, same server, same run.
    Ttft {
        #[command(flatten)]
        common: Common,
        /// Measured requests each way.
        #[arg(long, default_value_t = 20)]
        requests: usize,
        /// Warm-up requests each way, excluded from the figures.
        #[arg(long, default_value_t = 2)]
        warmup: usize,
    },
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The text model server's base URL (default: from config). A server that is not on this
    /// machine only ever receives the harness's synthetic prompt.
    #[arg(long)]
    upstream: Option<String>,
    /// Requests per batch, sent together.
    #[arg(long, default_value_t = 2)]
    concurrency: usize,
    /// Measured batches.
    #[arg(long, default_value_t = 3)]
    batches: usize,
    /// Warm-up batches, excluded from the figures.
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    #[arg(long, default_value_t = 128)]
    max_tokens: u32,
    /// Your own prompts, one per line (loopback servers only).
    #[arg(long)]
    prompts: Option<PathBuf>,
    /// Also run a real audio job (transcribing --clip) beside the text load, and report audio
    /// latency idle vs under load and the text figures with and without it.
    #[arg(long)]
    with_audio_job: bool,
    #[arg(long, default_value = "samples/interview.flac")]
    clip: PathBuf,
    #[arg(long, default_value = headroom_speech::models::DEFAULT_MODEL)]
    speech_model: String,
    /// Timed idle transcriptions for --with-audio-job.
    #[arg(long, default_value_t = 3)]
    audio_runs: usize,
    /// Repeat the measured pass N times and judge the memory floor (leak or retention).
    #[arg(long, value_name = "N")]
    soak: Option<usize>,
    /// Sample this process's resident memory when there is no GPU (e.g. a CPU llama-server).
    #[arg(long)]
    server_pid: Option<u32>,
    /// Memory sampling period in milliseconds.
    #[arg(long, default_value_t = 200)]
    sample_ms: u64,
    /// Where report.json and report.html go.
    #[arg(long, default_value = "target/bench")]
    out: PathBuf,
}

#[derive(Args, Debug)]
pub struct Common {
    /// The text model server's base URL (default: from config).
    #[arg(long)]
    upstream: Option<String>,
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn line(label: &str, s: &Option<LatencySummary>) -> String {
    match s {
        Some(s) => format!(
            "{label:<28} n={:<4} p50 {:>8.2} ms  p95 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms",
            s.count, s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms
        ),
        None => format!("{label:<28} no samples"),
    }
}

pub async fn run(cmd: BenchCommand, shared: Arc<Services>) -> anyhow::Result<ExitCode> {
    let services = &*shared;
    let client_for = |common: &Common| {
        let url = common
            .upstream
            .clone()
            .unwrap_or_else(|| services.config().llm.url);
        services.client(&url)
    };
    match cmd {
        BenchCommand::Run(args) => return run_harness(args, services).await,
        BenchCommand::Narration(args) => suites::narration(args, shared.clone()).await?,
        BenchCommand::Isolation(args) => suites::isolation(args, shared.clone()).await?,
        BenchCommand::Voices(args) => suites::voices(args, services).await?,
        BenchCommand::Fleet(args) => return fleet::run(args, services).await,
        BenchCommand::Speakers(args) => suites::speakers(args, services).await?,
        BenchCommand::Long(args) => suites::long(args, services).await?,
        BenchCommand::Edit(args) => suites::edit(args, shared.clone()).await?,
        BenchCommand::Batch(args) => suites::batch(args, services).await?,
        BenchCommand::Speech(args) => suites::speech(args, services).await?,
        BenchCommand::Wer {
            reference,
            hypothesis,
        } => {
            let read = |p: &PathBuf| {
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))
            };
            let (said, heard) = (read(&reference)?, read(&hypothesis)?);
            let report = serde_json::json!({
                "raw": WordErrors::raw(&said, &heard),
                "normalized": WordErrors::normalized(&said, &heard),
            });
            println!("{report}");
        }
        BenchCommand::Flood {
            common,
            requests,
            concurrency,
        } => {
            let report = flood(services, &client_for(&common)?, requests, concurrency).await?;
            eprintln!(
                "flood: {} slots held, {} requests ({} at a time); statuses {:?}; reasons {:?}",
                report.slots_held,
                report.flood_requests,
                report.concurrency,
                report.statuses,
                report.reasons
            );
            eprintln!("{}", line("rejection latency", &report.rejection_latency));
            write_json(&common.json, &report)?;
        }
        BenchCommand::Yield {
            common,
            clip,
            model,
            runs,
            streams,
        } => {
            let input = AudioInput::from_file(&clip)?;
            let report = yield_rules(
                services,
                &client_for(&common)?,
                &input,
                &model,
                runs,
                streams,
                &|line| eprintln!("bench: {line}"),
            )
            .await?;
            eprintln!(
                "audio job: transcribe {} ({:.1} s, {model}), {runs} runs per condition, {streams} text streams as load",
                clip.display(),
                report.clip_seconds
            );
            eprintln!("{}", line("audio idle", &report.audio_idle));
            for r in &report.rules {
                eprintln!(
                    "{}",
                    line(
                        &format!("audio, text load, {:?}", r.rule).to_lowercase(),
                        &r.audio_under_load
                    )
                );
                if let Some(ratio) = r.p50_ratio {
                    eprintln!(
                        "{:<22} p50 ratio vs idle {ratio:.2}; text requests {:?}",
                        "", r.text_outcomes
                    );
                }
            }
            write_json(&common.json, &report)?;
        }
        BenchCommand::Ttft {
            common,
            requests,
            warmup,
        } => {
            let report = proxy_overhead(services, &client_for(&common)?, requests, warmup).await?;
            eprintln!("{}", line("TTFT direct", &report.direct_ttft));
            eprintln!("{}", line("TTFT via headroom", &report.via_headroom_ttft));
            if let (Some(r), Some(o)) = (report.p50_ratio, report.p50_overhead_ms) {
                eprintln!("p50 ratio {r:.3} (headroom adds {o:.2} ms at the median)");
            }
            write_json(&common.json, &report)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn run_harness(args: RunArgs, services: &Services) -> anyhow::Result<ExitCode> {
    use headroom_bench::harness::{self, AudioJob, HarnessConfig};
    use headroom_gpu::{GpuSampler, ProcessRssReader, SamplerStatus, DEFAULT_CAPACITY};
    let url = args
        .upstream
        .clone()
        .unwrap_or_else(|| services.config().llm.url);
    let client = services.client(&url)?;
    let mut harness_config = HarnessConfig {
        concurrency: args.concurrency,
        batches: args.batches,
        warmup_batches: args.warmup,
        max_tokens: args.max_tokens,
        soak_runs: args.soak,
        ..HarnessConfig::default()
    };
    if let Some(path) = &args.prompts {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        harness_config.prompts = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        harness_config.custom_prompts = true;
    }
    if args.with_audio_job {
        harness_config.audio = Some(AudioJob {
            clip: AudioInput::from_file(&args.clip)?,
            model: args.speech_model.clone(),
            runs: args.audio_runs.max(1),
        });
    }
    // A sampler of the harness's own, at the period asked for (--sample-ms): a measuring
    // instrument, not the app's 200 ms panel feed.
    let period = std::time::Duration::from_millis(args.sample_ms.max(10));
    let gpu = GpuSampler::start(period, DEFAULT_CAPACITY);
    let (memory, absent) = match (gpu.status(), args.server_pid) {
        (SamplerStatus::Sampling { device, .. }, _) => (Some((gpu, device)), String::new()),
        (SamplerStatus::NoGpu { reason }, Some(pid)) => {
            let reader = ProcessRssReader::open(pid)?;
            let sampler = GpuSampler::with_reader(reader, period, DEFAULT_CAPACITY, true);
            tracing::debug!(%reason, "no NVIDIA GPU; sampling the server process instead");
            let source = format!("{}, no NVIDIA GPU", sampler.device());
            (Some((sampler, source)), String::new())
        }
        (SamplerStatus::NoGpu { reason }, None) => (None, format!("no NVIDIA GPU: {reason}")),
    };
    let report = harness::run(
        services,
        &client,
        harness_config,
        memory,
        &absent,
        &|line| eprintln!("bench: {line}"),
    )
    .await?;
    print!("{}", harness::render_text(&report));
    let (json, html) = harness::write_reports(&args.out, &report)
        .map_err(|e| anyhow::anyhow!("cannot write the report into {}: {e}", args.out.display()))?;
    eprintln!("bench: wrote {} and {}", json.display(), html.display());
    Ok(ExitCode::SUCCESS)
}
