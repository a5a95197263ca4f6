//! Kokoro-82M, a neural voice run by ONNX Runtime ([`crate::onnx`]): IPA phonemes from
//! espeak-ng mapped through Kokoro's vocabulary, and a 256-number style that sets the voice.
//! Each shipped style is a table with one row per input length; a [`Style`] mixes shipped
//! styles and adds an offset, which is what an approximate voice match searches over.

use super::{
    piece_phonemes, speak_in_pieces, synthesize_by_sentence, Synthesizer, TtsError, Voice,
};
use crate::audio::Audio;
use ort::value::Tensor;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use tokio_util::sync::CancellationToken;

const ENGINE: &str = "kokoro";
/// Kokoro speaks at 24 kHz.
pub const KOKORO_SAMPLE_RATE: u32 = 24_000;
/// Numbers in a style.
pub const STYLE_DIM: usize = 256;
/// Rows in a shipped style table: one per input length, so at most this many phonemes a call.
const STYLE_ROWS: usize = 510;
/// The most phonemes Kokoro is given at once: a style row each, less the pads at either end.
/// A longer sentence is spoken in pieces ([`speak_in_pieces`]), never cut short.
const MAX_PHONEMES: usize = STYLE_ROWS - 2;
/// The style used when none is named. Every shipped style's English is understood by the
/// embedded Whisper within a word in 27 (the README's voice table); this one is the first.
pub const DEFAULT_STYLE: &str = "jf_alpha";

fn engine_error(message: impl std::fmt::Display) -> TtsError {
    TtsError::Engine {
        engine: ENGINE.into(),
        message: message.to_string(),
    }
}

/// A voice for Kokoro: a weighted mixture of shipped styles plus an offset (empty: none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Style {
    /// (shipped style name, weight)
    pub mix: Vec<(String, f32)>,
    /// Added to the mixture; empty or [`STYLE_DIM`] numbers.
    #[serde(default)]
    pub offset: Vec<f32>,
}

impl Style {
    /// One shipped style as it is.
    pub fn shipped(name: &str) -> Style {
        Style {
            mix: vec![(name.to_string(), 1.0)],
            offset: Vec::new(),
        }
    }
}

/// espeak-ng's IPA where Kokoro's vocabulary writes a sound as one symbol (diphthongs and
/// affricates), and sounds Kokoro has no symbol for.
const IPA_TO_KOKORO: &[(&str, &str)] = &[
    ("\u{361}", ""),
    ("dʒ", "ʤ"),
    ("tʃ", "ʧ"),
    ("eɪ", "A"),
    ("aɪ", "I"),
    ("oʊ", "O"),
    ("aʊ", "W"),
    ("ɔɪ", "Y"),
    ("ɝ", "ɜɹ"),
    ("r", "ɹ"),
    ("ɬ", "l"),
];

/// A loaded Kokoro model.
pub struct Kokoro {
    session: crate::onnx::Model,
    vocab: HashMap<char, i64>,
    /// (name, STYLE_ROWS × STYLE_DIM numbers), in the model's order.
    styles: Vec<(String, Vec<f32>)>,
    espeak_program: String,
    espeak_voice: String,
}

impl Kokoro {
    /// Loads `kokoro.onnx`, `vocab.json`, `voices.npz` and `libonnxruntime.so` from an installed
    /// model; phonemes come from espeak-ng run as `espeak_program`, in English.
    pub fn load(dir: &Path, espeak_program: &str) -> Result<Kokoro, TtsError> {
        let vocab_path = dir.join("vocab.json");
        let vocab: serde_json::Value = std::fs::read_to_string(&vocab_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .ok_or_else(|| engine_error(format!("cannot read {}", vocab_path.display())))?;
        let vocab: HashMap<char, i64> = vocab["vocab"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(symbol, id)| Some((single_char(symbol)?, id.as_i64()?)))
            .collect();
        if vocab.is_empty() {
            return Err(engine_error(format!(
                "{} has no vocabulary",
                vocab_path.display()
            )));
        }
        let styles = read_style_tables(&dir.join("voices.npz"))?;
        let session = crate::onnx::Model::load(dir, "kokoro.onnx", 0).map_err(engine_error)?;
        Ok(Kokoro {
            session,
            vocab,
            styles,
            espeak_program: espeak_program.to_string(),
            espeak_voice: "en-us".into(),
        })
    }

    /// The shipped styles' names in an installed model, read from its table of contents
    /// without loading the model (for voice lists).
    pub fn style_names_in(dir: &Path) -> Result<Vec<String>, TtsError> {
        let path = dir.join("voices.npz");
        let bad = |detail: String| engine_error(format!("{}: {detail}", path.display()));
        let file = std::fs::File::open(&path).map_err(|e| bad(e.to_string()))?;
        let archive = zip::ZipArchive::new(file).map_err(|e| bad(e.to_string()))?;
        Ok(archive
            .file_names()
            .filter_map(|n| n.strip_suffix(".npy"))
            .map(str::to_string)
            .collect())
    }

    /// The shipped styles' names.
    pub fn style_names(&self) -> Vec<String> {
        self.styles.iter().map(|(n, _)| n.clone()).collect()
    }

    /// Each shipped style's vector for an input of `tokens` phonemes, in the model's order.
    pub fn shipped_rows(&self, tokens: usize) -> Vec<Vec<f32>> {
        let row = tokens.min(STYLE_ROWS - 1);
        self.styles
            .iter()
            .map(|(_, t)| t[row * STYLE_DIM..(row + 1) * STYLE_DIM].to_vec())
            .collect()
    }

    /// The style vector `style` gives for an input of `tokens` phonemes.
    pub fn style_row(&self, style: &Style, tokens: usize) -> Result<Vec<f32>, TtsError> {
        let row = tokens.min(STYLE_ROWS - 1);
        let mut out = vec![0f32; STYLE_DIM];
        for (name, weight) in &style.mix {
            let table = self
                .styles
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t)
                .ok_or_else(|| TtsError::UnknownVoice {
                    voice: format!("kokoro-{name}"),
                })?;
            for (o, v) in out
                .iter_mut()
                .zip(&table[row * STYLE_DIM..(row + 1) * STYLE_DIM])
            {
                *o += weight * v;
            }
        }
        if !style.offset.is_empty() {
            if style.offset.len() != STYLE_DIM {
                return Err(engine_error(format!(
                    "a style offset has {} numbers, not {STYLE_DIM}",
                    style.offset.len()
                )));
            }
            for (o, d) in out.iter_mut().zip(&style.offset) {
                *o += d;
            }
        }
        Ok(out)
    }

    /// Kokoro's ids for phonemes (unknown symbols dropped), all of them.
    fn ids_of(&self, phonemes: &str) -> Vec<i64> {
        let mut ipa = phonemes.to_string();
        for (from, to) in IPA_TO_KOKORO {
            ipa = ipa.replace(from, to);
        }
        ipa.chars()
            .filter_map(|c| self.vocab.get(&c).copied())
            .collect()
    }

    /// Speaks a sentence, in pieces of at most [`MAX_PHONEMES`] phonemes where it is longer.
    fn speak_sentence(
        &self,
        sentence: &str,
        style: &Style,
        speed: f32,
        cancel: &CancellationToken,
    ) -> Result<Option<Audio>, TtsError> {
        speak_in_pieces(
            sentence,
            MAX_PHONEMES,
            cancel,
            |piece, last| {
                let phonemes =
                    piece_phonemes(&self.espeak_program, &self.espeak_voice, piece, last)?;
                let ids = self.ids_of(&phonemes);
                Ok((ids.len(), ids))
            },
            |ids| self.speak_ids(ids, style, speed),
        )
    }

    /// Speaks at most [`MAX_PHONEMES`] ids (`None`: only punctuation, nothing to say).
    fn speak_ids(
        &self,
        ids: Vec<i64>,
        style: &Style,
        speed: f32,
    ) -> Result<Option<Audio>, TtsError> {
        if ids.len() > MAX_PHONEMES {
            return Err(engine_error(format!(
                "{} phonemes at once, over the {MAX_PHONEMES} Kokoro takes",
                ids.len()
            )));
        }
        if ids.iter().all(|&id| id <= 16) {
            // Only punctuation and spaces: nothing to say.
            return Ok(None);
        }
        let row = self.style_row(style, ids.len())?;
        let mut tokens = Vec::with_capacity(ids.len() + 2);
        tokens.push(0);
        tokens.extend(ids);
        tokens.push(0);
        let n = tokens.len();
        let samples = self
            .session
            .run(
                || {
                    Ok(ort::inputs![
                        "tokens" => Tensor::from_array(([1usize, n], tokens.clone()))?,
                        "style" => Tensor::from_array(([1usize, STYLE_DIM], row.clone()))?,
                        "speed" => Tensor::from_array(([1usize], vec![speed]))?,
                    ])
                },
                |outputs| Ok(outputs["audio"].try_extract_tensor::<f32>()?.1.to_vec()),
            )
            .map_err(engine_error)?;
        Ok(Some(Audio {
            samples,
            sample_rate: KOKORO_SAMPLE_RATE,
        }))
    }

    /// Speaks `text` sentence by sentence in `style`.
    pub fn speak(
        &self,
        text: &str,
        style: &Style,
        speed: f32,
        cancel: &CancellationToken,
    ) -> Result<Audio, TtsError> {
        synthesize_by_sentence(text, 200, cancel, |sentence| {
            self.speak_sentence(sentence, style, speed, cancel)
        })
    }
}

fn single_char(s: &str) -> Option<char> {
    let mut chars = s.chars();
    let c = chars.next()?;
    chars.next().is_none().then_some(c)
}

impl Synthesizer for Kokoro {
    fn name(&self) -> &str {
        ENGINE
    }

    fn voices(&self) -> Result<Vec<Voice>, TtsError> {
        Ok(self
            .styles
            .iter()
            .map(|(name, _)| Voice {
                id: format!("kokoro-{name}"),
                language: "en".into(),
                name: format!("{name} (Kokoro, neural)"),
            })
            .collect())
    }

    /// `voice`: a shipped style, bare (`jf_alpha`) or as listed (`kokoro-jf_alpha`); `kokoro`
    /// or none: the default style.
    fn synthesize(
        &self,
        text: &str,
        voice: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Audio, TtsError> {
        self.synthesize_at_speed(text, voice, 1.0, cancel)
    }

    /// Kokoro's own speed (its duration predictor's), not a time-stretch.
    fn synthesize_at_speed(
        &self,
        text: &str,
        voice: Option<&str>,
        speed: f32,
        cancel: &CancellationToken,
    ) -> Result<Audio, TtsError> {
        let name = match voice {
            None | Some("kokoro") => DEFAULT_STYLE,
            Some(v) => v.strip_prefix("kokoro-").unwrap_or(v),
        };
        if !self.styles.iter().any(|(n, _)| n == name) {
            return Err(TtsError::UnknownVoice {
                voice: voice.unwrap_or(name).to_string(),
            });
        }
        self.speak(text, &Style::shipped(name), speed, cancel)
    }
}

/// The largest `.npy` member read: a shipped style table is 522 KB.
const MAX_TABLE_BYTES: u64 = 4 << 20;

/// The style tables in `voices.npz` (a zip of `.npy` float32 arrays shaped [510, 1, 256]).
fn read_style_tables(path: &Path) -> Result<Vec<(String, Vec<f32>)>, TtsError> {
    let bad = |detail: String| engine_error(format!("{}: {detail}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| bad(e.to_string()))?;
    let mut tables = Vec::new();
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(|e| bad(e.to_string()))?;
        let Some(name) = entry.name().strip_suffix(".npy").map(str::to_string) else {
            continue;
        };
        if entry.size() > MAX_TABLE_BYTES {
            return Err(bad(format!("{name} is {} bytes", entry.size())));
        }
        let mut bytes = Vec::with_capacity(entry.size() as usize);
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| bad(e.to_string()))?;
        let table =
            npy_f32(&bytes, STYLE_ROWS * STYLE_DIM).map_err(|e| bad(format!("{name}: {e}")))?;
        tables.push((name, table));
    }
    if tables.is_empty() {
        return Err(bad("no styles".into()));
    }
    Ok(tables)
}

/// The numbers of a little-endian float32 `.npy` array of `expected` elements in C order.
fn npy_f32(bytes: &[u8], expected: usize) -> Result<Vec<f32>, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a .npy array".into());
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!(".npy version {v} is not supported")),
    };
    let header = bytes
        .get(start..start + header_len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or("a damaged .npy header")?;
    if !header.contains("'descr': '<f4'") || !header.contains("'fortran_order': False") {
        return Err(format!("not little-endian float32 in C order: {header}"));
    }
    let data = &bytes[start + header_len..];
    if data.len() != expected * 4 {
        return Err(format!(
            "{} bytes of data, expected {}",
            data.len(),
            expected * 4
        ));
    }
    Ok(data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str, data: &[f32]) -> Vec<u8> {
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend((header.len() as u16).to_le_bytes());
        out.extend(header.as_bytes());
        for v in data {
            out.extend(v.to_le_bytes());
        }
        out
    }

    #[test]
    fn reads_float32_arrays_and_refuses_others() {
        let good = npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
            &[1.5, -2.0],
        );
        assert_eq!(npy_f32(&good, 2).unwrap(), vec![1.5, -2.0]);
        assert!(npy_f32(&good, 3).unwrap_err().contains("expected 12"));
        let doubles = npy(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }",
            &[0.0, 0.0],
        );
        assert!(npy_f32(&doubles, 1).is_err());
        assert!(npy_f32(b"PK\x03\x04 not npy", 1).is_err());
        let mut cut = good.clone();
        cut[8] = 0xff;
        assert!(npy_f32(&cut, 2).is_err(), "a header longer than the file");
    }

    #[test]
    fn diphthongs_and_affricates_become_single_symbols() {
        let mut ipa = "dʒˈʌmps tʃˈeɪn bɹˈaʊn".to_string();
        for (from, to) in IPA_TO_KOKORO {
            ipa = ipa.replace(from, to);
        }
        assert_eq!(ipa, "ʤˈʌmps ʧˈAn bɹˈWn");
    }
}
