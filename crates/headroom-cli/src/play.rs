use clap::Args;
use headroom_core::admission::Priority;
use headroom_services::Services;
use headroom_speech::audio::{decode_file, play, DecodeLimits};
use std::path::PathBuf;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct PlayArgs {
    /// Audio file to play on the default output device.
    file: PathBuf,
}

pub async fn run(args: PlayArgs, services: &Services) -> anyhow::Result<ExitCode> {
    let audio = decode_file(&args.file, DecodeLimits::default())?;
    let lane = services.audio_lane();
    let cancel = CancellationToken::new();
    crate::cancel_on_ctrl_c(cancel.clone());
    let seconds = audio.duration_secs();
    lane.run("playback", Priority::Interactive, cancel, move |cancel| {
        play(&audio, cancel)
    })
    .await??;
    eprintln!("played {} ({seconds:.1} s)", args.file.display());
    Ok(ExitCode::SUCCESS)
}
