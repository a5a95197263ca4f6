//! Hours-long recordings, run as a person runs them: the `headroom` program itself, one whole
//! process per recording (model loading included), on conversations of held-out voices made
//! here at each length (the [`speakers`](super::speakers) suite's conversations, its `test`
//! voices by default). Per length: the time and its fraction of real time, and the process's
//! peak resident memory, transcribing alone and with `--speakers auto`; then the speakers found
//! and the diarization error of the transcript's segments (0.25 s collar).

use super::speakers::{
    all_voices, available_voices, bench_voice, choose_voices, keep, make_conversation,
    sentence_cache, VoiceSet,
};
use super::{Progress, SuiteError};
use headroom_base::process::Tool;
use headroom_services::Services;
use headroom_speech::asr::der::{diarization_error, DerReport, Labelled};
use headroom_speech::asr::Transcript;
use headroom_speech::audio::{write_wav, DecodeLimits};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What the long-recordings suite makes and measures.
#[derive(Debug, Clone)]
pub struct LongBenchConfig {
    /// Lengths of the conversations, in minutes.
    pub minutes: Vec<f64>,
    /// Voices in each conversation (the same voices at every length).
    pub speakers: usize,
    pub set: VoiceSet,
    /// The speech model `headroom transcribe` runs.
    pub model: String,
    /// The `headroom` program measured (the CLI passes itself); it is given the services'
    /// config file and inherits the environment, so it finds the same models.
    pub headroom: PathBuf,
    /// The voices, by the speakers suite's names (`None`: `speakers` of `set`, drawn by the
    /// seed).
    pub voices: Option<Vec<String>>,
    /// Measure `--speakers auto` too.
    pub with_speakers: bool,
    pub seed: u64,
    /// Where synthesized sentences are kept between runs.
    pub cache: Option<PathBuf>,
    /// Where each conversation's audio and reference (RTTM) are written.
    pub keep: Option<PathBuf>,
}

impl LongBenchConfig {
    pub fn new(headroom: PathBuf) -> LongBenchConfig {
        LongBenchConfig {
            minutes: vec![6.0, 30.0, 90.0, 180.0],
            speakers: 4,
            set: VoiceSet::Test,
            model: headroom_speech::models::DEFAULT_MODEL.into(),
            headroom,
            voices: None,
            with_speakers: true,
            seed: 41,
            cache: None,
            keep: None,
        }
    }
}

/// One run of the program, to its end.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessRun {
    pub secs: f64,
    /// `secs` over the audio's length.
    pub real_time: f64,
    pub peak_mib: f64,
}

/// A run with `--speakers auto`, and how right its speakers were.
#[derive(Debug, Clone, Serialize)]
pub struct SpeakersRun {
    pub run: ProcessRun,
    pub speakers_found: usize,
    /// The transcript's segments, each labelled with its speaker, against who spoke.
    pub der: DerReport,
}

#[derive(Debug, Clone, Serialize)]
pub struct LongRow {
    pub minutes: f64,
    pub audio_secs: f64,
    pub transcribe: ProcessRun,
    pub with_speakers: Option<SpeakersRun>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LongBenchReport {
    pub set: VoiceSet,
    pub seed: u64,
    pub model: String,
    pub speakers: usize,
    pub voices: Vec<String>,
    pub cores: usize,
    pub rows: Vec<LongRow>,
}

/// Makes a conversation of each length (shortest first) and runs `headroom transcribe` on it,
/// alone and with `--speakers auto`.
pub async fn run(
    services: &Services,
    config: &LongBenchConfig,
    progress: Progress<'_>,
) -> Result<LongBenchReport, SuiteError> {
    // The conversation is made here in memory before it is written: as long as a decode
    // may hold (`headroom transcribe` itself streams, and takes a day).
    let longest = DecodeLimits::default().max_seconds / 60.0;
    if let Some(bad) = config
        .minutes
        .iter()
        .find(|m| !(m.is_finite() && **m > 0.0 && **m <= longest))
    {
        return Err(SuiteError::Unavailable(format!(
            "--minutes {bad}: each length must be more than 0 and at most {longest} minutes (the longest conversation this bench makes)"
        )));
    }
    let (cache, _private) = sentence_cache(config.cache.as_deref())?;
    let voices = available_voices(services, config.set, config.speakers)?;
    let chosen: Vec<&'static str> = match &config.voices {
        Some(named) => named
            .iter()
            .map(|name| {
                bench_voice(name).ok_or_else(|| {
                    SuiteError::Unavailable(format!(
                        "no voice {name} in the speakers suite (its voices: {})",
                        all_voices().join(", ")
                    ))
                })
            })
            .collect::<Result<_, _>>()?,
        None => {
            let mut rng = StdRng::seed_from_u64(config.seed);
            choose_voices(&voices, config.speakers, &mut rng)
        }
    };
    let work = tempfile::Builder::new()
        .prefix("headroom-bench-long-")
        .tempdir()?;
    let mut minutes = config.minutes.clone();
    minutes.sort_by(f64::total_cmp);
    let mut rows = Vec::new();
    for length in minutes {
        progress(&format!(
            "{length} minutes: making the conversation ({})",
            chosen.join(", ")
        ));
        // Each length its own conversation: the same voices, turns drawn afresh.
        let mut rng = StdRng::seed_from_u64(config.seed ^ (length * 1000.0) as u64);
        let conversation =
            make_conversation(services, &cache, &chosen, length * 60.0, &mut rng).await?;
        let name = format!("{length}-minutes");
        if let Some(dir) = &config.keep {
            keep(dir, &name, &conversation)?;
        }
        let wav = work.path().join(format!("{name}.wav"));
        write_wav(&wav, &conversation.audio)?;
        let audio_secs = conversation.audio.duration_secs();
        let reference = conversation.reference();
        // The audio is on disk: the bench's copy would only crowd the process measured.
        drop(conversation);
        let config_file = services.env().config_file.as_deref();
        let (alone, _) = run_headroom(config, config_file, &wav, false, audio_secs).await?;
        progress(&format!(
            "{length} minutes: transcribed in {:.1} s ({:.3} × real time), peak {:.0} MiB",
            alone.secs, alone.real_time, alone.peak_mib
        ));
        let with_speakers = if config.with_speakers {
            let (run, transcript) =
                run_headroom(config, config_file, &wav, true, audio_secs).await?;
            let found = segments_by_speaker(&transcript);
            let der = diarization_error(&reference, &found, 0.25);
            let row = SpeakersRun {
                run,
                speakers_found: transcript.speakers.len(),
                der,
            };
            progress(&format!(
                "{length} minutes with speakers: {:.1} s, peak {:.0} MiB, {} speakers found ({} true), DER {:.1}%",
                row.run.secs,
                row.run.peak_mib,
                row.speakers_found,
                chosen.len(),
                100.0 * row.der.der
            ));
            Some(row)
        } else {
            None
        };
        std::fs::remove_file(&wav)?;
        rows.push(LongRow {
            minutes: length,
            audio_secs,
            transcribe: alone,
            with_speakers,
        });
    }
    Ok(LongBenchReport {
        set: config.set,
        seed: config.seed,
        model: config.model.clone(),
        speakers: chosen.len(),
        voices: chosen.iter().map(|v| v.to_string()).collect(),
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        rows,
    })
}

/// `headroom transcribe` on `wav`, as JSON: its run and its transcript.
async fn run_headroom(
    config: &LongBenchConfig,
    config_file: Option<&Path>,
    wav: &Path,
    speakers: bool,
    audio_secs: f64,
) -> Result<(ProcessRun, Transcript), SuiteError> {
    let mut tool = Tool::new(&config.headroom).subcommand("transcribe");
    if let Some(path) = config_file {
        tool = tool.path_option("--config", path);
    }
    tool = tool
        .option("--model", &config.model)
        .option("--format", "json");
    if speakers {
        tool = tool.option("--speakers", "auto");
    }
    let tool = tool.operands([wav]).watching_memory();
    let started = Instant::now();
    let finished = tokio::task::spawn_blocking(move || tool.run(b"")).await??;
    let secs = started.elapsed().as_secs_f64();
    if !finished.status.success() {
        let stderr = String::from_utf8_lossy(&finished.stderr);
        let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" / ");
        return Err(SuiteError::Measurement(format!(
            "headroom transcribe failed ({}): {tail}",
            finished.status
        )));
    }
    let transcript: Transcript = serde_json::from_slice(&finished.stdout).map_err(|e| {
        SuiteError::Measurement(format!("headroom transcribe wrote no transcript: {e}"))
    })?;
    let run = ProcessRun {
        secs,
        real_time: secs / audio_secs.max(1e-9),
        peak_mib: finished.peak_rss_kib.unwrap_or(0) as f64 / 1024.0,
    };
    Ok((run, transcript))
}

/// The transcript's segments labelled with their speaker: who the person reading it is told
/// said each line.
fn segments_by_speaker(transcript: &Transcript) -> Vec<Labelled> {
    transcript
        .segments
        .iter()
        .filter_map(|s| {
            Some(Labelled {
                start: s.start,
                end: s.end,
                speaker: s.speaker.clone()?,
            })
        })
        .collect()
}

/// The report as the README shows it: one row per length.
pub fn render_text(r: &LongBenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} · {} voices of the {:?} set ({}) · {} cores · whole processes, model loading included",
        r.model,
        r.speakers,
        r.set,
        r.voices.join(", "),
        r.cores
    );
    let _ = writeln!(
        out,
        "| audio | transcribe: time (× real time), peak | with `--speakers auto`: time, peak | speakers found ({} true) | DER (0.25 s collar, segments) |",
        r.speakers
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for row in &r.rows {
        let t = &row.transcribe;
        let (speakers_run, found, der) = match &row.with_speakers {
            Some(s) => (
                format!("{:.1} s, {:.0} MiB", s.run.secs, s.run.peak_mib),
                s.speakers_found.to_string(),
                format!("{:.1}%", 100.0 * s.der.der),
            ),
            None => ("–".into(), "–".into(), "–".into()),
        };
        let _ = writeln!(
            out,
            "| {} min | {:.1} s ({:.3}), {:.0} MiB | {speakers_run} | {found} | {der} |",
            row.minutes, t.secs, t.real_time, t.peak_mib
        );
    }
    out
}
