use clap::Args;
use headroom_core::audio::write_wav;
use headroom_core::config::Config;
use headroom_core::lanes::AudioLane;
use headroom_core::metrics::Metrics;
use headroom_core::speech::SpeechService;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct SpeakArgs {
    /// The text to speak.
    #[arg(required_unless_present = "list_voices")]
    text: Option<String>,
    /// Output WAV file.
    #[arg(long, required_unless_present = "list_voices")]
    out: Option<PathBuf>,
    /// Voice (espeak-ng voice id, e.g. en-us, en-gb, de, fr).
    #[arg(long)]
    voice: Option<String>,
    /// List the available voices.
    #[arg(long)]
    list_voices: bool,
}

pub async fn run(args: SpeakArgs, config: Config) -> anyhow::Result<ExitCode> {
    let speech = SpeechService::new(AudioLane::new(
        config.audio_lane(),
        Arc::new(Metrics::new()),
    ));
    if args.list_voices {
        for v in speech.synthesizer().voices()? {
            println!("{:<12} {}", v.id, v.name);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (Some(text), Some(out)) = (args.text, args.out) else {
        anyhow::bail!("give the text and --out FILE.wav");
    };
    let cancel = CancellationToken::new();
    crate::cancel_on_ctrl_c(cancel.clone());
    let started = std::time::Instant::now();
    let audio = speech.synthesize(text, args.voice, cancel).await?;
    write_wav(&out, &audio)?;
    eprintln!(
        "wrote {} ({:.1} s of speech in {:.2} s)",
        out.display(),
        audio.duration_secs(),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
