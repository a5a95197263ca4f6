//! espeak-ng, run as a separate program (it is GPL-3.0; Headroom does not link it).

use super::{synthesize_by_sentence, Synthesizer, TtsError, Voice};
use crate::audio::{decode_bytes, Audio, DecodeLimits};
use headroom_base::process::{ProcessError, Tool};
use headroom_base::sync::Locked;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use tokio_util::sync::CancellationToken;

/// The espeak-ng engine.
pub struct Espeak {
    program: String,
    /// Words per minute.
    pub speed: u32,
    /// Base pitch, 0–99 (espeak-ng's default is 50).
    pub pitch: u32,
    /// Where its output's private folders are made; the platform's temporary folder if unset.
    temp_dir: Option<PathBuf>,
}

/// The program run when none is configured.
pub const ESPEAK_PROGRAM: &str = "espeak-ng";

impl Default for Espeak {
    fn default() -> Self {
        Espeak::new(ESPEAK_PROGRAM)
    }
}

impl Espeak {
    /// espeak-ng run as `program` (a name on `PATH` or a path).
    pub fn new(program: impl Into<String>) -> Self {
        Espeak {
            program: program.into(),
            speed: 165,
            pitch: 50,
            temp_dir: None,
        }
    }

    /// The same engine making its output's private folders inside `dir` (the one the
    /// composition root was given), not the platform's.
    pub fn with_temp_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.temp_dir = Some(dir.into());
        self
    }

    fn speak_one(&self, text: &str, voice: &str) -> Result<Audio, TtsError> {
        // A file, not --stdout: streamed WAV headers carry no length. It lives in a private
        // folder of its own (not a guessable name in the shared temp folder) and goes with it.
        let mut folder = tempfile::Builder::new();
        folder.prefix("headroom-espeak-");
        let folder = match &self.temp_dir {
            Some(dir) => folder.tempdir_in(dir),
            None => folder.tempdir(),
        }
        .map_err(|e| TtsError::Engine {
            engine: "espeak-ng".into(),
            message: format!("cannot make a folder for its output: {e}"),
        })?;
        self.speak_to(text, voice, &folder.path().join("speech.wav"))
    }

    fn speak_to(&self, text: &str, voice: &str, wav: &Path) -> Result<Audio, TtsError> {
        let voice = voice_names(&self.program)?.resolve(voice)?;
        // The text goes on stdin, never among the arguments: a sentence such as
        // "--phonout=/file" or "-f/file" must stay words to speak.
        let output = Tool::new(&self.program)
            .option("-b", "1")
            .option("-s", self.speed.to_string())
            .option("-p", self.pitch.min(99).to_string())
            .option("-v", &voice)
            .path_option("-w", wav)
            .run(spoken_text(text).as_bytes())
            .map_err(engine_failure)?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success()
            || stderr.contains("Voice does not exist")
            || stderr.contains("no voice")
        {
            if stderr.to_ascii_lowercase().contains("voice") {
                return Err(TtsError::UnknownVoice { voice });
            }
            return Err(TtsError::Engine {
                engine: "espeak-ng".into(),
                message: stderr.trim().to_string(),
            });
        }
        let bytes = std::fs::read(wav).map_err(|e| TtsError::Engine {
            engine: "espeak-ng".into(),
            message: format!("cannot read its output: {e}"),
        })?;
        decode_bytes(
            bytes,
            Some("wav"),
            Path::new("espeak-ng output"),
            DecodeLimits::default(),
        )
        .map_err(|e| TtsError::Engine {
            engine: "espeak-ng".into(),
            message: e.to_string(),
        })
    }
}

/// The longest voice name looked up: espeak-ng's own are short (`en-gb-x-gbcwmd+Mr serious`).
const MAX_VOICE_NAME: usize = 64;

/// The voice names espeak-ng answers to, as it lists them: its languages (and the other
/// language names it takes, such as `en`) from `--voices`, and its variants (`m3`, `Denis`,
/// or their names, `male3`) from `--voices=variant`. espeak-ng reads `LANGUAGE+VARIANT` and
/// opens VARIANT as a file, so a name reaches it only as spelled in this list, never as given:
/// `en-us+../../etc/passwd` is no voice, and no process starts for it.
#[derive(Debug, Clone, Default)]
pub struct EspeakVoices {
    /// The languages as voices, for listing.
    languages: Vec<Voice>,
    /// Every language name it takes, lowercased, with its spelling in the list.
    language_names: HashMap<String, String>,
    /// Every variant, by its file name and its name, lowercased, with its file name.
    variant_names: HashMap<String, String>,
}

impl EspeakVoices {
    /// Reads the two listings (`--voices` and `--voices=variant`, as espeak-ng prints them).
    pub fn parse(languages: &str, variants: &str) -> EspeakVoices {
        let mut names = EspeakVoices::default();
        // Columns: Pty Language Age/Gender VoiceName File Other Languages, where the others
        // are `(en 2)(en-gb 3)`, each with its priority.
        for line in languages.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 5 {
                continue;
            }
            let language = cols[1];
            names.languages.push(Voice {
                id: language.to_string(),
                language: language.to_string(),
                name: cols[3].replace('_', " "),
            });
            names.add_language(language);
            for other in cols[5..].join(" ").split(['(', ')']) {
                if let Some(alias) = other.split_whitespace().next() {
                    names.add_language(alias);
                }
            }
        }
        // The same columns; a variant's file is `!v/NAME` (which may hold a space).
        for line in variants.lines().skip(1) {
            let Some(file_at) = line.find("!v/") else {
                continue;
            };
            let file = line[file_at + 3..]
                .split(" (")
                .next()
                .unwrap_or_default()
                .trim();
            if file.is_empty() {
                continue;
            }
            names
                .variant_names
                .insert(file.to_lowercase(), file.to_string());
            if let Some(name) = line[..file_at].split_whitespace().nth(3) {
                names
                    .variant_names
                    .entry(name.to_lowercase())
                    .or_insert_with(|| file.to_string());
            }
        }
        names
    }

    fn add_language(&mut self, name: &str) {
        self.language_names
            .entry(name.to_lowercase())
            .or_insert_with(|| name.to_string());
    }

    /// `voice` (`LANGUAGE` or `LANGUAGE+VARIANT`, in any case) spelled as espeak-ng lists
    /// it, or [`TtsError::UnknownVoice`] when either part is not in the list.
    pub fn resolve(&self, voice: &str) -> Result<String, TtsError> {
        let unknown = || TtsError::UnknownVoice {
            voice: voice.chars().take(MAX_VOICE_NAME).collect(),
        };
        if voice.len() > MAX_VOICE_NAME {
            return Err(unknown());
        }
        let (language, variant) = match voice.split_once('+') {
            Some((language, variant)) => (language, Some(variant)),
            None => (voice, None),
        };
        let language = self
            .language_names
            .get(&language.to_lowercase())
            .ok_or_else(unknown)?;
        match variant {
            None => Ok(language.clone()),
            Some(variant) => {
                let variant = self
                    .variant_names
                    .get(&variant.to_lowercase())
                    .ok_or_else(unknown)?;
                Ok(format!("{language}+{variant}"))
            }
        }
    }

    /// Whether espeak-ng lists `voice`.
    pub fn knows(&self, voice: &str) -> bool {
        self.resolve(voice).is_ok()
    }
}

/// espeak-ng's voice names for `program`, listed once per program for the process (a failed
/// listing, such as a missing program, is tried again next time).
pub fn voice_names(program: &str) -> Result<Arc<EspeakVoices>, TtsError> {
    static LISTED: OnceLock<Mutex<HashMap<String, Arc<EspeakVoices>>>> = OnceLock::new();
    let listed = LISTED.get_or_init(Default::default);
    if let Some(names) = listed.locked().get(program) {
        return Ok(names.clone());
    }
    let list = |flag: &'static str| -> Result<String, TtsError> {
        let output = Tool::new(program)
            .flag(flag)
            .run(b"")
            .map_err(engine_failure)?;
        if !output.status.success() {
            return Err(TtsError::Engine {
                engine: "espeak-ng".into(),
                message: format!(
                    "{flag} failed: {}",
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    };
    let names = Arc::new(EspeakVoices::parse(
        &list("--voices")?,
        &list("--voices=variant")?,
    ));
    listed.locked().insert(program.to_string(), names.clone());
    Ok(names)
}

/// A sentence as IPA phonemes from espeak-ng run as `program` with `voice`, clauses joined by
/// spaces and the sentence's final punctuation kept (espeak drops it; neural voices use it for
/// intonation and pauses).
pub fn ipa_phonemes(program: &str, voice: &str, sentence: &str) -> Result<String, TtsError> {
    let voice = voice_names(program)?.resolve(voice)?;
    let output = Tool::new(program)
        .flag("-q")
        .flag("--ipa")
        .option("-v", &voice)
        .run(spoken_text(sentence).as_bytes())
        .map_err(engine_failure)?;
    let mut ipa = String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if let Some(end) = sentence
        .trim_end()
        .chars()
        .last()
        .filter(|c| matches!(c, '.' | '?' | '!' | ','))
    {
        ipa.push(end);
    }
    Ok(ipa)
}

/// Text as espeak-ng should read it on stdin: control characters (NUL ends its input early)
/// become spaces; line breaks stay, since espeak-ng reads them as pauses.
fn spoken_text(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                ' '
            } else {
                c
            }
        })
        .collect()
}

fn engine_failure(e: ProcessError) -> TtsError {
    if e.is_not_found() {
        TtsError::EngineMissing {
            engine: "espeak-ng".into(),
            hint: "install it (Debian/Ubuntu: apt-get install espeak-ng)".into(),
        }
    } else {
        TtsError::Engine {
            engine: "espeak-ng".into(),
            message: e.to_string(),
        }
    }
}

impl Synthesizer for Espeak {
    fn name(&self) -> &str {
        "espeak-ng"
    }

    fn voices(&self) -> Result<Vec<Voice>, TtsError> {
        Ok(voice_names(&self.program)?.languages.clone())
    }

    fn synthesize(
        &self,
        text: &str,
        voice: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Audio, TtsError> {
        let voice = voice.unwrap_or("en-us");
        synthesize_by_sentence(text, 250, cancel, |sentence| {
            match self.speak_one(sentence, voice) {
                Ok(clip) => Ok(Some(clip)),
                // A sentence of only punctuation makes no sound: skip it.
                Err(TtsError::Engine { message, .. }) if message.contains("contains no sound") => {
                    Ok(None)
                }
                Err(e) => Err(e),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LANGUAGES: &str = "\
Pty Language       Age/Gender VoiceName          File                 Other Languages
 2  en-gb           --/M      English_(Great_Britain) gmw/en               (en 2)
 5  en-gb-x-gbclan  --/M      English_(Lancaster) gmw/en-GB-x-gbclan   (en-gb 3)(en 5)
 2  en-us           --/M      English_(America)  gmw/en-US            (en 3)
 5  fr-fr           --/M      French             roa/fr               (fr 5)
";
    const VARIANTS: &str = "\
Pty Language       Age/Gender VoiceName          File                 Other Languages
 5  variant         35/M      Denis              !v/Denis             
 5  variant         --/F      female3            !v/f3                
 5  variant         --/M      male3              !v/m3                
 5  variant         --/M      Mr_Serious         !v/Mr serious        
 5  variant         --/M      Storm              !v/Storm             (en-us 5)
";

    fn names() -> EspeakVoices {
        EspeakVoices::parse(LANGUAGES, VARIANTS)
    }

    #[test]
    fn listed_languages_and_variants_resolve_to_their_listed_spelling() {
        let names = names();
        assert_eq!(names.resolve("en-us").unwrap(), "en-us");
        assert_eq!(names.resolve("EN-US").unwrap(), "en-us");
        assert_eq!(names.resolve("en").unwrap(), "en", "another name it takes");
        assert_eq!(names.resolve("en-us+m3").unwrap(), "en-us+m3");
        assert_eq!(names.resolve("en-us+male3").unwrap(), "en-us+m3");
        assert_eq!(names.resolve("fr+denis").unwrap(), "fr+Denis");
        assert_eq!(
            names.resolve("en-gb+mr serious").unwrap(),
            "en-gb+Mr serious"
        );
        assert_eq!(names.languages.len(), 4);
        assert_eq!(names.languages[2].name, "English (America)");
    }

    #[test]
    fn a_name_that_is_not_listed_never_becomes_a_file_name() {
        let names = names();
        for hostile in [
            "en-us+../../../../../../../etc/passwd",
            "en-us+./././././././././././././Denis",
            "en-us+/etc/passwd",
            "en-us+Denis/../../x",
            "../../etc/passwd",
            "gmw/en-US",
            "en-us+",
            "+m3",
            "en-us+m3+f3",
            "",
            "English_(America)",
        ] {
            assert!(
                matches!(names.resolve(hostile), Err(TtsError::UnknownVoice { .. })),
                "{hostile:?}"
            );
        }
        let long = format!("en-us+{}", "a".repeat(10_000));
        match names.resolve(&long) {
            Err(TtsError::UnknownVoice { voice }) => assert_eq!(voice.len(), MAX_VOICE_NAME),
            other => panic!("{other:?}"),
        }
    }
}
