//! The audio decoders' entry point (`Decode::bytes`: WAV with hound, MP3/FLAC/OGG/AAC/M4A/MKV/
//! WebM with symphonia, Opus with libopus), with the default limits.
//!
//! Input: one byte picking the extension hint (and whether to resample to 16 kHz while
//! decoding), then the file.
//!
//! `Decode` turns a panic inside a decoder into `AudioError::DecoderFailed`. libFuzzer's panic
//! hook aborts on any panic, caught or not; here a panic inside symphonia (a dependency, not
//! ours to fix) is only logged, once per place, and must come back as `DecoderFailed`. Any
//! other panic still aborts. `FUZZ_STRICT_PANICS=1` makes symphonia's abort too.

#![no_main]

#[path = "alloc_guard.rs"]
mod alloc_guard;

use headroom_speech::audio::{AudioError, Decode};
use libfuzzer_sys::fuzz_target;
use std::collections::HashSet;
use std::path::Path;
use std::sync::Mutex;

/// Where symphonia panicked, for the log.
static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);

fn tolerate_symphonia_panics() {
    if std::env::var_os("FUZZ_STRICT_PANICS").is_some_and(|v| v == "1") {
        return;
    }
    let abort = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let place = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        // Inside symphonia: its own file, or a std function it called (an overflow in
        // `u32::pow` under its Vorbis codebook reader is placed in core).
        let inside = place.contains("/symphonia-")
            || std::backtrace::Backtrace::force_capture()
                .to_string()
                .contains("/symphonia-");
        if !inside {
            return abort(info);
        }
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        if seen.get_or_insert_with(HashSet::new).insert(place) {
            eprintln!("==symphonia-panic== (caught by Decode, reported as DecoderFailed) {info}");
        }
    }));
}

const HINTS: [Option<&str>; 11] = [
    None,
    Some("wav"),
    Some("mp3"),
    Some("flac"),
    Some("ogg"),
    Some("m4a"),
    Some("aac"),
    Some("bin"),
    Some("mkv"),
    Some("webm"),
    Some("opus"),
];

fuzz_target!(init: tolerate_symphonia_panics(), |data: &[u8]| {
    let Some((&pick, file)) = data.split_first() else {
        return;
    };
    let decode = Decode {
        to_rate: (pick & 0x80 != 0).then_some(16_000),
        ..Decode::default()
    };
    let hint = HINTS[usize::from(pick) % HINTS.len()];
    match decode.bytes(file.to_vec(), hint, Path::new("fuzz")) {
        Ok(audio) => {
            assert!(!audio.samples.is_empty());
            assert!(audio.sample_rate > 0);
        }
        Err(AudioError::DecoderFailed { detail, .. }) => {
            // Only a panic inside symphonia may end up here (any other aborted in the hook).
            assert!(!detail.is_empty());
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
