//! Audio in and out: decoding any common file to mono samples, resampling, writing WAV.

mod decode;
mod device;
pub mod encode;
mod loudness;
pub mod mel;
mod opus_decode;
mod pauses;
mod peaks;
mod recording;
mod resample;
mod sniff;
mod source;
pub mod stretch;
pub mod timeline;
mod wav;

pub use decode::{
    decode_bytes, decode_file, Decode, DecodeLimits, Decoded, SampleSink, Stretch, AUDIO_EXTENSIONS,
};
pub(crate) use decode::{part_in, sample_range};
pub(crate) use device::play_fed;
pub use device::{input_devices, play, play_file, record, record_to};
pub use encode::{encode, EncodeError, Finished, SpeechFormat, StreamEncoder, UnknownFormat};
pub use loudness::Loudness;
pub use pauses::{pieces_at_pauses, PiecePlan};
pub use peaks::{Peaks, MAX_PEAKS};
pub use recording::{partial_path, repair_partial, repair_partial_in, RecordTarget, WavRecorder};
pub use resample::{resample, StreamResampler};
pub use source::{SampleSource, SpoolWriter, SpooledAudio};
pub use wav::{wav_bytes, write_wav, WavStream};

use std::path::PathBuf;

/// Mono samples in [-1, 1] at a sample rate.
#[derive(Debug, Clone, PartialEq)]
pub struct Audio {
    pub samples: Vec<f32>,
    pub sample_rate: u32,
}

impl Audio {
    pub fn duration_secs(&self) -> f64 {
        self.samples.len() as f64 / self.sample_rate as f64
    }

    /// The loudest sample's magnitude.
    pub fn peak(&self) -> f32 {
        self.samples.iter().fold(0.0f32, |m, s| m.max(s.abs()))
    }

    /// This audio at 16 kHz, as speech models want it.
    pub fn to_16k(&self) -> Result<Audio, AudioError> {
        Ok(Audio {
            samples: resample(&self.samples, self.sample_rate, 16_000)?,
            sample_rate: 16_000,
        })
    }
}

/// A problem with an audio file, naming the file and what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AudioError {
    #[error("cannot read {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{path} is empty")]
    Empty { path: PathBuf },
    #[error("{path} is not an audio format Headroom can read ({detail}); use WAV, MP3, FLAC, OGG (Vorbis or Opus), AAC/M4A, or a video's sound (MP4, MOV, MKV, WebM)")]
    Unsupported { path: PathBuf, detail: String },
    #[error("{path} is damaged: {detail}")]
    Corrupt { path: PathBuf, detail: String },
    #[error("{path} contains no sound (it is silent)")]
    Silent { path: PathBuf },
    #[error("{path} is too long: {seconds:.0} s, the limit is {limit:.0} s")]
    TooLong {
        path: PathBuf,
        seconds: f64,
        limit: f64,
    },
    #[error("{path} is refused: {bound}")]
    Refused { path: PathBuf, bound: Bound },
    #[error("the decoder failed on {path}: {detail}")]
    DecoderFailed { path: PathBuf, detail: String },
    #[error("decoding {path} was cancelled")]
    Cancelled { path: PathBuf },
    #[error("cannot resample from {from} Hz to {to} Hz: {detail}")]
    Resample { from: u32, to: u32, detail: String },
    #[error("sound device: {message}")]
    Device { message: String },
    #[error("cannot write {path}: {message}")]
    Write { path: PathBuf, message: String },
}

/// A limit a file's header or decoded output went past (see [`DecodeLimits`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Bound {
    #[error("it declares a sample rate of {rate} Hz; Headroom reads {min}–{max} Hz")]
    SampleRate { rate: u32, min: u32, max: u32 },
    #[error("it declares {channels} channels; Headroom reads 1–{max}")]
    Channels { channels: u32, max: u32 },
    #[error("it declares {bits} bits per sample; Headroom reads 1–32")]
    Bits { bits: u32 },
    #[error("it would decode to {} MiB, over the {} MiB limit", bytes >> 20, limit >> 20)]
    DecodedSize { bytes: u64, limit: u64 },
    #[error("it decodes to {samples} samples from {bytes} bytes, more than {max} per byte, which no real recording does")]
    Expansion { samples: u64, bytes: u64, max: u64 },
}
