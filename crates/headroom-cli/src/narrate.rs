//! `headroom narrate PROJECT`: a project narrated end to end (see
//! `headroom_workstation::narration`), with each segment's progress on stderr and a summary on
//! stdout (`--json`: segments done, refused by reason, overflowed, the files and the timings).

use crate::progress::Progress;
use crate::project_lookup::{project_voice, resolve};
use crate::{cancel_on_ctrl_c, EXIT_CANCELLED, EXIT_REJECTED};
use anyhow::Context;
use clap::Args;
use headroom_core::cleanup::FailurePolicy;
use headroom_services::Services;
use headroom_workstation::narration::{
    NarrationEvent, NarrationMode, NarrationOptions, NarrationSummary, SegmentState,
};
use headroom_workstation::projects::ProjectStore;
use headroom_workstation::workstation::{SaveDestination, Workstation, WorkstationError};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

#[derive(Args, Debug)]
pub struct NarrateArgs {
    /// The project's id or name.
    project: String,
    /// What the text model does first: cleanup, rewrite or translate (default: the last
    /// narration's, else the project's cleanup mode).
    #[arg(long)]
    mode: Option<NarrationMode>,
    /// The language to translate into, with --mode translate: a code (es) or a name (Spanish).
    #[arg(long)]
    to: Option<String>,
    /// The voice: a voice profile by name, kokoro-<style>, piper-joe or an espeak-ng voice
    /// (default: the last narration's, else the project's).
    #[arg(long)]
    voice: Option<String>,
    /// A speaker's voice, as --voice names voices: `S2=en-gb` (repeat for each speaker;
    /// `S2=` gives back their default: their voice profile, else a voice of their own).
    #[arg(long = "speaker-voice", value_name = "ID=VOICE")]
    speaker_voices: Vec<String>,
    /// When the text lane refuses a segment: reject (flag it), fallback (the rules' cleanup) or
    /// retry (bounded) (default: the project's).
    #[arg(long)]
    policy: Option<FailurePolicy>,
    /// Also mix the narration over the original audio, the original ducked under it.
    #[arg(long)]
    mix: bool,
    /// Narrate only this segment again (numbered from 1), then lay out the files again.
    #[arg(long)]
    segment: Option<usize>,
    /// Also copy the narration's files into this folder.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// `ID=VOICE` pairs as the narration takes them (a voice profile's name becomes its voice).
async fn speaker_voices(
    ws: &Workstation,
    pairs: Vec<String>,
) -> anyhow::Result<Option<BTreeMap<String, String>>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut voices = BTreeMap::new();
    for pair in pairs {
        let (speaker, voice) = pair
            .split_once('=')
            .with_context(|| format!("--speaker-voice takes {pair:?} as ID=VOICE"))?;
        let voice = match voice.trim() {
            "" => String::new(),
            v => project_voice(ws, v.to_string()).await?,
        };
        voices.insert(speaker.trim().to_string(), voice);
    }
    Ok(Some(voices))
}

/// A segment's new state as one line.
fn describe(index: usize, state: &SegmentState) -> Option<String> {
    let n = index + 1;
    Some(match state {
        SegmentState::Waiting => return None,
        SegmentState::TextRefused { reason, message } => {
            format!("segment {n}: text refused ({reason}): {message}")
        }
        SegmentState::TextDone => format!("segment {n}: text done"),
        SegmentState::SpeechRefused { reason, message } => {
            format!("segment {n}: speech refused ({reason}): {message}")
        }
        SegmentState::Synthesized => return None,
        SegmentState::Fitted => format!("segment {n}: fitted"),
        SegmentState::Overflow { secs, cut_secs } if *cut_secs > 0.0 => format!(
            "segment {n}: overflows its slot by {secs:.2} s ({cut_secs:.2} s cut where the next segment starts)"
        ),
        SegmentState::Overflow { secs, .. } => {
            format!("segment {n}: overflows its slot by {secs:.2} s, into the pause after it")
        }
    })
}

pub async fn run(args: NarrateArgs, services: Arc<Services>) -> anyhow::Result<ExitCode> {
    let store = ProjectStore::new(services.env().projects_dir.clone());
    let config_path = services.env().config_file_to_write();
    let ws = Workstation::new(store.clone(), services, config_path);
    let id = resolve(&store, &args.project)?;
    let options = NarrationOptions {
        mode: args
            .mode
            .or(args.to.is_some().then_some(NarrationMode::Translate)),
        to: args.to,
        voice: match args.voice {
            Some(v) => Some(project_voice(&ws, v).await?),
            None => None,
        },
        policy: args.policy,
        mix: args.mix.then_some(true),
        speaker_voices: speaker_voices(&ws, args.speaker_voices).await?,
    };
    let cancel = CancellationToken::new();
    cancel_on_ctrl_c(cancel.clone());
    let shown = Arc::new(Progress::new(format!("narrating {id}")));
    let progress = shown.clone();
    let on_event = move |event: NarrationEvent| match event {
        NarrationEvent::Planned {
            segments, to_do, ..
        } => progress.finish(&format!(
            "{} of {segments} segments to narrate ({} unchanged)",
            to_do.len(),
            segments - to_do.len()
        )),
        NarrationEvent::Segment {
            index,
            state,
            done,
            of,
            ..
        } => {
            if let Some(line) = describe(index, &state) {
                progress.finish(&line);
            }
            progress.update(done as f32 / of.max(1) as f32);
        }
        NarrationEvent::Assembled { .. } => {}
    };
    let result = match args.segment {
        Some(0) => anyhow::bail!("segments are numbered from 1"),
        Some(n) => {
            if options != NarrationOptions::default() {
                anyhow::bail!(
                    "--segment narrates one segment again with the narration's settings: leave \
                     out --mode, --to, --voice, --policy and --mix, or narrate the whole project"
                );
            }
            ws.narrate_segment(&id, n - 1, &on_event, &cancel).await
        }
        None => ws.narrate(&id, options, &on_event, &cancel).await,
    };
    shown.finish("");
    match result {
        Ok(summary) => finished(&ws, &id, &summary, args.out.as_deref(), args.json),
        Err(WorkstationError::Cancelled) => {
            eprintln!(
                "headroom: narration cancelled; the segments finished are kept in the project"
            );
            Ok(ExitCode::from(EXIT_CANCELLED))
        }
        Err(e) => Err(e.into()),
    }
}

/// A finished narration's files (the narration, its subtitles, the mix when made): in the
/// project, or copied into `out` when given.
pub fn narration_files(
    ws: &Workstation,
    id: &str,
    summary: &NarrationSummary,
    out: Option<&Path>,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    if let Some(output) = &summary.output {
        let relative: Vec<&String> = [&output.wav, &output.srt, &output.vtt]
            .into_iter()
            .chain(output.mix.as_ref())
            .collect();
        for file in relative {
            let path = match out {
                Some(dir) => {
                    std::fs::create_dir_all(dir)?;
                    let name = Path::new(file).file_name().expect("a file name");
                    ws.save_copy(id, file, &SaveDestination::Chosen(dir.join(name)))?
                }
                None => ws.project_file(id, file)?,
            };
            files.push(path);
        }
    }
    Ok(files)
}

/// Reports a finished narration (copying its files into `out` when asked); refused segments
/// make the exit status 3.
pub fn finished(
    ws: &Workstation,
    id: &str,
    summary: &NarrationSummary,
    out: Option<&Path>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let files = narration_files(ws, id, summary, out)?;
    let mut by_reason: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &summary.refused {
        *by_reason.entry(r.refusal.reason.as_str()).or_default() += 1;
    }
    let t = &summary.timings;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "project": id,
                "summary": summary,
                "refused_by_reason": by_reason,
                "sum_of_parts_secs": t.sum_of_parts(),
                "files": files,
            }))?
        );
    } else {
        println!(
            "{} of {} segments narrated in {} ({} redone, {} unchanged)",
            summary.narrated,
            summary.segments,
            summary.settings.language,
            summary.worked_on,
            summary.unchanged
        );
        for (reason, count) in &by_reason {
            println!("  {count} refused: {reason}");
        }
        for o in &summary.overflowed {
            println!("  segment {} overflows by {:.2} s", o.segment + 1, o.secs);
        }
        if let Some(note) = &summary.voice_note {
            println!("  {note}");
        }
        println!(
            "  {:.1} s in all (text {:.1} s, speech {:.1} s, fitting {:.1} s, files {:.1} s, side by side)",
            t.total_secs, t.text_secs, t.speech_secs, t.fit_secs, t.assemble_secs
        );
        for f in &files {
            println!("{}", f.display());
        }
    }
    Ok(if summary.refused.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_REJECTED)
    })
}
