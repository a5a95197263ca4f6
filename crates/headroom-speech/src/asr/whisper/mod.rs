//! Whisper speech recognition on the CPU, from CTranslate2 model files.

mod ct2;
mod decode;
pub mod mel;
mod model;

pub use ct2::{Ct2Error, Ct2Model};
pub use decode::LANGUAGE_CODES;

use crate::asr::{AsrError, TranscribeOptions, Transcriber, Transcript, WindowDone};
use decode::{Decoding, SpecialTokens};
use mel::MelFrontend;
use model::Whisper;
use std::path::Path;
use tokenizers::Tokenizer;
use tokio_util::sync::CancellationToken;

/// A loaded Whisper model: weights, tokenizer, mel front end and decoding settings.
pub struct WhisperEngine {
    name: String,
    model: Whisper,
    tokenizer: Tokenizer,
    special: SpecialTokens,
    mel: MelFrontend,
    suppress: Vec<u32>,
    suppress_at_begin: Vec<u32>,
}

impl WhisperEngine {
    /// Loads `model.bin`, `tokenizer.json` and `config.json` from a model directory.
    pub fn load(dir: &Path, name: &str) -> Result<WhisperEngine, AsrError> {
        let ct2 =
            Ct2Model::load(&dir.join("model.bin")).map_err(|e| AsrError::Model(e.to_string()))?;
        let model = Whisper::from_ct2(&ct2).map_err(AsrError::model)?;
        drop(ct2);
        let tokenizer_path = dir.join("tokenizer.json");
        let tokenizer = Tokenizer::from_file(&tokenizer_path).map_err(|e| {
            AsrError::Model(format!("cannot load {}: {e}", tokenizer_path.display()))
        })?;
        let special = SpecialTokens::from_tokenizer(&tokenizer, model.dims.n_vocab >= 51865)
            .map_err(AsrError::model)?;
        let config: serde_json::Value = std::fs::read_to_string(dir.join("config.json"))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let ids = |key: &str| -> Vec<u32> {
            config[key]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_u64())
                        .map(|v| v as u32)
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut suppress_at_begin = ids("suppress_ids_begin");
        if suppress_at_begin.is_empty() {
            suppress_at_begin = vec![special.eot];
        }
        Ok(WhisperEngine {
            name: name.to_string(),
            mel: MelFrontend::new(model.dims.n_mels),
            suppress: ids("suppress_ids"),
            suppress_at_begin,
            model,
            tokenizer,
            special,
        })
    }

    pub fn multilingual(&self) -> bool {
        self.special.multilingual()
    }
}

impl Transcriber for WhisperEngine {
    fn name(&self) -> &str {
        &self.name
    }

    fn transcribe(
        &self,
        samples: &[f32],
        options: &TranscribeOptions,
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Transcript, AsrError> {
        self.transcribe_from(samples, 0.0, options, &mut |_| {}, progress, cancel)
    }

    fn transcribe_from(
        &self,
        samples: &[f32],
        from_secs: f64,
        options: &TranscribeOptions,
        window_done: &mut dyn FnMut(WindowDone<'_>),
        progress: &dyn Fn(f32),
        cancel: &CancellationToken,
    ) -> Result<Transcript, AsrError> {
        let decoding = Decoding {
            model: &self.model,
            tokenizer: &self.tokenizer,
            special: &self.special,
            mel: &self.mel,
            suppress: &self.suppress,
            suppress_at_begin: &self.suppress_at_begin,
        };
        let decoded = decoding.transcribe(
            samples,
            options.language.as_deref(),
            from_secs,
            window_done,
            progress,
            cancel,
        )?;
        Ok(Transcript {
            language: decoded.language,
            duration: samples.len() as f64 / mel::SAMPLE_RATE as f64,
            segments: decoded.segments,
        })
    }
}
