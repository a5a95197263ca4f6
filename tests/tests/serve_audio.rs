//! `headroom serve`'s audio endpoints with the embedded engines: the official openai Python
//! client for both endpoints, and upload limits.

use headroom_server::{bind_loopback, RunningServer, ServerState};
use headroom_services::Services;
use serde_json::Value;
use std::sync::Arc;

fn services() -> Arc<Services> {
    // The audio endpoints need no text model; nothing listens on port 9.
    headroom_tests::services_for("http://127.0.0.1:9/v1")
}

fn require_models() {
    assert!(
        std::env::var_os("HEADROOM_MODELS_DIR").is_some(),
        "HEADROOM_MODELS_DIR is not set: run the tests with scripts/test"
    );
}

#[tokio::test]
async fn the_openai_python_client_speaks_and_transcribes() {
    require_models();
    let server = headroom_tests::serve(&services()).await;
    let scratch = std::env::temp_dir().join(format!("headroom-serve-audio-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/python/openai_audio_check.py");
    let out = tokio::process::Command::new("python3")
        .arg(script)
        .arg(server.base_url())
        .arg(&scratch)
        .output()
        .await
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = seen["text"].as_str().unwrap().to_lowercase();
    assert!(text.contains("report") && text.contains("office"), "{text}");
    assert!(seen["srt"]
        .as_str()
        .unwrap()
        .starts_with("1\n00:00:00,000 --> "));
    assert_eq!(seen["verbose_language"], "en");
    assert!(seen["verbose_segments"].as_u64().unwrap() >= 1);
    assert_eq!(seen["bad_status"], 400);
    assert_eq!(seen["bad_code"], "invalid_audio");
    assert!(seen["bad_message"].as_str().unwrap().contains("notes.mp3"));
}

#[tokio::test]
async fn uploads_over_the_limit_get_413_and_bad_requests_clear_400s() {
    let mut state = ServerState::from_services(&services()).unwrap();
    state.max_upload_bytes = 64 * 1024;
    let server =
        RunningServer::start(bind_loopback("127.0.0.1:0").await.unwrap(), Arc::new(state)).unwrap();
    let http = reqwest::Client::new();
    let url = format!("{}/audio/transcriptions", server.base_url());
    let big = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(vec![0u8; 200 * 1024]).file_name("big.wav"),
        )
        .text("model", "whisper-1");
    let resp = http.post(&url).multipart(big).send().await.unwrap();
    assert_eq!(resp.status(), 413);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "file_too_large");

    let no_file = reqwest::multipart::Form::new().text("model", "whisper-1");
    let resp = http.post(&url).multipart(no_file).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"]["code"],
        "missing_file"
    );

    let speech = format!("{}/audio/speech", server.base_url());
    let resp = http
        .post(&speech)
        .json(&serde_json::json!({"model": "tts-1", "input": "hi", "voice": "alloy", "response_format": "mp3"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"]["code"],
        "invalid_response_format"
    );
}

#[tokio::test]
async fn remote_backends_speak_and_transcribe_through_another_server() {
    use headroom_core::admission::Priority;
    use headroom_services::speech::AudioInput;
    use headroom_speech::remote::{RemoteSynthesizer, RemoteTranscriber};
    use tokio_util::sync::CancellationToken;
    require_models();
    let server = headroom_tests::serve(&services()).await;
    let url = server.base_url();
    // The client side is another process's services, as a second `headroom` would have.
    let client = services();
    let client_side = client.speech_using(
        Some(Arc::new(
            RemoteTranscriber::new(&url, "whisper-tiny.en", None).unwrap(),
        )),
        Some(Arc::new(
            RemoteSynthesizer::new(&url, "tts-1", None).unwrap(),
        )),
    );
    let audio = client_side
        .synthesize(
            "Please send the report to my office before noon.".into(),
            Some("alloy".into()),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    assert!(audio.duration_secs() > 1.0);
    let input = AudioInput {
        bytes: headroom_speech::audio::wav_bytes(&audio),
        name: "remote.wav".into(),
    };
    let transcript = client_side
        .transcribe(
            input,
            "ignored-for-remote",
            Default::default(),
            Priority::Interactive,
            Arc::new(|_| {}),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let text = transcript.text().to_lowercase();
    assert!(text.contains("report") && text.contains("office"), "{text}");
    assert!(
        !transcript.segments.is_empty()
            && transcript.segments[0].end > transcript.segments[0].start
    );

    // A server that refuses says so, naming itself.
    let bad = client.speech_using(
        None,
        Some(Arc::new(
            RemoteSynthesizer::new(&url, "tts-1", None).unwrap(),
        )),
    );
    let err = bad
        .synthesize("x".repeat(5000), None, CancellationToken::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("HTTP 400"), "{err}");
}
