//! A neural voice: Piper (VITS) models run by ONNX Runtime ([`crate::onnx`]). Text becomes
//! IPA phonemes with espeak-ng (a separate process), phonemes become the model's ids.

use super::{synthesize_by_sentence, Synthesizer, TtsError, Voice};
use crate::audio::Audio;
use ort::value::Tensor;
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;
use tokio_util::sync::CancellationToken;

const ENGINE: &str = "piper";

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

    fn phonemes(&self, sentence: &str) -> Result<String, TtsError> {
        super::espeak::ipa_phonemes(&self.espeak_program, &self.espeak_voice, sentence)
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

    fn speak_sentence(&self, sentence: &str) -> Result<Audio, TtsError> {
        let ids = self.ids_of(&self.phonemes(sentence)?);
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
            self.speak_sentence(sentence).map(Some)
        })
    }
}
