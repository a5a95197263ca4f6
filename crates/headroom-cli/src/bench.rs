use clap::{Args, Subcommand};
use headroom_core::bench::{flood, proxy_overhead, LatencySummary};
use headroom_core::config::Config;
use headroom_core::llm::LlmClient;
use serde::Serialize;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum BenchCommand {
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
        #[arg(long, default_value = headroom_core::models::DEFAULT_MODEL)]
        model: String,
        /// Audio jobs timed per condition.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// Long text generations kept going as load.
        #[arg(long, default_value_t = 2)]
        streams: usize,
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

fn write_json(path: &Option<PathBuf>, report: &impl Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    match path {
        Some(p) => std::fs::write(p, text + "\n")?,
        None => println!("{text}"),
    }
    Ok(())
}

pub async fn run(cmd: BenchCommand, config: Config) -> anyhow::Result<ExitCode> {
    let client_for = |common: &Common| {
        let url = common
            .upstream
            .clone()
            .unwrap_or_else(|| config.llm.url.clone());
        LlmClient::new(&url, config.llm.api_key())
    };
    match cmd {
        BenchCommand::Flood {
            common,
            requests,
            concurrency,
        } => {
            let report = flood(&client_for(&common)?, requests, concurrency).await?;
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
            let input = headroom_core::speech::AudioInput::from_file(&clip)?;
            let report = headroom_core::bench::yield_rules(
                &client_for(&common)?,
                &input,
                &model,
                runs,
                streams,
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
            let report = proxy_overhead(&client_for(&common)?, requests, warmup).await?;
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
