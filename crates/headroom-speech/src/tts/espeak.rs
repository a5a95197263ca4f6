//! espeak-ng, run as a separate program (it is GPL-3.0; Headroom does not link it).

use super::{synthesize_by_sentence, Synthesizer, TtsError, Voice};
use crate::audio::{decode_bytes, Audio, DecodeLimits};
use headroom_base::process::{ProcessError, Tool};
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// The espeak-ng engine.
pub struct Espeak {
    program: String,
    /// Words per minute.
    pub speed: u32,
    /// Base pitch, 0–99 (espeak-ng's default is 50).
    pub pitch: u32,
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
        }
    }

    fn failed(&self, e: ProcessError) -> TtsError {
        engine_failure(e)
    }

    fn speak_one(&self, text: &str, voice: &str) -> Result<Audio, TtsError> {
        // A file, not --stdout: streamed WAV headers carry no length.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let wav = std::env::temp_dir().join(format!(
            "headroom-espeak-{}-{}.wav",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let result = self.speak_to(text, voice, &wav);
        let _ = std::fs::remove_file(&wav);
        result
    }

    fn speak_to(&self, text: &str, voice: &str, wav: &Path) -> Result<Audio, TtsError> {
        // The text goes on stdin, never among the arguments: a sentence such as
        // "--phonout=/file" or "-f/file" must stay words to speak.
        let output = Tool::new(&self.program)
            .option("-b", "1")
            .option("-s", self.speed.to_string())
            .option("-p", self.pitch.min(99).to_string())
            .option("-v", voice)
            .path_option("-w", wav)
            .run(spoken_text(text).as_bytes())
            .map_err(|e| self.failed(e))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success()
            || stderr.contains("Voice does not exist")
            || stderr.contains("no voice")
        {
            if stderr.to_ascii_lowercase().contains("voice") {
                return Err(TtsError::UnknownVoice {
                    voice: voice.to_string(),
                });
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

/// A sentence as IPA phonemes from espeak-ng run as `program` with `voice`, clauses joined by
/// spaces and the sentence's final punctuation kept (espeak drops it; neural voices use it for
/// intonation and pauses).
pub fn ipa_phonemes(program: &str, voice: &str, sentence: &str) -> Result<String, TtsError> {
    let output = Tool::new(program)
        .flag("-q")
        .flag("--ipa")
        .option("-v", voice)
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
        let output = Tool::new(&self.program)
            .flag("--voices")
            .run(b"")
            .map_err(|e| self.failed(e))?;
        // Columns: Pty Language Age/Gender VoiceName File Other
        Ok(String::from_utf8_lossy(&output.stdout)
            .lines()
            .skip(1)
            .filter_map(|line| {
                let cols: Vec<&str> = line.split_whitespace().collect();
                (cols.len() >= 5).then(|| Voice {
                    id: cols[1].to_string(),
                    language: cols[1].to_string(),
                    name: cols[3].replace('_', " "),
                })
            })
            .collect())
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
