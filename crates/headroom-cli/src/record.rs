use crate::progress::Progress;
use clap::Args;
use headroom_core::admission::Priority;
use headroom_services::Services;
use headroom_speech::audio::{input_devices, record, write_wav};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct RecordArgs {
    /// How long to record.
    #[arg(long, required_unless_present = "list_devices")]
    seconds: Option<f64>,
    /// Output WAV file.
    #[arg(long, required_unless_present = "list_devices")]
    out: Option<PathBuf>,
    /// Input device name (default: the system's default input).
    #[arg(long)]
    device: Option<String>,
    /// List input devices.
    #[arg(long)]
    list_devices: bool,
}

fn meter(dbfs: f32) -> String {
    // -60 dBFS .. 0 dBFS over 30 cells.
    let cells = (((dbfs + 60.0) / 60.0).clamp(0.0, 1.0) * 30.0) as usize;
    format!("[{:<30}] {dbfs:>5.1} dBFS", "#".repeat(cells))
}

pub async fn run(args: RecordArgs, services: &Services) -> anyhow::Result<ExitCode> {
    if args.list_devices {
        for name in input_devices()? {
            println!("{name}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (Some(seconds), Some(out)) = (args.seconds, args.out) else {
        anyhow::bail!("give --seconds and --out FILE.wav");
    };
    if !(seconds > 0.0 && seconds <= 4.0 * 3600.0) {
        anyhow::bail!("--seconds must be between 0 and 14400");
    }
    let lane = services.audio_lane();
    let cancel = CancellationToken::new();
    crate::cancel_on_ctrl_c(cancel.clone());
    let device = args.device.clone();
    let progress = Arc::new(Progress::new("recording"));
    let shown = progress.clone();
    let audio = lane
        .run(Priority::Interactive, cancel, move |cancel| {
            record(
                device.as_deref(),
                seconds,
                &|dbfs| shown.show(&meter(dbfs)),
                cancel,
            )
        })
        .await??;
    write_wav(&out, &audio)?;
    progress.finish(&format!(
        "wrote {} ({:.1} s at {} Hz)",
        out.display(),
        audio.duration_secs(),
        audio.sample_rate
    ));
    Ok(ExitCode::SUCCESS)
}
