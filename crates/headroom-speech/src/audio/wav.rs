//! 16-bit PCM WAV output, written atomically.

use super::{Audio, AudioError};
use std::io::Cursor;
use std::path::Path;

/// The audio as a 16-bit mono WAV file in memory.
pub fn wav_bytes(audio: &Audio) -> Vec<u8> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: audio.sample_rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut cursor = Cursor::new(Vec::new());
    {
        let mut writer = hound::WavWriter::new(&mut cursor, spec).expect("writing to memory");
        for s in &audio.samples {
            let v = (s.clamp(-1.0, 1.0) * i16::MAX as f32).round() as i16;
            writer.write_sample(v).expect("writing to memory");
        }
        writer.finalize().expect("writing to memory");
    }
    cursor.into_inner()
}

/// Writes a WAV file so that readers never see a half-written file.
pub fn write_wav(path: &Path, audio: &Audio) -> Result<(), AudioError> {
    headroom_base::fsutil::write_atomic(path, &wav_bytes(audio)).map_err(|e| AudioError::Write {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}
