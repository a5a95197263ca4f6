use crate::progress::Progress;
use clap::Args;
use headroom_services::recording::{LiveRequest, Recording};
use headroom_services::speech::SpeechError;
use headroom_services::Services;
use headroom_speech::asr::live::{LiveParams, LiveUpdate};
use headroom_speech::asr::TranscribeOptions;
use headroom_speech::audio::{input_devices, RecordTarget};
use headroom_speech::models::DEFAULT_MODEL;
use std::io::{IsTerminal, Write};
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
    /// Transcribe while recording: the phrase being spoken is shown about every second
    /// (on stderr) and each phrase's final text is printed (on stdout) when a pause ends it.
    /// Needs the silero-vad model.
    #[arg(long)]
    live: bool,
    /// The model for --live (see `headroom models list`).
    #[arg(long, default_value = DEFAULT_MODEL, requires = "live")]
    model: String,
    /// The language for --live with a multilingual model (detected from the first phrase when
    /// not given).
    #[arg(long, requires = "live")]
    language: Option<String>,
}

fn meter(dbfs: f32) -> String {
    // -60 dBFS .. 0 dBFS over 30 cells.
    let cells = (((dbfs + 60.0) / 60.0).clamp(0.0, 1.0) * 30.0) as usize;
    format!("[{:<30}] {dbfs:>5.1} dBFS", "#".repeat(cells))
}

/// Shows live text: on a terminal the phrase being spoken replaces itself on one line;
/// elsewhere (a pipe, a log) each partial is a line of its own on stderr. Final text goes to
/// stdout, one line per segment.
fn show_live(terminal: bool) -> impl FnMut(LiveUpdate) + Send {
    move |update| match update {
        LiveUpdate::Partial { start, text, .. } => {
            if terminal {
                eprint!("\r\x1b[2K… {text}");
            } else {
                eprintln!("partial [{start:.1} s] {text}");
            }
            let _ = std::io::stderr().flush();
        }
        LiveUpdate::Final { segments } => {
            if terminal {
                eprint!("\r\x1b[2K");
            }
            for s in segments {
                println!("[{:.1} s → {:.1} s] {}", s.start, s.end, s.text.trim());
            }
            let _ = std::io::stdout().flush();
        }
    }
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
    let cancel = CancellationToken::new();
    crate::cancel_on_ctrl_c(cancel.clone());
    let progress = Arc::new(Progress::new("recording"));
    let terminal = std::io::stderr().is_terminal();
    let live = args.live.then(|| LiveRequest {
        model: args.model.clone(),
        options: TranscribeOptions::in_language(args.language.clone()),
        params: LiveParams::default(),
        on_update: Box::new(show_live(terminal)),
    });
    // The level meter would overwrite the live text on a terminal.
    let shown = progress.clone();
    let level: Arc<dyn Fn(f32) + Send + Sync> = if args.live {
        Arc::new(|_| {})
    } else {
        Arc::new(move |dbfs| shown.show(&meter(dbfs)))
    };
    let recording = Recording {
        device: args.device.clone(),
        max_seconds: seconds,
        target: RecordTarget::at(&out)?,
        level,
    };
    let recorded = match services.speech().record(recording, live, cancel).await {
        Ok(recorded) => recorded,
        Err(SpeechError::RecordingCut {
            source,
            path,
            frames,
        }) => {
            eprintln!(
                "headroom: kept the {frames} samples recorded before the failure in {}",
                path.display()
            );
            return Err(source.into());
        }
        Err(e) => return Err(e.into()),
    };
    progress.finish(&format!(
        "wrote {} ({:.1} s at {} Hz)",
        out.display(),
        recorded.seconds(),
        recorded.sample_rate
    ));
    match recorded.live {
        Some(Err(e)) => Err(anyhow::Error::new(e).context(format!(
            "live transcription stopped (the recording is kept in {})",
            out.display()
        ))),
        Some(Ok(transcript)) if transcript.segments.is_empty() => {
            eprintln!("headroom: no speech was heard");
            Ok(ExitCode::SUCCESS)
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}
