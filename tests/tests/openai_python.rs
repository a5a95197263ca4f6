//! The official `openai` Python client (PyPI `openai`) against `headroom serve` in front of a
//! real llama-server, and in front of a fleet of two: streamed text on success,
//! `RateLimitError` on overload.

use headroom_base::consent::RemoteConsent;
use headroom_core::admission::Lane;
use headroom_core::config::{Config, UpstreamSettings};
use headroom_tests::llama::LlamaServer;
use headroom_tests::python_client;
use serde_json::Value;

/// Runs tests/python/openai_client_check.py against `base` whose text lane has `slots`, and
/// checks what every server shape shares: text, then 429 text_lane_full, then 400.
async fn openai_client_check(base: &str, slots: usize) -> Value {
    let slots = slots.to_string();
    let seen = python_client::run(
        "openai_client_check.py",
        &[base.as_ref(), slots.as_ref()],
        "",
    )
    .await;
    assert!(!seen["streamed_text"].as_str().unwrap().trim().is_empty());
    assert_eq!(seen["overload_status"], 429);
    assert_eq!(seen["overload_code"], "text_lane_full");
    assert!(
        seen["overload_retry_after"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert!(seen["overload_message"].as_str().unwrap().contains("busy"));
    assert_eq!(seen["oversized_status"], 400);
    assert_eq!(seen["oversized_code"], "input_too_long");
    seen
}

#[tokio::test]
async fn the_openai_python_client_sees_text_then_rate_limit_errors() {
    let llama = LlamaServer::start().await;
    let services = headroom_tests::services_for(&llama.base_url());
    services
        .default_text_lane(&RemoteConsent::none())
        .unwrap()
        .discover()
        .await
        .unwrap();
    let server = headroom_tests::serve(&services).await;
    let seen = openai_client_check(&server.base_url(), 2).await;
    assert_eq!(seen["held_per_upstream"], serde_json::json!([2]), "{seen}");
}

#[tokio::test]
async fn the_openai_python_client_over_a_fleet_of_two_llama_servers() {
    let (a, b) = tokio::join!(LlamaServer::start(), LlamaServer::start());
    let mut config = Config::default();
    config.llm.url = a.base_url();
    config.llm.upstreams = vec![UpstreamSettings {
        url: b.base_url(),
        capacity: None,
    }];
    let services = headroom_tests::services(config);
    let lane = services.default_text_lane(&RemoteConsent::none()).unwrap();
    lane.discover().await.unwrap();
    assert_eq!(
        lane.snapshot().occupancy.limit,
        4,
        "two llama-servers of two slots each"
    );
    let server = headroom_tests::serve(&services).await;
    // Four streams hold every slot of both servers; the fifth is refused at once.
    let seen = openai_client_check(&server.base_url(), 4).await;
    assert_eq!(
        seen["held_per_upstream"],
        serde_json::json!([2, 2]),
        "{seen}"
    );
    // Both servers answered requests, none failed.
    for view in lane.fleet().views() {
        assert!(
            lane.metrics()
                .upstream_requests(Lane::Text, &view.name, "answered")
                >= 2,
            "{} answered too few requests",
            view.name
        );
        assert_eq!(
            lane.metrics()
                .upstream_requests(Lane::Text, &view.name, "unavailable"),
            0
        );
    }
}
