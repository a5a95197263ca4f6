//! `headroom mcp`: a Model Context Protocol server on standard input and output, with the
//! official Rust SDK (`rmcp`), so agents can transcribe, speak, list voices and work on the
//! app's projects. Every tool runs through the process's `Services`: the same audio and text
//! lanes, admission and models as the app and the other commands. An agent's work is batch
//! priority unless a call asks for `interactive`; a call that carries a progress token gets
//! progress notifications, and a call the client cancels cancels its job.
//!
//! Standard output is the protocol's channel and nothing else may write to it: the protocol
//! gets its own handle on it, and the process's file descriptor 1 is pointed at standard error,
//! so a stray print anywhere (a library, a native engine) lands in the log, not in the stream.

mod stdio;

use crate::project_lookup::{project_voice, resolve};
use clap::Args;
use headroom_base::fsutil::{write_atomic, write_atomic_new};
use headroom_core::admission::Priority;
use headroom_core::cleanup::FailurePolicy;
use headroom_services::speaking_voice::SpeakingVoice;
use headroom_services::speech::{
    check_speech_input, AudioInput, SpeakerRequest, SpeechError, Transcription,
};
use headroom_services::Services;
use headroom_speech::asr::diarize::SpeakerCount;
use headroom_speech::asr::export::{render, ExportFormat};
use headroom_speech::asr::{AsrError, TranscribeOptions};
use headroom_speech::audio::{encode, Audio, SpeechFormat};
use headroom_speech::models::DEFAULT_MODEL;
use headroom_workstation::editing::{EditChange, TimeSpan};
use headroom_workstation::narration::{NarrationEvent, NarrationMode, NarrationOptions};
use headroom_workstation::projects::ProjectStore;
use headroom_workstation::workstation::{
    CleanAllEvent, SegmentOutcome, Workstation, WorkstationError,
};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, RoleServer, ServerHandler, ServiceExt};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use tokio::sync::mpsc;

#[derive(Args, Debug)]
pub struct McpArgs {}

pub async fn run(_args: McpArgs, services: Arc<Services>) -> anyhow::Result<ExitCode> {
    let output = protocol_output()?;
    let server = HeadroomMcp::new(services);
    tracing::info!("headroom mcp: serving the Model Context Protocol on stdio");
    let transport = stdio::BoundedStdio::new(tokio::io::BufReader::new(tokio::io::stdin()), output);
    let running = server
        .serve(transport)
        .await
        .map_err(|e| anyhow::anyhow!("the MCP session did not start: {e}"))?;
    running.waiting().await?;
    Ok(ExitCode::SUCCESS)
}

/// The protocol's own handle on standard output; descriptor 1 then points at standard error.
#[cfg(unix)]
fn protocol_output() -> anyhow::Result<tokio::fs::File> {
    use std::os::fd::AsFd;
    // A duplicate (close-on-exec, so no helper program inherits the channel).
    let channel = std::io::stdout().as_fd().try_clone_to_owned()?;
    // SAFETY: dup2 on two descriptors the process owns for its whole life; it only makes 1 a
    // copy of 2. Nothing has been written to standard output yet, so no buffered bytes are lost.
    if unsafe { libc::dup2(2, 1) } < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(tokio::fs::File::from_std(std::fs::File::from(channel)))
}

#[cfg(not(unix))]
fn protocol_output() -> anyhow::Result<tokio::io::Stdout> {
    Ok(tokio::io::stdout())
}

/// The server: the process's services and the projects' workstation over them.
#[derive(Clone)]
pub struct HeadroomMcp {
    services: Arc<Services>,
    workstation: Arc<Workstation>,
}

impl HeadroomMcp {
    pub fn new(services: Arc<Services>) -> Self {
        let store = ProjectStore::new(services.env().projects_dir.clone());
        let config_path = services.env().config_file_to_write();
        let workstation = Workstation::new(store, services.clone(), config_path);
        HeadroomMcp {
            services,
            workstation,
        }
    }

    fn store(&self) -> &ProjectStore {
        self.workstation.store()
    }
}

/// Whose work a call is: batch (an agent's, by default) or interactive (a person waits on it).
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CallPriority {
    /// Waits behind interactive work on the audio lane (the default for an agent).
    #[default]
    Batch,
    /// Someone is waiting on the result right now.
    Interactive,
}

impl From<CallPriority> for Priority {
    fn from(p: CallPriority) -> Priority {
        match p {
            CallPriority::Batch => Priority::Normal,
            CallPriority::Interactive => Priority::Interactive,
        }
    }
}

/// A transcript's format.
#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TranscriptFormat {
    /// Plain text (speakers named when found).
    #[default]
    Txt,
    /// SubRip subtitles.
    Srt,
    /// WebVTT subtitles.
    Vtt,
    /// Segments with times (and speakers) as JSON.
    Json,
}

impl From<TranscriptFormat> for ExportFormat {
    fn from(f: TranscriptFormat) -> ExportFormat {
        match f {
            TranscriptFormat::Txt => ExportFormat::Txt,
            TranscriptFormat::Srt => ExportFormat::Srt,
            TranscriptFormat::Vtt => ExportFormat::Vtt,
            TranscriptFormat::Json => ExportFormat::Json,
        }
    }
}

/// `"auto"` or a number of speakers.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Speakers {
    Count(u32),
    Named(String),
}

impl Speakers {
    fn count(&self) -> Result<SpeakerCount, String> {
        match self {
            Speakers::Count(n) => n.to_string().parse(),
            Speakers::Named(s) => s.parse(),
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TranscribeParams {
    /// The audio file on this machine (WAV, MP3, FLAC, OGG Vorbis or Opus, AAC/M4A, or a video: MP4, MOV, MKV, WebM).
    pub path: String,
    /// A language code (en, de, ...) for multilingual models; detected when not given.
    #[serde(default)]
    pub language: Option<String>,
    /// Who spoke when: "auto" estimates how many speakers, a number (1 to 10) finds exactly
    /// that many. Not given: no speakers.
    #[serde(default)]
    pub speakers: Option<Speakers>,
    /// txt (the default), srt, vtt or json.
    #[serde(default)]
    pub format: Option<TranscriptFormat>,
    /// The speech model (see `headroom models list`); whisper-tiny.en when not given.
    #[serde(default)]
    pub model: Option<String>,
    /// batch (the default) or interactive.
    #[serde(default)]
    pub priority: Option<CallPriority>,
    /// Write the fillers ("um", "uh") Whisper hears but leaves out of its text (each window
    /// read twice: about half as long again). Off when not given.
    #[serde(default)]
    pub hear_fillers: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SpeakParams {
    /// The text to speak: at most 4096 characters.
    pub text: String,
    /// Where to write the audio: a new file on this machine (written atomically), inside the
    /// client's roots when it declares any. Its extension is the format's (.mp3, .opus or
    /// .ogg, .flac, .wav, .pcm or .raw).
    pub output: String,
    /// Replace the file at output when there is one (only a regular file is ever replaced).
    #[serde(default)]
    pub overwrite: bool,
    /// A voice from list_voices: a voice profile's name, kokoro[-STYLE], piper-joe, an
    /// espeak-ng voice (en-us, de, ...) or one of OpenAI's names (alloy, ...). The default
    /// voice when not given.
    #[serde(default)]
    pub voice: Option<String>,
    /// mp3, opus, flac, wav or pcm (24 kHz 16-bit little-endian, no header); from the
    /// output's extension when not given.
    #[serde(default)]
    pub format: Option<String>,
    /// batch (the default) or interactive.
    #[serde(default)]
    pub priority: Option<CallPriority>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ProjectTranscriptParams {
    /// The project's id or name (see list_projects).
    pub project: String,
    /// txt (the default), srt, vtt or json. Accepted cleanups are included.
    #[serde(default)]
    pub format: Option<TranscriptFormat>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct CleanupProjectParams {
    /// The project's id or name (see list_projects).
    pub project: String,
    /// Rule-based cleanup only: nothing leaves the machine, whatever the project's settings.
    #[serde(default)]
    pub rules_only: bool,
    /// Accept every suggestion made (otherwise they wait for review in the app).
    #[serde(default)]
    pub accept: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct NarrateProjectParams {
    /// The project's id or name (see list_projects).
    pub project: String,
    /// What the text model does first: cleanup, rewrite or translate (default: the last
    /// narration's, else the project's cleanup mode).
    #[serde(default)]
    pub mode: Option<String>,
    /// The language to translate into (a code such as es, or a name such as Spanish); implies
    /// mode translate.
    #[serde(default)]
    pub to: Option<String>,
    /// The voice, as speak takes it (default: the last narration's, else the project's).
    #[serde(default)]
    pub voice: Option<String>,
    /// When the text lane refuses a segment: reject (flag it), fallback (the rules' cleanup)
    /// or retry (default: the project's).
    #[serde(default)]
    pub policy: Option<String>,
    /// Also mix the narration over the original audio.
    #[serde(default)]
    pub mix: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct EditProjectParams {
    /// The project's id or name (see list_projects).
    pub project: String,
    /// Cut every filler, repeat and false start the cleanup rules find (true), or stop
    /// cutting them (false).
    #[serde(default)]
    pub cut_fillers: Option<bool>,
    /// Shorten pauses longer than this many seconds to it (0.05 to 60); 0 stops shortening.
    #[serde(default)]
    pub max_pause: Option<f64>,
    /// Shortened pauses sound as the recording's room tone instead of their own audio.
    #[serde(default)]
    pub room_tone: Option<bool>,
    /// Passages to cut, each START-END in seconds ("12.30-14.85").
    #[serde(default)]
    pub cut: Vec<String>,
    /// Words to cut, by id (SEGMENT:WORD, from 1, as this tool's fillers list them) or run
    /// (FIRST-LAST).
    #[serde(default)]
    pub strike: Vec<String>,
    /// Words to keep whatever else would cut them, by id or run.
    #[serde(default)]
    pub keep: Vec<String>,
    /// Start again from the whole recording (alone: remove the edit).
    #[serde(default)]
    pub clear: bool,
}

/// A tool's failure, as the client sees it (a tool error whose text is this message).
type ToolResult = Result<CallToolResult, String>;

fn structured(value: serde_json::Value) -> ToolResult {
    Ok(CallToolResult::structured(value))
}

/// The file at `path` as given (the user's own agent on their machine), or why it is not one.
fn existing_file(path: &str) -> Result<PathBuf, String> {
    let file = PathBuf::from(path);
    match std::fs::metadata(&file) {
        Ok(m) if m.is_file() => Ok(file),
        Ok(m) if m.is_dir() => Err(format!("{path} is a folder, not a file")),
        Ok(_) => Err(format!("{path} is not a regular file")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("there is no file {path}"))
        }
        Err(e) => Err(format!("cannot read {path}: {e}")),
    }
}

/// Progress notifications for one call, when the client sent a progress token: fractions
/// from the job's thread go through a channel to a task that notifies the client, once per
/// whole percent (steps, such as segments, once each). [`Progress::finish`] waits until every notification before it is sent, so
/// they all arrive before the call's result (even if the job still holds a sender).
struct Progress {
    sender: Option<mpsc::UnboundedSender<Update>>,
    forwarder: Option<tokio::task::JoinHandle<()>>,
}

/// A percentage (and a message), or the end of the call.
type Update = Option<(f64, Option<String>)>;

impl Progress {
    fn new(context: &RequestContext<RoleServer>) -> Progress {
        let Some(token) = context.meta.get_progress_token() else {
            return Progress {
                sender: None,
                forwarder: None,
            };
        };
        let (sender, mut received) = mpsc::unbounded_channel::<Update>();
        let peer = context.peer.clone();
        let forwarder = tokio::spawn(async move {
            let mut last = -1.0;
            while let Some(Some((percent, message))) = received.recv().await {
                // Progress only ever increases, as the protocol asks.
                if percent <= last {
                    continue;
                }
                last = percent;
                let _ = peer
                    .notify_progress(notification(&token, percent, message))
                    .await;
            }
        });
        Progress {
            sender: Some(sender),
            forwarder: Some(forwarder),
        }
    }

    /// A sender of fractions (0.0..=1.0) for a job's progress callback.
    fn fractions(&self) -> Arc<dyn Fn(f32) + Send + Sync> {
        let sender = self.sender.clone();
        Arc::new(move |fraction: f32| {
            if let Some(s) = &sender {
                let percent = (fraction.clamp(0.0, 1.0) * 100.0).floor() as f64;
                let _ = s.send(Some((percent, None)));
            }
        })
    }

    /// Progress as `done` of `of` steps, with a message.
    fn step(&self, done: usize, of: usize, message: String) {
        if let Some(s) = &self.sender {
            let percent = 100.0 * done as f64 / of.max(1) as f64;
            let _ = s.send(Some((percent, Some(message))));
        }
    }

    /// Sends what is queued, then stops.
    async fn finish(mut self) {
        if let Some(s) = self.sender.take() {
            let _ = s.send(None);
        }
        if let Some(forwarder) = self.forwarder.take() {
            let _ = forwarder.await;
        }
    }
}

fn notification(
    token: &ProgressToken,
    percent: f64,
    message: Option<String>,
) -> ProgressNotificationParam {
    let n = ProgressNotificationParam::new(token.clone(), percent).with_total(100.0);
    match message {
        Some(m) => n.with_message(m),
        None => n,
    }
}

/// A call the client cancelled (its job stopped): logged, and the message for its result.
fn cancelled(tool: &str) -> String {
    tracing::info!("{tool}: cancelled by the client");
    match tool {
        "cleanup_project" | "narrate_project" => {
            "cancelled; the segments finished are kept in the project".into()
        }
        _ => "cancelled; nothing was written".into(),
    }
}

#[tool_router]
impl HeadroomMcp {
    /// Transcribes an audio file with the embedded Whisper engine on the audio lane and returns
    /// the transcript (txt, srt, vtt or json); optionally finds who spoke when.
    #[tool]
    async fn transcribe(
        &self,
        Parameters(p): Parameters<TranscribeParams>,
        context: RequestContext<RoleServer>,
    ) -> ToolResult {
        let file = existing_file(&p.path)?;
        let speakers = match &p.speakers {
            Some(s) => Some(SpeakerRequest::new(s.count()?)),
            None => None,
        };
        let input = AudioInput::from_file(&file).map_err(|e| e.to_string())?;
        let options = TranscribeOptions {
            language: p.language.clone(),
            hear_fillers: p.hear_fillers,
            ..TranscribeOptions::default()
        };
        let model = p.model.as_deref().unwrap_or(DEFAULT_MODEL);
        let progress = Progress::new(&context);
        let job = Transcription {
            speakers,
            priority: p.priority.unwrap_or_default().into(),
            progress: progress.fractions(),
            ..Transcription::new(input, model, options)
        };
        let result = self
            .services
            .speech()
            .transcribe_with(job, context.ct.clone())
            .await;
        progress.finish().await;
        let transcript = match result {
            Ok(done) => done.transcript,
            // Stopped mid-way, or while it waited for the lane.
            Err(SpeechError::Asr(AsrError::Cancelled)) => return Err(cancelled("transcribe")),
            Err(_) if context.ct.is_cancelled() => return Err(cancelled("transcribe")),
            Err(e) => return Err(e.to_string()),
        };
        let text = render(&transcript, p.format.unwrap_or_default().into());
        Ok(CallToolResult::success(vec![
            rmcp::model::ContentBlock::text(text),
        ]))
    }

    /// Speaks text to an audio file (mp3, opus, flac, wav or pcm) in a voice from list_voices,
    /// on the audio lane; returns the file's path and the speech's duration.
    #[tool]
    async fn speak(
        &self,
        Parameters(p): Parameters<SpeakParams>,
        context: RequestContext<RoleServer>,
    ) -> ToolResult {
        if p.text.trim().is_empty() {
            return Err("there is no text to speak".into());
        }
        check_speech_input(&p.text).map_err(|e| e.to_string())?;
        let output = PathBuf::from(&p.output);
        let format = speech_format(p.format.as_deref(), &output)?;
        // Checked before any work: an agent may be steered by what it reads, so it writes
        // nowhere its client did not open to it, and replaces nothing it was not told to.
        let roots = client_roots(&context).await?;
        output_allowed(&output, p.overwrite, roots.as_deref())?;
        let priority: Priority = p.priority.unwrap_or_default().into();
        let cancel = context.ct.clone();
        let voice = self
            .services
            .resolve_voice(p.voice.as_deref())
            .await
            .map_err(|e| e.to_string())?;
        let spoken = match voice {
            // A voice profile: cloned through the configured server, else its voice match.
            SpeakingVoice::Profile(profile) => self
                .services
                .voices()
                .speak_unscored(&profile, p.text, None, priority, cancel.clone())
                .await
                .map(|(audio, _)| audio)
                .map_err(|e| e.to_string()),
            SpeakingVoice::Engine { speech, voice } => speech
                .synthesize_at(p.text, voice, priority, cancel.clone())
                .await
                .map_err(|e| e.to_string()),
        };
        if cancel.is_cancelled() {
            return Err(cancelled("speak"));
        }
        let audio = spoken?;
        let duration = audio.duration_secs();
        write_speech(audio, format, output.clone(), p.overwrite).await?;
        structured(json!({
            "path": output,
            "format": format.name(),
            "duration_secs": duration,
        }))
    }

    /// Lists every voice speak and narrate_project take: voice profiles, Kokoro's and Piper's
    /// voices when installed, espeak-ng's; with language, engine, licence and kind (stock,
    /// clone or approximate match).
    #[tool]
    async fn list_voices(&self) -> ToolResult {
        let services = self.services.clone();
        let voices = tokio::task::spawn_blocking(move || services.voice_catalog())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        structured(json!({ "voices": voices }))
    }

    /// Lists the app's projects, newest first: id, name, segments.
    #[tool]
    async fn list_projects(&self) -> ToolResult {
        let store = self.store().clone();
        let entries = tokio::task::spawn_blocking(move || store.list())
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        structured(json!({ "projects": entries }))
    }

    /// A project's transcript (accepted cleanups included) as txt, srt, vtt or json.
    #[tool]
    async fn project_transcript(
        &self,
        Parameters(p): Parameters<ProjectTranscriptParams>,
    ) -> ToolResult {
        let store = self.store().clone();
        let project = tokio::task::spawn_blocking(move || {
            let id = resolve(&store, &p.project)?;
            anyhow::Ok(store.open(&id)?)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("{e:#}"))?;
        if project.segments.is_empty() {
            return Err(format!("{} has no transcript yet", project.name));
        }
        let text = render(&project.transcript(), p.format.unwrap_or_default().into());
        Ok(CallToolResult::success(vec![
            rmcp::model::ContentBlock::text(text),
        ]))
    }

    /// Cleans every segment of a project as its settings say (the text model when its LLM
    /// cleanup is on, else the rules), as a job recorded in the project; suggestions wait for
    /// review unless accept. Returns each segment's outcome; refused segments are listed.
    #[tool]
    async fn cleanup_project(
        &self,
        Parameters(p): Parameters<CleanupProjectParams>,
        context: RequestContext<RoleServer>,
    ) -> ToolResult {
        let id = resolve(self.store(), &p.project).map_err(|e| format!("{e:#}"))?;
        let progress = Progress::new(&context);
        let on_event = |event: CleanAllEvent| {
            if let CleanAllEvent::Segment { count, outcome, .. } = event {
                let done = match &outcome {
                    SegmentOutcome::Cleaned { segment, .. }
                    | SegmentOutcome::Refused { segment, .. }
                    | SegmentOutcome::Skipped { segment, .. } => *segment + 1,
                };
                progress.step(done, count, format!("segment {done} of {count}"));
            }
        };
        let result = self
            .workstation
            .clean_all(&id, p.rules_only, p.accept, &on_event, &context.ct)
            .await;
        progress.finish().await;
        match result {
            Ok(summary) => structured(json!({
                "project": id,
                "job": summary.job,
                "segments": summary.outcomes,
                "refused": summary.refused,
            })),
            Err(WorkstationError::Cancelled) => Err(cancelled("cleanup_project")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Narrates a project end to end: each segment cleaned, rewritten or translated on the
    /// text lane, spoken in the chosen voice and fitted to its time; writes the narration WAV
    /// (and a mix over the original when asked) with subtitles. Returns the summary and files.
    #[tool]
    async fn narrate_project(
        &self,
        Parameters(p): Parameters<NarrateProjectParams>,
        context: RequestContext<RoleServer>,
    ) -> ToolResult {
        let id = resolve(self.store(), &p.project).map_err(|e| format!("{e:#}"))?;
        let mode = match p.mode.as_deref() {
            Some(m) => Some(m.parse::<NarrationMode>()?),
            None => p.to.is_some().then_some(NarrationMode::Translate),
        };
        let policy = match p.policy.as_deref() {
            Some(s) => Some(s.parse::<FailurePolicy>()?),
            None => None,
        };
        let ws = &self.workstation;
        let voice = match p.voice {
            Some(v) => Some(project_voice(ws, v).await.map_err(|e| format!("{e:#}"))?),
            None => None,
        };
        let options = NarrationOptions {
            mode,
            to: p.to,
            voice,
            policy,
            mix: p.mix.then_some(true),
            speaker_voices: None,
        };
        let progress = Progress::new(&context);
        let on_event = |event: NarrationEvent| {
            if let NarrationEvent::Segment {
                index, done, of, ..
            } = event
            {
                progress.step(done, of, format!("segment {}", index + 1));
            }
        };
        let result = ws.narrate(&id, options, &on_event, &context.ct).await;
        progress.finish().await;
        let summary = match result {
            Ok(summary) => summary,
            Err(WorkstationError::Cancelled) => return Err(cancelled("narrate_project")),
            Err(e) => return Err(e.to_string()),
        };
        let files = crate::narrate::narration_files(ws, &id, &summary, None)
            .map_err(|e| format!("{e:#}"))?;
        structured(json!({
            "project": id,
            "summary": summary,
            "files": files,
        }))
    }

    /// Edits a project's recording by its words, non-destructively: cut the fillers the
    /// cleanup rules find, struck words and passages, shorten long pauses. With no change
    /// asked, shows the edit. Returns the edit (the stretches of the original kept), the
    /// fillers found (each with its id and whether it is cut) and the lengths before and after.
    #[tool]
    async fn edit_project(
        &self,
        Parameters(p): Parameters<EditProjectParams>,
        context: RequestContext<RoleServer>,
    ) -> ToolResult {
        let id = resolve(self.store(), &p.project).map_err(|e| format!("{e:#}"))?;
        let cuts = p
            .cut
            .iter()
            .map(|c| c.parse::<TimeSpan>())
            .collect::<Result<Vec<_>, _>>()?;
        let change = EditChange {
            cut_fillers: p.cut_fillers,
            max_pause: p.max_pause,
            room_tone: p.room_tone,
            cuts,
            strike: p.strike,
            keep: p.keep,
            clear: p.clear,
            from: None,
        };
        match self
            .workstation
            .change_edit(&id, change, context.ct.clone())
            .await
        {
            Ok(summary) => structured(json!({ "project": id, "edit": summary })),
            Err(WorkstationError::Cancelled) => Err(cancelled("edit_project")),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[tool_handler(
    name = "headroom",
    instructions = "Headroom, the local voice workstation: transcribe audio files, speak text \
                    to files, list voices, and read, clean up, narrate or edit (cut fillers, \
                    words and pauses from the recording) the app's projects. \
                    Work runs on the machine's shared audio and text lanes; it is batch \
                    priority unless a call sets priority to interactive."
)]
impl ServerHandler for HeadroomMcp {}

/// The format to write: the one asked for, else the one the output's extension names; the
/// extension must be the format's, so a `.aac` file never holds WAV bytes.
fn speech_format(asked: Option<&str>, output: &Path) -> Result<SpeechFormat, String> {
    let extension = output
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let named = extension.as_deref().and_then(format_of_extension);
    let format = match asked {
        Some(name) => name.parse::<SpeechFormat>().map_err(|e| {
            format!(
                "format {:?} is not one of {}",
                e.given,
                SpeechFormat::available_list()
            )
        })?,
        None => match (&extension, named) {
            (_, Some(format)) => format,
            (Some(ext), None) => {
                return Err(format!(
                    "the output's extension .{ext} is no format speak writes: give output a \
                     name ending in .mp3, .opus, .flac, .wav or .pcm, or say format"
                ))
            }
            (None, None) => {
                return Err(
                    "the output has no extension: end it in .mp3, .opus, .flac, .wav or .pcm, \
                     or say format"
                        .into(),
                )
            }
        },
    };
    if let Some(reason) = format.unavailable() {
        return Err(format!("{format} is not available: {reason}"));
    }
    if let Some(ext) = &extension {
        if named != Some(format) {
            return Err(format!(
                "the output ends in .{ext} but the format is {format}: name it .{} or ask for \
                 the format its extension names",
                format.name()
            ));
        }
    }
    Ok(format)
}

/// The format a file extension names (`ogg` for Opus in Ogg, `raw` for headerless PCM).
fn format_of_extension(extension: &str) -> Option<SpeechFormat> {
    match extension {
        "ogg" => Some(SpeechFormat::Opus),
        "raw" => Some(SpeechFormat::Pcm),
        other => other.parse::<SpeechFormat>().ok(),
    }
}

/// The client's roots as folders, when it declares the roots capability (`None` when it does
/// not: then any path the user can write is allowed, as for the CLI). Roots are deprecated by
/// SEP-2577 in the SDK, but clients in use today declare them, and they are the user's word on
/// where an agent may write.
#[allow(deprecated)]
async fn client_roots(
    context: &RequestContext<RoleServer>,
) -> Result<Option<Vec<PathBuf>>, String> {
    let declares = context
        .peer
        .peer_info()
        .is_some_and(|info| info.capabilities.roots.is_some());
    if !declares {
        return Ok(None);
    }
    let listed = context
        .peer
        .list_roots()
        .await
        .map_err(|e| format!("the client declares roots but did not list them: {e}"))?;
    Ok(Some(
        listed
            .roots
            .iter()
            .filter_map(|root| url::Url::parse(&root.uri).ok()?.to_file_path().ok())
            .collect(),
    ))
}

/// Whether speak may write `output`: inside one of `roots` when there are any (a root whose
/// URI is not a local path allows nothing), never through a link, onto an existing file only
/// with `overwrite`, and never onto anything but a regular file.
fn output_allowed(output: &Path, overwrite: bool, roots: Option<&[PathBuf]>) -> Result<(), String> {
    let shown = output.display();
    let Some(name) = output.file_name() else {
        return Err(format!("{shown} names no file"));
    };
    let parent = match output.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => parent.to_path_buf(),
        None => PathBuf::from("."),
    };
    let folder = parent
        .canonicalize()
        .map_err(|e| format!("cannot write {shown}: its folder {}: {e}", parent.display()))?;
    if let Some(roots) = roots {
        let inside = roots
            .iter()
            .filter_map(|root| root.canonicalize().ok())
            .any(|root| folder.starts_with(&root));
        if !inside {
            return Err(format!(
                "{shown} is outside the roots this client opened to Headroom"
            ));
        }
    }
    match std::fs::symlink_metadata(folder.join(name)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot write {shown}: {e}")),
        Ok(meta) if meta.file_type().is_symlink() => Err(format!(
            "{shown} is a symbolic link: speak never writes through one"
        )),
        Ok(meta) if meta.is_dir() => Err(format!("{shown} is a folder: give a file to write")),
        Ok(meta) if !meta.is_file() => Err(format!(
            "{shown} is not a regular file (a device, pipe or socket): speak writes only files"
        )),
        Ok(_) if !overwrite => Err(format!(
            "{shown} exists: say overwrite: true to replace it, or give a new name"
        )),
        Ok(_) => Ok(()),
    }
}

/// Encodes `audio` and writes it to `output` atomically, off the async threads: as a new file
/// (refused if one appeared meanwhile) unless `overwrite`.
async fn write_speech(
    audio: Audio,
    format: SpeechFormat,
    output: PathBuf,
    overwrite: bool,
) -> Result<(), String> {
    tokio::task::spawn_blocking(move || {
        let bytes = encode(&audio, format).map_err(|e| e.to_string())?;
        let written = if overwrite {
            write_atomic(&output, &bytes)
        } else {
            write_atomic_new(&output, &bytes)
        };
        written.map_err(|e| format!("cannot write {}: {e}", output.display()))
    })
    .await
    .map_err(|e| e.to_string())?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speech_format_is_the_one_asked_or_the_extensions_and_they_must_agree() {
        let format = |asked: Option<&str>, out: &str| speech_format(asked, Path::new(out));
        assert_eq!(format(None, "/tmp/a.mp3").unwrap(), SpeechFormat::Mp3);
        assert_eq!(format(None, "/tmp/a.OGG").unwrap(), SpeechFormat::Opus);
        assert_eq!(
            format(Some("flac"), "/tmp/a.flac").unwrap(),
            SpeechFormat::Flac
        );
        assert_eq!(
            format(Some("pcm"), "/tmp/a.raw").unwrap(),
            SpeechFormat::Pcm
        );
        // `.aac` wrote WAV bytes.
        let e = format(None, "/tmp/a.aac").unwrap_err();
        assert!(e.starts_with("aac is not available: "), "{e}");
        let e = format(Some("wav"), "/tmp/a.aac").unwrap_err();
        assert!(e.contains("ends in .aac but the format is wav"), "{e}");
        let e = format(Some("flac"), "/tmp/a.mp3").unwrap_err();
        assert!(e.contains("ends in .mp3 but the format is flac"), "{e}");
        let e = format(None, "/tmp/a.audio").unwrap_err();
        assert!(e.contains(".audio is no format"), "{e}");
        assert!(format(None, "/tmp/bashrc").is_err());
        assert_eq!(
            format(Some("wav"), "/tmp/bashrc").unwrap(),
            SpeechFormat::Wav
        );
        let e = format(Some("ogg"), "/tmp/a.mp3").unwrap_err();
        assert_eq!(
            e,
            "format \"ogg\" is not one of mp3, opus, flac, wav or pcm"
        );
    }

    #[test]
    fn speak_replaces_only_a_regular_file_it_was_told_to_and_stays_in_the_roots() {
        let dir = tempfile::tempdir().unwrap();
        let inside = dir.path().join("inside");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let new = inside.join("new.wav");
        assert!(output_allowed(&new, false, None).is_ok());
        let existing = inside.join("rc.wav");
        std::fs::write(&existing, b"keep me").unwrap();
        let e = output_allowed(&existing, false, None).unwrap_err();
        assert!(e.contains("overwrite: true"), "{e}");
        assert!(output_allowed(&existing, true, None).is_ok());
        // Never a device, a pipe or a link, whatever overwrite says.
        let e = output_allowed(Path::new("/dev/null"), true, None).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let fifo = inside.join("pipe.wav");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert!(output_allowed(&fifo, true, None)
            .unwrap_err()
            .contains("not a regular file"));
        let link = inside.join("link.wav");
        std::os::unix::fs::symlink(outside.join("victim"), &link).unwrap();
        assert!(output_allowed(&link, true, None)
            .unwrap_err()
            .contains("symbolic link"));
        assert!(output_allowed(&inside, true, None)
            .unwrap_err()
            .contains("folder"));
        // Inside the declared roots only (a path with `..` is judged by where it leads).
        let roots = [inside.clone()];
        assert!(output_allowed(&new, false, Some(&roots)).is_ok());
        let escape = inside.join("../outside/x.wav");
        let e = output_allowed(&escape, false, Some(&roots)).unwrap_err();
        assert!(e.contains("outside the roots"), "{e}");
        assert!(
            output_allowed(&new, false, Some(&[])).is_err(),
            "no root allows nothing"
        );
        // Written as a new file: one that appeared since is not replaced.
        write_atomic_new(&new, b"one").unwrap();
        assert!(write_atomic_new(&new, b"two").is_err());
        assert_eq!(std::fs::read(&new).unwrap(), b"one");
    }

    #[test]
    fn a_path_that_is_not_a_file_is_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().to_str().unwrap().to_string();
        assert_eq!(
            existing_file(&folder).unwrap_err(),
            format!("{folder} is a folder, not a file")
        );
        let missing = dir.path().join("none.wav");
        let missing = missing.to_str().unwrap();
        assert_eq!(
            existing_file(missing).unwrap_err(),
            format!("there is no file {missing}")
        );
        let file = dir.path().join("a.wav");
        std::fs::write(&file, b"RIFF").unwrap();
        assert_eq!(existing_file(file.to_str().unwrap()).unwrap(), file);
    }

    #[test]
    fn speakers_are_auto_or_a_count_and_priority_batch_unless_asked() {
        assert!(matches!(
            Speakers::Named("auto".into()).count(),
            Ok(SpeakerCount::Auto)
        ));
        assert!(matches!(
            Speakers::Count(2).count(),
            Ok(SpeakerCount::Exactly(2))
        ));
        assert!(Speakers::Count(0).count().is_err());
        assert!(Speakers::Named("many".into()).count().is_err());
        let p: Priority = CallPriority::default().into();
        assert_eq!(p, Priority::Normal);
        let p: Priority = CallPriority::Interactive.into();
        assert_eq!(p, Priority::Interactive);
    }
}
