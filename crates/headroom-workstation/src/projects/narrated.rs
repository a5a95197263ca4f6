//! A project's narration as its manifest keeps it: the settings it was made with and each
//! segment's text, take and state (see [`crate::narration`] for the workflow).

use super::{SuggestionSource, TextNote};
use headroom_base::language::Language;
use headroom_core::admission::Rejection;
use headroom_core::cleanup::{CleanupMode, FailurePolicy};
use headroom_speech::audio::timeline::OVERFLOW_EPSILON_SECS;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the text model does with each segment before it is spoken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum NarrationMode {
    #[default]
    Cleanup,
    Rewrite,
    Translate,
}

impl std::str::FromStr for NarrationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cleanup" => Ok(NarrationMode::Cleanup),
            "rewrite" => Ok(NarrationMode::Rewrite),
            "translate" => Ok(NarrationMode::Translate),
            other => Err(format!(
                "unknown mode {other:?}: use cleanup, rewrite or translate"
            )),
        }
    }
}

impl From<CleanupMode> for NarrationMode {
    fn from(mode: CleanupMode) -> Self {
        match mode {
            CleanupMode::Cleanup => NarrationMode::Cleanup,
            CleanupMode::Rewrite => NarrationMode::Rewrite,
        }
    }
}

/// What a narration run asks for; anything left out comes from the project's last narration,
/// else from the project's settings (cleanup mode, failure policy, voice).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(default)]
pub struct NarrationOptions {
    pub mode: Option<NarrationMode>,
    /// The language to translate into (a code such as `es`, or its English name).
    pub to: Option<String>,
    /// A voice as projects name them (`profile:<id>`, `kokoro-<style>`, an espeak-ng voice).
    pub voice: Option<String>,
    pub policy: Option<FailurePolicy>,
    /// Also mix the narration over the original audio, ducking the original.
    pub mix: Option<bool>,
    /// The voice each speaker (by id) is spoken in, as projects name voices; an empty voice
    /// takes the speaker's default again. Speakers left out keep the last narration's choice.
    pub speaker_voices: Option<BTreeMap<String, String>>,
}

/// The settings a narration was made with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct NarrationSettings {
    pub mode: NarrationMode,
    /// The narration's language (the code); the source's when not translating.
    pub language: String,
    pub voice: Option<String>,
    pub policy: FailurePolicy,
    pub mix: bool,
    /// The text model was used (the project's LLM cleanup was on); otherwise the rules only.
    pub llm: bool,
    /// The voices the user chose for speakers (by id); the others get their default (see
    /// [`SpeakerVoice`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub speaker_voices: BTreeMap<String, String>,
}

/// Why a speaker is narrated in the voice it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum SpeakerVoiceSource {
    /// The user chose it.
    Chosen,
    /// The voice profile the speaker is attached to (or was recognised as).
    Profile,
    /// A default voice, different for each speaker.
    Default,
}

/// The voice a speaker is narrated in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct SpeakerVoice {
    pub speaker: String,
    /// The speaker's name as shown.
    pub name: String,
    /// As projects name voices (`profile:<id>`, `kokoro-<style>`, an espeak-ng voice).
    pub voice: String,
    pub source: SpeakerVoiceSource,
}

impl NarrationSettings {
    /// What the text stage does, as compared between runs.
    pub(crate) fn task_key(&self) -> String {
        let mode = match self.mode {
            NarrationMode::Cleanup => "cleanup".to_string(),
            NarrationMode::Rewrite => "rewrite".to_string(),
            NarrationMode::Translate => format!("translate:{}", self.language),
        };
        if self.llm {
            mode
        } else {
            format!("rules:{mode}")
        }
    }
}

/// Where the narration stopped for a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum NarrationStage {
    Text,
    Speech,
}

/// Why a segment has no narration: the lane's refusal (reason code and message) or a failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct SegmentRefusal {
    pub stage: NarrationStage,
    /// A rejection's reason code (`text_lane_full`, ...), or `failed`.
    pub reason: String,
    pub message: String,
}

impl SegmentRefusal {
    pub(crate) fn rejected(stage: NarrationStage, rejection: &Rejection) -> SegmentRefusal {
        SegmentRefusal {
            stage,
            reason: rejection.reason.code().to_string(),
            message: rejection.message(),
        }
    }
}

/// A segment's fitted take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct NarrationTake {
    /// The WAV, relative to the project folder.
    pub file: String,
    /// The text it speaks and the voice it speaks in (as the run asked for it).
    pub text: String,
    pub voice: Option<String>,
    /// The engine voice that spoke it, and how (a voice profile's method).
    pub spoken_by: String,
    /// The take's sound before fitting, the rate it was fitted at, and how long it lasts now.
    pub natural_secs: f64,
    pub rate: f64,
    pub secs: f64,
    /// How far past its segment's end it runs after fitting, and how much was cut where the next
    /// segment starts.
    pub overflow_secs: f64,
    pub cut_secs: f64,
}

/// One segment's narration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct NarratedSegment {
    pub start: f64,
    pub end: f64,
    /// The segment text it was made from, and the text stage's task then.
    pub source_text: String,
    pub task: String,
    /// The narration text, where the text stage finished.
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub text_source: Option<SuggestionSource>,
    /// The text's language (the source's, when a translation fell back to the rules).
    #[serde(default)]
    pub language: Option<String>,
    /// Why the rules were used, or why the text is not translated.
    #[serde(default)]
    pub note: Option<String>,
    /// The same, as a code.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::unknown_code_as_none"
    )]
    pub note_code: Option<TextNote>,
    #[serde(default)]
    pub refused: Option<SegmentRefusal>,
    #[serde(default)]
    pub take: Option<NarrationTake>,
}

/// Where a segment stands, as the timeline shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SegmentState {
    Waiting,
    TextRefused { reason: String, message: String },
    TextDone,
    SpeechRefused { reason: String, message: String },
    Synthesized,
    Fitted,
    Overflow { secs: f64, cut_secs: f64 },
}

impl NarratedSegment {
    pub(crate) fn new(start: f64, end: f64) -> NarratedSegment {
        NarratedSegment {
            start,
            end,
            source_text: String::new(),
            task: String::new(),
            text: None,
            text_source: None,
            language: None,
            note: None,
            note_code: None,
            refused: None,
            take: None,
        }
    }

    /// Its take is part of the narration: there is one, of its text, and nothing refused since.
    pub fn is_spoken(&self) -> bool {
        self.refused.is_none()
            && matches!((&self.take, &self.text), (Some(take), Some(text)) if &take.text == text)
    }

    /// The state its saved fields show.
    pub fn state(&self) -> SegmentState {
        if let Some(r) = &self.refused {
            let (reason, message) = (r.reason.clone(), r.message.clone());
            return match r.stage {
                NarrationStage::Text => SegmentState::TextRefused { reason, message },
                NarrationStage::Speech => SegmentState::SpeechRefused { reason, message },
            };
        }
        match (&self.text, &self.take) {
            (_, Some(take)) if take.overflow_secs > OVERFLOW_EPSILON_SECS => {
                SegmentState::Overflow {
                    secs: take.overflow_secs,
                    cut_secs: take.cut_secs,
                }
            }
            (_, Some(_)) => SegmentState::Fitted,
            (Some(_), None) => SegmentState::TextDone,
            (None, None) => SegmentState::Waiting,
        }
    }

    /// The text stage must run (again): new or changed source text or task, a refusal, or
    /// rules used only because the text model refused.
    pub(crate) fn needs_text(&self, source_text: &str, task: &str) -> bool {
        let fell_back = self.text_source == Some(SuggestionSource::RuleBased)
            && self.note.is_some()
            && !task.starts_with("rules:");
        self.text.is_none()
            || self.source_text != source_text
            || self.task != task
            || fell_back
            || matches!(&self.refused, Some(r) if r.stage == NarrationStage::Text)
    }

    /// The take must be made (again): none yet, or not of this text in this voice.
    pub(crate) fn needs_take(&self, voice: &Option<String>) -> bool {
        match (&self.take, &self.text) {
            (Some(take), Some(text)) => &take.text != text || &take.voice != voice,
            _ => true,
        }
    }
}

/// The narration's files, relative to the project folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct NarrationOutput {
    pub wav: String,
    #[serde(default)]
    pub mix: Option<String>,
    pub srt: String,
    pub vtt: String,
    pub duration_secs: f64,
    pub language: String,
    pub created_unix_ms: u64,
}

/// A project's narration: how it was made, each segment's state, and its files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Narration {
    pub settings: NarrationSettings,
    pub segments: Vec<NarratedSegment>,
    #[serde(default)]
    pub output: Option<NarrationOutput>,
    /// Why the voice differs from the one asked for (the voice speaks English only).
    #[serde(default)]
    pub voice_note: Option<String>,
    /// The same, as a code.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::unknown_code_as_none"
    )]
    pub voice_note_code: Option<VoiceNote>,
}

/// Why a narration is spoken by another voice than the one chosen, as a code (see [`TextNote`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum VoiceNote {
    /// `voice` speaks English only: the narration in `language` (a code) is spoken by
    /// espeak-ng's `instead` voice.
    SpeaksEnglishOnly {
        voice: String,
        language: String,
        instead: String,
    },
}

impl VoiceNote {
    /// The note in English, for the CLI, the logs and `voice_note`.
    pub fn english(&self) -> String {
        match self {
            VoiceNote::SpeaksEnglishOnly {
                voice,
                language,
                instead,
            } => {
                let name = Language::find(language).map_or(language.as_str(), |l| l.name);
                format!("{voice} speaks English only: the {name} narration is spoken by espeak-ng's {instead} voice")
            }
        }
    }
}
