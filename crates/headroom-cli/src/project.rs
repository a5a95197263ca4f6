//! `headroom project …`: the desktop app's projects from the command line, for scripting and
//! QA, through the same workstation code (and the same store lock, so the app and the CLI
//! never lose each other's writes). Every command takes `--json`.

use crate::progress::Progress;
use crate::project_lookup::{project_voice, resolve};
use crate::{cancel_on_ctrl_c, EXIT_CANCELLED, EXIT_REJECTED};
use anyhow::Context;
use clap::{Args, Subcommand};
use headroom_base::fsutil::write_atomic;
use headroom_services::voice_work::both_similarities;
use headroom_services::Services;
use headroom_speech::asr::export::{render, ExportFormat};
use headroom_workstation::editing::{EditChange, EditSummary, EditedFormat, TimeSpan};
use headroom_workstation::projects::{
    Project, ProjectEntry, ProjectStore, SpeakerSetting, SplitAt,
};
use headroom_workstation::resume::JobOutcome;
use headroom_workstation::workstation::{
    CleanAllEvent, CleanupSummary, SegmentOutcome, Workstation, WorkstationError,
};
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Subcommand, Debug)]
pub enum ProjectCommand {
    /// List the projects, newest first.
    List(Output),
    /// Create a project.
    Create {
        name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Rename a project (its folder, its id, stays).
    Rename {
        /// The project's id or name.
        project: String,
        new_name: String,
        #[command(flatten)]
        output: Output,
    },
    /// Delete a project and every file in it.
    Delete {
        project: String,
        #[command(flatten)]
        output: Output,
    },
    /// Show a project: settings, segments and cleanup decisions.
    Show {
        project: String,
        #[command(flatten)]
        output: Output,
    },
    /// Import an audio file into a project and transcribe it (replacing its transcript).
    Transcribe {
        project: String,
        file: PathBuf,
        /// Model (see `headroom models list`).
        #[arg(long)]
        model: Option<String>,
        /// Find who speaks when: off, auto or how many speakers (kept as the project's
        /// setting; the project's setting when not given).
        #[arg(long)]
        speakers: Option<SpeakerSetting>,
        /// Write the fillers ("um", "uh") Whisper hears but leaves out, for editing by the
        /// words: on or off (kept as the project's setting; each window is read twice).
        #[arg(long, value_parser = parse_switch)]
        hear_fillers: Option<bool>,
        #[command(flatten)]
        output: Output,
    },
    /// The project's speakers, and edits to them: rename one everywhere, merge one into
    /// another, "this is <voice profile>", or make a voice profile from a speaker's turns.
    Speakers {
        project: String,
        /// Name a speaker: `S2=Grace` ("S2=" gives back its label).
        #[arg(long, value_name = "ID=NAME")]
        rename: Option<String>,
        /// Merge a speaker into another: `S3:S1` merges S3 into S1.
        #[arg(long, value_name = "FROM:INTO")]
        merge: Option<String>,
        /// Attach a speaker to a voice profile (its name or id): `S1=Ada` ("S1=" detaches).
        #[arg(long, value_name = "ID=PROFILE")]
        attach: Option<String>,
        /// Make a voice profile from this speaker's longest turns (5-20 s) and attach it.
        #[arg(long, value_name = "ID")]
        profile_from: Option<String>,
        /// The new profile's name (default: the speaker's).
        #[arg(long, requires = "profile_from")]
        profile_name: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Split a segment in two, before a word or at a time; the new part may get another
    /// speaker (an id, or `new`).
    Split {
        project: String,
        /// The segment (1-based).
        segment: usize,
        /// The new part starts with this word (1-based within the segment).
        #[arg(long, conflicts_with = "at")]
        word: Option<usize>,
        /// The new part starts with the first word at or after this time (seconds).
        #[arg(long)]
        at: Option<f64>,
        /// The new part's speaker (an id such as S2, or `new`); the segment's when not given.
        #[arg(long)]
        speaker: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Clean every segment as the project's settings say (LLM cleanup on or off, its failure
    /// policy); suggestions are kept pending unless --accept.
    Cleanup {
        project: String,
        /// Rule-based cleanup only: nothing leaves the machine.
        #[arg(long)]
        rules_only: bool,
        /// Accept every suggestion made.
        #[arg(long)]
        accept: bool,
        #[command(flatten)]
        output: Output,
    },
    /// The project's jobs: running ones, and those paused in the app or interrupted by a crash
    /// or a kill, which can be resumed from their checkpoint or discarded.
    Jobs {
        project: String,
        /// Resume this interrupted job (a transcription from its last finished window, a
        /// cleanup from its first unfinished segment).
        #[arg(long, conflicts_with = "discard")]
        resume: Option<String>,
        /// Discard this interrupted job (what it saved in the project stays).
        #[arg(long)]
        discard: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// The kept versions of the transcript (each time it was replaced wholesale), or bring
    /// one back with --restore.
    Versions {
        project: String,
        /// The version to restore (the transcript it replaces is kept too).
        #[arg(long)]
        restore: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Speak the project's text (a segment, or all; accepted cleanups first) into its speech/
    /// folder, in the project's voice or --voice (kept as the project's voice): a voice
    /// profile's name, `kokoro[-STYLE]`, `piper-joe` or an espeak-ng voice.
    Speak {
        project: String,
        /// The segment to speak (1-based); all of them when not given.
        #[arg(long)]
        segment: Option<usize>,
        #[arg(long)]
        voice: Option<String>,
        #[command(flatten)]
        output: Output,
    },
    /// Change a project's settings (those not given stay as they are) and show them.
    Settings {
        project: String,
        /// Send the transcript to the text model: on or off (off: the rules only, nothing
        /// leaves the machine).
        #[arg(long, value_parser = parse_switch)]
        llm_cleanup: Option<bool>,
        /// reject, fallback or retry.
        #[arg(long)]
        policy: Option<headroom_core::cleanup::FailurePolicy>,
        /// cleanup or rewrite.
        #[arg(long)]
        mode: Option<headroom_core::cleanup::CleanupMode>,
        /// The text model's server for this project ("" for the app's); given more than once,
        /// the project's text lane spans them all.
        #[arg(long, value_name = "URL")]
        server: Vec<String>,
        /// The voice (a voice profile's name, kokoro[-STYLE], piper-joe, an espeak-ng voice).
        #[arg(long)]
        voice: Option<String>,
        /// Find who speaks when on transcribing: off, auto or how many speakers.
        #[arg(long)]
        speakers: Option<SpeakerSetting>,
        /// Write the fillers ("um", "uh") Whisper hears but leaves out on transcribing, for
        /// editing by the words: on or off (each window is read twice).
        #[arg(long, value_parser = parse_switch)]
        hear_fillers: Option<bool>,
        #[command(flatten)]
        output: Output,
    },
    /// Edit the recording by its words: cut the fillers the cleanup rules find, struck words
    /// and passages, shorten long pauses. Shows the fillers found (each by its SEGMENT:WORD id)
    /// and what the edit keeps. The original is never changed, and each change keeps the edit
    /// before it as a version (see `versions`). Without options, shows the edit.
    Edit {
        project: String,
        /// Cut every filler, repeat and false start ("um", "the the", "th- the").
        #[arg(long, conflicts_with = "keep_fillers")]
        cut_fillers: bool,
        /// Stop cutting the fillers.
        #[arg(long)]
        keep_fillers: bool,
        /// Shorten pauses longer than this many seconds to it (0 stops shortening).
        #[arg(long, value_name = "SECONDS")]
        max_pause: Option<f64>,
        /// Shortened pauses sound as the recording's room tone (its quietest stretch) instead
        /// of their own audio: on or off.
        #[arg(long, value_parser = parse_switch)]
        room_tone: Option<bool>,
        /// Cut a passage: START-END in seconds (e.g. 12.30-14.85); the words whose middle it
        /// holds go. Repeatable.
        #[arg(long, value_name = "START-END")]
        cut: Vec<TimeSpan>,
        /// Cut a word (SEGMENT:WORD, as listed) or a run of them (FIRST-LAST, e.g. 3:4-5:2).
        /// Repeatable.
        #[arg(long, value_name = "WORD_ID")]
        strike: Vec<String>,
        /// Keep a word (or a run) whatever else would cut it (a filler the rules found, say).
        /// Repeatable.
        #[arg(long, value_name = "WORD_ID")]
        keep: Vec<String>,
        /// Start again from the whole recording (with no other option: remove the edit).
        #[arg(long)]
        clear: bool,
        #[command(flatten)]
        output: Output,
    },
    /// Export the transcript (accepted cleanups included) to stdout, or to --out. With
    /// --edited, the edited recording (wav, flac, mp3, opus), its transcript re-timed (txt,
    /// srt, vtt, json) or its cut list for video editors (edl, xmeml, fcpxml, otio), to --out
    /// or the project's exports/ folder.
    Export {
        project: String,
        /// txt, srt, vtt or json; with --edited also wav, flac, mp3, opus, edl, xmeml, fcpxml
        /// or otio.
        #[arg(long, default_value = "txt")]
        format: String,
        /// Export the edit (see `project edit`) rather than the whole recording's transcript.
        #[arg(long)]
        edited: bool,
        /// The cut list's frame rate: 24, 25, 30, 50 or 60.
        #[arg(long, default_value_t = 30)]
        fps: u32,
        /// Write here (atomically) instead of to stdout (or, with --edited, exports/).
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        output: Output,
    },
}

fn clock(secs: f64) -> String {
    let tenths = (secs.max(0.0) * 10.0).round() as u64;
    format!("{}:{:02}.{}", tenths / 600, (tenths / 10) % 60, tenths % 10)
}

fn print_edit(name: &str, summary: &EditSummary, output: Output) -> anyhow::Result<()> {
    if output.json {
        println!("{}", serde_json::to_string_pretty(summary)?);
        return Ok(());
    }
    match &summary.edit {
        None => println!(
            "{name}: no edit; the recording plays whole ({})",
            clock(summary.original_secs)
        ),
        Some(edit) => {
            let i = &edit.intent;
            println!(
                "{name}: {} edited to {} ({:.1} s removed, {} words cut, {} joins)",
                clock(summary.original_secs),
                clock(summary.edited_secs),
                summary.original_secs - summary.edited_secs,
                summary.words_cut,
                summary.joins
            );
            println!(
                "  fillers {}, pauses {}, room tone {}, {} passages and {} words cut, {} words kept by hand",
                if i.cut_fillers { "cut" } else { "kept" },
                i.max_pause
                    .map_or("as they are".into(), |p| format!("at most {p} s")),
                if i.room_tone { "on" } else { "off" },
                i.cuts.len(),
                i.struck_words.len(),
                i.kept_words.len()
            );
        }
    }
    println!("  {} fillers found:", summary.fillers.len());
    for f in &summary.fillers {
        println!(
            "  {:>8} {:>9} {:<12} {:<13} {}",
            f.word.id,
            clock(f.word.start),
            f.word.text,
            serde_json::to_value(f.kind)?.as_str().unwrap_or_default(),
            if f.cut { "cut" } else { "kept" }
        );
    }
    Ok(())
}

#[derive(Args, Debug, Clone, Copy)]
pub struct Output {
    /// Print JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

pub(crate) fn parse_switch(value: &str) -> Result<bool, String> {
    match value {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        other => Err(format!("{other:?}: use on or off")),
    }
}

fn print_project(project: &Project, output: Output) {
    if output.json {
        println!(
            "{}",
            serde_json::to_string_pretty(project).expect("a project serializes")
        );
        return;
    }
    let s = &project.settings;
    println!("{} ({})", project.name, project.id);
    println!(
        "  llm cleanup {}, policy {:?}, mode {:?}, server {}",
        if s.llm_cleanup { "on" } else { "off" },
        s.failure_policy,
        s.cleanup_mode,
        match &s.server_url {
            None => "the app's".to_string(),
            Some(url) => std::iter::once(url)
                .chain(&s.upstreams)
                .map(|u| headroom_base::redact::urls(u))
                .collect::<Vec<_>>()
                .join(", "),
        }
    );
    println!("  speakers {}", s.speakers);
    println!(
        "  hear fillers {}",
        if s.hear_fillers { "on" } else { "off" }
    );
    for speaker in &project.speakers {
        println!(
            "  {} {}: {:.1} s{}",
            speaker.id,
            speaker.display_name(),
            speaker.seconds,
            speaker
                .profile
                .as_deref()
                .map(|p| format!(", voice profile {p}"))
                .unwrap_or_default()
        );
    }
    println!(
        "  {} segments, {:.1} s of audio{}",
        project.segments.len(),
        project.duration_secs,
        project
            .source_audio
            .as_deref()
            .map(|a| format!(" from {a}"))
            .unwrap_or_default()
    );
    for (i, segment) in project.segments.iter().enumerate() {
        let decision = segment
            .suggestion
            .as_ref()
            .map(|s| format!(" [{:?}: {}]", s.decision, s.text))
            .unwrap_or_default();
        let who = segment
            .speaker
            .as_deref()
            .map(|id| {
                let name = project
                    .speaker(id)
                    .map(|s| s.display_name())
                    .unwrap_or_else(|_| id.to_string());
                format!("{name}: ")
            })
            .unwrap_or_default();
        println!(
            "  {i:>3} {:>7.2}–{:<7.2} {who}{}{decision}",
            segment.start, segment.end, segment.text
        );
    }
}

pub async fn run(cmd: ProjectCommand, services: Arc<Services>) -> anyhow::Result<ExitCode> {
    let store = ProjectStore::new(services.env().projects_dir.clone());
    let config_path = services.env().config_file_to_write();
    let ws = Workstation::new(store.clone(), services, config_path);
    match cmd {
        ProjectCommand::List(output) => {
            let entries = store.list()?;
            if output.json {
                println!("{}", serde_json::to_string_pretty(&entries)?);
            } else if entries.is_empty() {
                eprintln!("no projects yet in {}", store.root().display());
            } else {
                for e in &entries {
                    match e {
                        ProjectEntry::Ok {
                            id, name, segments, ..
                        } => println!("{id}\t{name}\t{segments} segments"),
                        ProjectEntry::Unreadable { id, error } => {
                            println!("{id}\tunreadable: {error}")
                        }
                    }
                }
            }
        }
        ProjectCommand::Create { name, output } => print_project(&store.create(&name)?, output),
        ProjectCommand::Rename {
            project,
            new_name,
            output,
        } => print_project(
            &store.rename(&resolve(&store, &project)?, &new_name)?,
            output,
        ),
        ProjectCommand::Delete { project, output } => {
            let id = resolve(&store, &project)?;
            store.delete(&id)?;
            if output.json {
                println!("{}", json!({ "deleted": id }));
            } else {
                eprintln!("deleted {id}");
            }
        }
        ProjectCommand::Show { project, output } => {
            print_project(&store.open(&resolve(&store, &project)?)?, output)
        }
        ProjectCommand::Transcribe {
            project,
            file,
            model,
            speakers,
            hear_fillers,
            output,
        } => {
            let id = resolve(&store, &project)?;
            if speakers.is_some() || hear_fillers.is_some() {
                let shown = store.open(&id)?.settings;
                let settings = headroom_workstation::projects::ProjectSettings {
                    speakers: speakers.unwrap_or(shown.speakers),
                    hear_fillers: hear_fillers.unwrap_or(shown.hear_fillers),
                    ..shown.clone()
                };
                ws.update_settings(&id, settings, shown).await?;
            }
            let cancel = CancellationToken::new();
            cancel_on_ctrl_c(cancel.clone());
            let shown = Arc::new(Progress::new(format!("transcribing {}", file.display())));
            let progress = {
                let shown = shown.clone();
                Arc::new(move |fraction: f32| shown.update(fraction))
            };
            match ws
                .transcribe(&id, &file, model.as_deref(), progress, cancel)
                .await
            {
                Ok(project) => {
                    shown.finish(&format!(
                        "transcribed into {}: {} segments",
                        project.id,
                        project.segments.len()
                    ));
                    print_project(&project, output);
                }
                Err(WorkstationError::Cancelled) => {
                    shown.finish("headroom: transcription cancelled; the project is unchanged");
                    return Ok(ExitCode::from(EXIT_CANCELLED));
                }
                Err(e) => {
                    shown.finish("");
                    return Err(e.into());
                }
            }
        }
        ProjectCommand::Cleanup {
            project,
            rules_only,
            accept,
            output,
        } => return cleanup(&ws, &resolve(&store, &project)?, rules_only, accept, output).await,
        ProjectCommand::Jobs {
            project,
            resume,
            discard,
            output,
        } => {
            let id = resolve(&store, &project)?;
            if let Some(job) = discard {
                ws.discard_job(&id, &job)?;
                eprintln!("discarded {job}");
            }
            if let Some(job) = resume {
                return resume_job(&ws, &id, &job, output).await;
            }
            let jobs = ws.jobs(&id)?;
            if output.json {
                println!("{}", serde_json::to_string_pretty(&jobs)?);
            } else if jobs.is_empty() {
                eprintln!("no jobs in {id}");
            } else {
                for j in &jobs {
                    let state = match (j.running, j.paused) {
                        (true, _) => "running",
                        (false, true) => "paused",
                        (false, false) => "interrupted",
                    };
                    println!("{}\t{state}\t{}", j.id, j.description);
                }
            }
        }
        ProjectCommand::Versions {
            project,
            restore,
            output,
        } => {
            let id = resolve(&store, &project)?;
            if let Some(version) = restore {
                let project = ws.restore_version(&id, &version).await?;
                eprintln!("restored {version}: {} segments", project.segments.len());
            }
            let versions = ws.versions(&id)?;
            if output.json {
                println!("{}", serde_json::to_string_pretty(&versions)?);
            } else {
                for v in &versions {
                    println!("{}	{} segments	{}", v.id, v.segments, v.reason);
                }
            }
        }
        ProjectCommand::Settings {
            project,
            llm_cleanup,
            policy,
            mode,
            server,
            voice,
            speakers,
            hear_fillers,
            output,
        } => {
            let id = resolve(&store, &project)?;
            let shown = store.open(&id)?.settings;
            let mut settings = shown.clone();
            if let Some(on) = llm_cleanup {
                settings.llm_cleanup = on;
            }
            if let Some(policy) = policy {
                settings.failure_policy = policy;
            }
            if let Some(mode) = mode {
                settings.cleanup_mode = mode;
            }
            if let Some((first, more)) = server.split_first() {
                settings.server_url = Some(first.clone()).filter(|u| !u.trim().is_empty());
                settings.upstreams = if settings.server_url.is_some() {
                    more.to_vec()
                } else {
                    Vec::new()
                };
            }
            if let Some(voice) = voice {
                settings.voice = Some(project_voice(&ws, voice).await?);
            }
            if let Some(speakers) = speakers {
                settings.speakers = speakers;
            }
            if let Some(on) = hear_fillers {
                settings.hear_fillers = on;
            }
            let project = ws.update_settings(&id, settings, shown).await?;
            print_project(&project, output);
        }
        ProjectCommand::Speakers {
            project,
            rename,
            merge,
            attach,
            profile_from,
            profile_name,
            output,
        } => {
            let id = resolve(&store, &project)?;
            let pair = |value: &str, sep: char, what: &str| -> anyhow::Result<(String, String)> {
                let (a, b) = value
                    .split_once(sep)
                    .with_context(|| format!("--{what} takes {value:?} as ID{sep}VALUE"))?;
                Ok((a.trim().to_string(), b.trim().to_string()))
            };
            if let Some(rename) = rename {
                let (speaker, name) = pair(&rename, '=', "rename")?;
                let shown = store.open(&id)?.speakers;
                ws.rename_speaker(&id, &speaker, name, shown).await?;
            }
            if let Some(merge) = merge {
                let (from, into) = pair(&merge, ':', "merge")?;
                let shown = store.open(&id)?.speakers;
                ws.merge_speakers(&id, &from, &into, shown).await?;
            }
            if let Some(attach) = attach {
                let (speaker, profile) = pair(&attach, '=', "attach")?;
                let profile = match profile.as_str() {
                    "" => None,
                    named => Some(
                        ws.services()
                            .voice_library()
                            .open(named)
                            .map_err(anyhow::Error::from)?
                            .id,
                    ),
                };
                let shown = store.open(&id)?.speakers;
                ws.attach_speaker(&id, &speaker, profile, shown).await?;
            }
            if let Some(speaker) = profile_from {
                let cancel = CancellationToken::new();
                cancel_on_ctrl_c(cancel.clone());
                let made = ws
                    .profile_from_speaker(&id, &speaker, profile_name, cancel)
                    .await?;
                eprintln!(
                    "voice profile {} ({}) made from {} turns, {:.1} s",
                    made.voice.name,
                    made.voice.id,
                    made.segments.len(),
                    made.seconds
                );
            }
            let project = store.open(&id)?;
            if output.json {
                println!("{}", serde_json::to_string_pretty(&project.speakers)?);
            } else {
                print_project(&project, output);
            }
        }
        ProjectCommand::Split {
            project,
            segment,
            word,
            at,
            speaker,
            output,
        } => {
            let id = resolve(&store, &project)?;
            let index = segment
                .checked_sub(1)
                .context("segments are numbered from 1")?;
            let at = match (word, at) {
                (Some(w), _) => SplitAt::Word {
                    index: w.checked_sub(1).context("words are numbered from 1")?,
                },
                (None, Some(secs)) => SplitAt::Time { secs },
                (None, None) => anyhow::bail!("say where to split: --word N or --at SECONDS"),
            };
            let shown = store.open(&id)?.segment(index)?.clone();
            let project = ws.split_segment(&id, index, at, speaker, shown).await?;
            print_project(&project, output);
        }
        ProjectCommand::Speak {
            project,
            segment,
            voice,
            output,
        } => {
            let id = resolve(&store, &project)?;
            if let Some(voice) = voice {
                let chosen = project_voice(&ws, voice).await?;
                let shown = store.open(&id)?.settings;
                let mut settings = shown.clone();
                settings.voice = Some(chosen);
                ws.update_settings(&id, settings, shown).await?;
            }
            let cancel = CancellationToken::new();
            cancel_on_ctrl_c(cancel.clone());
            let segment = match segment {
                Some(0) => anyhow::bail!("segments are numbered from 1"),
                Some(n) => Some(n - 1),
                None => None,
            };
            let take = ws.synthesize(&id, segment, cancel).await?;
            if output.json {
                println!("{}", serde_json::to_string(&take)?);
            } else {
                println!(
                    "{} ({:.1} s){}",
                    take.file,
                    take.duration_secs,
                    take.voice_method
                        .as_deref()
                        .map(|m| format!(", {m}"))
                        .unwrap_or_default()
                );
                if let (Some(s), Some(d)) = (take.similarity, take.default_similarity) {
                    println!(
                        "similarity {} (default voice {})",
                        both_similarities(s, take.similarity_independent),
                        both_similarities(d, take.default_similarity_independent)
                    );
                }
            }
        }
        ProjectCommand::Edit {
            project,
            cut_fillers,
            keep_fillers,
            max_pause,
            room_tone,
            cut,
            strike,
            keep,
            clear,
            output,
        } => {
            let id = resolve(&store, &project)?;
            let opened = store.open(&id)?;
            let (name, hears_fillers) = (opened.name, opened.settings.hear_fillers);
            let change = EditChange {
                cut_fillers: if cut_fillers {
                    Some(true)
                } else {
                    keep_fillers.then_some(false)
                },
                max_pause,
                room_tone,
                cuts: cut,
                strike,
                keep,
                clear,
                from: None,
            };
            let cancel = CancellationToken::new();
            cancel_on_ctrl_c(cancel.clone());
            let summary = match ws.change_edit(&id, change, cancel).await {
                Err(WorkstationError::Cancelled) => {
                    eprintln!("headroom: edit cancelled; the project is unchanged");
                    return Ok(ExitCode::from(EXIT_CANCELLED));
                }
                other => other?,
            };
            print_edit(&name, &summary, output)?;
            if !hears_fillers && !output.json {
                eprintln!(
                    "note: Whisper leaves most fillers out of its text; to find them, transcribe with `headroom project transcribe {name:?} FILE --hear-fillers on`"
                );
            }
        }
        ProjectCommand::Export {
            project,
            format,
            edited: true,
            fps,
            out,
            output,
        } => {
            let id = resolve(&store, &project)?;
            let format: EditedFormat = format.parse().map_err(anyhow::Error::msg)?;
            let cancel = CancellationToken::new();
            cancel_on_ctrl_c(cancel.clone());
            let written = match ws.export_edited(&id, format, fps, out, cancel).await {
                Err(WorkstationError::Cancelled) => {
                    eprintln!("headroom: export cancelled; nothing was written");
                    return Ok(ExitCode::from(EXIT_CANCELLED));
                }
                other => other?,
            };
            if output.json {
                println!("{}", json!({ "written": written }));
            } else {
                println!("{}", written.display());
            }
        }
        ProjectCommand::Export {
            project,
            format,
            edited: false,
            fps: _,
            out,
            output,
        } => {
            let format: ExportFormat = format.parse().map_err(|e: String| {
                anyhow::anyhow!("{e}; audio and cut lists are exported with --edited")
            })?;
            let project = store.open(&resolve(&store, &project)?)?;
            if project.segments.is_empty() {
                anyhow::bail!("{} has no transcript to export yet", project.name);
            }
            let text = render(&project.transcript(), format);
            match &out {
                Some(path) => {
                    write_atomic(path, text.as_bytes())
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    if output.json {
                        println!("{}", json!({ "written": path }));
                    }
                }
                None => print!("{text}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Cleans each segment in turn as a job recorded in the project (one text slot at a time),
/// reporting each on stderr; a refused segment is reported and the job goes on.
async fn cleanup(
    ws: &Workstation,
    id: &str,
    rules_only: bool,
    accept: bool,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let cancel = CancellationToken::new();
    cancel_on_ctrl_c(cancel.clone());
    let result = ws
        .clean_all(id, rules_only, accept, &report_segment, &cancel)
        .await;
    cleanup_finished(id, result, output)
}

/// A finished segment of a cleanup job, on stderr.
fn report_segment(event: CleanAllEvent) {
    let CleanAllEvent::Segment { count, outcome, .. } = event else {
        return;
    };
    match outcome {
        SegmentOutcome::Cleaned {
            segment,
            suggestion,
        } => eprintln!("segment {}/{count}: {:?}", segment + 1, suggestion.source),
        SegmentOutcome::Refused { segment, rejection } => eprintln!(
            "segment {}/{count}: refused ({}): {}",
            segment + 1,
            rejection.reason.code(),
            rejection.message()
        ),
        SegmentOutcome::Skipped { segment, reason } => {
            eprintln!("segment {}/{count}: skipped: {reason}", segment + 1)
        }
    }
}

fn cleanup_finished(
    id: &str,
    result: Result<CleanupSummary, WorkstationError>,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let summary = match result {
        Ok(summary) => summary,
        Err(WorkstationError::Cancelled) => {
            eprintln!("headroom: cleanup cancelled; finished segments are kept");
            return Ok(ExitCode::from(EXIT_CANCELLED));
        }
        Err(e) => return Err(e.into()),
    };
    if output.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "project": id,
                "job": summary.job,
                "segments": summary.outcomes,
                "refused": summary.refused,
            }))?
        );
    }
    Ok(if summary.refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_REJECTED)
    })
}

/// Resumes an interrupted job, with progress on stderr.
async fn resume_job(
    ws: &Workstation,
    id: &str,
    job: &str,
    output: Output,
) -> anyhow::Result<ExitCode> {
    let cancel = CancellationToken::new();
    cancel_on_ctrl_c(cancel.clone());
    let shown = Arc::new(Progress::new(format!("resuming {job}")));
    let progress = {
        let shown = shown.clone();
        Arc::new(move |fraction: f32| shown.update(fraction))
    };
    let result = ws
        .resume_job(id, job, progress, &report_segment, cancel)
        .await;
    shown.finish("");
    match result {
        Ok(JobOutcome::Transcribed(project)) => {
            eprintln!(
                "transcribed into {}: {} segments",
                project.id,
                project.segments.len()
            );
            print_project(&project, output);
        }
        Ok(JobOutcome::Cleaned(summary)) => return cleanup_finished(id, Ok(summary), output),
        Ok(JobOutcome::Narrated(summary)) => {
            return crate::narrate::finished(ws, id, &summary, None, output.json)
        }
        Ok(JobOutcome::Synthesized(take)) => {
            if output.json {
                println!("{}", serde_json::to_string_pretty(&take)?);
            } else {
                println!("{}", take.file);
            }
        }
        Err(WorkstationError::Cancelled) => {
            eprintln!("headroom: cancelled; the job is over, what it saved is kept");
            return Ok(ExitCode::from(EXIT_CANCELLED));
        }
        Err(e) => return Err(e.into()),
    }
    Ok(ExitCode::SUCCESS)
}
