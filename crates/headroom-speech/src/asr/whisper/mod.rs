//! Whisper speech recognition on the CPU, from CTranslate2 model files.

mod align;
mod ct2;
mod decode;
mod gemm;
mod kernels;
pub mod mel;
mod model;
mod text_decoder;

pub use ct2::{Ct2Error, Ct2Model};
pub use decode::LANGUAGE_CODES;
pub use kernels::Precision;

use crate::asr::{AsrError, TranscribeOptions, Transcriber, Transcript, WindowDone};
use crate::audio::SampleSource;
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
    alignment_heads: Vec<(usize, usize)>,
}

/// Alignment heads of the models Headroom installs, as openai-whisper publishes them (its
/// `_ALIGNMENT_HEADS`), for model files whose config does not list them.
const PUBLISHED_ALIGNMENT_HEADS: &[(&str, &[(usize, usize)])] = &[
    (
        "whisper-tiny.en",
        &[
            (1, 0),
            (2, 0),
            (2, 5),
            (3, 0),
            (3, 1),
            (3, 2),
            (3, 3),
            (3, 4),
        ],
    ),
    (
        "whisper-base",
        &[
            (3, 1),
            (4, 2),
            (4, 3),
            (4, 7),
            (5, 1),
            (5, 2),
            (5, 4),
            (5, 6),
        ],
    ),
];

impl WhisperEngine {
    /// Loads `model.bin`, `tokenizer.json` and `config.json` from a model directory, with
    /// the decoder's weights in int8.
    pub fn load(dir: &Path, name: &str) -> Result<WhisperEngine, AsrError> {
        Self::load_at(dir, name, Precision::Int8)
    }

    /// As [`WhisperEngine::load`], with the decoder's weights at `precision`.
    pub fn load_at(
        dir: &Path,
        name: &str,
        precision: Precision,
    ) -> Result<WhisperEngine, AsrError> {
        let started = std::time::Instant::now();
        let mut ct2 =
            Ct2Model::load(&dir.join("model.bin")).map_err(|e| AsrError::Model(e.to_string()))?;
        let read = started.elapsed();
        let model = Whisper::from_ct2(&mut ct2, precision).map_err(AsrError::model)?;
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
        // Alignment heads: the config's list, else the published one, else (as openai-whisper
        // does for unknown models) every head of the second half of the decoder.
        let mut alignment_heads: Vec<(usize, usize)> = config["alignment_heads"]
            .as_array()
            .map(|pairs| {
                pairs
                    .iter()
                    .filter_map(|p| Some((p[0].as_u64()? as usize, p[1].as_u64()? as usize)))
                    .collect()
            })
            .unwrap_or_default();
        if alignment_heads.is_empty() {
            alignment_heads = PUBLISHED_ALIGNMENT_HEADS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, heads)| heads.to_vec())
                .unwrap_or_else(|| {
                    let layers = model.dims.n_text_layers;
                    (layers / 2..layers)
                        .flat_map(|l| (0..model.decoder.heads).map(move |h| (l, h)))
                        .collect()
                });
        }
        tracing::debug!(
            model = name,
            precision = precision.name(),
            read_ms = read.as_millis() as u64,
            load_ms = started.elapsed().as_millis() as u64,
            "speech model loaded"
        );
        Ok(WhisperEngine {
            alignment_heads,
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

    fn sole_language(&self) -> Option<&str> {
        (!self.multilingual()).then_some("en")
    }

    /// Reads the whole audio: Whisper scales its log-mel by the audio's overall loudest
    /// value (with voice activity detection, the audio is one chunk of speech).
    fn transcribe_from(
        &self,
        samples: &dyn SampleSource,
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
            alignment_heads: &self.alignment_heads,
        };
        let samples = samples.read(0..samples.len())?;
        let decoded =
            decoding.transcribe(&samples, options, from_secs, window_done, progress, cancel)?;
        Ok(Transcript {
            speakers: Vec::new(),
            language: decoded.language,
            duration: samples.len() as f64 / mel::SAMPLE_RATE as f64,
            segments: decoded.segments,
        })
    }
}
