//! Narration: a project's segments cleaned up, rewritten or translated on the text lane (batch,
//! one request at a time, under the project's failure policy), spoken in the chosen voice on the
//! audio lane (batch, so interactive work goes first), each take fitted to its segment's time
//! slot, and laid out as one narration WAV (optionally mixed over the original, ducked) with
//! subtitles in the narration's language.
//!
//! The text stage and the audio stage run side by side: while segment N is spoken, segment N+1
//! is with the text model. Every finished step is saved in the project's manifest as it finishes
//! (`project.narration`), the job is recorded in the project, and a run only redoes what changed:
//! a segment whose source text, task or voice changed, one the text lane refused, one cleaned by
//! the rules because of a refusal. A crash or a cancel loses at most the segment in progress.

use crate::jobs::{JobKind, JobStop, RunningJob};
pub use crate::projects::{
    NarratedSegment, Narration, NarrationMode, NarrationOptions, NarrationOutput,
    NarrationSettings, NarrationStage, NarrationTake, SegmentRefusal, SegmentState, SpeakerVoice,
    SpeakerVoiceSource, VoiceNote,
};
use crate::projects::{Project, ProjectError, SuggestionSource, TextNote};
use crate::workstation::{
    blocking, end_job, project_file_in, stop_job, suggestion_from, WavOnDisk, Workstation,
    WorkstationError,
};
use headroom_base::clock::unix_ms;
use headroom_base::consent::RemoteConsent;
use headroom_base::language::Language;
use headroom_base::sync::{into_value, Locked};
use headroom_core::admission::Priority;
use headroom_core::cleanup::{
    clean_document, clean_offline, CleanupError, CleanupMode, CleanupRequest, FailurePolicy,
    LengthHint, TextTask,
};
use headroom_core::lanes::TextLane;
use headroom_services::speaking_voice::{is_profile_voice, profile_voice_name, SpeakingVoice};
use headroom_services::{Services, KOKORO_VOICE, NEURAL_VOICE_PREFIX};
use headroom_speech::asr::export::{render, ExportFormat};
use headroom_speech::asr::{Segment, Transcript};
use headroom_speech::audio::timeline::{
    fit_to_slot, render_mix, render_track, Ducking, FitBounds, TrackRender,
};
use headroom_speech::audio::{decode_file, wav_bytes, Audio, Decode, DecodeLimits};
use headroom_speech::tts::{join_clips, sentences, Kokoro};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The narration's sample rate: Kokoro's, and above espeak-ng's and Piper's.
const NARRATION_RATE: u32 = 24_000;
/// The pause between a take's sentences (as Kokoro and Piper leave between theirs).
const SENTENCE_PAUSE_MS: u32 = 200;
/// Attempts at a take the audio lane refused (it was full, or interactive work kept it busy).
const SPEECH_ATTEMPTS: u32 = 4;

/// What a narration reports as it goes.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum NarrationEvent {
    /// The run's plan: the segments it works on (the others are unchanged).
    Planned {
        project: String,
        segments: usize,
        to_do: Vec<usize>,
    },
    /// A segment moved on.
    Segment {
        project: String,
        index: usize,
        state: SegmentState,
        segment: Box<NarratedSegment>,
        /// Segments of this run finished so far, out of `of` (the plan's).
        done: usize,
        of: usize,
    },
    /// The narration's files are written.
    Assembled {
        project: String,
        output: NarrationOutput,
    },
}

/// A refused segment in a summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct RefusedNarration {
    pub segment: usize,
    #[serde(flatten)]
    pub refusal: SegmentRefusal,
}

/// A segment whose take did not fit its slot.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Overflowed {
    pub segment: usize,
    pub secs: f64,
    pub cut_secs: f64,
}

/// Where a run's time went. The stages overlap, so `total_secs` is below the sum of the parts
/// when the pipeline works.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct NarrationTimings {
    pub total_secs: f64,
    /// Text requests (or the rules), summed.
    pub text_secs: f64,
    /// Takes on the audio lane, waiting included, summed.
    pub speech_secs: f64,
    /// Fitting the takes to their slots, summed.
    pub fit_secs: f64,
    /// Laying out the WAV, the mix and the subtitles.
    pub assemble_secs: f64,
}

impl NarrationTimings {
    pub fn sum_of_parts(&self) -> f64 {
        self.text_secs + self.speech_secs + self.fit_secs + self.assemble_secs
    }
}

/// What a narration run did.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct NarrationSummary {
    pub job: String,
    pub settings: NarrationSettings,
    pub segments: usize,
    /// Segments with a take now.
    pub narrated: usize,
    /// Segments this run worked on; the others were unchanged since the last run.
    pub worked_on: usize,
    pub unchanged: usize,
    pub refused: Vec<RefusedNarration>,
    pub overflowed: Vec<Overflowed>,
    pub output: Option<NarrationOutput>,
    pub voice_note: Option<String>,
    pub voice_note_code: Option<VoiceNote>,
    pub timings: NarrationTimings,
}

/// A project's narration with each segment's state, as the Narration view shows it.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct NarrationView {
    pub narration: Option<Narration>,
    pub states: Vec<SegmentState>,
    /// The project's text model is on (cleanup and rewrite use it; translation needs it).
    pub llm: bool,
    /// Each speaker's voice in the next run (none when the transcript has no speakers).
    pub speakers: Vec<SpeakerVoice>,
}

/// A language narration can be translated into, as the app lists them.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct LanguageView {
    pub code: String,
    pub name: String,
}

/// Every language on offer, English first.
pub fn languages() -> Vec<LanguageView> {
    headroom_base::language::LANGUAGES
        .iter()
        .map(|l| LanguageView {
            code: l.code.to_string(),
            name: l.name.to_string(),
        })
        .collect()
}

/// What speakers' voices are chosen from (see [`voice_choices`]).
#[derive(Debug, Clone, Default)]
struct VoiceChoices {
    /// Kokoro's installed styles, sorted.
    kokoro_styles: Vec<String>,
    /// The voice profiles' ids.
    profiles: BTreeSet<String>,
}

/// espeak-ng's voice variants given to speakers in turn: clearly different voices, men's and
/// women's alternating.
const SPEAKER_VARIANTS: [&str; 10] = ["m3", "f3", "m7", "f4", "m1", "f2", "m5", "f5", "m6", "f1"];

/// `count` different voices for speakers without a chosen one, the narration's voice
/// (`base`) first: Kokoro's other styles after a Kokoro voice (in English, which they
/// speak), else espeak-ng's variants of the voice's language (the narration's language when
/// the voice is not espeak-ng's).
fn default_voices(
    base: Option<&str>,
    language: &Language,
    known: &VoiceChoices,
    count: usize,
) -> Vec<String> {
    let mut voices: Vec<String> = base.map(str::to_string).into_iter().collect();
    let is_neural = |v: &str| {
        v == KOKORO_VOICE
            || v.starts_with("kokoro-")
            || v.starts_with(NEURAL_VOICE_PREFIX)
            || is_profile_voice(v)
    };
    if language.code == "en" && base.is_some_and(|v| v == KOKORO_VOICE || v.starts_with("kokoro-"))
    {
        for style in &known.kokoro_styles {
            let voice = format!("kokoro-{style}");
            if !voices.contains(&voice) {
                voices.push(voice);
            }
        }
    }
    // espeak-ng's variants of the base voice's language (or the narration's).
    let espeak = match base {
        Some(v) if !is_neural(v) => v.split('+').next().unwrap_or(v).to_string(),
        _ => language.espeak_voice.to_string(),
    };
    for variant in SPEAKER_VARIANTS {
        let voice = format!("{espeak}+{variant}");
        if !voices.contains(&voice) {
            voices.push(voice);
        }
    }
    (0..count)
        .map(|k| voices[k % voices.len()].clone())
        .collect()
}

/// Each speaker's voice: the one chosen, else the voice profile the speaker is attached to,
/// else a default different from the other speakers' (see [`default_voices`]).
fn speaker_voices(
    project: &Project,
    settings: &NarrationSettings,
    language: &Language,
    known: &VoiceChoices,
) -> Vec<SpeakerVoice> {
    let defaults = default_voices(
        settings.voice.as_deref(),
        language,
        known,
        project.speakers.len(),
    );
    project
        .speakers
        .iter()
        .zip(defaults)
        .map(|(speaker, default)| {
            let chosen = settings
                .speaker_voices
                .get(&speaker.id)
                .filter(|v| !v.trim().is_empty());
            let profile = speaker
                .profile
                .as_ref()
                .filter(|p| known.profiles.contains(*p));
            let (voice, source) = match (chosen, profile) {
                (Some(v), _) => (v.clone(), SpeakerVoiceSource::Chosen),
                (None, Some(p)) => (profile_voice_name(p), SpeakerVoiceSource::Profile),
                (None, None) => (default, SpeakerVoiceSource::Default),
            };
            SpeakerVoice {
                speaker: speaker.id.clone(),
                name: speaker.display_name(),
                voice,
                source,
            }
        })
        .collect()
}

/// The voice each segment is spoken in: its speaker's (see [`speaker_voices`]), else the
/// narration's.
fn segment_voices(
    project: &Project,
    settings: &NarrationSettings,
    language: &Language,
    known: &VoiceChoices,
) -> Vec<Option<String>> {
    let speakers: BTreeMap<String, String> = speaker_voices(project, settings, language, known)
        .into_iter()
        .map(|v| (v.speaker, v.voice))
        .collect();
    project
        .segments
        .iter()
        .map(|s| {
            s.speaker
                .as_ref()
                .and_then(|id| speakers.get(id).cloned())
                .or_else(|| settings.voice.clone())
        })
        .collect()
}

/// The voice that speaks `language`: `voice` where it can, else espeak-ng's voice for the
/// language (Kokoro's and Piper's voices here speak English only), with a note saying so.
fn voice_for(voice: Option<&str>, language: &Language) -> (Option<String>, Option<VoiceNote>) {
    // A voice profile speaks every language (through the cloning server, else its match).
    if language.code == "en" || voice.is_some_and(is_profile_voice) {
        return (voice.map(str::to_string), None);
    }
    let speaks = |v: &str| {
        let base = v.split('+').next().unwrap_or(v);
        let code = base.split('-').next().unwrap_or(base);
        code == language.code
    };
    let in_language = Some(language.espeak_voice.to_string());
    match voice {
        Some(v) if speaks(v) => (Some(v.to_string()), None),
        Some(v) => (
            in_language,
            Some(VoiceNote::SpeaksEnglishOnly {
                voice: v.to_string(),
                language: language.code.to_string(),
                instead: language.espeak_voice.to_string(),
            }),
        ),
        None => (in_language, None),
    }
}

/// The language a project's transcript is in (Whisper's guess), English when unknown.
fn source_language(project: &Project) -> Language {
    project
        .language
        .as_deref()
        .and_then(|l| Language::find(l).ok())
        .unwrap_or_else(english)
}

fn english() -> Language {
    Language::find("en").expect("English is in the table")
}

/// One segment's text as the text stage left it.
struct TextDone {
    text: String,
    source: SuggestionSource,
    note: Option<String>,
    note_code: Option<TextNote>,
    language: Language,
}

/// What the text stage hands the audio stage.
struct SpeakOrder {
    index: usize,
    text: String,
    language: Language,
    /// The segment's voice: its speaker's, else the narration's.
    voice: Option<String>,
}

/// The run's shared state: the job record, the counts and the timings.
struct RunState {
    job: RunningJob,
    done: usize,
    to_do: usize,
    timings: NarrationTimings,
}

/// The stage runs that report through `on_event`.
type OnEvent<'a> = &'a (dyn Fn(NarrationEvent) + Send + Sync);

impl Workstation {
    /// Narrates a project end to end (see the module's documentation), as a job recorded in
    /// the project. `options` left out come from the last narration, else the project.
    pub async fn narrate(
        &self,
        project_id: &str,
        options: NarrationOptions,
        on_event: OnEvent<'_>,
        stop: impl Into<JobStop>,
    ) -> Result<NarrationSummary, WorkstationError> {
        let job = self
            .start_job(
                project_id,
                JobKind::Narrate {
                    options,
                    segment: None,
                },
            )
            .await?;
        self.run_narration(project_id, job, on_event, &stop.into())
            .await
    }

    /// The project's narration and each segment's state.
    pub fn narration(&self, project_id: &str) -> Result<NarrationView, WorkstationError> {
        let project = self.store().open(project_id)?;
        let states = project
            .narration
            .as_ref()
            .map(|n| n.segments.iter().map(NarratedSegment::state).collect())
            .unwrap_or_default();
        let speakers = match self.narration_settings(&project, &NarrationOptions::default()) {
            Ok(settings) if !project.speakers.is_empty() => {
                let language = Language::find(&settings.language).unwrap_or_else(|_| english());
                let known = voice_choices(self.services());
                speaker_voices(&project, &settings, &language, &known)
            }
            _ => Vec::new(),
        };
        Ok(NarrationView {
            narration: project.narration,
            states,
            llm: project.settings.llm_cleanup,
            speakers,
        })
    }

    /// Narrates one segment again (its text and its take), with the narration's settings, and
    /// lays out the narration's files again.
    pub async fn narrate_segment(
        &self,
        project_id: &str,
        index: usize,
        on_event: OnEvent<'_>,
        stop: impl Into<JobStop>,
    ) -> Result<NarrationSummary, WorkstationError> {
        self.open_project(project_id).await?.segment(index)?;
        let job = self
            .start_job(
                project_id,
                JobKind::Narrate {
                    options: NarrationOptions::default(),
                    segment: Some(index),
                },
            )
            .await?;
        self.run_narration(project_id, job, on_event, &stop.into())
            .await
    }

    /// The settings a run uses: `options`, else the last narration's, else the project's.
    fn narration_settings(
        &self,
        project: &Project,
        options: &NarrationOptions,
    ) -> Result<NarrationSettings, WorkstationError> {
        let last = project.narration.as_ref().map(|n| &n.settings);
        let mode = options
            .mode
            .or(last.map(|s| s.mode))
            .unwrap_or_else(|| project.settings.cleanup_mode.into());
        let source = source_language(project);
        let language = match mode {
            NarrationMode::Translate => {
                let named = options
                    .to
                    .clone()
                    .or_else(|| last.filter(|s| s.mode == mode).map(|s| s.language.clone()))
                    .ok_or(WorkstationError::NoTargetLanguage)?;
                Language::find(&named).map_err(WorkstationError::UnknownLanguage)?
            }
            _ => source,
        };
        if mode == NarrationMode::Translate && !project.settings.llm_cleanup {
            return Err(WorkstationError::TranslationNeedsModel);
        }
        Ok(NarrationSettings {
            mode,
            language: language.code.to_string(),
            voice: options
                .voice
                .clone()
                .or_else(|| last.and_then(|s| s.voice.clone()))
                .or_else(|| project.settings.voice.clone())
                .filter(|v| !v.trim().is_empty()),
            policy: options
                .policy
                .or(last.map(|s| s.policy))
                .unwrap_or(project.settings.failure_policy),
            mix: options.mix.or(last.map(|s| s.mix)).unwrap_or(false),
            llm: project.settings.llm_cleanup,
            speaker_voices: {
                let mut chosen = last.map(|s| s.speaker_voices.clone()).unwrap_or_default();
                for (speaker, voice) in options.speaker_voices.iter().flatten() {
                    match voice.trim() {
                        "" => chosen.remove(speaker),
                        voice => chosen.insert(speaker.clone(), voice.to_string()),
                    };
                }
                // Only the project's speakers (one merged away leaves no choice behind).
                chosen.retain(|id, _| project.speakers.iter().any(|s| &s.id == id));
                chosen
            },
        })
    }
}

/// What the speakers' voices are chosen from: the Kokoro styles installed and the voice
/// profiles there are (a speaker attached to a profile since deleted gets a default). Reads
/// files: called on the blocking pool.
fn voice_choices(services: &Services) -> VoiceChoices {
    let dir = &services.env().models_dir;
    let mut kokoro_styles = headroom_speech::models::locate(dir, KOKORO_VOICE)
        .ok()
        .and_then(|d| Kokoro::style_names_in(&d).ok())
        .unwrap_or_default();
    kokoro_styles.sort();
    let profiles = services
        .voice_library()
        .list()
        .map(|l| l.into_iter().map(|p| p.id).collect())
        .unwrap_or_default();
    VoiceChoices {
        kokoro_styles,
        profiles,
    }
}

impl Workstation {
    pub(crate) async fn run_narration(
        &self,
        project_id: &str,
        job: RunningJob,
        on_event: OnEvent<'_>,
        stop: &JobStop,
    ) -> Result<NarrationSummary, WorkstationError> {
        let cancel = stop.token();
        let started = Instant::now();
        let JobKind::Narrate { options, segment } = job.record().kind.clone() else {
            unreachable!("run_narration runs narration jobs")
        };
        let state = Arc::new(Mutex::new(RunState {
            job,
            done: 0,
            to_do: 0,
            timings: NarrationTimings::default(),
        }));
        let result = self
            .narration_pipeline(project_id, &options, segment, &state, on_event, cancel)
            .await;
        let RunState { job, timings, .. } =
            into_value(Arc::try_unwrap(state).ok().expect("the stages are done"));
        let job_id = job.id().to_string();
        // What was done is in the manifest. Finished, cancelled or failed: nothing to resume;
        // paused (or a crash): the record stays and a resume does the rest.
        if result.is_ok() {
            end_job(job).await;
        } else {
            stop_job(job, stop).await;
        }
        let (project, worked_on) = result?;
        let narration = project
            .narration
            .clone()
            .expect("the pipeline saved a narration");
        let mut timings = timings;
        timings.total_secs = started.elapsed().as_secs_f64();
        let refused = narration
            .segments
            .iter()
            .enumerate()
            .filter_map(|(segment, s)| {
                s.refused
                    .clone()
                    .map(|refusal| RefusedNarration { segment, refusal })
            })
            .collect();
        let overflowed = narration
            .segments
            .iter()
            .enumerate()
            .filter_map(|(segment, s)| match s.state() {
                SegmentState::Overflow { secs, cut_secs } => Some(Overflowed {
                    segment,
                    secs,
                    cut_secs,
                }),
                _ => None,
            })
            .collect();
        let summary = NarrationSummary {
            job: job_id,
            segments: narration.segments.len(),
            narrated: narration
                .segments
                .iter()
                .filter(|s| s.take.is_some())
                .count(),
            worked_on,
            unchanged: narration.segments.len() - worked_on,
            refused,
            overflowed,
            output: narration.output.clone(),
            voice_note: narration.voice_note.clone(),
            voice_note_code: narration.voice_note_code.clone(),
            settings: narration.settings,
            timings,
        };
        tracing::info!(
            project = project_id,
            narrated = summary.narrated,
            refused = summary.refused.len(),
            total_secs = summary.timings.total_secs,
            "narration finished"
        );
        Ok(summary)
    }

    /// Plans the run, runs the text and audio stages side by side, and lays out the files.
    /// Returns the project as saved and how many segments the run worked on.
    async fn narration_pipeline(
        &self,
        project_id: &str,
        options: &NarrationOptions,
        only: Option<usize>,
        state: &Arc<Mutex<RunState>>,
        on_event: OnEvent<'_>,
        cancel: &CancellationToken,
    ) -> Result<(Project, usize), WorkstationError> {
        let project = self.open_project(project_id).await?;
        if project.segments.is_empty() {
            return Err(WorkstationError::NothingToNarrate);
        }
        let settings = self.narration_settings(&project, options)?;
        let lane = if settings.llm {
            Some(self.permitted_text_lane(&project)?)
        } else {
            None
        };
        let language =
            Language::find(&settings.language).map_err(WorkstationError::UnknownLanguage)?;
        let known = {
            let services = self.services().clone();
            blocking(move || Ok(voice_choices(&services))).await?
        };
        // The manifest's narration, brought in line with the transcript and these settings.
        let task = settings.task_key();
        let plan_settings = settings.clone();
        let (project, (plan, voices)) = self
            .update_project(project_id, move |p| {
                let voices = segment_voices(p, &plan_settings, &language, &known);
                let voice_note = voices
                    .iter()
                    .collect::<BTreeSet<_>>()
                    .into_iter()
                    .find_map(|v| voice_for(v.as_deref(), &language).1);
                let mut narration = p.narration.take().unwrap_or(Narration {
                    settings: plan_settings.clone(),
                    segments: Vec::new(),
                    output: None,
                    voice_note: None,
                    voice_note_code: None,
                });
                let old = std::mem::take(&mut narration.segments);
                narration.segments = p
                    .segments
                    .iter()
                    .enumerate()
                    .map(|(i, s)| match old.get(i) {
                        Some(n) if n.start == s.start && n.end == s.end => n.clone(),
                        _ => NarratedSegment::new(s.start, s.end),
                    })
                    .collect();
                narration.settings = plan_settings.clone();
                narration.voice_note = voice_note.as_ref().map(VoiceNote::english);
                narration.voice_note_code = voice_note;
                let mut plan = Vec::new();
                for (i, (segment, narrated)) in
                    p.segments.iter().zip(&narration.segments).enumerate()
                {
                    let source = segment.speech_text().trim().to_string();
                    let forced = only == Some(i);
                    let text = forced || narrated.needs_text(&source, &task);
                    let take = text || narrated.needs_take(&voices[i]);
                    if (only.is_none() || forced) && (text || take) && !source.is_empty() {
                        plan.push((i, text));
                    }
                }
                p.narration = Some(narration);
                Ok((plan, voices))
            })
            .await?;
        let to_do: Vec<usize> = plan.iter().map(|(i, _)| *i).collect();
        state.locked().to_do = to_do.len();
        on_event(NarrationEvent::Planned {
            project: project_id.to_string(),
            segments: project.segments.len(),
            to_do: to_do.clone(),
        });
        for &(index, text) in &plan {
            if text {
                self.save_segment(
                    project_id,
                    index,
                    state,
                    on_event,
                    Some(SegmentState::Waiting),
                    |s| s.refused = None,
                )
                .await?;
            }
        }

        let (orders, incoming) = tokio::sync::mpsc::channel::<SpeakOrder>(2);
        let text_of = |index: usize, voice: Option<String>| {
            self.text_step(
                project_id,
                &project,
                lane.as_ref(),
                &settings,
                (index, voice),
                state,
                on_event,
                cancel,
            )
        };
        let text_stage = async {
            let mut deferred = Vec::new();
            for &(index, needs_text) in &plan {
                let order = if needs_text {
                    match text_of(index, voices[index].clone()).await? {
                        Some(order) => order,
                        None => {
                            deferred.push(index);
                            continue;
                        }
                    }
                } else {
                    let stored = self.open_project(project_id).await?;
                    let n = &stored.narration.as_ref().expect("planned").segments[index];
                    SpeakOrder {
                        index,
                        voice: voices[index].clone(),
                        text: n.text.clone().unwrap_or_default(),
                        language: n
                            .language
                            .as_deref()
                            .and_then(|l| Language::find(l).ok())
                            .unwrap_or(language),
                    }
                };
                if orders.send(order).await.is_err() {
                    break;
                }
            }
            // Retry policy: a segment refused in the first pass is tried once more at the end,
            // when the burst that refused it has usually passed.
            if settings.policy == FailurePolicy::Retry {
                for index in deferred {
                    if let Some(order) = text_of(index, voices[index].clone()).await? {
                        if orders.send(order).await.is_err() {
                            break;
                        }
                    }
                }
            }
            drop(orders);
            Ok::<(), WorkstationError>(())
        };
        let audio_stage = async {
            // Owned here, so an audio stage that stops (cancelled, failed) closes the channel
            // and the text stage's next send ends it too, instead of waiting for ever.
            let mut incoming = incoming;
            while let Some(order) = incoming.recv().await {
                self.speech_step(project_id, &project, order, state, on_event, cancel)
                    .await?;
            }
            Ok::<(), WorkstationError>(())
        };
        let (text, audio) = tokio::join!(text_stage, audio_stage);
        text?;
        audio?;
        if cancel.is_cancelled() {
            return Err(WorkstationError::Cancelled);
        }
        let assembling = Instant::now();
        let project = self.assemble_narration(project_id, on_event).await?;
        state.locked().timings.assemble_secs = assembling.elapsed().as_secs_f64();
        Ok((project, to_do.len()))
    }

    /// The text lane for a project's text model, refusing (visibly, in the lane's history) when
    /// any server it sends to is on another machine neither the project nor the settings allow.
    pub(crate) fn permitted_text_lane(
        &self,
        project: &Project,
    ) -> Result<TextLane, WorkstationError> {
        let urls = self.server_urls_for(project);
        Ok(self
            .services()
            .text_lane_for(&urls, &self.text_consent(project))?)
    }

    /// Saves a change to one narrated segment and reports its new state.
    async fn save_segment(
        &self,
        project_id: &str,
        index: usize,
        state: &Arc<Mutex<RunState>>,
        on_event: OnEvent<'_>,
        shown: Option<SegmentState>,
        change: impl FnOnce(&mut NarratedSegment) + Send + 'static,
    ) -> Result<NarratedSegment, WorkstationError> {
        let (_, segment) = self
            .update_project(project_id, move |p| {
                let narration = p
                    .narration
                    .as_mut()
                    .ok_or(ProjectError::NoSuchSegment { index, count: 0 })?;
                let count = narration.segments.len();
                let segment = narration
                    .segments
                    .get_mut(index)
                    .ok_or(ProjectError::NoSuchSegment { index, count })?;
                change(segment);
                Ok(segment.clone())
            })
            .await?;
        let (done, of) = {
            let s = state.locked();
            (s.done, s.to_do)
        };
        on_event(NarrationEvent::Segment {
            project: project_id.to_string(),
            index,
            state: shown.unwrap_or_else(|| segment.state()),
            segment: Box::new(segment.clone()),
            done,
            of,
        });
        Ok(segment)
    }

    /// Cleans, rewrites or translates one segment; `None` when the text lane refused it (saved
    /// and reported as refused).
    #[allow(clippy::too_many_arguments)]
    async fn text_step(
        &self,
        project_id: &str,
        project: &Project,
        lane: Option<&TextLane>,
        settings: &NarrationSettings,
        (index, voice): (usize, Option<String>),
        state: &Arc<Mutex<RunState>>,
        on_event: OnEvent<'_>,
        cancel: &CancellationToken,
    ) -> Result<Option<SpeakOrder>, WorkstationError> {
        if cancel.is_cancelled() {
            return Err(WorkstationError::Cancelled);
        }
        let segment = project.segment(index)?;
        let source = segment.speech_text().trim().to_string();
        let language =
            Language::find(&settings.language).map_err(WorkstationError::UnknownLanguage)?;
        let started = Instant::now();
        let result = match lane {
            None => Ok(rules_text(&source, settings, &language)),
            Some(lane) => {
                let task = match settings.mode {
                    NarrationMode::Cleanup => TextTask::Edit(CleanupMode::Cleanup),
                    NarrationMode::Rewrite => TextTask::Edit(CleanupMode::Rewrite),
                    NarrationMode::Translate => TextTask::Translate { to: language },
                };
                let request = CleanupRequest {
                    text: source.clone(),
                    task,
                    length_hint: Some(LengthHint::for_slot(segment.end - segment.start, &language)),
                    policy: settings.policy,
                    retry: self.config().retry()?,
                    project: Some(project.name.clone()),
                };
                // Batch work: wait for the person's audio work to end rather than be refused
                // by the text lane's yield gate (which still refuses if some starts meanwhile).
                let activity = self.services().audio_lane().activity();
                tokio::select! {
                    _ = activity.until_no_interactive() => {}
                    _ = cancel.cancelled() => return Err(WorkstationError::Cancelled),
                }
                match clean_document(lane, &request, cancel, &|_| {}).await {
                    Ok(output) => {
                        let made = suggestion_from(&output);
                        Ok(
                            if made.source == SuggestionSource::RuleBased
                                && settings.mode == NarrationMode::Translate
                            {
                                // The rules cannot translate: the segment keeps its language.
                                let why: Vec<String> =
                                    output.fallbacks().map(|r| r.message()).collect();
                                TextDone {
                                    text: clean_offline(&source).text(),
                                    source: SuggestionSource::RuleBased,
                                    note: Some(format!(
                                        "Not translated: {} The original, cleaned by the rules, \
                                         is spoken.",
                                        why.join(" ")
                                    )),
                                    note_code: Some(TextNote::NotTranslated {
                                        reasons: output.fallback_reasons(),
                                    }),
                                    language: source_language(project),
                                }
                            } else {
                                TextDone {
                                    text: made.text,
                                    source: made.source,
                                    note: made.note,
                                    note_code: made.note_code,
                                    language,
                                }
                            },
                        )
                    }
                    Err(CleanupError::Rejected { rejection, .. }) => Err(rejection),
                    Err(CleanupError::Cancelled { .. }) => return Err(WorkstationError::Cancelled),
                }
            }
        };
        state.locked().timings.text_secs += started.elapsed().as_secs_f64();
        let task = settings.task_key();
        match result {
            Ok(done) => {
                let order = SpeakOrder {
                    index,
                    voice,
                    text: done.text.clone(),
                    language: done.language,
                };
                self.save_segment(project_id, index, state, on_event, None, move |s| {
                    s.source_text = source;
                    s.task = task;
                    s.text = Some(done.text);
                    s.text_source = Some(done.source);
                    s.language = Some(done.language.code.to_string());
                    s.note = done.note;
                    s.note_code = done.note_code;
                    s.refused = None;
                })
                .await?;
                Ok(Some(order))
            }
            Err(rejection) => {
                let refusal = SegmentRefusal::rejected(NarrationStage::Text, &rejection);
                tracing::info!(project = project_id, segment = index, reason = %refusal.reason, "narration text refused");
                self.finish_segment(state).await;
                self.save_segment(project_id, index, state, on_event, None, move |s| {
                    s.source_text = source;
                    s.task = task;
                    s.refused = Some(refusal);
                })
                .await?;
                Ok(None)
            }
        }
    }

    /// Counts a segment done and saves the job's checkpoint (on the blocking pool).
    async fn finish_segment(&self, state: &Arc<Mutex<RunState>>) {
        let state = state.clone();
        let saved = blocking(move || {
            let mut state = state.locked();
            state.done += 1;
            let fraction = (state.done as f32 / state.to_do.max(1) as f32).min(1.0);
            Ok(state.job.checkpoint(|p| p.fraction = fraction)?)
        })
        .await;
        if let Err(e) = saved {
            tracing::warn!(error = %e, "a narration checkpoint was not saved");
        }
    }

    /// Speaks one segment's text (batch work on the audio lane), fits the take to its slot and
    /// saves it.
    #[allow(clippy::too_many_arguments)]
    async fn speech_step(
        &self,
        project_id: &str,
        project: &Project,
        order: SpeakOrder,
        state: &Arc<Mutex<RunState>>,
        on_event: OnEvent<'_>,
        cancel: &CancellationToken,
    ) -> Result<(), WorkstationError> {
        let index = order.index;
        let consent = project.settings.remote_consent();
        let (voice, _) = voice_for(order.voice.as_deref(), &order.language);
        let started = Instant::now();
        let spoken = match self.services().resolve_voice(voice.as_deref()).await {
            Ok(voice) => self.speak_take(&voice, &consent, &order, cancel).await,
            Err(e) => Err(e.into()),
        };
        state.locked().timings.speech_secs += started.elapsed().as_secs_f64();
        let (audio, spoken_by) = match spoken {
            Ok(done) => done,
            Err(WorkstationError::Cancelled) => return Err(WorkstationError::Cancelled),
            Err(e) => {
                let refusal = match e.rejection() {
                    Some(r) => SegmentRefusal::rejected(NarrationStage::Speech, r),
                    None => SegmentRefusal {
                        stage: NarrationStage::Speech,
                        reason: "failed".into(),
                        message: e.to_string(),
                    },
                };
                self.finish_segment(state).await;
                self.save_segment(project_id, index, state, on_event, None, move |s| {
                    s.refused = Some(refusal);
                })
                .await?;
                return Ok(());
            }
        };
        let segment = project.segment(index)?;
        let synthesized = NarratedSegment {
            text: Some(order.text.clone()),
            ..NarratedSegment::new(segment.start, segment.end)
        };
        let (done, of) = {
            let s = state.locked();
            (s.done, s.to_do)
        };
        on_event(NarrationEvent::Segment {
            project: project_id.to_string(),
            index,
            state: SegmentState::Synthesized,
            segment: Box::new(synthesized),
            done,
            of,
        });
        let slot = segment.end - segment.start;
        let room = project
            .segments
            .get(index + 1)
            .map(|next| next.start - segment.start)
            .unwrap_or(f64::INFINITY);
        let fitting = Instant::now();
        let lane = self.services().audio_lane().clone();
        let fitted = tokio::task::spawn_blocking(move || {
            lane.as_batch("narration", || {
                fit_to_slot(&audio, slot, room, FitBounds::default())
            })
        })
        .await
        .map_err(WorkstationError::TaskFailed)?;
        state.locked().timings.fit_secs += fitting.elapsed().as_secs_f64();
        let file = format!("speech/narration/segment-{}-{}.wav", index + 1, unix_ms());
        let fitted = {
            let (store, project, file) = (self.store().clone(), project.clone(), file.clone());
            blocking(move || {
                store.write_file(&project, &file, &wav_bytes(&fitted.audio))?;
                Ok(fitted)
            })
            .await?
        };
        let take = NarrationTake {
            file,
            text: order.text,
            voice: order.voice,
            spoken_by,
            natural_secs: fitted.natural_secs,
            rate: fitted.rate,
            secs: fitted.audio.duration_secs(),
            overflow_secs: fitted.overflow_secs,
            cut_secs: fitted.cut_secs,
        };
        self.finish_segment(state).await;
        let replaced = Arc::new(Mutex::new(None));
        let old = replaced.clone();
        self.save_segment(project_id, index, state, on_event, None, move |s| {
            *old.locked() = s.take.replace(take).map(|t| t.file);
            s.refused = None;
        })
        .await?;
        // The take it replaces is no longer part of the narration.
        let old = replaced.locked().take();
        if let Some(old) = old {
            let (store, id) = (self.store().clone(), project_id.to_string());
            let _ = blocking(move || {
                if let Ok(project) = store.beneath(&id) {
                    let _ = project.remove_file(&old);
                }
                Ok(())
            })
            .await;
        }
        Ok(())
    }

    /// Makes a take sentence by sentence, each sentence its own batch job on the audio lane:
    /// interactive work that arrives meanwhile waits for one sentence at most, not a segment.
    async fn speak_take(
        &self,
        voice: &SpeakingVoice,
        consent: &RemoteConsent,
        order: &SpeakOrder,
        cancel: &CancellationToken,
    ) -> Result<(Audio, String), WorkstationError> {
        let mut clips = Vec::new();
        let mut spoken_by = String::new();
        for sentence in sentences(&order.text) {
            let (clip, by) = self
                .speak_piece(voice, consent, order, sentence, cancel)
                .await?;
            clips.push(clip);
            spoken_by = by;
        }
        if clips.is_empty() {
            return Err(WorkstationError::NothingToSpeak);
        }
        Ok((join_clips(&clips, SENTENCE_PAUSE_MS), spoken_by))
    }

    /// Speaks one piece of a take, waiting and trying again when the audio lane refuses it (a
    /// narration is batch work: interactive work may keep the lane busy for a while).
    async fn speak_piece(
        &self,
        voice: &SpeakingVoice,
        consent: &RemoteConsent,
        order: &SpeakOrder,
        text: String,
        cancel: &CancellationToken,
    ) -> Result<(Audio, String), WorkstationError> {
        let mut attempt = 1;
        loop {
            let result = match voice {
                SpeakingVoice::Profile(profile) => self
                    .services()
                    .voices()
                    .with_consent(consent)
                    .speak_unscored(
                        profile,
                        text.clone(),
                        Some(order.language),
                        Priority::Normal,
                        cancel.clone(),
                    )
                    .await
                    .map(|(audio, method)| (audio, method.label()))
                    .map_err(WorkstationError::from),
                SpeakingVoice::Engine { speech, voice } => {
                    let name = voice.clone().unwrap_or_else(|| "espeak-ng en-us".into());
                    speech
                        .synthesize_at(
                            text.clone(),
                            voice.clone(),
                            Priority::Normal,
                            cancel.clone(),
                        )
                        .await
                        .map(|audio| (audio, name))
                        .map_err(WorkstationError::from)
                }
            };
            if cancel.is_cancelled() {
                return Err(WorkstationError::Cancelled);
            }
            match result {
                Err(e)
                    if attempt < SPEECH_ATTEMPTS
                        && e.rejection().is_some_and(|r| r.is_retryable()) =>
                {
                    let wait = Duration::from_millis(500 << attempt);
                    tracing::info!(
                        segment = order.index,
                        attempt,
                        "the audio lane refused a narration take; waiting"
                    );
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        _ = cancel.cancelled() => return Err(WorkstationError::Cancelled),
                    }
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// Lays out the narration WAV from the segments' takes (each at its segment's start), the
    /// mix over the original when asked, and the subtitles; saves where they are.
    async fn assemble_narration(
        &self,
        project_id: &str,
        on_event: OnEvent<'_>,
    ) -> Result<Project, WorkstationError> {
        let (store, id) = (self.store().clone(), project_id.to_string());
        // Read, checked and later written on the blocking pool.
        let (project, narration, source_audio, takes) = blocking(move || {
            let project = store.open(&id)?;
            let narration = project
                .narration
                .clone()
                .ok_or(WorkstationError::NothingToNarrate)?;
            // Every file decoded is checked to be inside the project, reached through no link.
            let source_audio = project
                .source_audio
                .as_deref()
                .map(|source| project_file_in(&store, &id, source))
                .transpose()?;
            // A refused segment keeps its earlier take on disk, but the narration leaves it
            // out: it no longer says what the segment says now.
            let takes: Vec<(f64, PathBuf)> = narration
                .segments
                .iter()
                .filter(|s| s.is_spoken())
                .filter_map(|s| s.take.as_ref().map(|t| (s.start, t.file.as_str())))
                .map(|(start, file)| Ok((start, project_file_in(&store, &id, file)?)))
                .collect::<Result<_, WorkstationError>>()?;
            Ok((project, narration, source_audio, takes))
        })
        .await?;
        let duration = project.duration_secs;
        let mix = narration.settings.mix;
        if takes.is_empty() {
            // Nothing was spoken (every segment refused): no files that would look finished.
            let (project, ()) = self
                .update_project(project_id, |p| {
                    if let Some(n) = p.narration.as_mut() {
                        n.output = None;
                    }
                    Ok(())
                })
                .await?;
            return Ok(project);
        }
        let language = narration.settings.language.clone();
        let base = format!("exports/{}-narration", project.id);
        let wav = format!("{base}.wav");
        let srt = format!("{base}.{language}.srt");
        let vtt = format!("{base}.{language}.vtt");
        let store = self.store().clone();
        let files = (wav.clone(), srt.clone(), vtt.clone());
        let lane = self.services().audio_lane().clone();
        let temp_dir = self.services().env().temp_dir.clone();
        // Decoding, laying out and mixing the takes is batch work: it gives way to the
        // person's jobs like the takes themselves. The track and the mix are written as they
        // are made, a second at a time, each take read only while it sounds.
        let (track_secs, mix_file) = blocking(move || {
            lane.as_batch("narration", move || {
                let (wav, srt, vtt) = files;
                let starts: Vec<f64> = takes.iter().map(|(start, _)| *start).collect();
                let load = |i: usize| decode_file(&takes[i].1, DecodeLimits::default());
                let placed = TrackRender::new(&starts, duration, NARRATION_RATE, load);
                let mut track = WavOnDisk::create(&temp_dir, NARRATION_RATE)?;
                let mixed = match (mix, source_audio) {
                    (true, Some(source)) => {
                        let mut mixed = WavOnDisk::create(&temp_dir, NARRATION_RATE)?;
                        render_mix(
                            placed,
                            &source,
                            &Decode::streamed(),
                            Ducking::default(),
                            &temp_dir,
                            &mut track.wav,
                            &mut mixed.wav,
                        )?;
                        Some(mixed)
                    }
                    _ => {
                        render_track(placed, &mut track.wav)?;
                        None
                    }
                };
                let track_secs = track.wav.duration_secs();
                track.into_project(&store, &project, &wav)?;
                let mix_file = match mixed {
                    Some(mixed) => {
                        let name = format!("{base}-mix.wav");
                        mixed.into_project(&store, &project, &name)?;
                        Some(name)
                    }
                    None => None,
                };
                let subtitles = narration_subtitles(&narration, track_secs);
                store.write_file(
                    &project,
                    &srt,
                    render(&subtitles, ExportFormat::Srt).as_bytes(),
                )?;
                store.write_file(
                    &project,
                    &vtt,
                    render(&subtitles, ExportFormat::Vtt).as_bytes(),
                )?;
                Ok((track_secs, mix_file))
            })
        })
        .await?;
        let output = NarrationOutput {
            wav,
            mix: mix_file,
            srt,
            vtt,
            duration_secs: track_secs,
            language,
            created_unix_ms: unix_ms(),
        };
        let stored = output.clone();
        let (project, ()) = self
            .update_project(project_id, move |p| {
                if let Some(n) = p.narration.as_mut() {
                    n.output = Some(stored);
                }
                Ok(())
            })
            .await?;
        on_event(NarrationEvent::Assembled {
            project: project_id.to_string(),
            output,
        });
        Ok(project)
    }
}

/// The rules' version of a segment (the project's LLM cleanup is off): they clean, and a rewrite
/// becomes a cleanup, said in the note. (Translation needs the model; it is refused earlier.)
fn rules_text(source: &str, settings: &NarrationSettings, language: &Language) -> TextDone {
    TextDone {
        text: clean_offline(source).text(),
        source: SuggestionSource::RuleBased,
        note: (settings.mode == NarrationMode::Rewrite).then(|| {
            "LLM cleanup is off for this project: the rules cleaned the text instead of rewriting it"
                .to_string()
        }),
        note_code: (settings.mode == NarrationMode::Rewrite)
            .then_some(TextNote::RulesInsteadOfRewrite),
        language: *language,
    }
}

/// Subtitles of the narration: one cue per spoken segment, from its start for as long as its
/// take sounds (never into the next cue).
fn narration_subtitles(narration: &Narration, duration: f64) -> Transcript {
    let spoken: Vec<&NarratedSegment> = narration
        .segments
        .iter()
        .filter(|s| s.is_spoken())
        .collect();
    let segments = spoken
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let take = s.take.as_ref().expect("filtered");
            let next = spoken.get(i + 1).map(|n| n.start).unwrap_or(f64::INFINITY);
            Segment {
                speaker: None,
                start: s.start,
                end: (s.start + take.secs.max(0.3)).min(next),
                text: s.text.clone().expect("filtered"),
                words: Vec::new(),
            }
        })
        .collect();
    Transcript {
        speakers: Vec::new(),
        language: Some(narration.settings.language.clone()),
        duration,
        segments,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spanish() -> Language {
        Language::find("es").unwrap()
    }

    #[test]
    fn a_voice_that_speaks_english_only_gives_way_to_espeak_in_another_language() {
        let (voice, note) = voice_for(Some("kokoro-jf_alpha"), &spanish());
        assert_eq!(voice.as_deref(), Some("es"));
        assert!(note.unwrap().english().contains("espeak-ng's es voice"));
        let (voice, note) = voice_for(Some("es+m3"), &spanish());
        assert_eq!(voice.as_deref(), Some("es+m3"));
        assert!(note.is_none());
        let (voice, note) = voice_for(None, &english());
        assert!(voice.is_none() && note.is_none());
        let (voice, note) = voice_for(Some("profile:ada"), &spanish());
        assert_eq!(voice.as_deref(), Some("profile:ada"));
        assert!(note.is_none());
    }

    fn settings(mode: NarrationMode, llm: bool) -> NarrationSettings {
        NarrationSettings {
            mode,
            language: "es".into(),
            voice: None,
            policy: FailurePolicy::Reject,
            mix: false,
            llm,
            speaker_voices: BTreeMap::new(),
        }
    }

    #[test]
    fn each_speaker_gets_a_voice_of_its_own_unless_one_is_chosen_or_attached() {
        let mut project: Project = serde_json::from_value(serde_json::json!({
            "format": 1, "id": "talk", "name": "Talk", "created_unix_ms": 0, "modified_unix_ms": 0,
            "speakers": [{"id": "S1"}, {"id": "S2", "name": "Grace"}, {"id": "S3", "profile": "ada"}],
            "segments": [
                {"start": 0.0, "end": 1.0, "text": "a", "speaker": "S1"},
                {"start": 1.0, "end": 2.0, "text": "b", "speaker": "S2"},
                {"start": 2.0, "end": 3.0, "text": "c"},
                {"start": 3.0, "end": 4.0, "text": "d", "speaker": "S3"}
            ]
        }))
        .unwrap();
        let mut known = VoiceChoices::default();
        let mut settings = settings(NarrationMode::Cleanup, false);
        settings.language = "en".into();
        let voices = segment_voices(&project, &settings, &english(), &known);
        assert_eq!(
            voices,
            [
                Some("en-us+m3".to_string()),
                Some("en-us+f3".into()),
                None,
                Some("en-us+m7".into())
            ],
            "distinct defaults; a deleted profile is not used; no speaker: the narration's"
        );
        known.profiles.insert("ada".into());
        settings.voice = Some("kokoro-jf_alpha".into());
        known.kokoro_styles = vec!["jf_alpha".into(), "jm_kumo".into()];
        settings.speaker_voices.insert("S2".into(), "en-gb".into());
        let view = speaker_voices(&project, &settings, &english(), &known);
        let shown: Vec<_> = view.iter().map(|v| (v.voice.as_str(), v.source)).collect();
        assert_eq!(
            shown,
            [
                ("kokoro-jf_alpha", SpeakerVoiceSource::Default),
                ("en-gb", SpeakerVoiceSource::Chosen),
                ("profile:ada", SpeakerVoiceSource::Profile)
            ]
        );
        assert_eq!(view[1].name, "Grace");
        // In Spanish, espeak-ng's Spanish voice in different variants.
        project.speakers.truncate(2);
        settings.voice = None;
        settings.speaker_voices.clear();
        let voices: Vec<_> = speaker_voices(&project, &settings, &spanish(), &known)
            .into_iter()
            .map(|v| v.voice)
            .collect();
        assert_eq!(voices, ["es+m3", "es+f3"]);
        assert_eq!(
            default_voices(Some("kokoro-jf_alpha"), &english(), &known, 3),
            ["kokoro-jf_alpha", "kokoro-jm_kumo", "en-us+m3"]
        );
    }

    #[test]
    fn only_changed_refused_or_fallen_back_segments_are_done_again() {
        let task = settings(NarrationMode::Translate, true).task_key();
        assert_eq!(task, "translate:es");
        assert_eq!(
            settings(NarrationMode::Cleanup, false).task_key(),
            "rules:cleanup"
        );
        let mut s = NarratedSegment::new(0.0, 2.0);
        assert!(s.needs_text("hola", &task), "new");
        s.source_text = "hello".into();
        s.task = task.clone();
        s.text = Some("hola".into());
        s.text_source = Some(SuggestionSource::Llm);
        assert!(!s.needs_text("hello", &task));
        assert!(s.needs_text("hello there", &task), "its source changed");
        assert!(s.needs_text("hello", "translate:fr"), "its task changed");
        s.text_source = Some(SuggestionSource::RuleBased);
        s.note = Some("Not translated: the text lane was full.".into());
        assert!(
            s.needs_text("hello", &task),
            "the rules stood in for the model"
        );
        s.text_source = Some(SuggestionSource::Llm);
        s.note = None;
        s.refused = Some(SegmentRefusal {
            stage: NarrationStage::Text,
            reason: "text_lane_full".into(),
            message: "full".into(),
        });
        assert!(s.needs_text("hello", &task), "refused");
        assert!(
            matches!(s.state(), SegmentState::TextRefused { reason, .. } if reason == "text_lane_full")
        );
        s.refused = None;
        assert_eq!(s.state(), SegmentState::TextDone);
        assert!(s.needs_take(&None));
        s.take = Some(NarrationTake {
            file: "speech/narration/segment-1.wav".into(),
            text: "hola".into(),
            voice: None,
            spoken_by: "es".into(),
            natural_secs: 2.4,
            rate: 1.2,
            secs: 2.0,
            overflow_secs: 0.0,
            cut_secs: 0.0,
        });
        assert_eq!(s.state(), SegmentState::Fitted);
        assert!(!s.needs_take(&None));
        assert!(s.needs_take(&Some("es+f2".into())), "another voice");
        s.take.as_mut().unwrap().overflow_secs = 0.4;
        assert!(matches!(s.state(), SegmentState::Overflow { secs, .. } if secs == 0.4));
    }

    #[test]
    fn subtitles_follow_the_takes_and_never_overlap() {
        let mut narration = Narration {
            settings: settings(NarrationMode::Translate, true),
            segments: vec![
                NarratedSegment::new(0.5, 2.0),
                NarratedSegment::new(2.2, 4.0),
                NarratedSegment::new(4.5, 6.0),
            ],
            output: None,
            voice_note: None,
            voice_note_code: None,
        };
        for (i, secs) in [(0usize, 1.9), (2, 1.0)] {
            let s = &mut narration.segments[i];
            s.text = Some(format!("texto {i}"));
            s.take = Some(NarrationTake {
                file: String::new(),
                text: format!("texto {i}"),
                voice: None,
                spoken_by: String::new(),
                natural_secs: secs,
                rate: 1.0,
                secs,
                overflow_secs: 0.0,
                cut_secs: 0.0,
            });
        }
        let subs = narration_subtitles(&narration, 6.0);
        assert_eq!(subs.segments.len(), 2, "the refused segment has no cue");
        assert_eq!((subs.segments[0].start, subs.segments[0].end), (0.5, 2.4));
        assert_eq!(subs.segments[1].text, "texto 2");
        assert_eq!(subs.language.as_deref(), Some("es"));
    }
}
