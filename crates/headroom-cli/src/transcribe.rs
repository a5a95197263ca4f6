//! `headroom transcribe`: one file to stdout or a file, or many files (and folders) to one
//! transcript each in a folder (see [`batch`]).

mod batch;

use crate::progress::Progress;
use crate::{cancel_on_ctrl_c, EXIT_CANCELLED};
use anyhow::Context;
use clap::Args;
use headroom_base::fsutil::write_atomic;
use headroom_core::admission::Priority;
use headroom_services::speech::{
    AudioInput, KnownVoice, SpeakerRequest, SpeechError, SpeechService, Transcription,
};
use headroom_services::transcription_fleet::ServerChoice;
use headroom_services::Services;
use headroom_speech::asr::diarize::SpeakerCount;
use headroom_speech::asr::export::{render, render_words, ExportFormat};
use headroom_speech::asr::whisper::Precision;
use headroom_speech::asr::{AsrError, DecodingGuards, TranscribeOptions, Transcript};
use headroom_speech::models::DEFAULT_MODEL;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct TranscribeArgs {
    /// Audio files (WAV, MP3, FLAC, OGG Vorbis or Opus, AAC/M4A, or a video: MP4, MOV, MKV, WebM) or folders of them. One file goes
    /// to stdout or --out FILE; several, or a folder (its audio files, not its subfolders),
    /// give one transcript each in the folder --out names, skipping those already current.
    #[arg(required = true, value_name = "FILE|FOLDER")]
    inputs: Vec<PathBuf>,
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
    /// Write the fillers ("um", "uh") Whisper hears but leaves out of its text: each window is
    /// read a second time, after a prompt full of fillers, and its fillers put among the words
    /// (the embedded engine; about half as long again). For editing by the words.
    #[arg(long)]
    hear_fillers: bool,
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
    /// Write here (atomically) instead of to stdout. With several inputs or a folder: the
    /// folder to write one transcript per input into (created if missing).
    #[arg(long, value_name = "FILE|FOLDER")]
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
    /// of the embedded engine; --model is sent as its model name. Repeat it to spread the
    /// work over several servers: each recording is cut at its pauses and the pieces are
    /// heard at once, a failed piece moving on to another server (speakers are still found
    /// here).
    #[arg(long, value_name = "URL")]
    server_url: Vec<String>,
    /// Pieces each --server-url is given at once (1 unless given). Given, even with one
    /// server, the recording is cut at its pauses and the pieces heard at once, as with several.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    per_server: Option<u16>,
}

impl TranscribeArgs {
    /// Where the audio is heard, as `--server-url` and `--per-server` name it.
    fn servers(&self) -> ServerChoice {
        ServerChoice {
            urls: self.server_url.clone(),
            per_server: self.per_server,
        }
    }
}

/// Exit status when some inputs of a batch could not be transcribed (the others were); 4 is
/// `plan`'s "does not fit".
pub const EXIT_SOME_FAILED: u8 = 5;

pub async fn run(args: TranscribeArgs, services: &Services) -> anyhow::Result<ExitCode> {
    let consent = services.config().privacy.consent();
    if args.per_server.is_some() && args.server_url.is_empty() {
        anyhow::bail!("--per-server shares pieces among servers: give them with --server-url")
    }
    let speech = services.speech_for_servers(&args.servers(), &args.model, &consent)?;
    match batch::destination(&args.inputs, args.out.as_deref())? {
        batch::Destination::One { file, out } => {
            let input = AudioInput::from_file(&file)?;
            let job = JobSettings::new(&args, speech)?;
            transcribe_one(&args, &job, input, &file, out.as_deref()).await
        }
        batch::Destination::Folder { inputs, folder } => {
            let job = JobSettings::new(&args, speech)?;
            batch::run(&args, &job, &inputs, &folder).await
        }
    }
}

/// What every input of one command is transcribed with.
struct JobSettings {
    speech: Arc<SpeechService>,
    options: TranscribeOptions,
    speakers: Option<SpeakerRequest>,
}

impl JobSettings {
    fn new(args: &TranscribeArgs, speech: Arc<SpeechService>) -> anyhow::Result<JobSettings> {
        let mut known = Vec::new();
        for (name, file) in known_speakers(args)? {
            known.push(KnownVoice::Recording {
                name: name.to_string(),
                audio: AudioInput::from_file(file)?,
            });
        }
        let speakers = match (args.speakers, known.is_empty()) {
            (None, true) => None,
            (count, _) => Some(SpeakerRequest {
                known,
                ..SpeakerRequest::new(count.unwrap_or(SpeakerCount::Auto))
            }),
        };
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
            hear_fillers: args.hear_fillers,
            ..TranscribeOptions::default()
        };
        Ok(JobSettings {
            speech,
            options,
            speakers,
        })
    }

    /// Transcribes `input` on the audio lane at `priority`, showing progress and the outcome as
    /// `lines` says. `Ok(None)`: cancelled (the progress line says so).
    async fn transcribe(
        &self,
        args: &TranscribeArgs,
        input: AudioInput,
        priority: Priority,
        lines: StderrLines<'_>,
        cancel: &CancellationToken,
    ) -> Result<Option<Transcript>, SpeechError> {
        let shown = Arc::new(Progress::new(lines.progress));
        let progress = {
            let shown = shown.clone();
            Arc::new(move |fraction: f32| shown.update(fraction))
        };
        let started = std::time::Instant::now();
        let job = Transcription {
            speakers: self.speakers.clone(),
            priority,
            progress,
            ..Transcription::new(input, &args.model, self.options.clone())
        };
        let transcript = match self.speech.transcribe_with(job, cancel.clone()).await {
            Ok(t) => t.transcript,
            Err(SpeechError::Asr(AsrError::Cancelled)) => {
                shown.finish(lines.cancelled);
                return Ok(None);
            }
            // A job stopped by Ctrl-C may end in another error (the decoder's, the lane's):
            // it is still the cancellation.
            Err(e) if cancel.is_cancelled() => {
                tracing::debug!(error = %e, "the cancelled job ended so");
                shown.finish(lines.cancelled);
                return Ok(None);
            }
            Err(e) => {
                shown.finish(lines.failed);
                return Err(e);
            }
        };
        let elapsed = started.elapsed().as_secs_f64();
        shown.finish(&format!(
            "{}transcribed {:.1} s of audio in {:.1} s ({}, language {})",
            lines.done_prefix,
            transcript.duration,
            elapsed,
            args.model,
            transcript.language.as_deref().unwrap_or("unknown")
        ));
        if args.speakers.is_some() || !args.known_speaker.is_empty() {
            eprintln!("{}", speakers_found(&transcript));
        }
        Ok(Some(transcript))
    }
}

/// What one transcription shows on stderr besides the speakers found.
struct StderrLines<'a> {
    /// Before the live percentage.
    progress: String,
    /// Before "transcribed 12.3 s of audio in …".
    done_prefix: &'a str,
    /// The line that ends a cancelled transcription.
    cancelled: &'a str,
    /// The line that ends a failed one (its error is shown by the caller).
    failed: &'a str,
}

/// The --known-speaker values as (name, file), or which one is not NAME=FILE.
fn known_speakers(args: &TranscribeArgs) -> anyhow::Result<Vec<(&str, &Path)>> {
    args.known_speaker
        .iter()
        .map(|given| {
            given
                .split_once('=')
                .filter(|(n, f)| !n.trim().is_empty() && !f.is_empty())
                .map(|(name, file)| (name.trim(), Path::new(file)))
                .ok_or_else(|| anyhow::anyhow!("--known-speaker takes NAME=FILE, not {given:?}"))
        })
        .collect()
}

/// The transcript as the export format and --words ask.
fn rendered(args: &TranscribeArgs, transcript: &Transcript) -> String {
    if args.words {
        render_words(transcript, args.format)
    } else {
        render(transcript, args.format)
    }
}

/// One file, interactively (a person waits on it), to `out` or stdout.
async fn transcribe_one(
    args: &TranscribeArgs,
    job: &JobSettings,
    input: AudioInput,
    file: &Path,
    out: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let cancel = CancellationToken::new();
    cancel_on_ctrl_c(cancel.clone());
    let lines = StderrLines {
        progress: format!("transcribing {}", file.display()),
        done_prefix: "",
        cancelled: "headroom: transcription cancelled; nothing was written",
        failed: "",
    };
    let Some(transcript) = job
        .transcribe(args, input, Priority::Interactive, lines, &cancel)
        .await?
    else {
        return Ok(ExitCode::from(EXIT_CANCELLED));
    };
    let text = rendered(args, &transcript);
    match out {
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
