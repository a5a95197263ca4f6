//! The embedded voices' speed and intelligibility (real-time factor, word error rate through
//! the embedded Whisper), and the approximate voice match against target speakers made at run
//! time by other synthesizers: similarity of the default voice, the best shipped style and the
//! match on held-out sentences, their WER, and the match's time. Every similarity is given
//! twice: by the embedder the search maximised, and by the independent one (Resemblyzer's) it
//! never used, so a gain that only fools the first shows.

use super::{espeak, installed, Progress, SuiteError, REFERENCE};
use headroom_services::speech::AudioInput;
use headroom_services::voice_work::{default_voice_name, INDEPENDENT_HINT};
use headroom_services::Services;
use headroom_speech::asr::word_error_rate;
use headroom_speech::audio::{write_wav, Audio};
use headroom_speech::models::DEFAULT_MODEL;
use headroom_speech::voice::matching::MatchSettings;
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// What the voices suite measures.
#[derive(Debug, Clone)]
pub struct VoicesBenchConfig {
    /// Candidate takes each match may make.
    pub budget: usize,
    /// Whether the match is measured too (else only the synthesizers).
    pub with_match: bool,
}

impl Default for VoicesBenchConfig {
    fn default() -> Self {
        VoicesBenchConfig {
            budget: MatchSettings::default().budget,
            with_match: true,
        }
    }
}

const TEXT: &str = "The weather today is sunny with a light breeze. Please send the report to my office before noon. We recorded the river at night for three hours.";

#[derive(Debug, Serialize)]
pub struct SynthRow {
    pub voice: String,
    pub seconds_of_speech: f64,
    pub real_time_factor: f64,
    pub word_error_rate: f64,
}

#[derive(Debug, Serialize)]
pub struct MatchRow {
    pub target: String,
    pub default_voice: (f32, f64),
    pub best_shipped: (String, f32, f64),
    pub matched_held_out: (f32, f64),
    pub matched_search: f32,
    pub espeak_match: Option<(String, u32, f32)>,
    /// The same scores by the independent embedder (Resemblyzer's), which the search never
    /// used: default voice, best shipped style, match held out, match on the search sentence,
    /// espeak-ng match held out. `None`: not installed.
    pub independent: Independent,
    pub evaluations: usize,
    pub seconds: f64,
}

#[derive(Debug, Serialize)]
pub struct Independent {
    pub default_voice: Option<f32>,
    pub best_shipped: Option<f32>,
    pub matched_held_out: Option<f32>,
    pub matched_search: Option<f32>,
    pub espeak_match: Option<f32>,
}

/// A score by both judges: the search's embedder, then the independent one.
fn both(search: f32, independent: Option<f32>) -> String {
    match independent {
        Some(i) => format!("{search:.3} / {i:.3}"),
        None => format!("{search:.3} / –"),
    }
}

#[derive(Debug, Serialize)]
pub struct VoicesBenchReport {
    pub synthesizers: Vec<SynthRow>,
    pub default_voice: String,
    pub budget: usize,
    pub targets: Vec<MatchRow>,
}

async fn wer_of(
    services: &Services,
    audio: &Audio,
    text: &str,
    scratch: &Path,
) -> Result<f64, SuiteError> {
    let path = scratch.join("take.wav");
    write_wav(&path, audio)?;
    let transcript = services
        .speech()
        .transcribe(
            AudioInput::from_file(&path)?,
            DEFAULT_MODEL,
            Default::default(),
            Default::default(),
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await?;
    Ok(word_error_rate(text, &transcript.text()))
}

/// Times and transcribes every embedded voice, then matches each target speaker.
pub async fn run(
    services: &Services,
    config: &VoicesBenchConfig,
    progress: Progress<'_>,
) -> Result<VoicesBenchReport, SuiteError> {
    let scratch = tempfile::tempdir()?;
    let installed = |m: &str| installed(services, m);
    let mut synthesizers = Vec::new();
    let mut voices = vec!["en-us".to_string()];
    if installed("piper-joe") {
        voices.push("piper-joe".into());
    }
    if installed("kokoro") {
        for style in services.kokoro()?.style_names() {
            voices.push(format!("kokoro-{style}"));
        }
    }
    for voice in voices {
        let (speech, name) = services.speech_for_voice(Some(&voice))?;
        // One warm-up, so loading the model is not counted.
        speech
            .synthesize("Warm up.".into(), name.clone(), CancellationToken::new())
            .await?;
        let started = Instant::now();
        let audio = speech
            .synthesize(TEXT.into(), name, CancellationToken::new())
            .await?;
        let elapsed = started.elapsed().as_secs_f64();
        let row = SynthRow {
            voice: voice.clone(),
            seconds_of_speech: audio.duration_secs(),
            real_time_factor: elapsed / audio.duration_secs(),
            word_error_rate: wer_of(services, &audio, TEXT, scratch.path()).await?,
        };
        progress(&format!(
            "{:<22} RTF {:.3}  WER {:.3}  ({:.1} s of speech)",
            row.voice, row.real_time_factor, row.word_error_rate, row.seconds_of_speech
        ));
        synthesizers.push(row);
    }

    let mut targets = Vec::new();
    if config.with_match {
        // A library of its own, so the user's voices are untouched.
        let mut env = services.env().clone();
        env.voices_dir = scratch.path().join("voices");
        let bench = Services::new(services.config(), env);
        let voices = bench.voices();
        let mut speakers: Vec<(String, Audio)> = vec![
            (
                "espeak en-us+m3 p40".into(),
                espeak("en-us+m3", 40, REFERENCE)?,
            ),
            (
                "espeak en-gb+f2 p65".into(),
                espeak("en-gb+f2", 65, REFERENCE)?,
            ),
            (
                "espeak en-us+m7 p25".into(),
                espeak("en-us+m7", 25, REFERENCE)?,
            ),
        ];
        if installed("piper-joe") {
            let (speech, name) = services.speech_for_voice(Some("piper-joe"))?;
            let audio = speech
                .synthesize(REFERENCE.into(), name, CancellationToken::new())
                .await?;
            speakers.push(("piper joe".into(), audio));
        }
        for (i, (label, audio)) in speakers.into_iter().enumerate() {
            let clip = scratch.path().join(format!("target-{i}.wav"));
            write_wav(&clip, &audio)?;
            let name = format!("target {i}");
            voices.library().create(&name)?;
            voices
                .add_clip(
                    &name,
                    AudioInput::from_file(&clip)?,
                    Some(REFERENCE.into()),
                    CancellationToken::new(),
                )
                .await?;
            let settings = MatchSettings {
                budget: config.budget,
                ..MatchSettings::default()
            };
            let profile = voices
                .match_voice(&name, settings, Arc::new(|_| {}), CancellationToken::new())
                .await?;
            let m = profile.current_match().expect("a match was just made");
            let row = MatchRow {
                target: label,
                default_voice: (
                    m.default_held_out.similarity,
                    m.default_held_out.word_error_rate,
                ),
                best_shipped: (
                    m.outcome.best_shipped.clone(),
                    m.outcome.best_shipped_held_out.similarity,
                    m.outcome.best_shipped_held_out.word_error_rate,
                ),
                matched_held_out: (
                    m.outcome.held_out.similarity,
                    m.outcome.held_out.word_error_rate,
                ),
                matched_search: m.outcome.search.similarity,
                espeak_match: m
                    .espeak
                    .as_ref()
                    .map(|(s, score)| (s.voice.clone(), s.pitch, score.similarity)),
                independent: Independent {
                    default_voice: m.default_held_out.similarity_independent,
                    best_shipped: m.outcome.best_shipped_held_out.similarity_independent,
                    matched_held_out: m.outcome.held_out.similarity_independent,
                    matched_search: m.outcome.search.similarity_independent,
                    espeak_match: m
                        .espeak
                        .as_ref()
                        .and_then(|(_, score)| score.similarity_independent),
                },
                evaluations: m.outcome.evaluations,
                seconds: m.outcome.seconds,
            };
            progress(&format!(
                "{:<22} default {}  best shipped {} {}  match {} (search {}, WER {:.2})  espeak {:?} {}  {} takes in {:.0} s  [search's embedder / independent]",
                row.target,
                both(row.default_voice.0, row.independent.default_voice),
                row.best_shipped.0,
                both(row.best_shipped.1, row.independent.best_shipped),
                both(row.matched_held_out.0, row.independent.matched_held_out),
                both(row.matched_search, row.independent.matched_search),
                row.matched_held_out.1,
                row.espeak_match,
                row.independent
                    .espeak_match
                    .map_or("–".into(), |i| format!("{i:.3}")),
                row.evaluations,
                row.seconds
            ));
            targets.push(row);
        }
    }
    Ok(VoicesBenchReport {
        synthesizers,
        default_voice: default_voice_name(services),
        budget: config.budget,
        targets,
    })
}

/// The report as the README shows it: the voices' table, then the match's.
pub fn render_text(report: &VoicesBenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| voice | RTF | WER |\n|---|---|---|");
    for s in &report.synthesizers {
        let _ = writeln!(
            out,
            "| {} | {:.3} | {:.3} |",
            s.voice, s.real_time_factor, s.word_error_rate
        );
    }
    if !report.targets.is_empty() {
        let _ = writeln!(
                out,
            "\nSimilarity by the search's embedder / by the independent one (Resemblyzer, never searched against).\n\n| target speaker | default voice ({}) | best shipped style | voice match (held out) | match on search sentence | espeak-ng match (held out) | match's gain over best shipped | WER default / shipped / match | takes | time |\n|---|---|---|---|---|---|---|---|---|---|",
            report.default_voice
        );
        for t in &report.targets {
            let i = &t.independent;
            let gain = both(
                t.matched_held_out.0 - t.best_shipped.1,
                i.matched_held_out.zip(i.best_shipped).map(|(m, b)| m - b),
            );
            let _ = writeln!(
                out,
                "| {} | {} | {} {} | {} | {} | {} | {} | {:.2} / {:.2} / {:.2} | {} | {:.0} s |",
                t.target,
                both(t.default_voice.0, i.default_voice),
                t.best_shipped.0,
                both(t.best_shipped.1, i.best_shipped),
                both(t.matched_held_out.0, i.matched_held_out),
                both(t.matched_search, i.matched_search),
                t.espeak_match
                    .as_ref()
                    .map_or("–".into(), |(v, p, s)| format!(
                        "{v} p{p}: {}",
                        both(*s, i.espeak_match)
                    )),
                gain,
                t.default_voice.1,
                t.best_shipped.2,
                t.matched_held_out.1,
                t.evaluations,
                t.seconds
            );
        }
        if report
            .targets
            .iter()
            .any(|t| t.independent.matched_held_out.is_none())
        {
            let _ = writeln!(out, "\n{INDEPENDENT_HINT}");
        }
    }
    out
}
