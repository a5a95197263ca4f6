use crate::progress::Progress;
use crate::{cancel_on_ctrl_c, EXIT_CANCELLED};
use anyhow::Context;
use clap::Args;
use headroom_base::fsutil::write_atomic;
use headroom_core::admission::Priority;
use headroom_services::speech::{
    AudioInput, KnownVoice, SpeakerRequest, SpeechError, Transcription,
};
use headroom_services::Services;
use headroom_speech::asr::diarize::SpeakerCount;
use headroom_speech::asr::export::{render, render_words, ExportFormat};
use headroom_speech::asr::whisper::Precision;
use headroom_speech::asr::{AsrError, DecodingGuards, TranscribeOptions, Transcript};
use headroom_speech::models::DEFAULT_MODEL;
use headroom_speech::remote::RemoteTranscriber;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct TranscribeArgs {
    /// Audio file: WAV, MP3, FLAC, OGG Vorbis or AAC/M4A.
    file: PathBuf,
    /// Model (see `headroom models list`).
    #[arg(long, default_value = DEFAULT_MODEL)]
    model: String,
    /// Language code for multilingual models (detected when not given).
    #[arg(long)]
    language: Option<String>,
    /// txt, srt, vtt or json.
    #[arg(long, default_value = "txt")]
    format: ExportFormat,
    /// Time each word: words with start, end and probability in JSON, and with --format srt
    /// or vtt one subtitle cue per word.
    #[arg(long)]
    words: bool,
    /// Beam search with this many beams (5 is Whisper's usual); 1 decodes greedily.
    #[arg(long, default_value_t = 1)]
    beam: usize,
    /// Candidates sampled at each fallback temperature (a window whose text fails the
    /// guards is decoded again hotter); the likeliest is kept. 5 as in Whisper.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=32))]
    best_of: u16,
    /// Names and vocabulary the model should expect and spell so (an initial prompt).
    #[arg(long)]
    prompt: Option<String>,
    /// Decode once at temperature 0, without the compression-ratio, log-probability and
    /// no-speech checks.
    #[arg(long)]
    no_guards: bool,
    /// Transcribe silence too, in fixed 30 s windows, instead of only the speech the voice
    /// activity detector (the silero-vad model, when installed) finds.
    #[arg(long)]
    keep_silence: bool,
    /// How the model's weights are held: int8 (faster, the default) or float32.
    #[arg(long, default_value = "int8")]
    precision: Precision,
    /// Write here (atomically) instead of to stdout.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Who spoke when: `auto` estimates the number of speakers, a number (1 to 10) finds
    /// exactly that many. Segments are split where the speaker changes and every export
    /// names the speakers; a voice profile's voice is named after the profile.
    #[arg(long, value_name = "auto|N")]
    speakers: Option<SpeakerCount>,
    /// A known speaker: NAME=FILE, a recording of that voice (a few seconds of speech; not
    /// the file transcribed). Repeat for several. Implies --speakers auto unless given.
    #[arg(long, value_name = "NAME=FILE")]
    known_speaker: Vec<String>,
    /// Use an OpenAI-compatible transcription server (e.g. http://127.0.0.1:8089/v1) instead
    /// of the embedded engine; --model is sent as its model name.
    #[arg(long)]
    server_url: Option<String>,
}

pub async fn run(args: TranscribeArgs, services: &Services) -> anyhow::Result<ExitCode> {
    let speech = match &args.server_url {
        Some(url) => {
            let key = services.env().audio_api_key.clone();
            let consent = services.config().privacy.consent();
            let remote = RemoteTranscriber::new(url, &args.model, key, &consent)?;
            services.speech_using(Some(Arc::new(remote)), None)
        }
        None => services.speech().clone(),
    };
    let input = AudioInput::from_file(&args.file)?;
    let mut known = Vec::new();
    for given in &args.known_speaker {
        let Some((name, file)) = given
            .split_once('=')
            .filter(|(n, f)| !n.trim().is_empty() && !f.is_empty())
        else {
            anyhow::bail!("--known-speaker takes NAME=FILE, not {given:?}");
        };
        known.push(KnownVoice::Recording {
            name: name.trim().to_string(),
            audio: AudioInput::from_file(file.as_ref())?,
        });
    }
    let speakers = match (args.speakers, known.is_empty()) {
        (None, true) => None,
        (count, _) => Some(SpeakerRequest {
            known,
            ..SpeakerRequest::new(count.unwrap_or(SpeakerCount::Auto))
        }),
    };
    let cancel = CancellationToken::new();
    cancel_on_ctrl_c(cancel.clone());
    let shown = Arc::new(Progress::new(format!(
        "transcribing {}",
        args.file.display()
    )));
    let progress = {
        let shown = shown.clone();
        Arc::new(move |fraction: f32| shown.update(fraction))
    };
    let started = std::time::Instant::now();
    let options = TranscribeOptions {
        language: args.language.clone(),
        beam_size: args.beam,
        initial_prompt: args.prompt.clone(),
        word_timestamps: args.words,
        guards: if args.no_guards {
            DecodingGuards::off()
        } else {
            DecodingGuards {
                best_of: args.best_of.into(),
                ..DecodingGuards::default()
            }
        },
        skip_silence: !args.keep_silence,
        precision: args.precision,
        audio_only_windows: false,
    };
    let job = Transcription {
        speakers,
        priority: Priority::Interactive,
        progress,
        ..Transcription::new(input, &args.model, options)
    };
    let transcript = match speech.transcribe_with(job, cancel).await {
        Ok(t) => t.transcript,
        Err(SpeechError::Asr(AsrError::Cancelled)) => {
            shown.finish("headroom: transcription cancelled; nothing was written");
            return Ok(ExitCode::from(EXIT_CANCELLED));
        }
        Err(e) => {
            shown.finish("");
            return Err(e.into());
        }
    };
    let elapsed = started.elapsed().as_secs_f64();
    shown.finish(&format!(
        "transcribed {:.1} s of audio in {:.1} s ({}, language {})",
        transcript.duration,
        elapsed,
        args.model,
        transcript.language.as_deref().unwrap_or("unknown")
    ));
    if args.speakers.is_some() || !args.known_speaker.is_empty() {
        eprintln!("{}", speakers_found(&transcript));
    }
    let text = if args.words {
        render_words(&transcript, args.format)
    } else {
        render(&transcript, args.format)
    };
    match &args.out {
        Some(path) => write_atomic(path, text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// "2 speakers: Speaker 1 (12.3 s), Ann (voice profile ann, similarity 0.87; 8.1 s)".
fn speakers_found(transcript: &Transcript) -> String {
    let listed: Vec<String> = transcript
        .speakers
        .iter()
        .map(|s| {
            let known = match (&s.profile, s.similarity) {
                (Some(profile), Some(sim)) => {
                    format!("voice profile {profile}, similarity {sim:.2}; ")
                }
                (None, Some(sim)) => format!("known voice, similarity {sim:.2}; "),
                _ => String::new(),
            };
            format!("{} ({known}{:.1} s)", s.display_name(), s.seconds)
        })
        .collect();
    match listed.len() {
        0 => "no speech, no speakers".to_string(),
        1 => format!("1 speaker: {}", listed[0]),
        n => format!("{n} speakers: {}", listed.join(", ")),
    }
}
