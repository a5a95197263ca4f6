use crate::progress::Progress;
use clap::Args;
use headroom_core::admission::Priority;
use headroom_services::Services;
use headroom_speech::audio::{input_devices, record_to, WavRecorder};
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
    // The WAV is written as it is recorded (a crash keeps all but the last second): it is
    // created once the device delivers, so a device that fails leaves no file.
    let target = out.clone();
    let recorded = lane
        .run(Priority::Interactive, cancel, move |cancel| {
            let mut recorder: Option<WavRecorder> = None;
            let result = record_to(
                device.as_deref(),
                seconds,
                &|dbfs| shown.show(&meter(dbfs)),
                cancel,
                &mut |rate, chunk| {
                    let recorder = match &mut recorder {
                        Some(r) => r,
                        None => recorder.insert(WavRecorder::create(&target, rate)?),
                    };
                    recorder.write(chunk)
                },
            );
            // Whatever was recorded before a failure is kept.
            let kept = recorder.map(|r| (r.frames(), r.finish()));
            (result, kept)
        })
        .await?;
    let rate = match recorded {
        (Ok(rate), Some((frames, finished))) => {
            finished?;
            (rate, frames)
        }
        (Ok(_), None) => anyhow::bail!("nothing was recorded"),
        (Err(e), kept) => {
            if let Some((frames, Ok(path))) = kept {
                eprintln!(
                    "headroom: kept the {frames} samples recorded before the failure in {}",
                    path.display()
                );
            }
            return Err(e.into());
        }
    };
    let (sample_rate, frames) = rate;
    progress.finish(&format!(
        "wrote {} ({:.1} s at {} Hz)",
        out.display(),
        frames as f64 / sample_rate as f64,
        sample_rate
    ));
    Ok(ExitCode::SUCCESS)
}
