//! The languages narration can be translated into: each with its English name (for the text
//! model's instructions), espeak-ng's voice for it (every one ships with espeak-ng) and a typical
//! speaking rate, used to tell the model how many words fit a segment's time.

use serde::{Deserialize, Serialize};

/// A language narration can be written and spoken in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Language {
    /// ISO 639-1 code, as projects and the command line name it.
    pub code: &'static str,
    /// The English name, as the text model is told.
    pub name: &'static str,
    /// espeak-ng's voice for the language.
    pub espeak_voice: &'static str,
    /// Words per second at a natural narration pace (espeak-ng's default rate speaks near it).
    pub words_per_second: f64,
}

/// Every language on offer, English first.
pub const LANGUAGES: &[Language] = &[
    lang("en", "English", "en-us", 2.6),
    lang("es", "Spanish", "es", 2.8),
    lang("fr", "French", "fr", 2.7),
    lang("de", "German", "de", 2.3),
    lang("it", "Italian", "it", 2.7),
    lang("pt", "Portuguese", "pt", 2.6),
    lang("nl", "Dutch", "nl", 2.4),
    lang("pl", "Polish", "pl", 2.2),
    lang("sv", "Swedish", "sv", 2.4),
    lang("da", "Danish", "da", 2.4),
    lang("fi", "Finnish", "fi", 2.0),
    lang("cs", "Czech", "cs", 2.2),
    lang("tr", "Turkish", "tr", 2.2),
    lang("ru", "Russian", "ru", 2.2),
];

const fn lang(
    code: &'static str,
    name: &'static str,
    espeak_voice: &'static str,
    words_per_second: f64,
) -> Language {
    Language {
        code,
        name,
        espeak_voice,
        words_per_second,
    }
}

/// A language name or code no table entry has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownLanguage(pub String);

impl std::fmt::Display for UnknownLanguage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let codes: Vec<&str> = LANGUAGES.iter().map(|l| l.code).collect();
        write!(
            f,
            "no language {:?}: use one of {} (or its English name)",
            self.0,
            codes.join(", ")
        )
    }
}

impl std::error::Error for UnknownLanguage {}

impl Language {
    /// The language with this code (`es`), English name (`Spanish`, any case) or region-tagged
    /// code (`es-MX`, `pt_BR`).
    pub fn find(name: &str) -> Result<Language, UnknownLanguage> {
        let wanted = name.trim().to_lowercase();
        let base = wanted.split(['-', '_']).next().unwrap_or_default();
        LANGUAGES
            .iter()
            .find(|l| l.code == base || l.name.to_lowercase() == wanted)
            .copied()
            .ok_or_else(|| UnknownLanguage(name.trim().to_string()))
    }

    /// About how many words are spoken in `seconds`.
    pub fn words_in(&self, seconds: f64) -> u32 {
        (seconds.max(0.0) * self.words_per_second).round().max(1.0) as u32
    }
}

impl Serialize for Language {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code)
    }
}

impl<'de> Deserialize<'de> for Language {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let code = String::deserialize(d)?;
        Language::find(&code).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_are_found_by_code_name_or_region_tag() {
        assert_eq!(Language::find("es").unwrap().name, "Spanish");
        assert_eq!(Language::find(" French ").unwrap().code, "fr");
        assert_eq!(Language::find("pt_BR").unwrap().espeak_voice, "pt");
        let unknown = Language::find("klingon").unwrap_err().to_string();
        assert!(
            unknown.contains("\"klingon\"") && unknown.contains("es, fr"),
            "{unknown}"
        );
    }

    #[test]
    fn a_language_is_stored_as_its_code() {
        let json = serde_json::to_string(&Language::find("de").unwrap()).unwrap();
        assert_eq!(json, "\"de\"");
        let back: Language = serde_json::from_str(&json).unwrap();
        assert_eq!(back.name, "German");
        assert!(serde_json::from_str::<Language>("\"xx\"").is_err());
    }

    #[test]
    fn word_counts_follow_the_speaking_rate() {
        let en = Language::find("en").unwrap();
        assert_eq!(en.words_in(10.0), 26);
        assert_eq!(en.words_in(0.0), 1, "never asks for nothing");
    }
}
