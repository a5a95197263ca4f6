//! Every voice Headroom can speak in, one list for every front end: the voice profiles (cloned
//! through the user's cloning server, or their approximate voice match), Kokoro's styles and
//! Piper's voices when installed, then espeak-ng's. OpenAI's voice names map onto them.

use crate::voice_work::VoiceWorkError;
use crate::{Services, SpeechError, KOKORO_VOICE, NEURAL_VOICE_PREFIX};
use headroom_speech::models::{self, ModelStatus};
use headroom_speech::tts::Kokoro;
use serde::Serialize;

/// How close a voice is to a real person's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum VoiceKind {
    /// A voice as its engine ships it.
    Stock,
    /// A voice profile cloned by the configured cloning server.
    Clone,
    /// A voice profile spoken by its voice match: the closest embedded voice, not a clone.
    Approximate,
}

/// One voice on offer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct CatalogVoice {
    /// What `voice` takes: `kokoro-jf_alpha`, `piper-joe`, `en-us`, or a profile's name.
    pub id: String,
    pub name: String,
    pub language: String,
    /// `profile`, `kokoro`, `piper` or `espeak-ng`.
    pub engine: String,
    pub license: String,
    pub kind: VoiceKind,
    /// The voice profile's folder id, for a profile.
    pub profile: Option<String>,
}

/// OpenAI's voice names, each with the voice it means here: Kokoro's styles when installed
/// (a feminine and a masculine one), else espeak-ng's English variants.
const OPENAI_VOICES: &[(&str, bool)] = &[
    ("alloy", true),
    ("ash", false),
    ("ballad", false),
    ("coral", true),
    ("echo", false),
    ("fable", false),
    ("nova", true),
    ("onyx", false),
    ("sage", true),
    ("shimmer", true),
    ("verse", false),
];

/// Whether `name` is one of OpenAI's voice names.
pub fn is_openai_voice(name: &str) -> bool {
    OPENAI_VOICES.iter().any(|(n, _)| *n == name)
}

const ESPEAK_LICENSE: &str = "GPL-3.0-or-later (espeak-ng voice data)";

impl Services {
    /// Every voice on offer, profiles first, then the installed neural voices, then espeak-ng's.
    /// Nothing is loaded to list them.
    pub fn voice_catalog(&self) -> Result<Vec<CatalogVoice>, VoiceWorkError> {
        let mut voices = Vec::new();
        let cloning = !self.config().cloning.url.trim().is_empty();
        let profiles = self.voice_library().list()?;
        for p in profiles {
            voices.push(CatalogVoice {
                id: p.name.clone(),
                name: format!("{} (voice profile)", p.name),
                language: "en".into(),
                engine: "profile".into(),
                license: "your own recording".into(),
                kind: if cloning {
                    VoiceKind::Clone
                } else {
                    VoiceKind::Approximate
                },
                profile: Some(p.id),
            });
        }
        let dir = &self.env().models_dir;
        if let Ok(kokoro) = models::locate(dir, KOKORO_VOICE) {
            let spec = models::spec(KOKORO_VOICE).map_err(SpeechError::from)?;
            let styles = Kokoro::style_names_in(&kokoro)?;
            for style in styles {
                voices.push(CatalogVoice {
                    id: format!("{KOKORO_VOICE}-{style}"),
                    name: format!("Kokoro {style} (neural)"),
                    language: "en".into(),
                    engine: "kokoro".into(),
                    license: spec.licence.into(),
                    kind: VoiceKind::Stock,
                    profile: None,
                });
            }
        }
        for spec in models::MODELS
            .iter()
            .filter(|m| m.name.starts_with(NEURAL_VOICE_PREFIX))
            .filter(|m| matches!(models::status(dir, m, false), ModelStatus::Installed { .. }))
        {
            voices.push(CatalogVoice {
                id: spec.name.into(),
                name: format!("{} (neural)", spec.description),
                language: "en-us".into(),
                engine: "piper".into(),
                license: spec.licence.into(),
                kind: VoiceKind::Stock,
                profile: None,
            });
        }
        let espeak = self.speech().synthesizer().voices()?;
        voices.extend(espeak.into_iter().map(|v| CatalogVoice {
            id: v.id,
            name: v.name,
            language: v.language,
            engine: "espeak-ng".into(),
            license: ESPEAK_LICENSE.into(),
            kind: VoiceKind::Stock,
            profile: None,
        }));
        Ok(voices)
    }

    /// The voice an OpenAI voice name means here (`None` for other names): Kokoro's default
    /// feminine or masculine style when Kokoro is installed, else espeak-ng's English.
    pub fn openai_voice(&self, name: &str) -> Option<String> {
        let (_, feminine) = OPENAI_VOICES.iter().find(|(n, _)| *n == name)?;
        let kokoro = models::locate(&self.env().models_dir, KOKORO_VOICE)
            .ok()
            .and_then(|dir| Kokoro::style_names_in(&dir).ok())
            .unwrap_or_default();
        let wanted = if *feminine { "jf_alpha" } else { "jm_kumo" };
        let pick = kokoro
            .iter()
            .find(|s| s.as_str() == wanted)
            .or_else(|| kokoro.first());
        Some(match pick {
            Some(style) => format!("{KOKORO_VOICE}-{style}"),
            None if *feminine => "en-us+f3".into(),
            None => "en-us".into(),
        })
    }

    /// A voice name as a person or a client writes it, in the form the synthesizers take:
    /// OpenAI's names mapped, `joe` for `piper-joe`, the rest as given.
    pub fn voice_id(&self, name: &str) -> String {
        if let Some(mapped) = self.openai_voice(name) {
            return mapped;
        }
        let neural = format!("{NEURAL_VOICE_PREFIX}{name}");
        if models::spec(&neural).is_ok() {
            return neural;
        }
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openais_names_are_known_and_others_are_not() {
        assert!(is_openai_voice("alloy") && is_openai_voice("onyx"));
        assert!(!is_openai_voice("kokoro") && !is_openai_voice("en-us"));
    }
}
