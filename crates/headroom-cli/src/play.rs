use clap::Args;
use headroom_core::admission::Priority;
use headroom_services::Services;
use headroom_speech::audio::play_file;
use std::path::PathBuf;
use std::process::ExitCode;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct PlayArgs {
    /// Audio file to play on the default output device.
    file: PathBuf,
}

pub async fn run(args: PlayArgs, services: &Services) -> anyhow::Result<ExitCode> {
    let lane = services.audio_lane();
    let cancel = CancellationToken::new();
    crate::cancel_on_ctrl_c(cancel.clone());
    // Decoded as it plays: a recording of hours costs a second or two of samples.
    let file = args.file.clone();
    let seconds = lane
        .run("playback", Priority::Interactive, cancel, move |cancel| {
            play_file(&file, 0.0, f64::INFINITY, cancel)
        })
        .await??;
    eprintln!("played {} ({seconds:.1} s)", args.file.display());
    Ok(ExitCode::SUCCESS)
}
