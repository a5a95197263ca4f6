//! `headroom bench narration`: whether interactive work stays first while a project is
//! narrated. Interactive audio (transcribing a short clip, speaking a line) is timed idle and
//! again while narration jobs run back to back on the same lanes, and the ratio is reported;
//! the narration's own total time is set against the sum of its stages (text, speech, fitting,
//! files), which the pipeline overlaps.

use clap::Args;
use headroom_bench::boundary::{summarize, time_transcription, LatencySummary};
use headroom_core::cleanup::FailurePolicy;
use headroom_services::speech::AudioInput;
use headroom_services::Services;
use headroom_speech::audio::{decode_file, write_wav, Audio, DecodeLimits};
use headroom_speech::models::{self, DEFAULT_MODEL};
use headroom_workstation::narration::{NarrationMode, NarrationOptions, NarrationTimings};
use headroom_workstation::projects::{Project, ProjectStore};
use headroom_workstation::workstation::Workstation;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct NarrationBenchArgs {
    /// The recording narrated.
    #[arg(long, default_value = "samples/interview.flac")]
    clip: PathBuf,
    /// The text model's server (LLM cleanup on); without it the rules clean the text.
    #[arg(long)]
    upstream: Option<String>,
    /// cleanup, rewrite or translate (translate needs --upstream and --to).
    #[arg(long, default_value = "cleanup")]
    mode: NarrationMode,
    #[arg(long)]
    to: Option<String>,
    /// Interactive jobs timed of each kind, idle and during narration.
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Serialize)]
struct Probe {
    job: String,
    idle: Option<LatencySummary>,
    during_narration: Option<LatencySummary>,
    p50_ratio: Option<f64>,
}

#[derive(Serialize)]
struct Report {
    clip: String,
    clip_secs: f64,
    segments: usize,
    mode: NarrationMode,
    text_model: Option<String>,
    voices: Vec<String>,
    narration_alone: NarrationTimings,
    sum_of_parts_secs: f64,
    /// total / sum of parts: below 1 when the text and audio stages overlap.
    overlap_ratio: f64,
    probes: Vec<Probe>,
    narrations_during_probes: usize,
}

/// The voices the narrations alternate between (so every run redoes every take).
pub(crate) fn voices(services: &Services) -> Vec<String> {
    if models::locate(&services.env().models_dir, "kokoro").is_ok() {
        vec!["kokoro-jf_alpha".into(), "kokoro-jm_kumo".into()]
    } else {
        vec!["en-us".into(), "en-us+m3".into()]
    }
}

/// A workstation over `services` whose projects live in `scratch`, and a project made by
/// transcribing `clip` into it, cleaned up by the text model at `upstream` (else the rules).
pub(crate) async fn scratch_project(
    services: &Arc<Services>,
    clip: &Path,
    scratch: &Path,
    upstream: Option<String>,
) -> anyhow::Result<(Arc<Workstation>, Project)> {
    let ws = Workstation::new(
        ProjectStore::new(scratch.join("projects")),
        services.clone(),
        None,
    );
    let project = ws.store().create("Bench")?;
    eprintln!("transcribing {} into a scratch project", clip.display());
    let project = ws
        .transcribe(
            &project.id,
            clip,
            None,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await?;
    ws.update_project(&project.id, move |p| {
        p.settings.llm_cleanup = upstream.is_some();
        p.settings.server_url = upstream;
        Ok(())
    })
    .await?;
    Ok((ws, project))
}

/// The first `secs` seconds of `clip`, written as a WAV file into `dir`: an interactive
/// probe's short clip.
pub(crate) fn first_seconds(clip: &Path, secs: usize, dir: &Path) -> anyhow::Result<AudioInput> {
    let source = decode_file(clip, DecodeLimits::default())?;
    let short = Audio {
        samples: source.samples[..source.samples.len().min(secs * source.sample_rate as usize)]
            .to_vec(),
        sample_rate: source.sample_rate,
    };
    let path = dir.join(format!("first-{secs}s.wav"));
    write_wav(&path, &short)?;
    Ok(AudioInput::from_file(&path)?)
}

pub async fn run(args: NarrationBenchArgs, services: Arc<Services>) -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    let (ws, project) =
        scratch_project(&services, &args.clip, scratch.path(), args.upstream.clone()).await?;
    // The interactive probes: the clip's first 6 s transcribed, and a line spoken.
    let short_clip = first_seconds(&args.clip, 6, scratch.path())?;
    let speech = services.speech().clone();
    let kokoro = models::locate(&services.env().models_dir, "kokoro")
        .is_ok()
        .then(|| services.speech_for_voice(Some("kokoro")))
        .transpose()?;
    // Each probe's times: transcribing the short clip, a line in espeak-ng, a line in Kokoro.
    let time_probes = |label: &'static str| {
        let speech = speech.clone();
        let clip = short_clip.clone();
        let kokoro = kokoro.clone();
        async move {
            let mut times = vec![time_transcription(&speech, &clip, DEFAULT_MODEL).await?.0];
            let line = "One short line, please.";
            let started = Instant::now();
            speech
                .synthesize(line.into(), None, CancellationToken::new())
                .await?;
            times.push(started.elapsed());
            if let Some((service, voice)) = &kokoro {
                let started = Instant::now();
                service
                    .synthesize(line.into(), voice.clone(), CancellationToken::new())
                    .await?;
                times.push(started.elapsed());
            }
            eprintln!("  {label}: {times:.2?}");
            Ok::<_, anyhow::Error>(times)
        }
    };
    let voices = voices(&services);
    let options = |n: usize| NarrationOptions {
        mode: Some(args.mode),
        to: args.to.clone(),
        voice: Some(voices[n % voices.len()].clone()),
        policy: Some(FailurePolicy::Fallback),
        mix: Some(false),
        speaker_voices: None,
    };
    // Warm-up: every model loaded once (a narration and a probe), excluded from the figures.
    eprintln!("warm-up: a narration and the probes, excluded");
    time_probes("warm-up").await?;
    ws.narrate(&project.id, options(1), &|_| {}, &CancellationToken::new())
        .await?;

    eprintln!("narration alone");
    let alone = ws
        .narrate(&project.id, options(0), &|_| {}, &CancellationToken::new())
        .await?;
    eprintln!("{} idle runs of each probe", args.runs);
    let mut idle: Vec<Vec<Duration>> = Vec::new();
    for _ in 0..args.runs {
        idle.push(time_probes("idle").await?);
    }
    eprintln!("{} runs of each probe during narration", args.runs);
    let mut busy: Vec<Vec<Duration>> = Vec::new();
    let mut narrations = 0;
    let mut running: Option<tokio::task::JoinHandle<_>> = None;
    while busy.len() < args.runs {
        if running.as_ref().is_none_or(|r| r.is_finished()) {
            if let Some(done) = running.take() {
                done.await??;
            }
            narrations += 1;
            let ws = ws.clone();
            let id = project.id.clone();
            let options = options(narrations);
            running = Some(tokio::spawn(async move {
                ws.narrate(&id, options, &|_| {}, &CancellationToken::new())
                    .await
            }));
            // Timed once the narration's first take is on the audio lane.
            while services.audio_lane().snapshot().occupancy.in_flight == 0 {
                if running.as_ref().is_some_and(|r| r.is_finished()) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        busy.push(time_probes("during").await?);
    }
    if let Some(last) = running {
        last.await??;
    }
    let probe = |job: &str, idle: &[Duration], busy: &[Duration]| {
        let (idle, during) = (summarize(idle), summarize(busy));
        let p50_ratio = match (&idle, &during) {
            (Some(i), Some(d)) => Some(d.p50_ms / i.p50_ms),
            _ => None,
        };
        Probe {
            job: job.into(),
            idle,
            during_narration: during,
            p50_ratio,
        }
    };
    let sum = alone.timings.sum_of_parts();
    let report = Report {
        clip: args.clip.display().to_string(),
        clip_secs: project.duration_secs,
        segments: project.segments.len(),
        mode: args.mode,
        text_model: args.upstream.clone(),
        voices,
        overlap_ratio: alone.timings.total_secs / sum.max(1e-9),
        sum_of_parts_secs: sum,
        narration_alone: alone.timings,
        probes: [
            "transcribe 6 s",
            "speak a line, espeak-ng",
            "speak a line, Kokoro",
        ]
        .iter()
        .enumerate()
        .filter(|(k, _)| idle.first().is_some_and(|t| *k < t.len()))
        .map(|(k, job)| {
            let column = |runs: &[Vec<Duration>]| runs.iter().map(|t| t[k]).collect::<Vec<_>>();
            probe(
                &format!("{job} (interactive)"),
                &column(&idle),
                &column(&busy),
            )
        })
        .collect(),
        narrations_during_probes: narrations,
    };
    let t = &report.narration_alone;
    println!(
        "narration of {} segments ({:.1} s of audio, {:?}, text by {}):",
        report.segments,
        report.clip_secs,
        report.mode,
        report.text_model.as_deref().unwrap_or("the rules")
    );
    println!(
        "  total {:.2} s vs sum of parts {:.2} s (text {:.2}, speech {:.2}, fitting {:.2}, files {:.2}): ratio {:.2}",
        t.total_secs, report.sum_of_parts_secs, t.text_secs, t.speech_secs, t.fit_secs, t.assemble_secs, report.overlap_ratio
    );
    println!(
        "| interactive job | idle p50 | during narration p50 | p95 idle / during | ratio (p50) |"
    );
    println!("|---|---|---|---|---|");
    for p in &report.probes {
        let (Some(i), Some(d)) = (&p.idle, &p.during_narration) else {
            continue;
        };
        println!(
            "| {} | {:.0} ms | {:.0} ms | {:.0} / {:.0} ms | {:.2} |",
            p.job,
            i.p50_ms,
            d.p50_ms,
            i.p95_ms,
            d.p95_ms,
            p.p50_ratio.unwrap_or(f64::NAN)
        );
    }
    if let Some(path) = &args.json {
        headroom_base::fsutil::write_atomic(path, &serde_json::to_vec_pretty(&report)?)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
