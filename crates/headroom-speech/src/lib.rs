//! Headroom's speech engines, with no knowledge of lanes or admission: decoding and resampling
//! any common audio file, the embedded Whisper transcriber, espeak-ng and the neural Piper
//! voice, the model installer, audio devices, and OpenAI-compatible speech servers by URL.
//! Scheduling these engines on the audio lane is `headroom-services`' job, so a change to
//! admission never recompiles them.
//!
//! ```no_run
//! use headroom_speech::asr::{whisper::WhisperEngine, Transcriber};
//! use headroom_speech::audio::{decode_file, DecodeLimits};
//! use headroom_speech::models;
//!
//! let dir = models::locate(&models::default_models_dir(), "whisper-tiny.en")?;
//! let engine = WhisperEngine::load(&dir, "whisper-tiny.en")?;
//! let audio = decode_file("interview.flac".as_ref(), DecodeLimits::default())?.to_16k()?;
//! let cancel = Default::default();
//! let transcript = engine.transcribe(&audio.samples, &Default::default(), &|_| {}, &cancel)?;
//! println!("{}", transcript.text());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! | module | for |
//! |---|---|
//! | [`audio`] | decode, resample, WAV, record and play on devices |
//! | [`asr`] | the [`asr::Transcriber`] trait, embedded Whisper, TXT/SRT/VTT/JSON export |
//! | [`tts`] | the [`tts::Synthesizer`] trait, espeak-ng, Piper |
//! | [`models`] | the speech models: specs, install from PyPI with checksums, status |
//! | [`remote`] | OpenAI-compatible transcription and speech servers plugged in by URL |

pub mod asr;
pub mod audio;
pub mod cloning;
pub mod edit;
pub mod models;
mod onnx;
pub mod remote;
mod remote_error;
pub mod tts;
pub mod voice;
