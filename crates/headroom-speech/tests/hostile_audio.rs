//! Crafted audio files, each refused (or read for what it really holds) with a clear error and
//! bounded memory. The allocator below measures every allocation of this test binary and fails
//! any that would take it past `CAP`, so a decoder that sizes a buffer from a lying header
//! makes this test fail instead of taking the machine down.

use headroom_speech::audio::{decode_file, AudioError, Bound, Decode, DecodeLimits};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const CAP: usize = 512 << 20;

struct Measured;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Measured {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::SeqCst) + layout.size();
        if live > CAP {
            LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
            return std::ptr::null_mut();
        }
        PEAK.fetch_max(live, Ordering::SeqCst);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::SeqCst);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Measured = Measured;

/// Tests in this binary measure memory one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Decodes `bytes` from a file named `name` and returns the result with the most memory the
/// decode held beyond what was live before it.
fn decode_measured(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    decode: &Decode,
) -> (Result<usize, AudioError>, usize) {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let before = LIVE.load(Ordering::SeqCst);
    PEAK.store(before, Ordering::SeqCst);
    let result = decode.file(&path).map(|audio| audio.samples.len());
    let peak = PEAK.load(Ordering::SeqCst) - before;
    (result, peak)
}

// ---- WAV -------------------------------------------------------------------------------------

/// A PCM WAV header as a crafted file would carry it; every field is what the caller says.
fn wav_header(rate: u32, channels: u16, bits: u16, data_len: u32) -> Vec<u8> {
    let block_align = channels.wrapping_mul(bits / 8);
    let mut h = Vec::new();
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&data_len.wrapping_add(36).to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes());
    h.extend_from_slice(&1u16.to_le_bytes()); // PCM
    h.extend_from_slice(&channels.to_le_bytes());
    h.extend_from_slice(&rate.to_le_bytes());
    h.extend_from_slice(&rate.wrapping_mul(u32::from(block_align)).to_le_bytes());
    h.extend_from_slice(&block_align.to_le_bytes());
    h.extend_from_slice(&bits.to_le_bytes());
    h.extend_from_slice(b"data");
    h.extend_from_slice(&data_len.to_le_bytes());
    h
}

/// 16-bit samples of a tone.
fn tone_pcm(frames: usize) -> Vec<u8> {
    (0..frames)
        .flat_map(|i| (((i as f32 * 0.07).sin() * 8000.0) as i16).to_le_bytes())
        .collect()
}

/// The file of the report, as `headroom transcribe` was given it.
fn evil_wav() -> Vec<u8> {
    let samples: Vec<u8> = (0..400)
        .map(|i| (128.0 + 60.0 * (i as f32 * 0.3).sin()) as u8)
        .collect();
    let file = with_body(wav_header(4_294_967_291, 1, 8, 400), &samples);
    assert_eq!(file.len(), 444);
    file
}

fn with_body(mut header: Vec<u8>, body: &[u8]) -> Vec<u8> {
    header.extend_from_slice(body);
    header
}

// ---- FLAC ------------------------------------------------------------------------------------

fn crc8(bytes: &[u8]) -> u8 {
    bytes.iter().fold(0u8, |mut crc, &b| {
        crc ^= b;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 {
                (crc << 1) ^ 0x07
            } else {
                crc << 1
            };
        }
        crc
    })
}

fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |mut crc, &b| {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x8005
            } else {
                crc << 1
            };
        }
        crc
    })
}

/// FLAC's UTF-8-like coding of a frame number.
fn flac_number(n: u64) -> Vec<u8> {
    if n < 0x80 {
        return vec![n as u8];
    }
    let mut continuation = Vec::new();
    let mut rest = n;
    let mut bytes = 1;
    loop {
        continuation.push(0x80 | (rest & 0x3f) as u8);
        rest >>= 6;
        bytes += 1;
        // The lead byte holds 7 - bytes bits of payload.
        if rest < (1 << (7 - bytes)) {
            break;
        }
    }
    let lead = (0xffu16 << (8 - bytes)) as u8 | rest as u8;
    let mut out = vec![lead];
    out.extend(continuation.into_iter().rev());
    out
}

/// A mono 16-bit FLAC stream whose every frame is one constant subframe of `block` samples:
/// a few bytes that decode to `block` samples each.
fn constant_flac(rate: u32, declared_total: u64, block: u16, frames: u64) -> Vec<u8> {
    let mut f = b"fLaC".to_vec();
    f.push(0x80); // last metadata block, STREAMINFO
    f.extend_from_slice(&[0, 0, 34]);
    f.extend_from_slice(&block.to_be_bytes());
    f.extend_from_slice(&block.to_be_bytes());
    f.extend_from_slice(&[0; 6]); // frame sizes unknown
                                  // rate (20 bits), channels - 1 (3), bits - 1 (5), total samples (36)
    let packed: u64 = (u64::from(rate) << 44) | (15 << 36) | (declared_total & 0xf_ffff_ffff);
    f.extend_from_slice(&packed.to_be_bytes());
    f.extend_from_slice(&[0; 16]); // MD5 unknown
    for n in 0..frames {
        let mut frame = vec![0xff, 0xf8, 0x70, 0x08];
        frame.extend(flac_number(n));
        frame.extend_from_slice(&(block - 1).to_be_bytes());
        frame.push(crc8(&frame));
        frame.push(0x00); // CONSTANT subframe, no wasted bits
        frame.extend_from_slice(&0x1000u16.to_be_bytes());
        let crc = crc16(&frame);
        frame.extend_from_slice(&crc.to_be_bytes());
        f.extend(frame);
    }
    f
}

// ---- Ogg, MP4, MP3, AAC ------------------------------------------------------------------------

fn ogg_crc(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0u32, |mut crc, &b| {
        crc ^= u32::from(b) << 24;
        for _ in 0..8 {
            crc = if crc & 0x8000_0000 != 0 {
                (crc << 1) ^ 0x04c1_1db7
            } else {
                crc << 1
            };
        }
        crc
    })
}

fn ogg_page(header_type: u8, sequence: u32, packet: &[u8]) -> Vec<u8> {
    let mut page = b"OggS".to_vec();
    page.push(0);
    page.push(header_type);
    page.extend_from_slice(&0u64.to_le_bytes());
    page.extend_from_slice(&0x1234u32.to_le_bytes());
    page.extend_from_slice(&sequence.to_le_bytes());
    page.extend_from_slice(&[0; 4]);
    page.push(1);
    page.push(packet.len() as u8);
    page.extend_from_slice(packet);
    let crc = ogg_crc(&page);
    page[22..26].copy_from_slice(&crc.to_le_bytes());
    page
}

/// An Ogg Vorbis identification header declaring `rate` and `channels`.
fn vorbis_identification(rate: u32, channels: u8) -> Vec<u8> {
    let mut packet = b"\x01vorbis".to_vec();
    packet.extend_from_slice(&0u32.to_le_bytes());
    packet.push(channels);
    packet.extend_from_slice(&rate.to_le_bytes());
    packet.extend_from_slice(&[0; 12]);
    packet.push(0xb8);
    packet.push(1);
    ogg_page(0x02, 0, &packet)
}

fn mp4_box(kind: &[u8; 4], declared_len: u32, body: &[u8]) -> Vec<u8> {
    let mut b = declared_len.to_be_bytes().to_vec();
    b.extend_from_slice(kind);
    b.extend_from_slice(body);
    b
}

// ---- the corpus ------------------------------------------------------------------------------

#[test]
fn crafted_files_are_refused_with_clear_errors_and_bounded_memory() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let decode = Decode {
        to_rate: Some(16_000),
        ..Decode::default()
    };
    let mut ftyp = mp4_box(b"ftyp", 20, b"M4A \0\0\0\0M4A ");
    ftyp.extend(mp4_box(b"moov", 0xffff_fff0, &[0; 64]));

    type Check = fn(&AudioError) -> bool;
    let refused_rate: Check = |e| {
        matches!(
            e,
            AudioError::Refused {
                bound: Bound::SampleRate { .. },
                ..
            }
        )
    };
    let refused_channels: Check = |e| {
        matches!(
            e,
            AudioError::Refused {
                bound: Bound::Channels { .. },
                ..
            }
        )
    };
    let refused_bits: Check = |e| {
        matches!(
            e,
            AudioError::Refused {
                bound: Bound::Bits { .. },
                ..
            }
        ) || matches!(e, AudioError::Corrupt { .. })
    };
    let too_long: Check = |e| matches!(e, AudioError::TooLong { .. });
    let bomb: Check = |e| {
        matches!(
            e,
            AudioError::Refused {
                bound: Bound::Expansion { .. },
                ..
            }
        )
    };
    let corrupt: Check = |e| matches!(e, AudioError::Corrupt { .. });
    let empty: Check = |e| matches!(e, AudioError::Empty { .. });
    let unreadable: Check = |e| {
        matches!(
            e,
            AudioError::Unsupported { .. } | AudioError::Corrupt { .. } | AudioError::Empty { .. }
        ) || matches!(e, AudioError::Refused { .. })
    };

    let cases: Vec<(&str, Vec<u8>, Check)> = vec![
        // The file of the report: 444 bytes of 8-bit mono at 4,294,967,291 Hz (resampling it
        // to 16 kHz asked for a 17 GB filter and aborted the process).
        ("evil.wav", evil_wav(), refused_rate),
        (
            "slow.wav",
            with_body(wav_header(1_000, 1, 16, 800), &tone_pcm(400)),
            refused_rate,
        ),
        (
            "channels.wav",
            with_body(wav_header(16_000, 65_535, 16, 0xffff_fff0), &[7; 4000]),
            unreadable,
        ),
        (
            "channels-64.wav",
            with_body(wav_header(16_000, 64, 16, 0xffff_ff80), &[7; 4096]),
            refused_channels,
        ),
        (
            "bits.wav",
            with_body(wav_header(16_000, 1, 0, 4000), &tone_pcm(2000)),
            refused_bits,
        ),
        (
            "truncated.wav",
            wav_header(16_000, 1, 16, 4000)[..30].to_vec(),
            corrupt,
        ),
        ("zero-data.wav", wav_header(16_000, 1, 16, 0), empty),
        ("zero-length.flac", Vec::new(), empty),
        // FLAC: a rate no reader takes, a header that admits to 20 hours, and a few hundred
        // KB of constant frames that would decode to five hours.
        (
            "rate.flac",
            constant_flac(655_350, 65_535, 65_535, 2),
            refused_rate,
        ),
        (
            "declared-long.flac",
            constant_flac(48_000, 20 * 3600 * 48_000, 4096, 2),
            too_long,
        ),
        (
            "bomb.flac",
            constant_flac(48_000, 0, 65_535, 5 * 3600 * 48_000 / 65_535),
            bomb,
        ),
        (
            "truncated.flac",
            constant_flac(48_000, 0, 4096, 3)[..60].to_vec(),
            unreadable,
        ),
        (
            "rate.ogg",
            vorbis_identification(4_294_967_291, 1),
            unreadable,
        ),
        (
            "channels.ogg",
            vorbis_identification(48_000, 255),
            unreadable,
        ),
        ("huge-box.m4a", ftyp, unreadable),
        (
            "id3-only.mp3",
            b"ID3\x04\x00\x00\x00\x00\x00\x00".to_vec(),
            unreadable,
        ),
        (
            "junk-frames.mp3",
            [0xffu8, 0xfb, 0x90, 0x64].repeat(500),
            unreadable,
        ),
        (
            "reserved-rate.aac",
            [0xff, 0xf1, 0x7c, 0x40, 0x01, 0x7f, 0xfc].repeat(50),
            unreadable,
        ),
    ];
    let mut failures = Vec::new();
    for (name, bytes, expected) in &cases {
        let (result, peak) = decode_measured(dir.path(), name, bytes, &decode);
        match result {
            Ok(samples) => failures.push(format!("{name}: decoded {samples} samples")),
            Err(e) => {
                let message = e.to_string();
                if !expected(&e) {
                    failures.push(format!("{name}: unexpected error {e:?}"));
                }
                if !message.contains(name) {
                    failures.push(format!(
                        "{name}: the message does not name the file: {message}"
                    ));
                }
                if peak > 32 << 20 {
                    failures.push(format!("{name}: held {} MiB", peak >> 20));
                }
                eprintln!(
                    "{name} ({} bytes, peak {} KiB): {message}",
                    bytes.len(),
                    peak >> 10
                );
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_reported_rate_is_explained_in_words() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("evil.wav");
    std::fs::write(&path, evil_wav()).unwrap();
    let err = decode_file(&path, DecodeLimits::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "{} is refused: it declares a sample rate of 4294967291 Hz; Headroom reads 8000–384000 Hz",
            path.display()
        )
    );
}

#[test]
fn a_lying_data_size_reads_what_the_file_holds() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // The header claims 4 GB of samples; the file holds one second.
    let bytes = with_body(wav_header(16_000, 1, 16, 0xffff_fff0), &tone_pcm(16_000));
    let (result, peak) = decode_measured(dir.path(), "lying.wav", &bytes, &Decode::default());
    assert_eq!(result.unwrap(), 16_000);
    assert!(peak < 4 << 20, "held {} KiB", peak >> 10);
}

#[test]
fn decoded_size_is_bounded_while_decoding_not_only_by_the_header() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // Constant frames of 4096 samples (as an encoder writes digital silence) under the
    // expansion bound, with no declared length: the output bound stops it.
    let decode = Decode {
        limits: DecodeLimits {
            max_decoded_bytes: 16 << 20,
            ..DecodeLimits::default()
        },
        ..Decode::default()
    };
    let bytes = constant_flac(48_000, 0, 4096, 3 * 60 * 48_000 / 4096);
    let (result, peak) = decode_measured(dir.path(), "long.flac", &bytes, &decode);
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            AudioError::Refused {
                bound: Bound::DecodedSize { .. },
                ..
            }
        ),
        "{err}"
    );
    assert!(peak < 48 << 20, "held {} MiB", peak >> 20);
}

#[test]
fn a_real_constant_tone_flac_still_decodes() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // Ten seconds of a constant (DC) signal: legal, and far below every bound.
    let bytes = constant_flac(48_000, 10 * 48_000, 4096, 10 * 48_000 / 4096);
    let (result, _) = decode_measured(dir.path(), "dc.flac", &bytes, &Decode::default());
    assert_eq!(result.unwrap(), (10 * 48_000 / 4096) * 4096);
}

#[test]
fn what_the_fuzzer_found_stays_refused() {
    // Each `crash-*` input of the audio fuzz target (one byte choosing the extension hint, then
    // the file) made a decoder allocate gigabytes or panic before it was fixed.
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/audio_decode");
    let dir = tempfile::tempdir().unwrap();
    let mut seen = 0;
    for entry in std::fs::read_dir(&corpus).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("crash-") {
            continue;
        }
        seen += 1;
        let input = std::fs::read(&path).unwrap();
        let (result, peak) = decode_measured(dir.path(), &name, &input[1..], &Decode::default());
        assert!(result.is_err(), "{name} decoded");
        assert!(peak < 32 << 20, "{name} held {} MiB", peak >> 20);
    }
    assert!(seen >= 2, "the crash inputs are in {}", corpus.display());
}
