use clap::Args;
use headroom_services::speaking_voice::SpeakingVoice;
use headroom_services::voice_catalog::VoiceKind;
use headroom_services::voice_work::{both_similarities, default_voice_name, INDEPENDENT_HINT};
use headroom_services::voices::VoiceProfile;
use headroom_services::Services;
use headroom_speech::audio::write_wav;
use headroom_speech::remote::RemoteSynthesizer;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug, Clone)]
pub struct SpeakArgs {
    /// The text to speak.
    #[arg(required_unless_present = "list_voices")]
    text: Option<String>,
    /// Output WAV file.
    #[arg(long, required_unless_present = "list_voices")]
    out: Option<PathBuf>,
    /// Voice: a voice profile's name (`headroom voice list`: cloned through the configured
    /// server, else its approximate voice match), `kokoro` or `kokoro-<style>` for the neural
    /// Kokoro voice (`headroom models install kokoro`), `joe` for the Piper voice, an
    /// espeak-ng voice id (en-us, en-gb, de, fr, ...), or one of OpenAI's names (alloy, ...).
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

pub async fn run(args: SpeakArgs, shared: Arc<Services>) -> anyhow::Result<ExitCode> {
    let services = &*shared;
    if args.list_voices && args.server_url.is_none() {
        print_catalog(&shared).await?;
        return Ok(ExitCode::SUCCESS);
    }
    let (speech, voice) = match &args.server_url {
        Some(url) => {
            let key = services.env().audio_api_key.clone();
            let consent = services.config().privacy.consent();
            let remote = RemoteSynthesizer::new(url, &args.model, key, &consent)?;
            (
                services.speech_using(None, Some(Arc::new(remote))),
                args.voice.clone(),
            )
        }
        None => match services.resolve_voice(args.voice.as_deref()).await? {
            SpeakingVoice::Profile(profile) => {
                return speak_as_profile(args, &profile, shared.clone()).await
            }
            SpeakingVoice::Engine { speech, voice } => (speech, voice),
        },
    };
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

/// The voices `--voice` takes, as `GET /v1/audio/voices` lists them.
async fn print_catalog(services: &Arc<Services>) -> anyhow::Result<()> {
    let services = services.clone();
    let voices = tokio::task::spawn_blocking(move || services.voice_catalog()).await??;
    println!(
        "{:<22} {:<10} {:<12} {:<8} LICENSE",
        "VOICE", "ENGINE", "KIND", "LANG"
    );
    for v in voices {
        let kind = match v.kind {
            VoiceKind::Stock => "stock",
            VoiceKind::Clone => "clone",
            VoiceKind::Approximate => "approximate",
        };
        println!(
            "{:<22} {:<10} {:<12} {:<8} {}",
            v.id, v.engine, kind, v.language, v.license
        );
    }
    println!("OpenAI's voice names (alloy, echo, nova, onyx, ...) mean the default neural voices.");
    Ok(())
}

/// Speaks as a voice profile, and says how close the take is beside the default voice.
async fn speak_as_profile(
    args: SpeakArgs,
    profile: &VoiceProfile,
    services: Arc<Services>,
) -> anyhow::Result<ExitCode> {
    let (Some(text), Some(out)) = (args.text, args.out) else {
        anyhow::bail!("give the text and --out FILE.wav");
    };
    let cancel = CancellationToken::new();
    crate::cancel_on_ctrl_c(cancel.clone());
    let started = std::time::Instant::now();
    let take = services.voices().speak(profile, text, cancel).await?;
    write_wav(&out, &take.audio)?;
    eprintln!(
        "wrote {} ({:.1} s of speech in {:.2} s), {}",
        out.display(),
        take.audio.duration_secs(),
        started.elapsed().as_secs_f64(),
        take.method.label()
    );
    let c = &take.closeness;
    eprintln!(
        "similarity to {}: {} (default voice {}: {})",
        profile.name,
        both_similarities(c.similarity, c.similarity_independent),
        default_voice_name(&services),
        both_similarities(c.default_similarity, c.default_similarity_independent)
    );
    if c.similarity_independent.is_none() {
        eprintln!("{INDEPENDENT_HINT}");
    }
    Ok(ExitCode::SUCCESS)
}
