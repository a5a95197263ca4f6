//! The signals reach the lanes a front end shows: a text lane whose every request is refused
//! for minutes is named, in words, on the configured lane's view.

use headroom_base::consent::RemoteConsent;
use headroom_core::llm::{ChatMessage, ChatRequest};
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};

const MINUTE_MS: u64 = 60_000;

#[tokio::test]
async fn a_text_lane_refusing_for_minutes_shows_its_rejection_rate_in_words() {
    // Every request is refused by the server as busy.
    let up = FakeUpstream::start(
        Behavior::Status {
            status: 503,
            body: "busy".into(),
            retry_after: Some(1),
        },
        4096,
    )
    .await;
    let services = headroom_tests::services_for(&up.base_url());
    let lane = services.default_text_lane(&RemoteConsent::none()).unwrap();
    let ask = || ChatRequest::new(vec![ChatMessage::new("user", "hi")]);
    let start = headroom_base::clock::unix_ms();
    assert!(services.observe_signals_at(start).is_empty());
    // Two rounds of refusals, the second six minutes after the first (the signal must hold
    // for five minutes before it counts).
    for (round, at) in [(0, start + MINUTE_MS), (1, start + 7 * MINUTE_MS)] {
        for _ in 0..25 {
            assert!(lane.submit(ask()).await.is_err(), "round {round}");
        }
        services.observe_signals_at(at);
    }
    let crossed = services.crossed_signals();
    let rejection = crossed
        .iter()
        .find(|s| s.code == "text_rejection_rate")
        .unwrap_or_else(|| panic!("crossed: {crossed:?}"));
    assert_eq!(
        rejection.labels.get("reason").map(String::as_str),
        Some("upstream_busy")
    );
    assert!(
        rejection.message_en.contains("100%"),
        "{}",
        rejection.message_en
    );

    let lanes = services.lanes().unwrap();
    let text = lanes
        .iter()
        .find(|l| l.server_url.is_some())
        .expect("the configured text lane");
    assert!(
        text.signals.iter().any(|s| s.code == "text_rejection_rate"),
        "the configured lane's view carries it: {:?}",
        text.signals
    );
    assert!(lanes[0].signals.is_empty(), "not on the audio lane's");
}
