//! A neural voice: Piper (VITS) models run by ONNX Runtime ([`crate::onnx`]). Text becomes
//! IPA phonemes with espeak-ng (a separate process), phonemes become the model's ids.

use super::{
    piece_phonemes, speak_in_pieces, synthesize_by_sentence, Synthesizer, TtsError, Voice,
};
use crate::audio::Audio;
use ort::value::Tensor;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use tokio_util::sync::CancellationToken;

const ENGINE: &str = "piper";
/// The most ids Piper is given at once: two per phoneme, so about 300 phonemes, some 50
/// words or 15 seconds of speech. The model takes any length, but the longer the input the
/// more words it slurs, and its memory grows with it: 300 words without punctuation in one
/// piece were heard by whisper-tiny.en as 270 to 273 of 300 and took 1.9 GB (Whisper
/// included); in pieces of at most 1,000 ids 282 to 291 (0.7 GB), of at most 600 285 to 295
/// (0.5 GB), as sentences of 15 words 291 and 292. A longer sentence is spoken in pieces
/// ([`speak_in_pieces`]).
const MAX_IDS: usize = 600;

fn engine_error(message: impl std::fmt::Display) -> TtsError {
    TtsError::Engine {
        engine: ENGINE.into(),
        message: message.to_string(),
    }
}

/// A loaded Piper voice.
pub struct Piper {
    id: String,
    session: crate::onnx::Model,
    sample_rate: u32,
    espeak_voice: String,
    /// espeak-ng, the phonemizer.
    espeak_program: String,
    ids: HashMap<char, Vec<i64>>,
    scales: [f32; 3],
}

impl Piper {
    /// Loads `voice.onnx`, `voice.onnx.json` and `libonnxruntime.so` from an installed voice;
    /// phonemes come from espeak-ng run as `espeak_program`.
    pub fn load(dir: &Path, id: &str, espeak_program: &str) -> Result<Piper, TtsError> {
        let config_path = dir.join("voice.onnx.json");
        let config: Value = std::fs::read_to_string(&config_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .ok_or_else(|| engine_error(format!("cannot read {}", config_path.display())))?;
        let mut ids = HashMap::new();
        for (symbol, list) in config["phoneme_id_map"].as_object().into_iter().flatten() {
            let (Some(c), Some(list)) = (symbol.chars().next(), list.as_array()) else {
                continue;
            };
            ids.insert(c, list.iter().filter_map(Value::as_i64).collect());
        }
        let scale =
            |key: &str, default: f64| config["inference"][key].as_f64().unwrap_or(default) as f32;
        let session = crate::onnx::Model::load(dir, "voice.onnx", 0).map_err(engine_error)?;
        Ok(Piper {
            id: id.to_string(),
            session,
            sample_rate: config["audio"]["sample_rate"].as_u64().unwrap_or(22_050) as u32,
            espeak_voice: config["espeak"]["voice"]
                .as_str()
                .unwrap_or("en-us")
                .to_string(),
            espeak_program: espeak_program.to_string(),
            ids,
            scales: [
                scale("noise_scale", 0.667),
                scale("length_scale", 1.0),
                scale("noise_w", 0.8),
            ],
        })
    }

    /// Piper's id sequence: start, then each phoneme followed by the pad, then end.
    fn ids_of(&self, phonemes: &str) -> Vec<i64> {
        let id = |c: char| self.ids.get(&c).cloned().unwrap_or_default();
        let mut out = id('^');
        out.extend(id('_'));
        for c in phonemes.chars() {
            if let Some(ids) = self.ids.get(&c) {
                out.extend(ids);
                out.extend(id('_'));
            }
        }
        out.extend(id('$'));
        out
    }

    /// Speaks a sentence, in pieces of at most [`MAX_IDS`] ids where it is longer.
    fn speak_sentence(
        &self,
        sentence: &str,
        cancel: &CancellationToken,
    ) -> Result<Option<Audio>, TtsError> {
        speak_in_pieces(
            sentence,
            MAX_IDS,
            cancel,
            |piece, last| {
                let phonemes =
                    piece_phonemes(&self.espeak_program, &self.espeak_voice, piece, last)?;
                let ids = self.ids_of(&phonemes);
                Ok((ids.len(), ids))
            },
            |ids| self.speak_ids(ids).map(Some),
        )
    }

    fn speak_ids(&self, ids: Vec<i64>) -> Result<Audio, TtsError> {
        let n = ids.len();
        let samples = self
            .session
            .run(
                || {
                    Ok(ort::inputs![
                        "input" => Tensor::from_array(([1usize, n], ids.clone()))?,
                        "input_lengths" => Tensor::from_array(([1usize], vec![n as i64]))?,
                        "scales" => Tensor::from_array(([3usize], self.scales.to_vec()))?,
                    ])
                },
                |outputs| Ok(outputs["output"].try_extract_tensor::<f32>()?.1.to_vec()),
            )
            .map_err(engine_error)?;
        Ok(Audio {
            samples,
            sample_rate: self.sample_rate,
        })
    }
}

impl Synthesizer for Piper {
    fn name(&self) -> &str {
        ENGINE
    }

    fn voices(&self) -> Result<Vec<Voice>, TtsError> {
        Ok(vec![Voice {
            id: self.id.clone(),
            language: self.espeak_voice.clone(),
            name: format!("{} (Piper, neural)", self.id),
        }])
    }

    fn synthesize(
        &self,
        text: &str,
        _voice: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<Audio, TtsError> {
        synthesize_by_sentence(text, 200, cancel, |sentence| {
            self.speak_sentence(sentence, cancel)
        })
    }
}
