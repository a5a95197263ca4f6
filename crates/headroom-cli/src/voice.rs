//! `headroom voice …`: the voice library from the command line — add reference clips (checked,
//! transcribed, embedded), list, show, score a recording against a voice, search for an
//! approximate voice match, remove, export and import. Every command takes `--json`.

use crate::progress::Progress;
use crate::{cancel_on_ctrl_c, EXIT_CANCELLED};
use clap::{Args, Subcommand};
use headroom_services::speech::AudioInput;
use headroom_services::voice_work::{
    both_similarities, default_voice_name, Closeness, VoiceWorkError, INDEPENDENT_HINT,
};
use headroom_services::voices::VoiceProfile;
use headroom_services::Services;
use headroom_speech::voice::matching::{MatchSettings, Score};
use headroom_speech::voice::{ClipReport, Severity, VoiceError};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug, Clone, Copy)]
pub struct Output {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand, Debug)]
pub enum VoiceCommand {
    /// Create a voice (if it does not exist) and add reference clips: 5–30 s of one person
    /// speaking, each checked, transcribed and embedded.
    Add {
        name: String,
        #[arg(required = true)]
        clips: Vec<PathBuf>,
        /// What is said in the clip (one clip only); transcribed when not given.
        #[arg(long)]
        transcript: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// List the voices.
    List(Output),
    /// Show a voice: its clips with their checks and transcripts, and its match.
    Show {
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// How close a recording is to a voice (cosine similarity of speaker embeddings), beside
    /// the default voice's.
    Score {
        name: String,
        file: PathBuf,
        #[command(flatten)]
        output: Output,
    },
    /// Search for an approximate voice match with the embedded voices (no server): espeak-ng's
    /// variants, then Kokoro's styles and an evolution strategy over them, judged on held-out
    /// sentences.
    Match {
        name: String,
        /// Candidate takes the search may make.
        #[arg(long, default_value_t = MatchSettings::default().budget)]
        budget: usize,
        /// The highest word error rate a candidate may have (intelligibility bound).
        #[arg(long, default_value_t = MatchSettings::default().max_word_error_rate)]
        max_wer: f64,
        #[command(flatten)]
        output: Output,
    },
    /// Rename a voice.
    Rename {
        name: String,
        new_name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Remove one clip (`--clip ID`) or the whole voice.
    Remove {
        name: String,
        #[arg(long)]
        clip: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Write a voice to one file (its profile and clips).
    Export { name: String, out: PathBuf },
    /// Add a voice from a file made by `headroom voice export`.
    Import {
        file: PathBuf,
        #[command(flatten)]
        output: Output,
    },
    /// Check the configured cloning server (cloning.url).
    Server(Output),
}

fn print_report(report: &ClipReport) {
    println!(
        "  {:.1} s, speech {:.0} dBFS, noise {:.0} dBFS (SNR {:.0} dB), clipped {:.2}%, silence {:.0}%",
        report.seconds,
        report.speech_dbfs,
        report.noise_dbfs,
        report.snr_db,
        report.clipped_fraction * 100.0,
        report.silence_fraction * 100.0
    );
    for f in &report.findings {
        let mark = match f.severity {
            Severity::Refused => "refused",
            Severity::Warning => "warning",
        };
        println!("  {mark}: {}", f.advice);
    }
}

fn print_profile(voice: &VoiceProfile) {
    println!("{} ({} clips)", voice.name, voice.clips.len());
    for clip in &voice.clips {
        println!(
            "- {}: {:.1} s, \"{}\"",
            clip.id,
            clip.seconds,
            clip.transcript.as_deref().unwrap_or("(no transcript)")
        );
        print_report(&clip.report);
    }
    match (&voice.matched, voice.current_match()) {
        (_, Some(m)) => {
            let both = |s: &Score| both_similarities(s.similarity, s.similarity_independent);
            println!(
                "voice match (approximate): similarity {} on held-out sentences (search sentence {}); default voice {}; best shipped style {} {}; WER {:.2}; {} takes in {:.0} s",
                both(&m.outcome.held_out),
                both(&m.outcome.search),
                both(&m.default_held_out),
                m.outcome.best_shipped,
                both(&m.outcome.best_shipped_held_out),
                m.outcome.held_out.word_error_rate,
                m.outcome.evaluations,
                m.outcome.seconds
            );
            if let Some((setting, score)) = &m.espeak {
                println!(
                    "espeak-ng match: {} pitch {} (similarity {} on held-out sentences)",
                    setting.voice,
                    setting.pitch,
                    both(score)
                );
            }
            if m.outcome.held_out.similarity_independent.is_none() {
                println!("{INDEPENDENT_HINT}");
            }
        }
        (Some(_), None) => println!("voice match: out of date (the clips changed); run it again"),
        (None, None) => println!(
            "voice match: none yet (`headroom voice match {}`)",
            voice.name
        ),
    }
}

fn print_closeness(c: &Closeness, default_voice: &str) {
    println!(
        "similarity {} (default voice {default_voice}: {})",
        both_similarities(c.similarity, c.similarity_independent),
        both_similarities(c.default_similarity, c.default_similarity_independent)
    );
    if c.similarity_independent.is_none() {
        println!("{INDEPENDENT_HINT}");
    }
}

pub async fn run(cmd: VoiceCommand, services: Arc<Services>) -> anyhow::Result<ExitCode> {
    if let VoiceCommand::Add {
        transcript: Some(_),
        clips,
        ..
    } = &cmd
    {
        if clips.len() > 1 {
            anyhow::bail!("--transcript says what one clip says: give one clip with it");
        }
    }
    let voices = services.voices();
    let library = voices.library().clone();
    let cancel = CancellationToken::new();
    cancel_on_ctrl_c(cancel.clone());
    let result: Result<(), VoiceWorkError> = async {
        match cmd {
            VoiceCommand::Add {
                name,
                clips,
                transcript,
                output,
            } => {
                let mut profile = match library.open(&name) {
                    Ok(p) => p,
                    Err(_) => library.create(&name)?,
                };
                let mut reports = Vec::new();
                for clip in &clips {
                    let input = AudioInput::from_file(clip)?;
                    match voices
                        .add_clip(&profile.id, input, transcript.clone(), cancel.clone())
                        .await
                    {
                        Ok((p, report)) => {
                            profile = p;
                            if !output.json {
                                println!("added {}", clip.display());
                                print_report(&report);
                            }
                            reports.push(json!({"file": clip, "added": true, "report": report}));
                        }
                        Err(VoiceWorkError::ClipRefused(report)) => {
                            if !output.json {
                                println!("not added {}", clip.display());
                                print_report(&report);
                            }
                            reports.push(json!({"file": clip, "added": false, "report": report}));
                        }
                        Err(e) => return Err(e),
                    }
                }
                if output.json {
                    println!("{}", json!({"voice": profile, "clips": reports}));
                }
                if profile.clips.is_empty() {
                    return Err(VoiceWorkError::NoClips(profile.name));
                }
            }
            VoiceCommand::List(output) => {
                let list = library.list()?;
                if output.json {
                    println!("{}", serde_json::to_string(&list).expect("voices serialize"));
                } else if list.is_empty() {
                    println!("no voices yet; add one with `headroom voice add NAME CLIP.wav`");
                } else {
                    for v in list {
                        let matched = match v.current_match() {
                            Some(m) => format!(
                                "match {}",
                                both_similarities(
                                    m.outcome.held_out.similarity,
                                    m.outcome.held_out.similarity_independent
                                )
                            ),
                            None => "no match".into(),
                        };
                        println!("{:<24} {} clips, {matched}", v.name, v.clips.len());
                    }
                }
            }
            VoiceCommand::Show { name, output } => {
                let voice = library.open(&name)?;
                if output.json {
                    println!("{}", serde_json::to_string(&voice).expect("a voice serializes"));
                } else {
                    print_profile(&voice);
                }
            }
            VoiceCommand::Score { name, file, output } => {
                let input = AudioInput::from_file(&file)?;
                let c = voices.score(&name, input, cancel.clone()).await?;
                let default_voice = default_voice_name(&services);
                if output.json {
                    println!("{}", json!({"voice": name, "file": file, "similarity": c.similarity, "default_similarity": c.default_similarity, "similarity_independent": c.similarity_independent, "default_similarity_independent": c.default_similarity_independent, "default_voice": default_voice}));
                } else {
                    print_closeness(&c, &default_voice);
                }
            }
            VoiceCommand::Match {
                name,
                budget,
                max_wer,
                output,
            } => {
                let settings = MatchSettings {
                    budget,
                    max_word_error_rate: max_wer,
                    ..MatchSettings::default()
                };
                let progress = Arc::new(Progress::new("voice match (approximate)"));
                let shown = progress.clone();
                let voice = voices
                    .match_voice(
                        &name,
                        settings,
                        Arc::new(move |p| {
                            shown.update(p.evaluations as f32 / p.total.max(1) as f32);
                        }),
                        cancel.clone(),
                    )
                    .await?;
                progress.finish("voice match (approximate): done");
                if output.json {
                    println!("{}", serde_json::to_string(&voice).expect("a voice serializes"));
                } else {
                    print_profile(&voice);
                }
            }
            VoiceCommand::Rename {
                name,
                new_name,
                output,
            } => {
                let id = library.open(&name)?.id;
                let voice = library.rename(&id, &new_name)?;
                if output.json {
                    println!("{}", json!({"id": voice.id, "name": voice.name}));
                } else {
                    println!("renamed to {}", voice.name);
                }
            }
            VoiceCommand::Remove { name, clip, output } => {
                let voice = library.open(&name)?;
                match clip {
                    Some(clip) => {
                        let v = library.remove_clip(&voice.id, &clip)?;
                        if output.json {
                            println!("{}", json!({"removed_clip": clip, "clips": v.clips.len()}));
                        } else {
                            println!("removed {clip}; {} clips left", v.clips.len());
                        }
                    }
                    None => {
                        library.delete(&voice.id)?;
                        if output.json {
                            println!("{}", json!({"removed": voice.id}));
                        } else {
                            println!("removed voice {}", voice.name);
                        }
                    }
                }
            }
            VoiceCommand::Export { name, out } => {
                let voice = library.open(&name)?;
                library.export(&voice.id, &out)?;
                eprintln!("wrote {}", out.display());
            }
            VoiceCommand::Import { file, output } => {
                let voice = library.import(&file)?;
                if output.json {
                    println!("{}", json!({"id": voice.id, "name": voice.name}));
                } else {
                    println!("imported {} ({} clips)", voice.name, voice.clips.len());
                }
            }
            VoiceCommand::Server(output) => {
                let health = voices.cloning_health().await?;
                if output.json {
                    println!("{}", serde_json::to_string(&health).expect("health serializes"));
                } else {
                    println!("{} at {}: {}", health.kind.label(), health.url, health.detail);
                }
            }
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(VoiceWorkError::Voice(VoiceError::Cancelled)) => Ok(ExitCode::from(EXIT_CANCELLED)),
        Err(e) => Err(e.into()),
    }
}
