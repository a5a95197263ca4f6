//! Voice workflows, each a job on the audio lane: add a reference clip (decode, check,
//! transcribe, embed), score a take against a voice, search for an approximate voice match,
//! and speak text as a voice — cloned through the user's server when one is configured, else
//! with the match. Every take is scored: its similarity to the voice, beside the default
//! voice's similarity for the same text, each by two embedders: the one the match searched
//! against, and an independent one (Resemblyzer's) the search never used, when it is installed.

use crate::speech::{AudioInput, SpeechError};
use crate::voices::{LibraryError, VoiceMatch, VoiceProfile};
use crate::{Services, ServicesError};
use headroom_base::clock::unix_ms;
use headroom_base::consent::RemoteConsent;
use headroom_base::language::Language;
use headroom_base::sync::Locked;
use headroom_core::admission::{Priority, Rejection};
use headroom_core::config::CloningSettings;
use headroom_speech::asr::{word_error_rate, TranscribeOptions, Transcriber};
use headroom_speech::audio::{Audio, Decode, DecodeLimits};
use headroom_speech::cloning::{CloningError, CloningKind, CloningServer, Health, Reference};
use headroom_speech::models::{self, DEFAULT_MODEL};
use headroom_speech::tts::{Espeak, Style, Synthesizer, DEFAULT_STYLE};
use headroom_speech::voice::matching::{
    match_espeak, match_style, EspeakSetting, Judge, MatchProgress, MatchSettings, Score,
    StyleVoice, HELD_OUT_SENTENCES,
};
use headroom_speech::voice::{
    check_clip, ClipReport, Embedding, IndependentEmbedder, SpeakerEmbedder, VoiceError,
};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Why a voice workflow failed.
#[derive(Debug, thiserror::Error)]
pub enum VoiceWorkError {
    #[error(transparent)]
    Library(#[from] LibraryError),
    #[error(transparent)]
    Voice(#[from] VoiceError),
    #[error(transparent)]
    Services(#[from] ServicesError),
    #[error(transparent)]
    Speech(#[from] SpeechError),
    #[error(transparent)]
    Cloning(#[from] CloningError),
    #[error("the clip was not added: {}", .0.findings.iter().filter(|f| f.severity == headroom_speech::voice::Severity::Refused).map(|f| f.advice.as_str()).collect::<Vec<_>>().join("; "))]
    ClipRefused(Box<ClipReport>),
    #[error("voice {0:?} has no reference clips yet; add one with `headroom voice add`")]
    NoClips(String),
    #[error("voice {0:?} has no voice match yet and no cloning server is configured: find a match first (Find voice match in the Voices view, or `headroom voice match {0}`), or set a cloning server (cloning.url)")]
    NoMatch(String),
    #[error("no cloning server is configured (set cloning.url, e.g. http://127.0.0.1:4123)")]
    NoCloningServer,
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// The work's thread stopped before it answered (the runtime shutting down).
    #[error("the voice work stopped before it finished")]
    Stopped,
}

impl From<headroom_speech::tts::TtsError> for VoiceWorkError {
    fn from(e: headroom_speech::tts::TtsError) -> Self {
        VoiceWorkError::Voice(VoiceError::Tts(e))
    }
}

/// How a take was made.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TakeMethod {
    /// Cloned by the user's server.
    Clone { server: String },
    /// Kokoro with the style the voice match found: "voice match (approximate)".
    VoiceMatch,
    /// espeak-ng with the matched variant and pitch.
    EspeakMatch { voice: String, pitch: u32 },
}

impl TakeMethod {
    /// How the method is named to people: a match is never called a clone.
    pub fn label(&self) -> String {
        match self {
            TakeMethod::Clone { server } => format!("cloned by {server}"),
            TakeMethod::VoiceMatch => "voice match (approximate)".into(),
            TakeMethod::EspeakMatch { voice, pitch } => {
                format!("voice match (approximate, espeak-ng {voice} pitch {pitch})")
            }
        }
    }
}

/// How close a take is to a voice, beside the default voice for the same text: by the
/// embedder the voice match searched against, and by the independent one (Resemblyzer's),
/// `None` when that is not installed ([`INDEPENDENT_HINT`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Closeness {
    pub similarity: f32,
    pub default_similarity: f32,
    pub similarity_independent: Option<f32>,
    pub default_similarity_independent: Option<f32>,
}

/// What to do when the independent judge's scores are missing.
pub const INDEPENDENT_HINT: &str =
    "no independent score: install Resemblyzer's embedder with `headroom models install resemblyzer`";

/// A similarity as people see it: by the search's embedder, then by the independent one,
/// e.g. `0.820 (search's embedder) · 0.710 (independent: Resemblyzer)`.
pub fn both_similarities(search: f32, independent: Option<f32>) -> String {
    match independent {
        Some(i) => format!("{search:.3} (search's embedder) · {i:.3} (independent: Resemblyzer)"),
        None => format!("{search:.3} (search's embedder) · independent: not installed"),
    }
}

/// The independent judge of one voice: Resemblyzer's embedder and the voice's reference clips
/// as it hears them. It never guides a search; it only scores what was made.
pub struct IndependentJudge {
    embedder: Arc<IndependentEmbedder>,
    target: Embedding,
}

impl IndependentJudge {
    /// The judge for a voice whose reference clips are the files `clips`; `None` (logged with
    /// the hint) when the model is not installed or no clip can be embedded: a missing second
    /// opinion never fails the work it would have scored.
    pub fn for_clips(services: &Services, clips: &[PathBuf]) -> Option<IndependentJudge> {
        let embedder = match services.independent_embedder() {
            Ok(embedder) => embedder,
            Err(e) => {
                tracing::info!(error = %e, "{INDEPENDENT_HINT}");
                return None;
            }
        };
        let mut embeddings = Vec::new();
        for path in clips {
            let embedded = headroom_speech::audio::decode_file(path, DecodeLimits::default())
                .map_err(VoiceError::from)
                .and_then(|audio| embedder.embed(&audio));
            match embedded {
                Ok(e) => embeddings.push(e),
                Err(e) => {
                    tracing::warn!(clip = %path.display(), error = %e, "the independent embedder skipped a clip")
                }
            }
        }
        Some(IndependentJudge {
            target: Embedding::mean(&embeddings)?,
            embedder,
        })
    }

    /// The takes' mean embedding's cosine to the voice; `None` (logged) if embedding failed.
    pub fn similarity(&self, takes: &[Audio]) -> Option<f32> {
        let mut embeddings = Vec::with_capacity(takes.len());
        for take in takes {
            match self.embedder.embed(take) {
                Ok(e) => embeddings.push(e),
                Err(e) => {
                    tracing::warn!(error = %e, "the independent embedder could not score a take");
                    return None;
                }
            }
        }
        Embedding::mean(&embeddings).map(|e| e.similarity(&self.target))
    }
}

/// A take in a voice.
#[derive(Debug, Clone)]
pub struct VoiceTake {
    pub audio: Audio,
    pub method: TakeMethod,
    pub closeness: Closeness,
}

/// The default voice a take is compared with: Kokoro's default style where it is installed,
/// else espeak-ng's en-us.
pub fn default_voice_name(services: &Services) -> String {
    if models::locate(&services.env().models_dir, "kokoro").is_ok() {
        format!("kokoro-{DEFAULT_STYLE}")
    } else {
        "espeak-ng en-us".into()
    }
}

fn default_voice_take(services: &Services, text: &str) -> Result<Audio, VoiceWorkError> {
    let cancel = CancellationToken::new();
    if models::locate(&services.env().models_dir, "kokoro").is_ok() {
        let kokoro = services.kokoro()?;
        Ok(kokoro.speak(text, &Style::shipped(DEFAULT_STYLE), 1.0, &cancel)?)
    } else {
        Ok(Espeak::new(services.env().espeak.clone())
            .with_temp_dir(services.env().temp_dir.clone())
            .synthesize(text, Some("en-us"), &cancel)
            .map_err(VoiceError::from)?)
    }
}

/// The audio lane, entered from a blocking thread once per take of a long search.
struct LaneSlots {
    /// What the jobs are, in metrics and the lanes panel.
    job: &'static str,
    lane: headroom_core::lanes::AudioLane,
    runtime: tokio::runtime::Handle,
    cancel: CancellationToken,
    /// The lane's refusal that stopped the search, kept typed for the caller.
    refused: std::sync::Mutex<Option<Rejection>>,
}

impl LaneSlots {
    /// Runs `work` as a batch job on the audio lane and waits for it (from a blocking thread).
    fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> Result<T, VoiceError> + Send + 'static,
    ) -> Result<T, VoiceError> {
        let job = self
            .lane
            .run(self.job, Priority::Normal, self.cancel.clone(), move |_| {
                work()
            });
        match self.runtime.block_on(job) {
            Ok(result) => result,
            Err(rejection) => {
                let message = rejection.to_string();
                *self.refused.locked() = Some(rejection);
                Err(VoiceError::Search(message))
            }
        }
    }
}

/// Kokoro whose takes are audio lane jobs.
struct LaneKokoro {
    kokoro: Arc<headroom_speech::tts::Kokoro>,
    slots: Arc<LaneSlots>,
}

impl StyleVoice for LaneKokoro {
    fn shipped_styles(&self) -> Vec<String> {
        self.kokoro.shipped_styles()
    }

    fn style_spread(&self) -> Vec<f32> {
        self.kokoro.style_spread()
    }

    fn speak(&self, text: &str, style: &Style) -> Result<Audio, VoiceError> {
        let (kokoro, text, style) = (self.kokoro.clone(), text.to_string(), style.clone());
        self.slots
            .run(move || StyleVoice::speak(&*kokoro, &text, &style))
    }
}

/// The embedder and the embedded Whisper, judging takes for a match (transcriptions as lane
/// jobs when `slots` is set).
struct TakeJudge {
    embedder: Arc<SpeakerEmbedder>,
    transcriber: Arc<dyn Transcriber>,
    slots: Option<Arc<LaneSlots>>,
    /// Scores the outcome only; the search never asks it.
    independent: Option<IndependentJudge>,
}

impl Judge for TakeJudge {
    fn embed(&self, take: &Audio) -> Result<Embedding, VoiceError> {
        self.embedder.embed(take)
    }

    fn independent_similarity(&self, takes: &[Audio]) -> Option<f32> {
        self.independent.as_ref()?.similarity(takes)
    }

    fn word_error_rate(&self, take: &Audio, text: &str) -> Result<f64, VoiceError> {
        let audio = take.to_16k()?;
        let transcriber = self.transcriber.clone();
        let transcribe = move || {
            transcriber
                .transcribe(
                    &audio.samples,
                    &TranscribeOptions::in_language(Some("en".into())),
                    &|_| {},
                    &CancellationToken::new(),
                )
                .map_err(|e| VoiceError::Asr(e.to_string()))
        };
        let transcript = match &self.slots {
            Some(slots) => slots.run(transcribe)?,
            None => transcribe()?,
        };
        Ok(word_error_rate(text, &transcript.text()))
    }
}

/// Decodes `input` at its own rate (a reference clip is kept as it was recorded).
fn decode_as_recorded(
    input: &AudioInput,
    cancel: &CancellationToken,
) -> Result<Audio, SpeechError> {
    let decode = Decode {
        limits: DecodeLimits::default(),
        to_rate: None,
        cancel: cancel.clone(),
    };
    Ok(input.decode(&decode)?)
}

/// espeak-ng with a matched variant's pitch.
fn espeak_for(services: &Services, setting: &EspeakSetting) -> Espeak {
    let mut espeak =
        Espeak::new(services.env().espeak.clone()).with_temp_dir(services.env().temp_dir.clone());
    espeak.pitch = setting.pitch;
    espeak
}

/// The voice workflows over the process's services and voice library.
#[derive(Clone)]
pub struct Voices {
    services: Arc<Services>,
    /// Servers off this machine allowed beyond the settings' `privacy.allow_remote` (a
    /// project's own consent).
    consent: RemoteConsent,
}

impl Voices {
    pub fn new(services: Arc<Services>) -> Voices {
        Voices {
            services,
            consent: RemoteConsent::none(),
        }
    }

    /// These voice workflows, also allowed to send to what `consent` allows (a project's).
    pub fn with_consent(mut self, consent: &RemoteConsent) -> Voices {
        self.consent = self.consent.and(consent);
        self
    }

    pub fn library(&self) -> &crate::voices::VoiceLibrary {
        self.services.voice_library()
    }

    /// The files of a voice's reference clips (the independent judge's target).
    fn clip_files(&self, profile: &VoiceProfile) -> Vec<PathBuf> {
        profile
            .clips
            .iter()
            .map(|clip| self.library().clip_path(profile, clip))
            .collect()
    }

    /// A voice and its embedding (the target of every score), or why it has none.
    fn voice_with_target(&self, voice: &str) -> Result<(VoiceProfile, Embedding), VoiceWorkError> {
        let profile = self.library().open(voice)?;
        let target = target_of(&profile)?;
        Ok((profile, target))
    }

    async fn on_lane<T: Send + 'static>(
        &self,
        job_name: &'static str,
        priority: Priority,
        cancel: CancellationToken,
        job: impl FnOnce(&Services, &CancellationToken) -> Result<T, VoiceWorkError> + Send + 'static,
    ) -> Result<T, VoiceWorkError> {
        let services = self.services.clone();
        self.services
            .audio_lane()
            .run(job_name, priority, cancel, move |cancel| {
                job(&services, cancel)
            })
            .await?
    }

    /// Decodes, checks, transcribes (unless `transcript` is given and where the default Whisper
    /// model is installed) and embeds a reference clip, and adds it to the voice. A clip the
    /// checks refuse is not added: the error carries the report with its advice.
    pub async fn add_clip(
        &self,
        voice: &str,
        input: AudioInput,
        transcript: Option<String>,
        cancel: CancellationToken,
    ) -> Result<(VoiceProfile, ClipReport), VoiceWorkError> {
        let id = self.library().open(voice)?.id;
        self.on_lane(
            "voice clip",
            Priority::Interactive,
            cancel,
            move |services, cancel| {
                let audio = decode_as_recorded(&input, cancel)?;
                let report = check_clip(&audio);
                if !report.accepted() {
                    return Err(VoiceWorkError::ClipRefused(Box::new(report)));
                }
                let embedding = services.embedder()?.embed(&audio)?;
                let transcript = match transcript {
                    Some(t) => Some(t),
                    None => transcribe_clip(services, &audio, cancel),
                };
                let profile = services.voice_library().add_clip(
                    &id,
                    &audio,
                    report.clone(),
                    transcript,
                    embedding,
                )?;
                Ok((profile, report))
            },
        )
        .await
    }

    /// How close the audio in `input` is to the voice, beside the default voice speaking the
    /// held-out sentences.
    pub async fn score(
        &self,
        voice: &str,
        input: AudioInput,
        cancel: CancellationToken,
    ) -> Result<Closeness, VoiceWorkError> {
        let (profile, target) = self.voice_with_target(voice)?;
        let clips = self.clip_files(&profile);
        self.on_lane(
            "voice score",
            Priority::Interactive,
            cancel,
            move |services, cancel| {
                let audio = decode_as_recorded(&input, cancel)?;
                let embedder = services.embedder()?;
                let similarity = embedder.embed(&audio)?.similarity(&target);
                let baseline = default_voice_take(services, &HELD_OUT_SENTENCES.join(" "))?;
                let independent = IndependentJudge::for_clips(services, &clips);
                let judge = |take: Audio| {
                    independent
                        .as_ref()
                        .and_then(|j| j.similarity(std::slice::from_ref(&take)))
                };
                Ok(Closeness {
                    similarity,
                    default_similarity: embedder.embed(&baseline)?.similarity(&target),
                    similarity_independent: judge(audio),
                    default_similarity_independent: judge(baseline),
                })
            },
        )
        .await
    }

    /// Searches for an approximate voice match (espeak-ng's variants first, then Kokoro's
    /// styles) as a batch job, and keeps what it found in the profile.
    pub async fn match_voice(
        &self,
        voice: &str,
        settings: MatchSettings,
        progress: Arc<dyn Fn(MatchProgress) + Send + Sync>,
        cancel: CancellationToken,
    ) -> Result<VoiceProfile, VoiceWorkError> {
        let (profile, target) = self.voice_with_target(voice)?;
        let clip_ids: Vec<String> = profile.clips.iter().map(|c| c.id.clone()).collect();
        let clips = self.clip_files(&profile);
        let id = profile.id.clone();
        // Not one long lane job: every take is its own batch job on the audio lane, so
        // interactive work (a transcription, speaking a line) goes ahead between takes.
        let slots = Arc::new(LaneSlots {
            job: "voice match",
            lane: self.services.audio_lane().clone(),
            runtime: tokio::runtime::Handle::current(),
            cancel: cancel.clone(),
            refused: std::sync::Mutex::new(None),
        });
        let services = self.services.clone();
        let refusals = slots.clone();
        let found = tokio::task::spawn_blocking(move || -> Result<VoiceProfile, VoiceWorkError> {
            let services = &*services;
            let cancel = &slots.cancel;
            let embedder = services.embedder()?;
            let model = models::locate(&services.env().models_dir, DEFAULT_MODEL)
                .map_err(SpeechError::from)?;
            let transcriber = services
                .speech()
                .embedded_transcriber(DEFAULT_MODEL, &model)?;
            let judge = TakeJudge {
                embedder: embedder.clone(),
                transcriber,
                slots: Some(slots.clone()),
                independent: IndependentJudge::for_clips(services, &clips),
            };
            let speak_espeak = |text: &str, setting: &EspeakSetting| -> Result<Audio, VoiceError> {
                let espeak = espeak_for(services, setting);
                let (text, voice) = (text.to_string(), setting.voice.clone());
                slots.run(move || {
                    Ok(espeak.synthesize(&text, Some(&voice), &CancellationToken::new())?)
                })
            };
            let (setting, _) = match_espeak(&speak_espeak, &judge, &target, &*progress, cancel)?;
            // Judged like the Kokoro match: on the held-out sentences.
            let espeak = (
                setting.clone(),
                held_out_score(&judge, &target, |text| speak_espeak(text, &setting))?,
            );
            let kokoro = LaneKokoro {
                kokoro: services.kokoro()?,
                slots: slots.clone(),
            };
            let outcome = match_style(&kokoro, &judge, &target, &settings, &*progress, cancel)?;
            let baseline = Style::shipped(DEFAULT_STYLE);
            let default_held_out =
                held_out_score(&judge, &target, |text| kokoro.speak(text, &baseline))?;
            tracing::info!(
                voice = %id,
                held_out = outcome.held_out.similarity,
                default = default_held_out.similarity,
                held_out_independent = ?outcome.held_out.similarity_independent,
                default_independent = ?default_held_out.similarity_independent,
                evaluations = outcome.evaluations,
                seconds = outcome.seconds,
                "voice match found"
            );
            Ok(services.voice_library().set_match(
                &id,
                VoiceMatch {
                    outcome,
                    default_held_out,
                    espeak: Some(espeak),
                    found_unix_ms: unix_ms(),
                    clip_ids,
                },
            )?)
        })
        .await
        .map_err(|e| VoiceWorkError::Voice(VoiceError::Search(format!("it stopped: {e}"))))?;
        // A take the lane refused stopped the search: say why, as every front end does.
        let refused = refusals.refused.locked().take();
        match (found, refused) {
            (Err(_), Some(rejection)) => Err(VoiceWorkError::Rejected(rejection)),
            (result, _) => result,
        }
    }

    /// The configured cloning server, if any.
    pub fn cloning_server(&self) -> Result<Option<CloningServer>, VoiceWorkError> {
        let language = self.services.config().cloning.language;
        self.cloning_server_in(&language)
    }

    /// The configured cloning server, told the text is in `language` (for XTTS).
    fn cloning_server_in(&self, language: &str) -> Result<Option<CloningServer>, VoiceWorkError> {
        let config = self.services.config();
        let settings: CloningSettings = config.cloning;
        if settings.url.trim().is_empty() {
            return Ok(None);
        }
        let consent = config.privacy.consent().and(&self.consent);
        let kind: CloningKind =
            serde_json::from_value(serde_json::Value::String(settings.kind.clone()))
                .unwrap_or_default();
        Ok(Some(CloningServer::new(
            kind,
            &settings.url,
            self.services.env().audio_api_key.clone(),
            language,
            &consent,
        )?))
    }

    /// Asks the configured cloning server whether it is up.
    pub async fn cloning_health(&self) -> Result<Health, VoiceWorkError> {
        let server = self
            .cloning_server()?
            .ok_or(VoiceWorkError::NoCloningServer)?;
        Ok(server.health().await?)
    }

    /// Speaks `text` as the voice: cloned by the configured server, else with the voice match
    /// (Kokoro's found style, else espeak-ng's matched variant). The take is scored against the
    /// voice beside the default voice speaking the same text.
    pub async fn speak(
        &self,
        voice: &VoiceProfile,
        text: String,
        cancel: CancellationToken,
    ) -> Result<VoiceTake, VoiceWorkError> {
        crate::speech::check_speech_input(&text)?;
        let (maker, target) = self.take_maker(voice, None)?;
        let clips = self.clip_files(&maker.profile);
        self.on_lane(
            "voice take",
            Priority::Interactive,
            cancel,
            move |services, cancel| {
                let (audio, method) = maker.make(services, &text, cancel)?;
                let embedder = services.embedder()?;
                let similarity = embedder.embed(&audio)?.similarity(&target);
                let baseline = default_voice_take(services, &text)?;
                let default_similarity = embedder.embed(&baseline)?.similarity(&target);
                let independent = IndependentJudge::for_clips(services, &clips);
                let judge = |take: &Audio| {
                    independent
                        .as_ref()
                        .and_then(|j| j.similarity(std::slice::from_ref(take)))
                };
                let similarity_independent = judge(&audio);
                let default_similarity_independent = judge(&baseline);
                Ok(VoiceTake {
                    audio,
                    method,
                    closeness: Closeness {
                        similarity,
                        default_similarity,
                        similarity_independent,
                        default_similarity_independent,
                    },
                })
            },
        )
        .await
    }

    /// Speaks `text` as the voice, in `language` (its own where `None`), at `priority`, without
    /// scoring it: narration's takes, one per segment, where the comparison would double the
    /// work. In a language other than English a voice match speaks through espeak-ng (Kokoro's
    /// voices here speak English only) with the matched variant and pitch.
    pub async fn speak_unscored(
        &self,
        voice: &VoiceProfile,
        text: String,
        language: Option<Language>,
        priority: Priority,
        cancel: CancellationToken,
    ) -> Result<(Audio, TakeMethod), VoiceWorkError> {
        crate::speech::check_speech_input(&text)?;
        let (maker, _) = self.take_maker(voice, language)?;
        self.on_lane("voice take", priority, cancel, move |services, cancel| {
            maker.make(services, &text, cancel)
        })
        .await
    }

    /// What a take in the voice needs, gathered before it goes on the lane.
    fn take_maker(
        &self,
        profile: &VoiceProfile,
        language: Option<Language>,
    ) -> Result<(TakeMaker, Embedding), VoiceWorkError> {
        let target = target_of(profile)?;
        let profile = profile.clone();
        let language = language.filter(|l| l.code != "en");
        let server = match language {
            Some(l) => self.cloning_server_in(l.code)?,
            None => self.cloning_server()?,
        };
        if server.is_none() && profile.current_match().is_none() {
            return Err(VoiceWorkError::NoMatch(profile.name.clone()));
        }
        let reference = profile.reference_clip().map(|clip| Reference {
            name: profile.id.clone(),
            clip: self.library().clip_path(&profile, clip),
            transcript: clip.transcript.clone(),
            server_voice: profile.server_voice.clone(),
        });
        Ok((
            TakeMaker {
                profile,
                server,
                reference,
                language,
            },
            target,
        ))
    }
}

/// A voice's embedding (the target of every score), or why it has none.
fn target_of(profile: &VoiceProfile) -> Result<Embedding, VoiceWorkError> {
    profile
        .embedding
        .clone()
        .ok_or_else(|| VoiceWorkError::NoClips(profile.name.clone()))
}

/// Makes takes in one voice profile (see [`Voices::speak`]).
struct TakeMaker {
    profile: VoiceProfile,
    server: Option<CloningServer>,
    reference: Option<Reference>,
    /// A language other than English, when the take is in one.
    language: Option<Language>,
}

impl TakeMaker {
    fn make(
        &self,
        services: &Services,
        text: &str,
        cancel: &CancellationToken,
    ) -> Result<(Audio, TakeMethod), VoiceWorkError> {
        let profile = &self.profile;
        match (&self.server, &self.reference) {
            (Some(server), Some(reference)) => {
                let audio = server.speak(text, reference, cancel)?;
                let method = TakeMethod::Clone {
                    server: format!("{} at {}", server.kind().label(), server.url()),
                };
                Ok((audio, method))
            }
            (Some(_), None) => Err(VoiceWorkError::NoClips(profile.name.clone())),
            (None, _) => {
                let matched = profile
                    .current_match()
                    .ok_or_else(|| VoiceWorkError::NoMatch(profile.name.clone()))?;
                // The closer of the two matches on held-out sentences, among those that
                // stay intelligible; Kokoro's needs the model installed and English.
                let kokoro_ok = self.language.is_none()
                    && models::locate(&services.env().models_dir, "kokoro").is_ok();
                let espeak = matched.espeak.clone().filter(|(_, score)| {
                    score.word_error_rate <= matched.outcome.search.word_error_rate.max(0.2)
                });
                let use_espeak = match &espeak {
                    Some((_, score)) => {
                        !kokoro_ok || score.similarity > matched.outcome.held_out.similarity
                    }
                    None => false,
                };
                if kokoro_ok && !use_espeak {
                    let kokoro = services.kokoro()?;
                    let audio = kokoro.speak(text, &matched.outcome.style, 1.0, cancel)?;
                    return Ok((audio, TakeMethod::VoiceMatch));
                }
                let mut setting = match espeak {
                    Some((setting, _)) => setting,
                    None if self.language.is_some() => EspeakSetting {
                        voice: "en-us".into(),
                        pitch: 50,
                    },
                    None => return Err(VoiceWorkError::NoMatch(profile.name.clone())),
                };
                if let Some(language) = self.language {
                    setting.voice = in_language(&setting.voice, &language);
                }
                let audio = espeak_for(services, &setting)
                    .synthesize(text, Some(&setting.voice), cancel)
                    .map_err(VoiceError::from)?;
                let method = TakeMethod::EspeakMatch {
                    voice: setting.voice,
                    pitch: setting.pitch,
                };
                Ok((audio, method))
            }
        }
    }
}

/// An espeak-ng voice with its variant (`en-us+m3`) moved to `language` (`es+m3`).
fn in_language(voice: &str, language: &Language) -> String {
    match voice.split_once('+') {
        Some((_, variant)) => format!("{}+{variant}", language.espeak_voice),
        None => language.espeak_voice.to_string(),
    }
}

/// A voice's similarity to `target` and its intelligibility on the held-out sentences.
fn held_out_score(
    judge: &dyn Judge,
    target: &Embedding,
    speak: impl Fn(&str) -> Result<Audio, VoiceError>,
) -> Result<Score, VoiceError> {
    let mut embeddings = Vec::new();
    let mut takes = Vec::new();
    let mut rates = 0.0;
    for sentence in HELD_OUT_SENTENCES {
        let take = speak(sentence)?;
        embeddings.push(judge.embed(&take)?);
        rates += judge.word_error_rate(&take, sentence)?;
        takes.push(take);
    }
    Ok(Score {
        similarity: Embedding::mean(&embeddings).map_or(0.0, |e| e.similarity(target)),
        word_error_rate: rates / HELD_OUT_SENTENCES.len() as f64,
        similarity_independent: judge.independent_similarity(&takes),
    })
}

/// The clip's words through the default Whisper model, if it is installed; `None` otherwise
/// (the transcript is optional and editable).
fn transcribe_clip(
    services: &Services,
    audio: &Audio,
    cancel: &CancellationToken,
) -> Option<String> {
    let dir = models::locate(&services.env().models_dir, DEFAULT_MODEL).ok()?;
    let engine = services
        .speech()
        .embedded_transcriber(DEFAULT_MODEL, &dir)
        .ok()?;
    let audio = audio.to_16k().ok()?;
    let transcript = engine
        .transcribe(
            &audio.samples,
            &TranscribeOptions::default(),
            &|_| {},
            cancel,
        )
        .ok()?;
    Some(transcript.text()).filter(|t| !t.trim().is_empty())
}
