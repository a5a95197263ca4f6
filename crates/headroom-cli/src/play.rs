use clap::Args;
use headroom_core::admission::Priority;
use headroom_core::audio::{decode_file, play, DecodeLimits};
use headroom_core::config::Config;
use headroom_core::lanes::AudioLane;
use headroom_core::metrics::Metrics;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct PlayArgs {
    /// Audio file to play on the default output device.
    file: PathBuf,
}

pub async fn run(args: PlayArgs, config: Config) -> anyhow::Result<ExitCode> {
    let audio = decode_file(&args.file, DecodeLimits::default())?;
    let lane = AudioLane::new(config.audio_lane(), Arc::new(Metrics::new()));
    let cancel = CancellationToken::new();
    crate::cancel_on_ctrl_c(cancel.clone());
    let seconds = audio.duration_secs();
    lane.run(Priority::Interactive, cancel, move |cancel| {
        play(&audio, cancel)
    })
    .await??;
    eprintln!("played {} ({seconds:.1} s)", args.file.display());
    Ok(ExitCode::SUCCESS)
}
