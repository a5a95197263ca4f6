use clap::Subcommand;
use headroom_gpu::{GpuSampler, SamplerStatus, DEFAULT_CAPACITY};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Subcommand, Debug)]
pub enum GpuCommand {
    /// Sample device memory for a while, then print baseline, peak and delta.
    Watch {
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Sampling period in milliseconds.
        #[arg(long, default_value_t = 200)]
        period_ms: u64,
        /// Print the readings as JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Compare NVML's readings with nvidia-smi's (the GPU check script runs this).
    Check {
        /// Largest accepted difference in used memory, MiB.
        #[arg(long, default_value_t = 64.0)]
        tolerance_mib: f64,
    },
}

const MIB: f64 = 1024.0 * 1024.0;

fn nvidia_smi() -> anyhow::Result<(f64, f64)> {
    let out = headroom_base::process::Tool::new("nvidia-smi")
        .flag("--id=0")
        .flag("--query-gpu=memory.used,memory.total")
        .flag("--format=csv,noheader,nounits")
        .run(b"")?;
    anyhow::ensure!(
        out.status.success(),
        "nvidia-smi failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut fields = text.trim().split(',').map(|f| f.trim().parse::<f64>());
    match (fields.next(), fields.next()) {
        (Some(Ok(used)), Some(Ok(total))) => Ok((used, total)),
        _ => anyhow::bail!("unexpected nvidia-smi output: {text:?}"),
    }
}

pub async fn run(cmd: GpuCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        GpuCommand::Watch {
            seconds,
            period_ms,
            json,
        } => {
            let period = Duration::from_millis(period_ms.max(10));
            let sampler = GpuSampler::start(period, DEFAULT_CAPACITY);
            if let SamplerStatus::NoGpu { reason } = sampler.status() {
                println!("no NVIDIA GPU detected: {reason}");
                return Ok(ExitCode::SUCCESS);
            }
            let start = sampler.mark();
            let mut ticker = tokio::time::interval(period);
            let ticks = (seconds * 1000.0 / period.as_millis() as f64).ceil() as usize;
            for _ in 0..ticks {
                ticker.tick().await;
                if json {
                    if let Some(s) = sampler.latest() {
                        println!("{}", serde_json::to_string(&s)?);
                    }
                }
            }
            let w = sampler
                .window(start)
                .ok_or_else(|| anyhow::anyhow!("no readings"))?;
            println!(
                "{}: baseline {:.0} MiB, peak {:.0} MiB, delta {:.0} MiB, floor {:.0} MiB, of {:.0} MiB ({} samples, {} ms)",
                w.device, w.baseline_mib, w.peak_mib, w.delta_mib, w.floor_mib, w.total_mib, w.samples, w.duration_ms
            );
            if let Some(latest) = sampler.latest() {
                for p in &latest.memory.processes {
                    match p.used_bytes {
                        Some(b) => println!("  process {}: {:.0} MiB", p.pid, b as f64 / MIB),
                        None => println!("  process {}: (the driver does not say)", p.pid),
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        GpuCommand::Check { tolerance_mib } => {
            let sampler = GpuSampler::start(Duration::from_millis(200), 64);
            let reading = match sampler.status() {
                SamplerStatus::NoGpu { reason } => anyhow::bail!("no NVIDIA GPU: {reason}"),
                _ => sampler
                    .sample_now()
                    .ok_or_else(|| anyhow::anyhow!("NVML gave no reading"))?,
            };
            let (smi_used, smi_total) = nvidia_smi()?;
            let used_diff = (reading.used_mib() - smi_used).abs();
            let total_diff = (reading.total_mib() - smi_total).abs();
            println!(
                "NVML: {:.0} MiB used of {:.0}; nvidia-smi: {smi_used:.0} of {smi_total:.0}; differences {used_diff:.0} / {total_diff:.0} MiB",
                reading.used_mib(),
                reading.total_mib()
            );
            // nvidia-smi reports total minus a small reserved area on some drivers.
            let ok =
                used_diff <= tolerance_mib && total_diff <= tolerance_mib.max(smi_total * 0.01);
            println!(
                "{}",
                if ok {
                    "gpu check: OK"
                } else {
                    "gpu check: MISMATCH"
                }
            );
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
