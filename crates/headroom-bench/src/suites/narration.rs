//! Whether interactive work stays first while a project is narrated. Interactive audio
//! (transcribing a short clip, speaking a line) is timed idle and again while narration jobs
//! run back to back on the same lanes, and the ratio is reported; the narration's own total
//! time is set against the sum of its stages (text, speech, fitting, files), which the
//! pipeline overlaps.

use super::{first_seconds, installed, narration_voices, scratch_project, Progress, SuiteError};
use crate::boundary::{summarize, time_transcription, LatencySummary};
use headroom_core::cleanup::FailurePolicy;
use headroom_services::Services;
use headroom_speech::models::DEFAULT_MODEL;
use headroom_workstation::narration::{NarrationMode, NarrationOptions, NarrationTimings};
use serde::Serialize;
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// What the narration suite narrates and how often it probes.
#[derive(Debug, Clone)]
pub struct NarrationBenchConfig {
    /// The recording narrated.
    pub clip: PathBuf,
    /// The text model's server (LLM cleanup on); `None`: the rules clean the text.
    pub upstream: Option<String>,
    pub mode: NarrationMode,
    /// The language a translation is into.
    pub to: Option<String>,
    /// Interactive jobs timed of each kind, idle and during narration.
    pub runs: usize,
}

#[derive(Debug, Serialize)]
pub struct NarrationProbe {
    pub job: String,
    pub idle: Option<LatencySummary>,
    pub during_narration: Option<LatencySummary>,
    pub p50_ratio: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct NarrationBenchReport {
    pub clip: String,
    pub clip_secs: f64,
    pub segments: usize,
    pub mode: NarrationMode,
    pub text_model: Option<String>,
    pub voices: Vec<String>,
    pub narration_alone: NarrationTimings,
    pub sum_of_parts_secs: f64,
    /// total / sum of parts: below 1 when the text and audio stages overlap.
    pub overlap_ratio: f64,
    pub probes: Vec<NarrationProbe>,
    pub narrations_during_probes: usize,
}

/// Narrates `config.clip` alone, then times the probes idle and during narrations.
pub async fn run(
    services: Arc<Services>,
    config: &NarrationBenchConfig,
    progress: Progress<'_>,
) -> Result<NarrationBenchReport, SuiteError> {
    let scratch = tempfile::tempdir()?;
    let (ws, project) = scratch_project(
        &services,
        &config.clip,
        scratch.path(),
        config.upstream.clone(),
        progress,
    )
    .await?;
    // The interactive probes: the clip's first 6 s transcribed, and a line spoken.
    let short_clip = first_seconds(&config.clip, 6, scratch.path())?;
    let speech = services.speech().clone();
    let kokoro = installed(&services, "kokoro")
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
            progress(&format!("  {label}: {times:.2?}"));
            Ok::<_, SuiteError>(times)
        }
    };
    let voices = narration_voices(&services);
    let options = |n: usize| NarrationOptions {
        mode: Some(config.mode),
        to: config.to.clone(),
        voice: Some(voices[n % voices.len()].clone()),
        policy: Some(FailurePolicy::Fallback),
        mix: Some(false),
        speaker_voices: None,
    };
    // Warm-up: every model loaded once (a narration and a probe), excluded from the figures.
    progress("warm-up: a narration and the probes, excluded");
    time_probes("warm-up").await?;
    ws.narrate(&project.id, options(1), &|_| {}, &CancellationToken::new())
        .await?;

    progress("narration alone");
    let alone = ws
        .narrate(&project.id, options(0), &|_| {}, &CancellationToken::new())
        .await?;
    progress(&format!("{} idle runs of each probe", config.runs));
    let mut idle: Vec<Vec<Duration>> = Vec::new();
    for _ in 0..config.runs {
        idle.push(time_probes("idle").await?);
    }
    progress(&format!(
        "{} runs of each probe during narration",
        config.runs
    ));
    let mut busy: Vec<Vec<Duration>> = Vec::new();
    let mut narrations = 0;
    let mut running: Option<tokio::task::JoinHandle<_>> = None;
    while busy.len() < config.runs {
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
        NarrationProbe {
            job: job.into(),
            idle,
            during_narration: during,
            p50_ratio,
        }
    };
    let sum = alone.timings.sum_of_parts();
    Ok(NarrationBenchReport {
        clip: config.clip.display().to_string(),
        clip_secs: project.duration_secs,
        segments: project.segments.len(),
        mode: config.mode,
        text_model: config.upstream.clone(),
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
    })
}

/// The report as the README shows it: the narration's overlap and a table of the probes.
pub fn render_text(report: &NarrationBenchReport) -> String {
    let mut out = String::new();
    let t = &report.narration_alone;
    let _ = writeln!(
        out,
        "narration of {} segments ({:.1} s of audio, {:?}, text by {}):",
        report.segments,
        report.clip_secs,
        report.mode,
        report.text_model.as_deref().unwrap_or("the rules")
    );
    let _ = writeln!(
        out,
        "  total {:.2} s vs sum of parts {:.2} s (text {:.2}, speech {:.2}, fitting {:.2}, files {:.2}): ratio {:.2}",
        t.total_secs, report.sum_of_parts_secs, t.text_secs, t.speech_secs, t.fit_secs, t.assemble_secs, report.overlap_ratio
    );
    let _ = writeln!(
        out,
        "| interactive job | idle p50 | during narration p50 | p95 idle / during | ratio (p50) |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for p in &report.probes {
        let (Some(i), Some(d)) = (&p.idle, &p.during_narration) else {
            continue;
        };
        let _ = writeln!(
            out,
            "| {} | {:.0} ms | {:.0} ms | {:.0} / {:.0} ms | {:.2} |",
            p.job,
            i.p50_ms,
            d.p50_ms,
            i.p95_ms,
            d.p95_ms,
            p.p50_ratio.unwrap_or(f64::NAN)
        );
    }
    out
}
