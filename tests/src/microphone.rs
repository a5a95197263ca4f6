//! A microphone that speaks a file: an ALSA configuration whose default input is ALSA's file
//! plugin over the null device, so recording works with no sound card and hears real speech.

use headroom_speech::audio::{decode_file, resample, DecodeLimits};
use std::path::{Path, PathBuf};

/// The rate the recorder takes from ALSA's null device (cpal's default input config for it).
/// The file plugin reads its file at the recorder's rate, so the file is written at this one.
pub const NULL_DEVICE_RATE: u32 = 44_100;

/// A microphone speaking a file, for `ALSA_CONFIG_PATH`.
pub struct SpeakingMicrophone {
    /// The ALSA configuration to point `ALSA_CONFIG_PATH` at.
    pub config: PathBuf,
    /// How long the speech lasts; silence follows it.
    pub speech_secs: f64,
}

/// Writes, into `dir`, `clip` as the microphone's sound (mono 16-bit at [`NULL_DEVICE_RATE`])
/// followed by `then_silence_secs` of silence, and the ALSA configuration that plays it. The
/// null device has no clock: the recorder hears the whole file at once, not in real time.
pub fn speaking_microphone(dir: &Path, clip: &Path, then_silence_secs: f64) -> SpeakingMicrophone {
    std::fs::create_dir_all(dir).unwrap();
    let audio = decode_file(clip, DecodeLimits::default()).unwrap();
    let samples = resample(&audio.samples, audio.sample_rate, NULL_DEVICE_RATE).unwrap();
    let speech_secs = samples.len() as f64 / NULL_DEVICE_RATE as f64;
    let mut raw: Vec<u8> = samples
        .iter()
        .flat_map(|s| ((s.clamp(-1.0, 1.0) * 32767.0) as i16).to_le_bytes())
        .collect();
    raw.resize(
        raw.len() + (then_silence_secs * NULL_DEVICE_RATE as f64) as usize * 2,
        0,
    );
    let raw_path = dir.join("microphone.raw");
    std::fs::write(&raw_path, raw).unwrap();
    let config = dir.join("speaking-microphone.conf");
    std::fs::write(
        &config,
        format!(
            "</usr/share/alsa/alsa.conf>\n\
             pcm.!default {{\n  type plug\n  slave {{ pcm \"speaking\"; format S16_LE; rate {NULL_DEVICE_RATE}; channels 1 }}\n}}\n\
             pcm.speaking {{\n  type file\n  slave.pcm \"null\"\n  file \"/dev/null\"\n  infile \"{}\"\n  format \"raw\"\n}}\n",
            raw_path.display()
        ),
    )
    .unwrap();
    SpeakingMicrophone {
        config,
        speech_secs,
    }
}
