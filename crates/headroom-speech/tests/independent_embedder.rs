//! The independent embedder (Resemblyzer's GE2E encoder, in Rust) against the Python package's
//! own output for a clip made here: its mel front end and its embedding must agree, so a broken
//! forward pass, a misread checkpoint or a changed front end fails here. Needs the `resemblyzer`
//! model installed under `HEADROOM_MODELS_DIR` (scripts/test installs it).

use headroom_speech::audio::Audio;
use headroom_speech::models;
use headroom_speech::voice::IndependentEmbedder;
use std::path::PathBuf;

/// A 3 s voiced sound: a gliding 120–180 Hz pulse train's first 20 harmonics shaped by two
/// moving "formants", three swells a second (tests/fixtures/resemblyzer_generated.json was
/// made from the same formula in numpy).
fn generated(rate: usize) -> Audio {
    let samples = (0..3 * rate)
        .map(|n| {
            let t = n as f64 / rate as f64;
            let pi = std::f64::consts::PI;
            let phase = 2.0 * pi * (120.0 * t + (30.0 / pi) * (1.0 - (pi * t).cos()));
            let f0 = 120.0 + 30.0 * (pi * t).sin();
            let mut x = 0.0;
            for k in 1..=20 {
                let f = k as f64 * f0;
                let second = 1200.0 + 400.0 * (2.0 * pi * 0.7 * t).sin();
                let formant = (-((f - 700.0) / 300.0).powi(2)).exp()
                    + 0.5 * (-((f - second) / 300.0).powi(2)).exp()
                    + 0.05;
                x += (k as f64 * phase).sin() / k as f64 * formant;
            }
            let envelope = 0.5 - 0.5 * (2.0 * pi * 3.0 * t).cos();
            (0.1 * envelope * x) as f32
        })
        .collect();
    Audio {
        samples,
        sample_rate: rate as u32,
    }
}

fn fixture() -> serde_json::Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/resemblyzer_generated.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn embedder() -> IndependentEmbedder {
    let root = std::env::var_os("HEADROOM_MODELS_DIR")
        .expect("HEADROOM_MODELS_DIR is not set: run the tests with scripts/test");
    let dir = models::locate(&PathBuf::from(root), models::INDEPENDENT_EMBEDDER_MODEL)
        .expect("install it with `headroom models install resemblyzer`");
    IndependentEmbedder::load(&dir).unwrap()
}

#[test]
fn the_rust_encoder_matches_resemblyzer_in_python() {
    let fixture = fixture();
    let embedder = embedder();
    let audio = generated(16_000);

    // The front end: one mel frame, within float rounding of librosa's.
    let expected_mel = floats(&fixture["mel_frame_10"]);
    let mel = embedder.mel(&audio.samples);
    let frame = &mel[10 * 40..11 * 40];
    for (band, (got, want)) in frame.iter().zip(&expected_mel).enumerate() {
        assert!(
            (got - want).abs() <= 1e-3 * want.abs().max(1e-3),
            "mel band {band}: {got} vs {want}"
        );
    }

    // The embedding (the clip is quieter than -30 dBFS: raised first): the same direction as
    // PyTorch's, value by value.
    let expected = floats(&fixture["embedding"]);
    let got = embedder.embed(&audio).unwrap();
    let cosine: f32 = got.values().iter().zip(&expected).map(|(a, b)| a * b).sum();
    assert!(cosine >= 0.9999, "cosine to Python's embedding {cosine}");
    for (i, (a, b)) in got.values().iter().zip(&expected).enumerate() {
        assert!((a - b).abs() < 2e-3, "value {i}: {a} vs {b}");
    }
}

#[test]
fn other_rates_are_resampled_and_short_clips_refused() {
    let embedder = embedder();
    let at_16k = embedder.embed(&generated(16_000)).unwrap();
    let at_48k = embedder.embed(&generated(48_000)).unwrap();
    let cosine = at_16k.similarity(&at_48k);
    assert!(cosine > 0.99, "{cosine}");
    let short = Audio {
        samples: vec![0.1; 4_000],
        sample_rate: 16_000,
    };
    assert!(embedder.embed(&short).is_err());
}
