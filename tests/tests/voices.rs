//! Voices with real models and real audio: the speaker embedder tells speakers apart (espeak-ng
//! voices and Kokoro styles made at test time), Kokoro speaks intelligibly, profiles are built
//! from clips, takes are cloned through fake servers that replay each backend's request and
//! response shapes (errors included), and an approximate match is found and used.

use headroom_core::config::Config;
use headroom_services::speech::AudioInput;
use headroom_services::voice_work::{TakeMethod, VoiceWorkError, Voices};
use headroom_services::{Environment, Services};
use headroom_speech::asr::word_error_rate;
use headroom_speech::audio::{write_wav, Audio};
use headroom_speech::tts::{Espeak, Style, Synthesizer};
use headroom_speech::voice::matching::MatchSettings;
use headroom_tests::fake_cloning::{FakeCloning, Kind};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const PARAGRAPH: &str =
    "When the morning train was late again, the whole platform sighed at once. \
A man with a red umbrella checked his watch and began to read the timetable aloud. \
Nobody listened, but everyone waited.";

/// Services with their own voice library in `dir`, and `cloning_url` as the cloning server.
fn services(dir: &Path, cloning: Option<(&str, &str)>) -> Arc<Services> {
    headroom_tests::models_dir();
    let mut env = Environment::from_vars(|name| std::env::var_os(name), std::env::temp_dir);
    env.voices_dir = dir.join("voices");
    let mut config = Config::default();
    if let Some((kind, url)) = cloning {
        config.cloning.kind = kind.into();
        config.cloning.url = url.into();
    }
    Services::new(config, env)
}

fn espeak(voice: &str, pitch: u32, text: &str) -> Audio {
    let mut e = Espeak::default();
    e.pitch = pitch;
    e.synthesize(text, Some(voice), &CancellationToken::new())
        .unwrap()
}

fn saved(dir: &Path, name: &str, audio: &Audio) -> PathBuf {
    let path = dir.join(name);
    write_wav(&path, audio).unwrap();
    path
}

#[tokio::test]
async fn the_embedder_scores_the_same_speaker_above_other_speakers() {
    let dir = tempfile::tempdir().unwrap();
    let services = services(dir.path(), None);
    let embedder = services.embedder().unwrap();
    let kokoro = services.kokoro().unwrap();
    let a = "The quick brown fox jumps over the lazy dog near the river bank.";
    let b = "Please bring the blue folder to the meeting on Thursday morning.";
    let cancel = CancellationToken::new();
    let kokoro_take = |style: &str, text: &str| {
        kokoro
            .speak(text, &Style::shipped(style), 1.0, &cancel)
            .unwrap()
    };
    // (speaker saying a, the same speaker saying b, another speaker saying a)
    let cases = [
        (
            "espeak m3 vs f2",
            espeak("en-us+m3", 50, a),
            espeak("en-us+m3", 50, b),
            espeak("en-us+f2", 50, a),
        ),
        (
            "kokoro alpha vs kumo",
            kokoro_take("jf_alpha", a),
            kokoro_take("jf_alpha", b),
            kokoro_take("jm_kumo", a),
        ),
        (
            "kokoro kumo vs espeak m3",
            kokoro_take("jm_kumo", a),
            kokoro_take("jm_kumo", b),
            espeak("en-us+m3", 50, a),
        ),
    ];
    for (label, first, same, other) in cases {
        let e = |audio: &Audio| embedder.embed(audio).unwrap();
        let (first, same, other) = (e(&first), e(&same), e(&other));
        let same_score = first.similarity(&same);
        let other_score = first.similarity(&other);
        eprintln!("{label}: same speaker {same_score:.3}, other speaker {other_score:.3}");
        assert!(
            same_score > other_score + 0.1,
            "{label}: same {same_score:.3} vs other {other_score:.3}"
        );
    }
    // Too little audio is refused with the amount needed, not guessed at.
    let blip = Audio {
        samples: vec![0.1; 4000],
        sample_rate: 16_000,
    };
    let err = embedder.embed(&blip).unwrap_err().to_string();
    assert!(err.contains("too short"), "{err}");
}

#[tokio::test]
async fn kokoro_speaks_english_the_embedded_whisper_understands() {
    let dir = tempfile::tempdir().unwrap();
    let services = services(dir.path(), None);
    let (speech, voice) = services.speech_for_voice(Some("kokoro")).unwrap();
    let text = "The weather today is sunny with a light breeze. We walked to the market.";
    let audio = speech
        .synthesize(text.into(), voice, CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(audio.sample_rate, 24_000);
    let path = saved(dir.path(), "kokoro.wav", &audio);
    let transcript = services
        .speech()
        .transcribe(
            AudioInput::from_file(&path).unwrap(),
            "whisper-tiny.en",
            Default::default(),
            Default::default(),
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let wer = word_error_rate(text, &transcript.text());
    eprintln!("kokoro: {:?} (WER {wer:.2})", transcript.text());
    assert!(wer <= 0.25, "WER {wer:.2}: {:?}", transcript.text());
    // Every shipped style is listed, and an unknown one is refused by name.
    let names: Vec<String> = speech
        .synthesizer()
        .voices()
        .unwrap()
        .into_iter()
        .map(|v| v.id)
        .collect();
    assert_eq!(names.len(), 5, "{names:?}");
    let err = speech
        .synthesize(
            "Hello.".into(),
            Some("kokoro-nobody".into()),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("kokoro-nobody"), "{err}");
}

/// A voice built from one real clip (espeak-ng's m3 reading a paragraph), in `services`' library.
async fn voice_from_clip(services: &Arc<Services>, dir: &Path, name: &str) -> PathBuf {
    let clip = saved(
        dir,
        &format!("{name}.wav"),
        &espeak("en-us+m3", 40, PARAGRAPH),
    );
    let voices = Voices::new(services.clone());
    voices.library().create(name).unwrap();
    let (profile, report) = voices
        .add_clip(
            name,
            AudioInput::from_file(&clip).unwrap(),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(report.accepted(), "{report:?}");
    assert_eq!(profile.clips.len(), 1);
    let transcript = profile.clips[0].transcript.clone().unwrap();
    assert!(
        word_error_rate(PARAGRAPH, &transcript) < 0.3,
        "the clip is transcribed: {transcript:?}"
    );
    clip
}

#[tokio::test]
async fn a_clip_that_fails_its_checks_is_refused_with_advice_and_nothing_is_added() {
    let dir = tempfile::tempdir().unwrap();
    let services = services(dir.path(), None);
    let voices = Voices::new(services.clone());
    voices.library().create("Short").unwrap();
    let short = saved(
        dir.path(),
        "short.wav",
        &espeak("en-us", 50, "Hello there."),
    );
    let err = voices
        .add_clip(
            "Short",
            AudioInput::from_file(&short).unwrap(),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    let VoiceWorkError::ClipRefused(report) = &err else {
        panic!("{err}");
    };
    assert!(report.findings.iter().any(|f| f.check == "too_short"));
    assert!(err.to_string().contains("at least 5 s"), "{err}");
    assert!(voices.library().open("Short").unwrap().clips.is_empty());
    let missing = voices
        .speak(
            &voices.library().open("Short").unwrap(),
            "Anything.".into(),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(missing, VoiceWorkError::NoClips(_)), "{missing}");
}

#[tokio::test]
async fn takes_are_cloned_through_each_kind_of_server_with_its_request_shape() {
    let dir = tempfile::tempdir().unwrap();
    // The reference, and a voice an OpenAI-style server knows by name.
    let named = saved(dir.path(), "named.wav", &espeak("en-us+m3", 40, PARAGRAPH));
    for kind in [Kind::Chatterbox, Kind::Xtts, Kind::OpenAi] {
        let voices_on_server = HashMap::from([("narrator".to_string(), named.clone())]);
        let fake = FakeCloning::start(kind, voices_on_server).await;
        let kind_name = match kind {
            Kind::Chatterbox => "chatterbox",
            Kind::Xtts => "xtts",
            Kind::OpenAi => "openai",
        };
        let services = services(&dir.path().join(kind_name), Some((kind_name, &fake.url())));
        std::fs::create_dir_all(dir.path().join(kind_name)).unwrap();
        let clip = voice_from_clip(&services, &dir.path().join(kind_name), "Mara").await;
        let voices = Voices::new(services.clone());
        if kind == Kind::OpenAi {
            let library = voices.library();
            let mut profile = library.open("Mara").unwrap();
            profile.server_voice = Some("narrator".into());
            library.save(&mut profile).unwrap();
        }
        let health = voices.cloning_health().await.unwrap();
        assert!(!health.detail.is_empty(), "{health:?}");

        let take = voices
            .speak(
                &voices.library().open("Mara").unwrap(),
                "A short line to say.".into(),
                CancellationToken::new(),
            )
            .await
            .unwrap();
        assert!(
            matches!(take.method, TakeMethod::Clone { .. }),
            "{:?}",
            take.method
        );
        assert!(take.method.label().starts_with("cloned by"));
        // The fake answers with the reference itself: closer to the voice than the default.
        assert!(
            take.closeness.similarity > take.closeness.default_similarity + 0.1,
            "{kind:?}: {:?}",
            take.closeness
        );
        let seen = fake.seen();
        let request = seen.last().unwrap();
        match kind {
            Kind::Chatterbox => {
                assert_eq!(request.path, "/v1/audio/speech/upload");
                assert_eq!(request.fields["input"], "A short line to say.");
                let size = std::fs::metadata(&clip).unwrap().len();
                assert!(
                    request.fields["voice_file"].starts_with(&format!("<{size} bytes")),
                    "the profile's clip is uploaded: {:?}",
                    request.fields
                );
            }
            Kind::Xtts => {
                assert_eq!(request.path, "/tts_to_audio/");
                assert_eq!(request.fields["language"], "en");
                // The fake runs on this machine and has no speaker "mara": the clip's path.
                assert!(
                    request.fields["speaker_wav"].ends_with("clip-1.wav"),
                    "{:?}",
                    request.fields
                );
            }
            Kind::OpenAi => {
                assert_eq!(request.path, "/v1/audio/speech");
                assert_eq!(request.fields["voice"], "narrator");
                assert_eq!(request.fields["response_format"], "wav");
            }
        }
        // A server error reaches the user with the server's own words and status.
        fake.fail_next(500, serde_json::json!({"detail": "CUDA out of memory"}));
        let err = voices
            .speak(
                &voices.library().open("Mara").unwrap(),
                "Again.".into(),
                CancellationToken::new(),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("500") && err.contains("CUDA out of memory"),
            "{kind:?}: {err}"
        );
    }
}

#[tokio::test]
async fn a_cloning_server_that_is_down_or_refuses_says_so() {
    let dir = tempfile::tempdir().unwrap();
    // Nothing listens on this port (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let services = services(
        dir.path(),
        Some(("chatterbox", &format!("http://127.0.0.1:{port}"))),
    );
    voice_from_clip(&services, dir.path(), "Nell").await;
    let voices = Voices::new(services.clone());
    let err = voices.cloning_health().await.unwrap_err().to_string();
    assert!(err.contains("cannot reach"), "{err}");
    let err = voices
        .speak(
            &voices.library().open("Nell").unwrap(),
            "Hello.".into(),
            CancellationToken::new(),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot reach"), "{err}");
    // XTTS validation errors (FastAPI's shape) are read as messages.
    let fake = FakeCloning::start(Kind::Xtts, HashMap::new()).await;
    let mut config = services.config();
    config.cloning.kind = "xtts".into();
    config.cloning.url = fake.url();
    config.cloning.language = "xx".into();
    services.replace_config(config).unwrap();
    let err = voices
        .speak(
            &voices.library().open("Nell").unwrap(),
            "Hello.".into(),
            CancellationToken::new(),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("HTTP 400") && err.contains("Language code"),
        "{err}"
    );
}

#[tokio::test]
async fn an_approximate_match_is_found_kept_and_used_without_a_server() {
    let dir = tempfile::tempdir().unwrap();
    let services = services(dir.path(), None);
    voice_from_clip(&services, dir.path(), "Otto").await;
    let voices = Voices::new(services.clone());
    let err = voices
        .speak(
            &voices.library().open("Otto").unwrap(),
            "Hello.".into(),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, VoiceWorkError::NoMatch(_)), "{err}");
    let steps = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = steps.clone();
    let settings = MatchSettings {
        budget: 8,
        ..MatchSettings::default()
    };
    let profile = voices
        .match_voice(
            "Otto",
            settings,
            Arc::new(move |p| seen.lock().unwrap().push(p)),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let matched = profile.current_match().expect("the match is kept");
    {
        let steps = steps.lock().unwrap();
        assert!(steps.iter().any(|p| p.stage == "espeak"));
        assert!(steps.iter().any(|p| p.stage == "search"));
        assert_eq!(steps.last().unwrap().stage, "held_out");
    }
    eprintln!(
        "match: held-out {:.3} (search {:.3}), best shipped {} {:.3}, default {:.3}, WER {:.2}",
        matched.outcome.held_out.similarity,
        matched.outcome.search.similarity,
        matched.outcome.best_shipped,
        matched.outcome.best_shipped_held_out.similarity,
        matched.default_held_out.similarity,
        matched.outcome.held_out.word_error_rate
    );
    assert!(
        matched.outcome.search.similarity >= matched.outcome.best_shipped_held_out.similarity - 0.2
    );
    assert!(matched.outcome.search.word_error_rate <= settings.max_word_error_rate);
    let take = voices
        .speak(
            &voices.library().open("Otto").unwrap(),
            "The match speaks this line.".into(),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    // The closer of the two matches on held-out sentences speaks: against an espeak-made
    // voice that is usually espeak-ng's own variant.
    let espeak_score = matched.espeak.as_ref().unwrap().1.similarity;
    match &take.method {
        TakeMethod::VoiceMatch => assert!(matched.outcome.held_out.similarity >= espeak_score),
        TakeMethod::EspeakMatch { .. } => {
            assert!(espeak_score > matched.outcome.held_out.similarity)
        }
        other => panic!("{other:?}"),
    }
    assert!(take.method.label().starts_with("voice match (approximate"));
    assert!(!take.method.label().contains("clone"));
    assert!(take.audio.duration_secs() > 1.0);
    // A cancelled match stops and keeps the match it had.
    let cancel = CancellationToken::new();
    cancel.cancel();
    let err = voices
        .match_voice("Otto", settings, Arc::new(|_| {}), cancel)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cancel"), "{err}");
    assert!(voices
        .library()
        .open("Otto")
        .unwrap()
        .current_match()
        .is_some());
}

#[tokio::test]
async fn the_speech_endpoint_speaks_a_voice_profile_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeCloning::start(Kind::Chatterbox, HashMap::new()).await;
    // A password inside the server's URL is used, and shown nowhere.
    let with_password = fake.url().replace("http://", "http://alice:s3cret-pw@");
    let services = services(dir.path(), Some(("chatterbox", &with_password)));
    voice_from_clip(&services, dir.path(), "Petra").await;
    let server = headroom_tests::serve(&services).await;
    let http = reqwest::Client::new();
    let speech = format!("{}/audio/speech", server.base_url());
    let resp = http
        .post(&speech)
        .json(&serde_json::json!({"model": "tts-1", "input": "Read this as Petra.", "voice": "Petra"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let method = resp.headers()["x-headroom-voice-method"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        method.starts_with("cloned by Chatterbox-TTS-API"),
        "{method}"
    );
    assert!(
        !method.contains("s3cret-pw") && method.contains("<redacted>@"),
        "{method}"
    );
    let metrics = http
        .get(server.base_url().replace("/v1", "/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!metrics.contains("s3cret-pw"));
    let similarity: f32 = resp.headers()["x-headroom-similarity"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(similarity > 0.9, "{similarity}");
    // OpenAI's default format, mp3, for a profile's take too.
    assert_eq!(resp.headers()["content-type"], "audio/mpeg");
    let mp3 = resp.bytes().await.unwrap();
    let take = headroom_speech::audio::decode_bytes(
        mp3.to_vec(),
        Some("mp3"),
        std::path::Path::new("take.mp3"),
        headroom_speech::audio::DecodeLimits::default(),
    )
    .unwrap();
    assert!(take.duration_secs() > 0.0);
    assert_eq!(
        fake.seen().last().unwrap().fields["input"],
        "Read this as Petra."
    );
    // Another format and a speed: the take time-stretched, encoded, with its headers.
    let resp = http
        .post(&speech)
        .json(
            &serde_json::json!({"input": "Read this as Petra.", "voice": "Petra",
                                  "response_format": "flac", "speed": 2.0}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "audio/flac");
    assert!(resp.headers().contains_key("x-headroom-voice-method"));
    let flac = resp.bytes().await.unwrap();
    assert_eq!(&flac[..4], b"fLaC");
    let fast = headroom_speech::audio::decode_bytes(
        flac.to_vec(),
        Some("flac"),
        std::path::Path::new("take.flac"),
        headroom_speech::audio::DecodeLimits::default(),
    )
    .unwrap();
    let ratio = fast.duration_secs() / take.duration_secs();
    assert!((0.4..0.6).contains(&ratio), "speed 2: {ratio}");
    // A profile with nothing to speak with is a clear 400; OpenAI's names still get the default.
    Voices::new(services.clone())
        .library()
        .create("Empty")
        .unwrap();
    let resp = http
        .post(&speech)
        .json(&serde_json::json!({"input": "Hello.", "voice": "Empty"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "voice_not_ready", "{body}");
    let resp = http
        .post(&speech)
        .json(&serde_json::json!({"input": "Hello.", "voice": "alloy"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("x-headroom-voice-method").is_none());
    // A cloning server on another machine, not allowed: refused before anything is sent.
    let mut config = services.config();
    config.cloning.url = "http://clone.invalid:4123".into();
    services.replace_config(config).unwrap();
    let resp = http
        .post(&speech)
        .json(&serde_json::json!({"input": "Read this as Petra.", "voice": "Petra"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "remote_not_allowed", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("text and voice clips"), "{message}");
}

#[tokio::test]
async fn interactive_speech_goes_ahead_of_a_running_match() {
    let dir = tempfile::tempdir().unwrap();
    let services = services(dir.path(), None);
    voice_from_clip(&services, dir.path(), "Quinn").await;
    let voices = Voices::new(services.clone());
    let searching = Arc::new(tokio::sync::Notify::new());
    let seen = searching.clone();
    let cancel = CancellationToken::new();
    let settings = MatchSettings {
        budget: 10_000,
        ..MatchSettings::default()
    };
    let search = {
        let voices = voices.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            voices
                .match_voice(
                    "Quinn",
                    settings,
                    Arc::new(move |p| {
                        if p.stage == "search" {
                            seen.notify_one();
                        }
                    }),
                    cancel,
                )
                .await
        })
    };
    searching.notified().await;
    // The match is mid-search: a line spoken now is not held behind its thousands of takes.
    let audio = services
        .speech()
        .synthesize(
            "A quick line, please.".into(),
            None,
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(audio.duration_secs() > 0.5);
    assert!(!search.is_finished(), "the match is still running");
    cancel.cancel();
    let err = search.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("cancel"), "{err}");
}
