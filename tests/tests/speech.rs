//! Speech with real models and real audio: espeak-ng speaks, the embedded Whisper engine
//! (whisper-tiny.en, installed by scripts/test) transcribes, in every input format.

use headroom_core::admission::Priority;
use headroom_core::config::Config;
use headroom_services::speech::{AudioInput, SpeechError, SpeechService};
use headroom_speech::asr::{word_error_rate, TranscribeOptions};
use headroom_speech::audio::{decode_file, write_wav, AudioError, DecodeLimits};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const MODEL: &str = "whisper-tiny.en";

fn service() -> Arc<SpeechService> {
    assert!(
        std::env::var_os("HEADROOM_MODELS_DIR").is_some(),
        "HEADROOM_MODELS_DIR is not set: run the tests with scripts/test, which installs {MODEL}"
    );
    headroom_tests::services(Config::default()).speech().clone()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("headroom-speech-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

async fn speak_to(service: &SpeechService, text: &str, path: &Path) {
    let audio = service
        .synthesize(text.into(), None, CancellationToken::new())
        .await
        .unwrap();
    write_wav(path, &audio).unwrap();
}

async fn transcribe(
    service: &SpeechService,
    path: &Path,
) -> Result<headroom_speech::asr::Transcript, SpeechError> {
    let input = AudioInput::from_file(path)?;
    service
        .transcribe(
            input,
            MODEL,
            TranscribeOptions::default(),
            Priority::Normal,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
}

#[tokio::test]
async fn synthesized_sentences_are_transcribed_within_a_word_error_bound() {
    let service = service();
    let sentences = [
        "The weather today is sunny with a light breeze.",
        "Please send the report to my office before noon.",
        "We recorded the river at night for three hours.",
        "Open the window and let the fresh air in.",
        "My brother plays the guitar in a small band.",
    ];
    let mut total_errors = 0.0;
    let mut total_words = 0.0;
    for (i, sentence) in sentences.iter().enumerate() {
        let path = scratch(&format!("sentence-{i}.wav"));
        speak_to(&service, sentence, &path).await;
        let transcript = transcribe(&service, &path).await.unwrap();
        let wer = word_error_rate(sentence, &transcript.text());
        eprintln!("{wer:.2}  {sentence:?} -> {:?}", transcript.text());
        total_errors += wer * sentence.split_whitespace().count() as f64;
        total_words += sentence.split_whitespace().count() as f64;
        assert_eq!(transcript.language.as_deref(), Some("en"));
        assert!(transcript
            .segments
            .iter()
            .all(|s| s.start <= s.end && s.end <= transcript.duration + 0.5));
    }
    let wer = total_errors / total_words;
    assert!(
        wer <= 0.25,
        "word error rate {wer:.2} over {total_words} words"
    );
}

#[tokio::test]
async fn audio_longer_than_a_window_gets_ordered_timestamps_to_the_end() {
    let service = service();
    let text = (1..=8)
        .map(|i| format!("Paragraph {i}. The old ferry crosses the harbour every morning, carrying people and their bicycles to the island."))
        .collect::<Vec<_>>()
        .join(" ");
    let path = scratch("long.wav");
    speak_to(&service, &text, &path).await;
    let transcript = transcribe(&service, &path).await.unwrap();
    assert!(transcript.duration > 45.0, "{}", transcript.duration);
    let starts: Vec<f64> = transcript.segments.iter().map(|s| s.start).collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
    let last = transcript.segments.last().unwrap();
    assert!(
        last.end > transcript.duration - 5.0,
        "the end of the audio is transcribed: {last:?}"
    );
    assert!(
        word_error_rate(&text, &transcript.text()) < 0.35,
        "{}",
        transcript.text()
    );
}

#[tokio::test]
async fn every_input_format_decodes_to_the_same_audio() {
    let service = service();
    let wav = scratch("formats.wav");
    speak_to(&service, "Every format should sound the same.", &wav).await;
    let original = decode_file(&wav, DecodeLimits::default()).unwrap();
    for (ext, codec) in [
        ("mp3", "libmp3lame"),
        ("flac", "flac"),
        ("ogg", "libvorbis"),
        ("m4a", "aac"),
    ] {
        let path = scratch(&format!("formats.{ext}"));
        let status = std::process::Command::new("ffmpeg")
            .args(["-loglevel", "error", "-y", "-i"])
            .arg(&wav)
            .args(["-c:a", codec])
            .arg(&path)
            .status()
            .expect("ffmpeg runs (scripts/install-test-deps installs it)");
        assert!(status.success(), "ffmpeg made no {ext}");
        let decoded = decode_file(&path, DecodeLimits::default()).unwrap();
        assert_eq!(decoded.sample_rate, original.sample_rate, "{ext}");
        // Encoders add priming samples and padding: within 100 ms.
        let diff = (decoded.duration_secs() - original.duration_secs()).abs();
        assert!(
            diff < 0.1,
            "{ext}: {} s vs {} s",
            decoded.duration_secs(),
            original.duration_secs()
        );
        let transcript = transcribe(&service, &path).await.unwrap();
        assert!(
            transcript.text().to_lowercase().contains("format"),
            "{ext}: {}",
            transcript.text()
        );
    }
}

#[tokio::test]
async fn bad_files_are_refused_with_their_name_and_problem() {
    let service = service();
    let empty = scratch("empty.wav");
    std::fs::write(&empty, b"").unwrap();
    let not_audio = scratch("notes.mp3");
    std::fs::write(&not_audio, "meeting notes, not audio\n".repeat(50)).unwrap();
    let silent = scratch("silent.wav");
    write_wav(
        &silent,
        &headroom_speech::audio::Audio {
            samples: vec![0.0; 16_000],
            sample_rate: 16_000,
        },
    )
    .unwrap();
    let good = scratch("good.wav");
    speak_to(&service, "Short.", &good).await;
    let mut bytes = std::fs::read(&good).unwrap();
    bytes.truncate(40);
    let truncated = scratch("truncated.wav");
    std::fs::write(&truncated, bytes).unwrap();
    let missing = scratch("does-not-exist.wav");

    let error = |r: Result<_, SpeechError>| match r {
        Err(SpeechError::Audio(e)) => e,
        Err(other) => panic!("unexpected error {other}"),
        Ok(_) => panic!("a bad file was accepted"),
    };
    assert!(matches!(
        error(transcribe(&service, &empty).await),
        AudioError::Empty { .. }
    ));
    let e = error(transcribe(&service, &not_audio).await);
    assert!(matches!(e, AudioError::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("notes.mp3"));
    assert!(matches!(
        error(transcribe(&service, &silent).await),
        AudioError::Silent { .. }
    ));
    assert!(matches!(
        error(transcribe(&service, &truncated).await),
        AudioError::Corrupt { .. }
    ));
    let e = error(transcribe(&service, &missing).await);
    assert!(e.to_string().contains("does-not-exist.wav"), "{e}");
    assert_eq!(service.lane().snapshot().occupancy.in_flight, 0);
}

#[tokio::test]
async fn cancelling_stops_transcription_and_frees_the_lane() {
    let service = service();
    let path = scratch("cancel.wav");
    let text = "This recording is long enough to need several windows of work. ".repeat(12);
    speak_to(&service, &text, &path).await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    // Cancel as soon as the first window reports progress.
    let progress = Arc::new(move |_: f32| trigger.cancel());
    let result = service
        .transcribe(
            AudioInput::from_file(&path).unwrap(),
            MODEL,
            TranscribeOptions::default(),
            Priority::Normal,
            progress,
            cancel,
        )
        .await;
    assert!(
        matches!(
            result,
            Err(SpeechError::Asr(headroom_speech::asr::AsrError::Cancelled))
                | Err(SpeechError::Rejected(_))
        ),
        "{:?}",
        result.map(|t| t.text())
    );
    assert_eq!(service.lane().snapshot().occupancy.in_flight, 0);
}

#[tokio::test]
async fn an_uninstalled_model_says_how_to_install_it() {
    let service = service();
    let path = scratch("model.wav");
    speak_to(&service, "Hello.", &path).await;
    // A process whose models folder is empty, as HEADROOM_MODELS_DIR would make it.
    let empty_dir = scratch("no-models");
    let services = headroom_services::Services::new(
        Config::default(),
        headroom_services::Environment::from_vars(|name| match name {
            "HEADROOM_MODELS_DIR" => Some(empty_dir.clone().into()),
            _ => std::env::var_os(name),
        }),
    );
    let err = services
        .speech()
        .transcribe(
            AudioInput::from_file(&path).unwrap(),
            MODEL,
            TranscribeOptions::default(),
            Priority::Normal,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await;
    match err {
        Err(SpeechError::Model(e)) => {
            assert!(
                e.to_string()
                    .contains("headroom models install whisper-tiny.en"),
                "{e}"
            )
        }
        Ok(_) => panic!("a model was found in an empty directory"),
        Err(other) => panic!("unexpected {other}"),
    }
}

#[tokio::test]
async fn the_multilingual_model_detects_the_language() {
    let service = service();
    let path = scratch("german.wav");
    let audio = service
        .synthesize(
            // faster-whisper detects German in this clip with p = 0.84 (other sentences spoken by
            // espeak-ng fool both it and Headroom).
            "Guten Morgen. Heute ist das Wetter schön, und wir gehen in den Park.".into(),
            Some("de".into()),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    write_wav(&path, &audio).unwrap();
    let transcribe_with = |model: &'static str, language: Option<&str>| {
        let input = AudioInput::from_file(&path).unwrap();
        let options = TranscribeOptions {
            language: language.map(str::to_string),
        };
        service.transcribe(
            input,
            model,
            options,
            Priority::Normal,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
    };
    let transcript = transcribe_with("whisper-base", None).await.unwrap();
    assert_eq!(
        transcript.language.as_deref(),
        Some("de"),
        "{}",
        transcript.text()
    );
    assert!(
        transcript.text().contains("Morgen"),
        "{}",
        transcript.text()
    );
    // English-only models refuse other languages rather than guessing.
    let err = transcribe_with(MODEL, Some("de")).await;
    assert!(matches!(
        err,
        Err(SpeechError::Asr(
            headroom_speech::asr::AsrError::UnknownLanguage(_)
        ))
    ));
}

#[tokio::test]
async fn the_neural_voice_speaks_intelligibly() {
    assert!(
        std::env::var_os("HEADROOM_MODELS_DIR").is_some(),
        "run with scripts/test"
    );
    let services = headroom_tests::services(Config::default());
    let (service, voice) = services
        .speech_for_voice(Some("piper-joe"))
        .expect("scripts/test installs piper-joe");
    assert_eq!(voice, None, "a neural voice speaks with its own engine");
    let text = "Please send the report to my office before noon. We recorded the river at night for three hours.";
    let audio = service
        .synthesize(text.into(), None, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(audio.sample_rate, 22_050);
    let path = scratch("piper.wav");
    write_wav(&path, &audio).unwrap();
    let transcript = transcribe(&service, &path).await.unwrap();
    let wer = word_error_rate(text, &transcript.text());
    assert!(
        wer <= 0.15,
        "word error rate {wer:.2}: {:?}",
        transcript.text()
    );
}
