//! Decoding audio files to mono samples: WAV with hound, everything else (MP3, FLAC, OGG
//! Vorbis, AAC/M4A) with symphonia. Every failure names the file and the problem.

use super::{Audio, AudioError};
use std::path::Path;
use symphonia::core::audio::SampleBuffer;
use symphonia::core::codecs::DecoderOptions;
use symphonia::core::errors::Error as SymphoniaError;
use symphonia::core::formats::FormatOptions;
use symphonia::core::io::MediaSourceStream;
use symphonia::core::meta::MetadataOptions;
use symphonia::core::probe::Hint;

/// Bounds on what a decode accepts.
#[derive(Debug, Clone, Copy)]
pub struct DecodeLimits {
    /// Longest audio accepted, in seconds.
    pub max_seconds: f64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_seconds: 4.0 * 3600.0,
        }
    }
}

/// Decodes a file to mono.
pub fn decode_file(path: &Path, limits: DecodeLimits) -> Result<Audio, AudioError> {
    let bytes = std::fs::read(path).map_err(|e| AudioError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let hint = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_string);
    decode_bytes(bytes, hint.as_deref(), path, limits)
}

/// Decodes an in-memory file to mono; `shown` names it in errors.
pub fn decode_bytes(
    bytes: Vec<u8>,
    extension: Option<&str>,
    shown: &Path,
    limits: DecodeLimits,
) -> Result<Audio, AudioError> {
    let path = shown.to_path_buf();
    if bytes.is_empty() {
        return Err(AudioError::Empty { path });
    }
    let audio = if bytes.starts_with(b"RIFF") && bytes.get(8..12) == Some(b"WAVE") {
        decode_wav(&bytes, &path, limits)?
    } else {
        decode_other(bytes, extension, &path, limits)?
    };
    if audio.samples.is_empty() {
        return Err(AudioError::Empty { path });
    }
    // Below -80 dBFS everywhere: nothing to hear.
    if audio.peak() < 1e-4 {
        return Err(AudioError::Silent { path });
    }
    Ok(audio)
}

fn too_long(path: &Path, frames: u64, rate: u32, limits: DecodeLimits) -> Result<(), AudioError> {
    let seconds = frames as f64 / rate.max(1) as f64;
    if seconds > limits.max_seconds {
        return Err(AudioError::TooLong {
            path: path.to_path_buf(),
            seconds,
            limit: limits.max_seconds,
        });
    }
    Ok(())
}

fn decode_wav(bytes: &[u8], path: &Path, limits: DecodeLimits) -> Result<Audio, AudioError> {
    let corrupt = |e: hound::Error| AudioError::Corrupt {
        path: path.to_path_buf(),
        detail: e.to_string(),
    };
    let reader = hound::WavReader::new(std::io::Cursor::new(bytes)).map_err(corrupt)?;
    let spec = reader.spec();
    if spec.channels == 0 || spec.sample_rate == 0 {
        return Err(AudioError::Corrupt {
            path: path.to_path_buf(),
            detail: "the header declares no channels or a zero sample rate".into(),
        });
    }
    too_long(path, reader.duration() as u64, spec.sample_rate, limits)?;
    let channels = spec.channels as usize;
    let interleaved: Vec<f32> = match spec.sample_format {
        hound::SampleFormat::Float => reader
            .into_samples::<f32>()
            .collect::<Result<_, _>>()
            .map_err(corrupt)?,
        hound::SampleFormat::Int => {
            let scale = 1.0 / (1u64 << (spec.bits_per_sample - 1)) as f32;
            reader
                .into_samples::<i32>()
                .map(|s| s.map(|v| v as f32 * scale))
                .collect::<Result<_, _>>()
                .map_err(corrupt)?
        }
    };
    Ok(Audio {
        samples: downmix(&interleaved, channels),
        sample_rate: spec.sample_rate,
    })
}

fn downmix(interleaved: &[f32], channels: usize) -> Vec<f32> {
    if channels == 1 {
        return interleaved.to_vec();
    }
    interleaved
        .chunks_exact(channels)
        .map(|frame| frame.iter().sum::<f32>() / channels as f32)
        .collect()
}

fn decode_other(
    bytes: Vec<u8>,
    extension: Option<&str>,
    path: &Path,
    limits: DecodeLimits,
) -> Result<Audio, AudioError> {
    let unsupported = |detail: String| AudioError::Unsupported {
        path: path.to_path_buf(),
        detail,
    };
    let corrupt = |detail: String| AudioError::Corrupt {
        path: path.to_path_buf(),
        detail,
    };
    let source = MediaSourceStream::new(Box::new(std::io::Cursor::new(bytes)), Default::default());
    let mut hint = Hint::new();
    if let Some(ext) = extension {
        hint.with_extension(ext);
    }
    let probed = symphonia::default::get_probe()
        .format(
            &hint,
            source,
            &FormatOptions::default(),
            &MetadataOptions::default(),
        )
        .map_err(|e| unsupported(e.to_string()))?;
    let mut format = probed.format;
    let track = format
        .default_track()
        .ok_or_else(|| unsupported("no audio track".into()))?;
    let track_id = track.id;
    let params = track.codec_params.clone();
    let rate = params
        .sample_rate
        .ok_or_else(|| corrupt("the audio track declares no sample rate".into()))?;
    if let Some(frames) = params.n_frames {
        too_long(path, frames, rate, limits)?;
    }
    let mut decoder = symphonia::default::get_codecs()
        .make(&params, &DecoderOptions::default())
        .map_err(|e| unsupported(e.to_string()))?;
    let mut samples: Vec<f32> = Vec::new();
    let mut buffer: Option<SampleBuffer<f32>> = None;
    let max_samples = (limits.max_seconds * rate as f64) as usize;
    loop {
        let packet = match format.next_packet() {
            Ok(p) => p,
            Err(SymphoniaError::IoError(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                break
            }
            Err(SymphoniaError::ResetRequired) => break,
            Err(e) => return Err(corrupt(e.to_string())),
        };
        if packet.track_id() != track_id {
            continue;
        }
        let decoded = match decoder.decode(&packet) {
            Ok(d) => d,
            // A damaged packet: skip it, as players do; a file of only damage ends up empty.
            Err(SymphoniaError::DecodeError(_)) => continue,
            Err(e) => return Err(corrupt(e.to_string())),
        };
        let spec = *decoded.spec();
        let channels = spec.channels.count().max(1);
        let buf = buffer.get_or_insert_with(|| SampleBuffer::new(decoded.capacity() as u64, spec));
        if buf.capacity() < decoded.capacity() * channels {
            *buf = SampleBuffer::new(decoded.capacity() as u64, spec);
        }
        buf.copy_interleaved_ref(decoded);
        samples.extend(downmix(buf.samples(), channels));
        if samples.len() > max_samples {
            too_long(path, samples.len() as u64, rate, limits)?;
        }
    }
    Ok(Audio {
        samples,
        sample_rate: rate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audio::wav_bytes;

    fn tone_wav(rate: u32, secs: f32, amplitude: f32) -> Vec<u8> {
        let samples = (0..(rate as f32 * secs) as usize)
            .map(|i| (i as f32 * 0.05).sin() * amplitude)
            .collect();
        wav_bytes(&Audio {
            samples,
            sample_rate: rate,
        })
    }

    #[test]
    fn wav_round_trips() {
        let audio = decode_bytes(
            tone_wav(22_050, 0.5, 0.5),
            Some("wav"),
            Path::new("t.wav"),
            DecodeLimits::default(),
        )
        .unwrap();
        assert_eq!(audio.sample_rate, 22_050);
        assert_eq!(audio.samples.len(), 11_025);
        assert!((audio.peak() - 0.5).abs() < 0.01);
    }

    #[test]
    fn empty_silent_garbage_and_long_files_get_named_errors() {
        let p = Path::new("clip.wav");
        let limits = DecodeLimits::default();
        assert!(matches!(
            decode_bytes(vec![], None, p, limits),
            Err(AudioError::Empty { .. })
        ));
        let silent = decode_bytes(tone_wav(16_000, 1.0, 0.0), None, p, limits).unwrap_err();
        assert_eq!(
            silent.to_string(),
            "clip.wav contains no sound (it is silent)"
        );
        let garbage = decode_bytes(
            b"this is not audio at all".repeat(10),
            Some("txt"),
            Path::new("notes.txt"),
            limits,
        )
        .unwrap_err();
        assert!(
            matches!(garbage, AudioError::Unsupported { .. }),
            "{garbage}"
        );
        assert!(garbage
            .to_string()
            .starts_with("notes.txt is not an audio format"));
        let mut truncated = tone_wav(16_000, 1.0, 0.5);
        truncated.truncate(30);
        assert!(matches!(
            decode_bytes(truncated, None, p, limits),
            Err(AudioError::Corrupt { .. })
        ));
        let short_limit = DecodeLimits { max_seconds: 0.5 };
        let long = decode_bytes(tone_wav(16_000, 1.0, 0.5), None, p, short_limit).unwrap_err();
        assert!(matches!(long, AudioError::TooLong { .. }), "{long}");
    }

    #[test]
    fn stereo_is_downmixed() {
        assert_eq!(downmix(&[1.0, 0.0, 0.5, 0.5], 2), vec![0.5, 0.5]);
    }
}
