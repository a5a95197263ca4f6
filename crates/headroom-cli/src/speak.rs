use clap::Args;
use headroom_core::audio::write_wav;
use headroom_core::config::Config;
use headroom_core::lanes::AudioLane;
use headroom_core::metrics::Metrics;
use headroom_core::models;
use headroom_core::remote_audio::RemoteSynthesizer;
use headroom_core::speech::SpeechService;
use headroom_core::tts::Piper;
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
    /// Voice: an espeak-ng voice id (en-us, en-gb, de, fr, ...), or `joe` for the neural Piper
    /// voice (`headroom models install piper-joe` first).
    #[arg(long)]
    voice: Option<String>,
    /// List the available voices.
    #[arg(long)]
    list_voices: bool,
    /// Use an OpenAI-compatible speech server (e.g. http://127.0.0.1:8089/v1) instead of
    /// espeak-ng.
    #[arg(long)]
    server_url: Option<String>,
    /// Model name sent to --server-url.
    #[arg(long, default_value = "tts-1")]
    model: String,
}

pub async fn run(args: SpeakArgs, config: Config) -> anyhow::Result<ExitCode> {
    let mut speech = SpeechService::new(AudioLane::new(
        config.audio_lane(),
        Arc::new(Metrics::new()),
    ));
    if let Some(url) = &args.server_url {
        let remote = RemoteSynthesizer::new(url, &args.model, audio_api_key())
            .map_err(anyhow::Error::msg)?;
        speech = speech.with_synthesizer(Arc::new(remote));
    }
    let mut voice = args.voice.clone();
    if let Some(name) = voice
        .as_deref()
        .filter(|v| models::spec(&format!("piper-{v}")).is_ok())
    {
        let dir = models::locate(&models::models_dir(), &format!("piper-{name}"))?;
        speech = speech.with_synthesizer(Arc::new(Piper::load(&dir, name)?));
        voice = None;
    }
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
    let audio = speech.synthesize(text, voice, cancel).await?;
    write_wav(&out, &audio)?;
    eprintln!(
        "wrote {} ({:.1} s of speech in {:.2} s)",
        out.display(),
        audio.duration_secs(),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// The key for an external speech server: its own variable, so the text model's key never
/// goes to another server.
pub fn audio_api_key() -> Option<headroom_core::llm::ApiKey> {
    std::env::var("HEADROOM_AUDIO_API_KEY")
        .ok()
        .and_then(headroom_core::llm::ApiKey::new)
}
