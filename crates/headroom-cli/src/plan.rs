use clap::Args;
use headroom_bench::plan::{plan, KvDtype, PlanRequest, TextModel};
use headroom_core::admission::Priority;
use headroom_gpu::{GpuSampler, SamplerStatus};
use headroom_services::speech::AudioInput;
use headroom_services::Services;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Debug)]
pub struct PlanArgs {
    /// The text model: a known name (Qwen/Qwen2.5-7B-Instruct-AWQ) or a local model folder
    /// with config.json and *.safetensors.
    #[arg(long, default_value = "Qwen/Qwen2.5-7B-Instruct-AWQ")]
    model: String,
    /// Weights size in GiB (default: the preset's, or the safetensors in the model folder).
    #[arg(long)]
    weights_gib: Option<f64>,
    /// The card's memory in GiB (default: measured through NVML).
    #[arg(long)]
    gpu_gib: Option<f64>,
    /// What the audio backends hold on the device, in MiB.
    #[arg(long, conflicts_with_all = ["measure_audio", "audio_pid"])]
    audio_mib: Option<f64>,
    /// Measure the audio backends: transcribe this clip with the embedded engine while
    /// sampling device memory (needs a GPU).
    #[arg(long, value_name = "CLIP")]
    measure_audio: Option<PathBuf>,
    /// Measure an external audio server by its process id (its device memory through NVML).
    #[arg(long)]
    audio_pid: Option<u32>,
    /// Wanted context per request (--max-model-len).
    #[arg(long, default_value_t = 4096)]
    context: u32,
    /// Wanted concurrent sequences (--max-num-seqs).
    #[arg(long, default_value_t = 2)]
    concurrency: u32,
    /// KV cache dtype: auto or fp8.
    #[arg(long, default_value = "auto")]
    kv_cache_dtype: KvDtype,
    /// Check this --gpu-memory-utilization instead of computing the smallest that fits.
    #[arg(long)]
    gpu_memory_utilization: Option<f64>,
    /// Kept free beside both (display, other processes, fragmentation), MiB.
    #[arg(long, default_value_t = 512.0)]
    reserve_mib: f64,
    /// vLLM's overhead beyond weights and KV (CUDA context, activations, CUDA graphs), MiB.
    #[arg(long, default_value_t = 1536.0)]
    overhead_mib: f64,
    /// Print the plan as JSON.
    #[arg(long)]
    json: bool,
}

fn model_from_folder(dir: &std::path::Path, weights_gib: Option<f64>) -> anyhow::Result<TextModel> {
    let config_path = dir.join("config.json");
    let text = std::fs::read_to_string(&config_path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", config_path.display()))?;
    let weights_mib = match weights_gib {
        Some(g) => g * 1024.0,
        None => {
            let mut bytes = 0u64;
            for entry in std::fs::read_dir(dir)? {
                let path = entry?.path();
                if path.extension().is_some_and(|e| e == "safetensors") {
                    bytes += std::fs::metadata(&path)?.len();
                }
            }
            anyhow::ensure!(
                bytes > 0,
                "no *.safetensors in {}: give --weights-gib",
                dir.display()
            );
            bytes as f64 / headroom_bench::plan::MIB
        }
    };
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("model")
        .to_string();
    Ok(TextModel::from_hf_config(&name, &text, weights_mib)?)
}

/// Device memory the embedded audio engines take while transcribing `clip`.
async fn measure_audio(
    clip: &std::path::Path,
    sampler: &GpuSampler,
    services: &Services,
) -> anyhow::Result<f64> {
    let start = sampler.mark();
    services
        .speech()
        .transcribe(
            AudioInput::from_file(clip)?,
            headroom_speech::models::DEFAULT_MODEL,
            Default::default(),
            Priority::Interactive,
            Arc::new(|_| {}),
            Default::default(),
        )
        .await?;
    let window = sampler
        .window(start)
        .ok_or_else(|| anyhow::anyhow!("no GPU readings while the audio job ran"))?;
    eprintln!(
        "plan: audio job on {}: baseline {:.0} MiB, peak {:.0} MiB → {:.0} MiB held by the audio backends",
        window.device, window.baseline_mib, window.peak_mib, window.delta_mib
    );
    Ok(window.delta_mib)
}

pub async fn run(args: PlanArgs, services: &Services) -> anyhow::Result<ExitCode> {
    let model = match TextModel::preset(&args.model) {
        Some(mut m) => {
            if let Some(g) = args.weights_gib {
                m.weights_mib = g * 1024.0;
            }
            m
        }
        None if std::path::Path::new(&args.model).is_dir() => {
            model_from_folder(std::path::Path::new(&args.model), args.weights_gib)?
        }
        None => anyhow::bail!(
            "unknown model {:?}: give a local model folder (config.json + *.safetensors) or Qwen/Qwen2.5-7B-Instruct-AWQ",
            args.model
        ),
    };
    let sampler = services.gpu().clone();
    let card_mib = match (args.gpu_gib, sampler.latest()) {
        (Some(g), _) => g * 1024.0,
        (None, Some(sample)) => {
            eprintln!(
                "plan: measured {:.0} MiB on {}",
                sample.total_mib(),
                sampler.device()
            );
            sample.total_mib()
        }
        (None, None) => {
            let why = match sampler.status() {
                SamplerStatus::NoGpu { reason } => reason,
                _ => "no reading".into(),
            };
            anyhow::bail!("cannot measure the card ({why}): give --gpu-gib")
        }
    };
    let audio_mib = if let Some(mib) = args.audio_mib {
        mib
    } else if let Some(clip) = &args.measure_audio {
        anyhow::ensure!(
            sampler.has_gpu(),
            "measuring the audio backends needs an NVIDIA GPU: give --audio-mib"
        );
        measure_audio(clip, &sampler, services).await?
    } else if let Some(pid) = args.audio_pid {
        let sample = sampler.sample_now().ok_or_else(|| {
            anyhow::anyhow!("measuring a process needs an NVIDIA GPU: give --audio-mib")
        })?;
        let bytes = sample.process_bytes(pid).ok_or_else(|| {
            anyhow::anyhow!("the driver reports no device memory for process {pid}")
        })?;
        bytes as f64 / headroom_bench::plan::MIB
    } else {
        eprintln!("plan: assuming the audio backends hold no device memory (Headroom's embedded engines run on the CPU); give --audio-mib or --measure-audio for GPU audio servers");
        0.0
    };
    let request = PlanRequest {
        card_mib,
        audio_mib,
        reserve_mib: args.reserve_mib,
        runtime_overhead_mib: args.overhead_mib,
        model,
        context_tokens: args.context,
        concurrency: args.concurrency,
        kv_dtype: args.kv_cache_dtype,
        utilization: args.gpu_memory_utilization,
    };
    let plan = plan(&request)?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "request": request, "plan": plan }))?
        );
    } else {
        println!(
            "Memory budget for {} on a {:.1} GiB card:",
            request.model.name,
            card_mib / 1024.0
        );
        for step in &plan.steps {
            println!("  {step}");
        }
        println!();
        println!("{}", plan.command(&request.model));
        for warning in &plan.warnings {
            println!("warning: {warning}");
        }
    }
    Ok(if plan.fits {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(4)
    })
}
