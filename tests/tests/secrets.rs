//! Where the API key and the URLs' secrets go: the key only to the server it was configured
//! for, kept when the desktop app saves settings, and never shown inside a URL.

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
        let lane = services.text_lane(&up.base_url()).unwrap();
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
    let lane = services.default_text_lane().unwrap();
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
    let lane = services.default_text_lane().unwrap();
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
