//! `headroom`: the command-line front end. It reads the environment and the config file once,
//! applies the command's flags, builds the process's `Services` (the composition root) and
//! hands each command a borrow of it.

// Standard output that a reader closed (`headroom project show X --json | head`) ends the
// process quietly, as Unix tools end, instead of std's panic "failed printing to stdout".
// These shadow std's macros for every module below; SIGPIPE itself stays ignored, so a
// subprocess or a client that goes away never kills a running server.
macro_rules! println {
    () => { $crate::stdout::write_line(format_args!("")) };
    ($($arg:tt)*) => { $crate::stdout::write_line(format_args!($($arg)*)) };
}
macro_rules! print {
    ($($arg:tt)*) => { $crate::stdout::write(format_args!($($arg)*)) };
}

mod stdout;

mod bench;
mod cleanup;
mod doctor;
mod gpu;
mod mcp;
mod memory;
mod models;
mod narrate;
mod plan;
mod play;
mod progress;
mod project;
mod project_lookup;
mod record;
mod serve;
mod speak;
mod transcribe;
mod voice;

use clap::{Args, Parser, Subcommand};
use headroom_core::config::Config;
use headroom_services::{Environment, Services};
use std::path::PathBuf;
use std::process::ExitCode;

/// Exit status when the text lane refused the work (with `--policy reject`).
pub const EXIT_REJECTED: u8 = 3;
/// Exit status after Ctrl-C.
pub const EXIT_CANCELLED: u8 = 130;

#[derive(Parser)]
#[command(
    name = "headroom",
    version,
    about = "Local voice workstation: an admission-controlled text lane beside the audio pipeline"
)]
struct Cli {
    /// Config file (default: the platform config dir's headroom/config.toml, or $HEADROOM_CONFIG).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Allow text, voice clips and audio to be sent to this server on another machine (an
    /// origin such as https://gpu.example:8000; repeatable). Servers on this machine need
    /// nothing; others are refused without it (or privacy.allow_remote in the config).
    #[arg(long = "allow-remote", global = true, value_name = "ORIGIN")]
    allow_remote: Vec<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Clean up or rewrite a transcript through the text model (or the rules).
    Cleanup(cleanup::CleanupArgs),
    /// Run a loopback OpenAI-compatible server with admission control in front of a text model.
    Serve(serve::ServeArgs),
    /// Check the text model server, its model and context, and the GPU.
    Doctor(doctor::DoctorArgs),
    /// Transcribe an audio file with the embedded Whisper engine.
    Transcribe(transcribe::TranscribeArgs),
    /// Synthesize speech to a WAV file.
    Speak(speak::SpeakArgs),
    /// Record from a microphone to a WAV file, with a level meter.
    Record(record::RecordArgs),
    /// Play an audio file on the default output device.
    Play(play::PlayArgs),
    /// List, install and verify speech models.
    #[command(subcommand)]
    Models(models::ModelsCommand),
    /// The speech models a running `headroom serve` holds in memory; --free lets go of them.
    Memory(memory::MemoryArgs),
    /// Measure the admission boundary and the text model's serving figures against a real server.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Plan GPU memory: how much vLLM may take beside the audio backends, and the bounded
    /// `vllm serve` command, with the arithmetic shown.
    Plan(plan::PlanArgs),
    /// GPU memory through NVML: watch it, or check it against nvidia-smi.
    #[command(subcommand)]
    Gpu(gpu::GpuCommand),
    /// The desktop app's projects: list, create, rename, delete, show, transcribe, clean up,
    /// export.
    #[command(subcommand)]
    Project(project::ProjectCommand),
    /// Voice profiles: reference clips, similarity, approximate voice match, cloning server.
    #[command(subcommand)]
    Voice(voice::VoiceCommand),
    /// Narrate a project: clean up, rewrite or translate each segment on the text lane, speak it
    /// in the chosen voice, fit each take to its segment's time, and write the narration WAV
    /// (optionally mixed over the original) with subtitles.
    Narrate(narrate::NarrateArgs),
    /// Serve the Model Context Protocol on stdin/stdout for agents: tools to transcribe a file,
    /// speak text to a file, list voices, and list, read, clean up or narrate projects, on the
    /// same lanes and admission as the app (batch priority unless a call asks for
    /// interactive), with progress notifications and cancellation.
    Mcp(mcp::McpArgs),
}

/// Text-lane limits shared by the commands that use the lane.
#[derive(Args, Debug, Clone, Default)]
pub struct LaneArgs {
    /// Requests to the text model at once.
    #[arg(long)]
    max_in_flight: Option<usize>,
    /// Requests allowed to wait for a slot (beyond that: rejected at once).
    #[arg(long)]
    max_waiting: Option<usize>,
    /// The model's context in tokens (default: asked from the server, else 4096).
    #[arg(long)]
    context_tokens: Option<u32>,
    /// The longest input a request may carry, in characters (beyond: rejected at once).
    #[arg(long)]
    max_input_chars: Option<usize>,
    /// The reply budget, in tokens, for requests that set none.
    #[arg(long)]
    max_tokens: Option<u32>,
    /// Longest wait for a slot, in seconds.
    #[arg(long)]
    queue_wait_secs: Option<f64>,
    /// Longest wait for the first words after dispatch, in seconds.
    #[arg(long)]
    first_chunk_secs: Option<f64>,
    /// Longest time for a whole request, in seconds.
    #[arg(long)]
    total_secs: Option<f64>,
    /// While interactive audio runs: none, gate (no new text requests), preempt (also stop
    /// running ones).
    #[arg(long)]
    yield_to_audio: Option<headroom_core::admission::YieldRule>,
    /// With an NVIDIA GPU: refuse text work while less than this much GPU memory is free, in
    /// MiB, kept for the audio models.
    #[arg(long)]
    audio_headroom_mib: Option<u64>,
}

impl LaneArgs {
    pub fn apply(&self, config: &mut Config) {
        let t = &mut config.text_lane;
        if let Some(v) = self.max_in_flight {
            t.max_in_flight = v;
        }
        if let Some(v) = self.max_waiting {
            t.max_waiting = v;
        }
        if let Some(v) = self.context_tokens {
            t.context_tokens = Some(v);
        }
        if let Some(v) = self.max_input_chars {
            t.max_input_chars = v;
        }
        if let Some(v) = self.max_tokens {
            t.max_tokens = v;
        }
        if let Some(v) = self.queue_wait_secs {
            t.queue_wait_secs = v;
        }
        if let Some(v) = self.first_chunk_secs {
            t.first_chunk_secs = v;
        }
        if let Some(v) = self.total_secs {
            t.total_secs = v;
        }
        if let Some(v) = self.yield_to_audio {
            t.yield_to_audio = v;
        }
        if let Some(v) = self.audio_headroom_mib {
            t.audio_headroom_mib = Some(v);
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HEADROOM_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

impl Command {
    /// Applies the flags that change settings, before the services are built from them.
    fn configure(&self, config: &mut Config) {
        match self {
            Command::Cleanup(args) => args.configure(config),
            Command::Serve(args) => args.configure(config),
            Command::Doctor(args) => args.configure(config),
            _ => {}
        }
    }
}

fn main() -> ExitCode {
    headroom_base::allocator::use_one_malloc_arena();
    let cli = Cli::parse();
    init_tracing();
    // The one place the process environment is read.
    let mut env = Environment::from_vars(|name| std::env::var_os(name), std::env::temp_dir);
    env.config_file = cli.config.clone().or(env.config_file);
    let mut config = match Config::load(env.config_file.as_deref(), |name| std::env::var(name).ok())
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!("headroom: {e}");
            return ExitCode::FAILURE;
        }
    };
    cli.command.configure(&mut config);
    config.privacy.allow_remote.extend(cli.allow_remote);
    let command = match cli.command {
        Command::Models(cmd) => return exit_code(models::run(cmd, &env)),
        other => other,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts");
    let result = runtime.block_on(async move {
        let shared = Services::new(config, env);
        let services = &*shared;
        match command {
            Command::Project(cmd) => project::run(cmd, shared.clone()).await,
            Command::Voice(cmd) => voice::run(cmd, shared.clone()).await,
            Command::Narrate(args) => narrate::run(args, shared.clone()).await,
            Command::Mcp(args) => mcp::run(args, shared.clone()).await,
            Command::Cleanup(args) => cleanup::run(args, services).await,
            Command::Serve(args) => serve::run(args, services).await,
            Command::Doctor(args) => doctor::run(args, services).await,
            Command::Bench(cmd) => bench::run(cmd, shared.clone()).await,
            Command::Transcribe(args) => transcribe::run(args, services).await,
            Command::Speak(args) => speak::run(args, shared.clone()).await,
            Command::Record(args) => record::run(args, services).await,
            Command::Memory(args) => memory::run(args, services).await,
            Command::Play(args) => play::run(args, services).await,
            Command::Plan(args) => plan::run(args, services).await,
            Command::Gpu(cmd) => gpu::run(cmd).await,
            Command::Models(_) => unreachable!("handled before the runtime starts"),
        }
    });
    exit_code(result)
}

fn exit_code(result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("headroom: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Cancels `token` on Ctrl-C.
pub fn cancel_on_ctrl_c(token: tokio_util::sync::CancellationToken) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("headroom: cancelling…");
            token.cancel();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The README promises a flag for every `[text_lane]` key, on `cleanup` and `serve`.
    #[test]
    fn every_text_lane_key_has_a_flag() {
        let keys = serde_json::to_value(headroom_core::config::TextLaneSettings::default())
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>();
        let lane = LaneArgs::augment_args(clap::Command::new("lane"));
        let flags: Vec<String> = lane
            .get_arguments()
            .filter_map(|a| a.get_long())
            .map(|long| long.replace('-', "_"))
            .collect();
        let missing: Vec<_> = keys.iter().filter(|k| !flags.contains(k)).collect();
        assert!(missing.is_empty(), "keys without a flag: {missing:?}");
        // And a flag sets its key.
        let cli = Cli::try_parse_from([
            "headroom",
            "serve",
            "--max-input-chars",
            "900",
            "--max-tokens",
            "64",
            "--audio-headroom-mib",
            "2048",
        ])
        .unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("serve")
        };
        let mut config = Config::default();
        args.configure(&mut config);
        let t = &config.text_lane;
        assert_eq!(
            (t.max_input_chars, t.max_tokens, t.audio_headroom_mib),
            (900, 64, Some(2048))
        );
    }
}
