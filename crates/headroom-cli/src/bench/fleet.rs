//! `headroom bench fleet`: the text lane over 1, 2 and 3 upstreams at the same rejection rate,
//! and the time it takes to route around one killed under load.

use crate::{cancel_on_ctrl_c, EXIT_CANCELLED};
use clap::Args;
use headroom_bench::fleet::llama::LlamaServerConfig;
use headroom_bench::fleet::sim::SimulatedServer;
use headroom_bench::fleet::{self, Backend, FleetBenchConfig, FleetBenchError, Load};
use headroom_services::Services;
use std::path::PathBuf;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct FleetBenchArgs {
    /// Simulated upstreams in this process (a fixed token rate per slot): the routing's
    /// scaling apart from what the CPU can run.
    #[arg(long)]
    simulated: bool,
    /// Start real llama-servers with this binary (on free loopback ports, `-np 2 -t 1`).
    #[arg(long, requires = "gguf")]
    llama_server: Option<PathBuf>,
    /// The model the llama-servers load.
    #[arg(long, requires = "llama_server")]
    gguf: Option<PathBuf>,
    /// A server you run (repeat for several): measured as given, never killed.
    #[arg(long = "upstream", value_name = "URL")]
    given: Vec<String>,
    /// Fleet sizes measured.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    sizes: Vec<usize>,
    /// The share of requests the lane should refuse: the arrival rate is set for it with each
    /// fleet size, and the share measured is reported.
    #[arg(long, default_value_t = 0.10)]
    rejection: f64,
    /// A fixed arrival rate per upstream (requests/s) instead of a target rejection share.
    #[arg(long, conflicts_with = "rejection")]
    rate_per_upstream: Option<f64>,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Seconds of arrivals before each measured window (excluded).
    #[arg(long, default_value_t = 2.0)]
    warmup: f64,
    #[arg(long, default_value_t = 32)]
    max_tokens: u32,
    /// Most runs per fleet size to reach the rejection share.
    #[arg(long, default_value_t = 3)]
    calibration_rounds: usize,
    /// Fleet sizes in which one upstream is killed under load.
    #[arg(long, value_delimiter = ',', default_value = "2,3")]
    kill_with: Vec<usize>,
    /// Skip the kill measurement.
    #[arg(long)]
    no_kill: bool,
    /// Seconds of load before the kill.
    #[arg(long, default_value_t = 4.0)]
    kill_after: f64,
    /// Seconds of load watched after the kill.
    #[arg(long, default_value_t = 6.0)]
    kill_watch: f64,
    /// Seed of the arrival times.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulated: slots per upstream.
    #[arg(long, default_value_t = 2)]
    sim_slots: usize,
    /// Simulated: tokens a second per slot.
    #[arg(long, default_value_t = 100.0)]
    sim_tokens_per_s: f64,
    /// Simulated: from a slot to the first token.
    #[arg(long, default_value_t = 20)]
    sim_first_token_ms: u64,
    /// llama-server: `-c`, the context split among its 2 slots.
    #[arg(long, default_value_t = 4096)]
    llama_context: u32,
    /// Where the llama-servers' output goes.
    #[arg(long, default_value = "target/bench/fleet-logs")]
    logs: PathBuf,
    /// Write the report as JSON here (else on stdout).
    #[arg(long)]
    json: Option<PathBuf>,
}

pub async fn run(args: FleetBenchArgs, services: &Services) -> anyhow::Result<ExitCode> {
    let chosen = [
        args.simulated,
        args.llama_server.is_some(),
        !args.given.is_empty(),
    ];
    if chosen.iter().filter(|c| **c).count() != 1 {
        anyhow::bail!(
            "say which upstreams to measure, one kind: --simulated, --llama-server PATH --gguf PATH, or --upstream URL (repeated)"
        );
    }
    let backend = if args.simulated {
        Backend::Simulated(SimulatedServer {
            slots: args.sim_slots.max(1),
            tokens_per_s: args.sim_tokens_per_s,
            first_token_ms: args.sim_first_token_ms,
            ..SimulatedServer::default()
        })
    } else if let (Some(binary), Some(gguf)) = (&args.llama_server, &args.gguf) {
        Backend::LlamaServer(LlamaServerConfig {
            binary: binary.clone(),
            gguf: gguf.clone(),
            context: args.llama_context,
            slots: 2,
            threads: 1,
            log_dir: Some(args.logs.clone()),
        })
    } else {
        Backend::External(args.given.clone())
    };
    let mut kill_with = if args.no_kill {
        Vec::new()
    } else {
        args.kill_with.clone()
    };
    if matches!(backend, Backend::External(_)) && !kill_with.is_empty() {
        eprintln!("bench: no kill measurement: the servers given with --upstream are yours");
        kill_with.clear();
    }
    if !(args.seconds > 0.0 && args.warmup >= 0.0 && args.kill_after > 0.0 && args.kill_watch > 0.0)
    {
        anyhow::bail!("--seconds, --kill-after and --kill-watch must be positive");
    }
    let load = match args.rate_per_upstream {
        Some(rate) if rate > 0.0 => Load::RatePerUpstream(rate),
        Some(_) => anyhow::bail!("--rate-per-upstream must be positive"),
        None if args.rejection > 0.0 && args.rejection < 1.0 => {
            Load::TargetRejection(args.rejection)
        }
        None => anyhow::bail!("--rejection is a share between 0 and 1"),
    };
    let config = FleetBenchConfig {
        counts: args.sizes.clone(),
        load,
        seconds: args.seconds,
        warmup_seconds: args.warmup,
        max_tokens: args.max_tokens,
        calibration_rounds: args.calibration_rounds,
        kill_with,
        kill_after_s: args.kill_after,
        kill_watch_s: args.kill_watch,
        seed: args.seed,
    };
    let cancel = CancellationToken::new();
    cancel_on_ctrl_c(cancel.clone());
    let report = match fleet::run(services, backend, config, cancel, &|line| {
        eprintln!("bench: {line}")
    })
    .await
    {
        Ok(report) => report,
        Err(FleetBenchError::Cancelled) => return Ok(ExitCode::from(EXIT_CANCELLED)),
        Err(e) => return Err(e.into()),
    };
    eprint!("{}", fleet::render_text(&report));
    super::report::write_json(&args.json, &report)?;
    Ok(ExitCode::SUCCESS)
}
