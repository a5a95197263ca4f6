//! Where the API key and the URLs' secrets go: the key only to the server it was configured
//! for, kept when the desktop app saves settings, and never shown inside a URL.

use headroom_base::consent::RemoteConsent;
use headroom_core::config::Config;
use headroom_core::llm::{ChatMessage, ChatRequest};
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};

fn ask() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::new("user", "hello")])
}

fn config_with_key(url: &str) -> Config {
    let mut config = Config::default();
    config.llm.url = url.to_string();
    config.llm.api_key = Some("sk-global-secret".into());
    config
}

#[tokio::test]
async fn the_key_goes_only_to_the_configured_server() {
    let configured = FakeUpstream::start(Behavior::Echo, 4096).await;
    let elsewhere = FakeUpstream::start(Behavior::Echo, 4096).await;
    let services = headroom_tests::services(config_with_key(&configured.base_url()));
    for up in [&configured, &elsewhere] {
        // A project's own server URL gets a lane of its own, as the workstation asks for one.
        let lane = services
            .text_lane(&up.base_url(), &RemoteConsent::none())
            .unwrap();
        lane.submit(ask())
            .await
            .unwrap()
            .collect_text()
            .await
            .unwrap();
    }
    assert_eq!(
        configured.authorizations(),
        vec![Some("Bearer sk-global-secret".to_string())]
    );
    assert_eq!(
        elsewhere.authorizations(),
        vec![None],
        "a server the key was not configured for never receives it"
    );
}

#[tokio::test]
async fn settings_saved_without_the_key_keep_the_key_in_use() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let services = headroom_tests::services(config_with_key(&up.base_url()));
    // The desktop app's settings form carries no key (it is never sent to the web view).
    let mut from_the_form = Config::default();
    from_the_form.llm.url = up.base_url();
    from_the_form.text_lane.max_waiting = 1;
    services.replace_config(from_the_form).unwrap();
    let lane = services.default_text_lane(&RemoteConsent::none()).unwrap();
    lane.submit(ask())
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap();
    assert_eq!(
        up.authorizations(),
        vec![Some("Bearer sk-global-secret".to_string())]
    );
}

#[tokio::test]
async fn passwords_in_server_urls_are_never_shown() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://alice:hunter2@127.0.0.1:{port}/v1?api_key=sk-in-url");
    let services = headroom_tests::services_for(&url);
    let lane = services.default_text_lane(&RemoteConsent::none()).unwrap();
    let rejection = lane.submit(ask()).await.err().expect("nothing listens");
    let shown = format!(
        "{rejection} {:?} {}",
        rejection.detail,
        serde_json::to_string(&services.lanes().unwrap()).unwrap()
    );
    let server = headroom_tests::serve(&services).await;
    let health = reqwest::get(format!("http://{}/health", server.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lanes = reqwest::get(format!("{}/headroom/lanes", server.base_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for text in [&shown, &health, &lanes] {
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!text.contains("sk-in-url"), "{text}");
    }
    assert!(health.contains("<redacted>@127.0.0.1"), "{health}");
}

#[tokio::test]
async fn urls_kept_in_errors_and_reports_are_shown_without_their_secrets() {
    use headroom_bench::harness::{self, HarnessConfig};
    use headroom_workstation::projects::ProjectStore;
    use headroom_workstation::workstation::Workstation;
    let secrets = ["hunter2", "sk-in-url"];
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = format!("http://alice:hunter2@127.0.0.1:{port}/v1?auth=sk-in-url");
    // The text client's own error, as any caller shows or logs it.
    let error = headroom_core::llm::LlmClient::new(&down, None)
        .unwrap()
        .server_info()
        .await
        .unwrap_err();
    let mut shown = format!("{error} {error:?}\n");
    // Settings' Test connection (its error held the URL as typed).
    let dir = tempfile::tempdir().unwrap();
    let services = headroom_tests::services_for(&down);
    let ws = Workstation::new(
        ProjectStore::new(dir.path().join("projects")),
        services.clone(),
        None,
    );
    let tested = ws.test_connection(&down).await.unwrap_err();
    shown.push_str(&format!("{tested} {tested:?}\n"));
    // The benchmark's report on a server whose URL carries secrets (its `target`).
    let upstream = FakeUpstream::start(Behavior::Echo, 4096).await;
    let with_secrets = upstream
        .base_url()
        .replace("http://", "http://alice:hunter2@")
        + "?auth=sk-in-url";
    let client = headroom_core::llm::LlmClient::new(&with_secrets, None).unwrap();
    let config = HarnessConfig {
        max_tokens: 8,
        batches: 1,
        warmup_batches: 0,
        ..HarnessConfig::default()
    };
    let report = harness::run(&services, &client, config, None, "test", &|_| {})
        .await
        .unwrap();
    shown.push_str(&serde_json::to_string(&report).unwrap());
    shown.push_str(&harness::render_html(&report));
    shown.push_str(&harness::render_text(&report));
    for secret in secrets {
        assert!(!shown.contains(secret), "a secret was shown: {shown}");
    }
    assert!(shown.contains("<redacted>@127.0.0.1"), "{shown}");
    assert!(shown.contains("auth=<redacted>"), "{shown}");
}

// ---- Redirects: consent is for a destination, not for wherever it points ----

use headroom_core::llm::LlmClient;
use headroom_speech::asr::{TranscribeOptions, Transcriber};
use headroom_speech::cloning::{CloningKind, CloningServer, Reference};
use headroom_speech::remote::{RemoteSynthesizer, RemoteTranscriber};
use headroom_speech::tts::Synthesizer;
use headroom_tests::fake_cloning::{FakeCloning, Kind};
use headroom_tests::redirector::Redirector;
use tokio_util::sync::CancellationToken;

fn refused_redirect(message: &str, to: &str) {
    assert!(
        message.contains("redirected to") && message.contains(to),
        "the error names the refused redirect and where it pointed: {message}"
    );
    assert!(message.contains("set that URL directly"), "{message}");
}

#[tokio::test]
async fn the_text_client_follows_no_redirect_to_another_server() {
    let elsewhere = FakeUpstream::start(Behavior::Echo, 4096).await;
    let redirector = Redirector::start(&elsewhere.base_url().replace("/v1", "")).await;
    let client = LlmClient::new(&format!("{}/v1", redirector.origin()), None).unwrap();
    let error = match client.stream_chat(&ask()).await {
        Ok(_) => panic!("a redirect to another server was followed"),
        Err(e) => e.to_string(),
    };
    refused_redirect(&error, &elsewhere.base_url().replace("/v1", ""));
    assert_eq!(redirector.redirected(), 1);
    assert_eq!(
        elsewhere.requests(),
        0,
        "the transcript reached the other server"
    );
    // The same through the lane a project's cleanup uses.
    let services = headroom_tests::services_for(&format!("{}/v1", redirector.origin()));
    let lane = services.default_text_lane(&RemoteConsent::none()).unwrap();
    let refused = match lane.submit(ask()).await {
        Ok(stream) => stream.collect_text().await.unwrap_err().1.to_string(),
        Err(rejection) => rejection.to_string(),
    };
    assert!(refused.contains("redirected to"), "{refused}");
    assert_eq!(elsewhere.requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speech_and_cloning_clients_follow_no_redirect_to_another_server() {
    let dir = tempfile::tempdir().unwrap();
    let clip = dir.path().join("clip.wav");
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut wav = hound::WavWriter::create(&clip, spec).unwrap();
    for i in 0..16_000 {
        wav.write_sample(((i as f32 * 0.05).sin() * 8000.0) as i16)
            .unwrap();
    }
    wav.finalize().unwrap();

    let cloning = FakeCloning::start(Kind::Chatterbox, Default::default()).await;
    let redirector = Redirector::start(&cloning.url()).await;
    let server = CloningServer::new(
        CloningKind::Chatterbox,
        &redirector.origin(),
        None,
        "en",
        &RemoteConsent::none(),
    )
    .unwrap();
    let reference = Reference {
        name: "max".into(),
        clip: clip.clone(),
        transcript: None,
        server_voice: None,
    };
    let error = tokio::task::spawn_blocking(move || {
        server
            .speak("a line of narration", &reference, &CancellationToken::new())
            .unwrap_err()
            .to_string()
    })
    .await
    .unwrap();
    refused_redirect(&error, &cloning.url());
    assert!(
        cloning.seen().is_empty(),
        "the clip reached the other server"
    );

    // Remote transcription and speech: the audio and the text stay where they were sent.
    let elsewhere = FakeUpstream::start(Behavior::Echo, 4096).await;
    let redirector = Redirector::start(&elsewhere.base_url().replace("/v1", "")).await;
    let base = format!("{}/v1", redirector.origin());
    let (transcribed, spoken) = tokio::task::spawn_blocking({
        let base = base.clone();
        move || {
            let cancel = CancellationToken::new();
            let transcriber =
                RemoteTranscriber::new(&base, "whisper-1", None, &RemoteConsent::none()).unwrap();
            let transcribed = transcriber
                .transcribe(
                    &[0.0; 16_000],
                    &TranscribeOptions::default(),
                    &|_| {},
                    &cancel,
                )
                .unwrap_err()
                .to_string();
            let synthesizer =
                RemoteSynthesizer::new(&base, "tts-1", None, &RemoteConsent::none()).unwrap();
            let spoken = synthesizer
                .synthesize("hello", None, &cancel)
                .unwrap_err()
                .to_string();
            (transcribed, spoken)
        }
    })
    .await
    .unwrap();
    let target = elsewhere.base_url().replace("/v1", "");
    refused_redirect(&transcribed, &target);
    refused_redirect(&spoken, &target);
    assert_eq!(elsewhere.requests(), 0);
}
