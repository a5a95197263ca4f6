//! `headroom serve`'s audio endpoints with the embedded engines: the official openai Python
//! client for both endpoints, and upload limits.

use headroom_base::consent::RemoteConsent;
use headroom_server::{bind_loopback, RunningServer, ServerState};
use headroom_services::Services;
use headroom_tests::python_client;
use serde_json::Value;
use std::sync::Arc;

fn services() -> Arc<Services> {
    // The audio endpoints need no text model; nothing listens on port 9.
    headroom_tests::services_for("http://127.0.0.1:9/v1")
}

fn require_models() {
    headroom_tests::models_dir();
}

#[tokio::test]
async fn the_openai_python_client_speaks_and_transcribes() {
    require_models();
    let server = headroom_tests::serve(&services()).await;
    let scratch = std::env::temp_dir().join(format!("headroom-serve-audio-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).unwrap();
    let seen = python_client::run(
        "openai_audio_check.py",
        &[server.base_url().as_ref(), scratch.as_os_str()],
        "",
    )
    .await;
    let text = seen["text"].as_str().unwrap().to_lowercase();
    assert!(text.contains("report") && text.contains("office"), "{text}");
    assert!(seen["srt"]
        .as_str()
        .unwrap()
        .starts_with("1\n00:00:00,000 --> "));
    assert_eq!(seen["verbose_language"], "en");
    assert!(seen["verbose_segments"].as_u64().unwrap() >= 1);
    // Word times, asked for as OpenAI's client asks.
    assert!(seen["words"].as_u64().unwrap() >= 3, "{seen}");
    assert_eq!(seen["words_in_order"], true, "{seen}");
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

    // A speech request's bad options are refused before anything is synthesized (these
    // services have no models), each naming what is accepted.
    let speech = format!("{}/audio/speech", server.base_url());
    for (options, code, accepted) in [
        (
            serde_json::json!({"response_format": "ogg"}),
            "invalid_response_format",
            "use mp3, opus, flac, wav or pcm",
        ),
        (
            serde_json::json!({"response_format": "aac"}),
            "response_format_unavailable",
            "aac is not available: ",
        ),
        (
            serde_json::json!({"speed": 0.1}),
            "invalid_speed",
            "outside 0.25 to 4",
        ),
        (
            serde_json::json!({"speed": 4.5, "response_format": "mp3"}),
            "invalid_speed",
            "outside 0.25 to 4",
        ),
        (
            serde_json::json!({"instructions": "Whisper it."}),
            "instructions_not_supported",
            "the voice \"alloy\" cannot follow instructions",
        ),
    ] {
        let mut body = serde_json::json!({"model": "tts-1", "input": "hi", "voice": "alloy"});
        body.as_object_mut()
            .unwrap()
            .extend(options.as_object().unwrap().clone());
        let resp = http.post(&speech).json(&body).send().await.unwrap();
        assert_eq!(resp.status(), 400, "{options}");
        let error = &resp.json::<Value>().await.unwrap()["error"];
        assert_eq!(error["code"], code, "{options}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(accepted), "{options}: {message}");
    }
}

#[tokio::test]
async fn the_openai_python_client_speaks_kokoro_in_every_format_ffprobe_reads() {
    require_models();
    let server = headroom_tests::serve(&services()).await;
    let scratch = tempfile::tempdir().unwrap();
    let seen = python_client::run(
        "openai_speech_formats_check.py",
        &[server.base_url().as_ref(), scratch.path().as_os_str()],
        "",
    )
    .await;
    // Each file as ffprobe reads it: codec, rate (Kokoro speaks at 24 kHz; Opus is 48 kHz),
    // mono, and the sentence's length.
    for (format, content_type, codec, rate) in [
        ("mp3", "audio/mpeg", "mp3", 24_000),
        ("opus", "audio/ogg", "opus", 48_000),
        ("flac", "audio/flac", "flac", 24_000),
        ("wav", "audio/wav", "pcm_s16le", 24_000),
    ] {
        let file = &seen[format];
        assert_eq!(file["content_type"], content_type, "{format}: {file}");
        assert_eq!(file["codec"], codec, "{format}: {file}");
        assert_eq!(file["sample_rate"], rate, "{format}: {file}");
        assert_eq!(file["channels"], 1, "{format}: {file}");
        let duration = file["duration"].as_f64().unwrap();
        assert!(duration > 1.5 && duration < 8.0, "{format}: {file}");
    }
    assert_eq!(seen["opus"]["format"], "ogg");
    // The lossless formats hold the same take.
    let (flac, wav) = (&seen["flac"]["duration"], &seen["wav"]["duration"]);
    assert!(
        (flac.as_f64().unwrap() - wav.as_f64().unwrap()).abs() < 0.01,
        "{flac} {wav}"
    );
    // pcm: 24 kHz 16-bit mono without a header, as long as the WAV's take.
    let pcm = &seen["pcm"];
    assert_eq!(pcm["content_type"], "audio/pcm");
    assert_eq!(pcm["starts_with_riff"], false);
    let bytes = pcm["bytes"].as_u64().unwrap();
    assert_eq!(bytes % 2, 0);
    let pcm_secs = bytes as f64 / 2.0 / 24_000.0;
    assert!(
        (pcm_secs - wav.as_f64().unwrap()).abs() < 0.05,
        "{pcm_secs} {wav}"
    );
    // Twice the speed (Kokoro's own): about half as long.
    let fast_secs = seen["pcm_fast"]["bytes"].as_u64().unwrap() as f64 / 2.0 / 24_000.0;
    let ratio = fast_secs / pcm_secs;
    assert!(ratio > 0.35 && ratio < 0.7, "speed 2: {ratio}");
    // Bad values: 400 with what is accepted.
    for (case, code, accepted) in [
        (
            "bad_format",
            "invalid_response_format",
            "mp3, opus, flac, wav or pcm",
        ),
        (
            "aac",
            "response_format_unavailable",
            "use mp3, opus, flac, wav or pcm",
        ),
        ("bad_speed", "invalid_speed", "0.25 to 4"),
        ("instructions", "instructions_not_supported", "alloy"),
    ] {
        let refused = &seen[case];
        assert_eq!(refused["status"], 400, "{case}: {refused}");
        assert_eq!(refused["code"], code, "{case}: {refused}");
        let message = refused["message"].as_str().unwrap();
        assert!(message.contains(accepted), "{case}: {message}");
    }
}

/// A long text is sent sentence by sentence: the client hears the first before the last is
/// made, in every way it can ask (raw PCM and MP3 read as they arrive, SSE events).
#[tokio::test]
async fn the_openai_python_client_hears_a_long_text_before_it_is_all_spoken() {
    require_models();
    let server = headroom_tests::serve(&services()).await;
    let seen = python_client::run(
        "openai_speech_stream_check.py",
        &[server.base_url().as_ref()],
        "",
    )
    .await;
    for (format, content_type) in [("pcm", "audio/pcm"), ("mp3", "audio/mpeg")] {
        let stream = &seen[format];
        assert_eq!(stream["content_type"], content_type, "{format}: {stream}");
        // Eight sentences, each sent when it is ready: the first arrives while most of the
        // text is still to be spoken (a whole take would arrive at the end, all at once).
        let (first, total) = (
            stream["first_audio_s"].as_f64().unwrap(),
            stream["total_s"].as_f64().unwrap(),
        );
        assert!(
            first < total / 2.0,
            "{format}: first audio at {first} s of {total} s"
        );
        assert!(
            stream["chunks"].as_u64().unwrap() >= 8,
            "{format}: {stream}"
        );
    }
    assert_eq!(seen["mp3"]["starts_like_mp3"], true);
    // Eight sentences with pauses between: well over a second each.
    let pcm_secs = seen["pcm"]["audio_s"].as_f64().unwrap();
    assert!(pcm_secs > 10.0 && pcm_secs < 40.0, "{pcm_secs}");
    // SSE: a delta per sentence, then done; the deltas hold the same take.
    assert_eq!(seen["sse_content_type"], "text/event-stream");
    let sse = &seen["sse"];
    let types: Vec<&str> = sse["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(types.last(), Some(&"speech.audio.done"), "{types:?}");
    let deltas = types.iter().filter(|t| **t == "speech.audio.delta").count();
    assert!(deltas >= 8 && deltas + 1 == types.len(), "{types:?}");
    let sse_secs = sse["audio_s"].as_f64().unwrap();
    assert!(
        (sse_secs - pcm_secs).abs() < 0.05,
        "{sse_secs} vs {pcm_secs}"
    );
    assert_eq!(sse["done"]["headroom"]["sentences"], 8, "{sse}");
    let first = sse["first_audio_s"].as_f64().unwrap();
    let total = sse["total_s"].as_f64().unwrap();
    assert!(
        first < total / 2.0,
        "sse: first audio at {first} s of {total} s"
    );
}

/// Spanish speech (espeak-ng's Spanish voice) comes back in English, in the shapes OpenAI's
/// translation endpoint answers; an English-only model is refused, naming one that can.
#[tokio::test]
async fn the_openai_python_client_translates_spanish_speech_into_english() {
    require_models();
    let server = headroom_tests::serve(&services()).await;
    let scratch = tempfile::tempdir().unwrap();
    let recording = scratch.path().join("spanish.wav");
    let spoken = std::process::Command::new("espeak-ng")
        .args(["-v", "es", "-s", "140", "-w"])
        .arg(&recording)
        .arg("--")
        .arg(SPANISH)
        .status()
        .expect("espeak-ng runs");
    assert!(spoken.success());
    let seen = python_client::run(
        "openai_translation_check.py",
        &[server.base_url().as_ref(), recording.as_os_str()],
        "",
    )
    .await;
    let text = seen["text"].as_str().unwrap().to_lowercase();
    // English words for what was said, not the Spanish ones.
    let english = ["madrid", "family", "beach", "hot", "morning", "live"];
    let heard: Vec<&str> = english.into_iter().filter(|w| text.contains(w)).collect();
    assert!(heard.len() >= 3, "{text}");
    for spanish in ["familia", "playa", "calor", "vivo"] {
        assert!(!text.contains(spanish), "{text}");
    }
    assert_eq!(seen["verbose_task"], "translate");
    assert_eq!(seen["verbose_language"], "es");
    assert!(seen["verbose_segments"].as_u64().unwrap() >= 1);
    assert!(seen["srt"].as_str().unwrap().starts_with("1\n00:00:"));
    let refused = &seen["english_only"];
    assert_eq!(refused["status"], 400, "{refused}");
    assert_eq!(refused["code"], "model_not_multilingual", "{refused}");
    assert!(refused["message"]
        .as_str()
        .unwrap()
        .contains("whisper-base"));
}

/// Said in the Spanish translation test.
const SPANISH: &str = "Buenos días. Me llamo Carlos y vivo en Madrid con mi familia. \
    Hoy hace mucho calor, así que vamos a la playa.";

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
            RemoteTranscriber::new(&url, "whisper-tiny.en", None, &RemoteConsent::none()).unwrap(),
        )),
        Some(Arc::new(
            RemoteSynthesizer::new(&url, "tts-1", None, &RemoteConsent::none()).unwrap(),
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
    let input = AudioInput::from_bytes(
        headroom_speech::audio::wav_bytes(&audio),
        "remote.wav".into(),
    );
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

    // Text over the one speech bound is refused here, before anything is sent.
    let bad = client.speech_using(
        None,
        Some(Arc::new(
            RemoteSynthesizer::new(&url, "tts-1", None, &RemoteConsent::none()).unwrap(),
        )),
    );
    let err = bad
        .synthesize("x".repeat(5000), None, CancellationToken::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("at most 4096"), "{err}");
    // A server that refuses says so, naming itself (serve refuses a voice espeak-ng does not
    // list).
    let err = bad
        .synthesize(
            "Hello.".to_string(),
            Some("en-us+../../../../etc/passwd".to_string()),
            CancellationToken::new(),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("HTTP 400"), "{err}");
}

/// The 444-byte WAV of issue 10: 8-bit mono at 4,294,967,291 Hz. Resampling it to 16 kHz
/// asked for a 17 GB filter and took the server down.
fn evil_wav() -> Vec<u8> {
    let rate: u32 = 4_294_967_291;
    let mut file = b"RIFF".to_vec();
    file.extend_from_slice(&436u32.to_le_bytes());
    file.extend_from_slice(b"WAVEfmt ");
    for field in [
        16u32.to_le_bytes().to_vec(),
        1u16.to_le_bytes().to_vec(),
        1u16.to_le_bytes().to_vec(),
    ] {
        file.extend(field);
    }
    file.extend_from_slice(&rate.to_le_bytes());
    file.extend_from_slice(&rate.to_le_bytes());
    file.extend_from_slice(&1u16.to_le_bytes());
    file.extend_from_slice(&8u16.to_le_bytes());
    file.extend_from_slice(b"data");
    file.extend_from_slice(&400u32.to_le_bytes());
    file.extend((0..400).map(|i| (128.0 + 60.0 * (i as f32 * 0.3).sin()) as u8));
    assert_eq!(file.len(), 444);
    file
}

#[tokio::test]
async fn a_crafted_upload_is_refused_and_the_server_keeps_serving() {
    require_models();
    let server = headroom_tests::serve(&services()).await;
    let http = reqwest::Client::new();
    let form = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(evil_wav()).file_name("evil.wav"),
        )
        .text("model", "whisper-1");
    let resp = http
        .post(format!("{}/audio/transcriptions", server.base_url()))
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_audio");
    assert_eq!(
        body["error"]["message"],
        "evil.wav is refused: it declares a sample rate of 4294967291 Hz; Headroom reads 8000–384000 Hz"
    );
    // Still serving (health says 503 here only because no text model runs on port 9).
    let metrics = http
        .get(format!("http://{}/metrics", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(metrics.status(), 200);
}

fn files_in(dir: &std::path::Path) -> Vec<(std::path::PathBuf, u64)> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.path(), e.metadata().unwrap().len())
        })
        .collect()
}

#[tokio::test]
async fn uploads_go_to_disk_as_they_arrive_and_beyond_the_cap_are_refused_at_once() {
    use tokio::io::AsyncWriteExt;
    let upload_dir = tempfile::tempdir().unwrap();
    let mut state = ServerState::from_services(&services()).unwrap();
    state.upload_slots = Arc::new(tokio::sync::Semaphore::new(1));
    state.max_concurrent_uploads = 1;
    state.upload_dir = upload_dir.path().to_path_buf();
    let state = Arc::new(state);
    let server =
        RunningServer::start(bind_loopback("127.0.0.1:0").await.unwrap(), state.clone()).unwrap();

    // A client that sends the start of a 1 MB upload, then stops sending.
    let mut slow = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let head = format!(
        "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: {}\r\nContent-Type: multipart/form-data; boundary=XYZ\r\nContent-Length: 1000000\r\n\r\n--XYZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"slow.wav\"\r\nContent-Type: audio/wav\r\n\r\n",
        server.addr
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    slow.write_all(&[1u8; 50_000]).await.unwrap();
    slow.flush().await.unwrap();
    // What arrived is on disk, not in memory.
    headroom_tests::until_true("the upload's first 50,000 bytes on disk", || {
        files_in(upload_dir.path())
            .iter()
            .any(|(_, len)| *len >= 50_000)
    })
    .await;
    assert_eq!(state.upload_slots.available_permits(), 0);

    // A second upload while the only slot is taken: refused before its body is read.
    let http = reqwest::Client::new();
    let url = format!("{}/audio/transcriptions", server.base_url());
    let form = || {
        reqwest::multipart::Form::new()
            .part(
                "file",
                reqwest::multipart::Part::bytes(vec![0u8; 1000]).file_name("next.wav"),
            )
            .text("model", "whisper-1")
    };
    let resp = http.post(&url).multipart(form()).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().contains_key("retry-after"));
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "audio_lane_full");
    assert_eq!(
        body["error"]["headroom"]["detail"],
        "1 uploads are being received; at most 1 at once"
    );
    assert_eq!(
        state.metrics.rejections(
            headroom_core::admission::Lane::Audio,
            headroom_core::admission::RejectReason::AudioLaneFull
        ),
        1
    );

    // The stalled client goes away: its slot and its temporary file are freed.
    drop(slow);
    headroom_tests::until_true("the upload slot to be free", || {
        state.upload_slots.available_permits() == 1
    })
    .await;
    headroom_tests::until_true("the temporary file to be removed", || {
        files_in(upload_dir.path()).is_empty()
    })
    .await;

    // A text field larger than any real value is refused by itself.
    let oversized = reqwest::multipart::Form::new().text("language", "x".repeat(100_000));
    let resp = http.post(&url).multipart(oversized).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"]["code"],
        "field_too_large"
    );
}

#[tokio::test]
async fn every_installed_voice_speaks_through_the_speech_endpoint_and_is_listed() {
    require_models();
    let server = headroom_tests::serve(&services()).await;
    let http = reqwest::Client::new();
    let listed: Value = http
        .get(format!("{}/audio/voices", server.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let voices = listed["data"].as_array().unwrap();
    let by_id = |id: &str| voices.iter().find(|v| v["id"] == id).cloned();
    let kokoro =
        by_id("kokoro-jf_alpha").expect("Kokoro's styles are listed (scripts/test installs it)");
    assert_eq!(
        (kokoro["engine"].as_str(), kokoro["kind"].as_str()),
        (Some("kokoro"), Some("stock"))
    );
    assert!(kokoro["license"].as_str().unwrap().contains("Apache-2.0"));
    assert_eq!(by_id("piper-joe").unwrap()["engine"], "piper");
    assert_eq!(by_id("en-us").unwrap()["engine"], "espeak-ng");

    let speak = |voice: &'static str| {
        http.post(format!("{}/audio/speech", server.base_url()))
            .json(&serde_json::json!({"model": "tts-1", "input": "Hello there.", "voice": voice, "response_format": "wav"}))
            .send()
    };
    // The app's default neural voice, one of its styles, OpenAI's names, Piper and espeak-ng.
    for voice in ["kokoro", "kokoro-jm_kumo", "alloy", "onyx", "joe", "en-gb"] {
        let resp = speak(voice).await.unwrap();
        assert_eq!(
            resp.status(),
            200,
            "{voice}: {}",
            resp.text().await.unwrap()
        );
        let wav = resp.bytes().await.unwrap();
        let audio = headroom_speech::audio::decode_bytes(
            wav.to_vec(),
            Some("wav"),
            std::path::Path::new("speech.wav"),
            headroom_speech::audio::DecodeLimits::default(),
        )
        .unwrap();
        assert!(audio.duration_secs() > 0.3, "{voice} says something");
    }
    let resp = speak("nobody").await.unwrap();
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_voice_or_input");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nobody"),
        "{body}"
    );
}
