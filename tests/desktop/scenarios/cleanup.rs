//! The Cleanup view: rule-based with the text model off, the text lane under a flood, a server
//! elsewhere held back until allowed, and the real text model's suggestion accepted.

use crate::fixture::{Desktop, World, LONG_WAIT, WAIT};

/// Turns the text model on for the project's cleanup, unless it is on already.
async fn text_model_on(ui: &Desktop) {
    if !ui.text("cleanup-privacy-note").await.contains("sent to") {
        ui.click("setting-llm-cleanup").await;
        ui.until_text("cleanup-privacy-note", WAIT, |t| t.contains("sent to"))
            .await;
    }
}

/// With the text model off: rule-based, and nothing reaches the server.
pub async fn cleanup_with_the_text_model_off_is_rule_based_and_sends_nothing(
    ui: &Desktop,
    w: &mut World,
) {
    // The interview project, whatever the keyboard scenario before this one left open.
    ui.open_project("interview", "Interview").await;
    ui.click("nav-cleanup").await;
    let note = ui.text("cleanup-privacy-note").await;
    assert!(note.contains("nothing leaves this machine"), "{note}");
    ui.click("cleanup-segment-1").await;
    ui.find("cleanup-suggestion-1").await;
    assert_eq!(ui.text("cleanup-source-1").await, "rule-based");
    assert!(!ui.text("cleanup-suggestion-1").await.contains(" um "));
    assert_eq!(w.fake.requests(), 0, "cleanup off sent a request");
}

/// Two requests hold both text slots on the (holding) fake server; the third is refused on
/// screen, with its reason, the lane's occupancy, a retry, the rule-based fallback and the
/// rejection history; the fallback is taken, and cancelling frees the slots.
pub async fn a_full_text_lane_refuses_on_screen_with_its_reason_and_a_fallback(
    ui: &Desktop,
    w: &mut World,
) {
    ui.click("nav-cleanup").await;
    ui.click("setting-llm-cleanup").await;
    ui.until_text("cleanup-privacy-note", WAIT, |t| t.contains("sent to"))
        .await;
    ui.click("cleanup-segment-0").await;
    ui.click("cleanup-segment-2").await;
    ui.until_text("lane-text-in-flight", WAIT, |t| t == "2")
        .await;
    ui.click("cleanup-segment-3").await;
    let reason = ui.text("rejection-reason-segment-3").await;
    assert_eq!(reason, "Text lane full");
    let message = ui.text("rejection-message-segment-3").await;
    assert!(message.contains("2 of 2 running"), "{message}");
    assert!(ui
        .text("rejection-busy-segment-3")
        .await
        .contains("Text lane: 2 of 2 running, 0 of 0 waiting"));
    ui.find("rejection-retry-segment-3").await;
    ui.find("rejection-fallback-segment-3").await;
    let history = ui.find("rejection-history-item").await;
    assert_eq!(
        history.attr("data-reason").await.unwrap().as_deref(),
        Some("text_lane_full")
    );
    assert_eq!(ui.text("lane-text-rejected").await, "1");
    ui.screenshot("03-cleanup-rejection").await;
    // The refused segment takes the offered rule-based cleanup; the held ones are cancelled.
    ui.click("rejection-fallback-segment-3").await;
    assert_eq!(
        ui.until_text("cleanup-source-3", WAIT, |t| !t.is_empty())
            .await,
        "rule-based"
    );
    ui.click("cleanup-cancel-0").await;
    ui.click("cleanup-cancel-2").await;
    ui.until_text("lane-text-in-flight", WAIT, |t| t == "0")
        .await;
    w.release.notify_waiters();
}

/// A server on another machine: shown as such, and nothing is sent without consent.
pub async fn a_text_server_on_another_machine_gets_nothing_without_consent(
    ui: &Desktop,
    _w: &mut World,
) {
    ui.click("nav-cleanup").await;
    text_model_on(ui).await;
    ui.type_into("setting-server-url", "http://192.0.2.1:8000/v1")
        .await;
    ui.click("setting-server-url-save").await;
    ui.until_text("text-destination-url", WAIT, |t| t.contains("192.0.2.1"))
        .await;
    let consent = ui.find("setting-remote-consent").await;
    assert!(!consent.is_selected().await.unwrap());
    ui.click("cleanup-segment-1").await;
    assert_eq!(
        ui.text("rejection-reason-segment-1").await,
        "Not allowed to leave this machine"
    );
}

/// With the text model on, against the real llama-server (the project's server from now on):
/// streamed, diffed, pending, then accepted.
pub async fn cleanup_with_the_text_model_is_streamed_diffed_and_accepted(
    ui: &Desktop,
    w: &mut World,
) {
    ui.click("nav-cleanup").await;
    text_model_on(ui).await;
    ui.type_into("setting-server-url", &w.llama.base_url())
        .await;
    ui.click("setting-server-url-save").await;
    ui.until_text("text-destination", WAIT, |t| t.contains("(this machine)"))
        .await;
    ui.click("cleanup-segment-1").await;
    let source = ui
        .until_text("cleanup-source-1", LONG_WAIT, |t| t == "text model")
        .await;
    assert_eq!(source, "text model");
    let cleaned = ui.text("cleanup-suggestion-1").await;
    assert!(!cleaned.trim().is_empty());
    ui.find("cleanup-diff-1").await;
    assert_eq!(ui.text("cleanup-status-1").await, "pending");
    ui.click("cleanup-accept-1").await;
    ui.until_text("cleanup-status-1", WAIT, |t| t == "accepted")
        .await;
    assert!(w.llama.metric("llamacpp:prompt_tokens_total").await > 0.0);
    ui.screenshot("04-cleanup-accepted").await;
    w.cleaned = Some(cleaned);
}
