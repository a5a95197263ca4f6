//! The second session: the app restarted on a replayed GPU trace (this machine has no GPU),
//! with a cloning server on another machine (with a password in its URL) and two jobs a crash
//! interrupted in the interview project (see `World::second_session`).

use crate::fixture::{Desktop, SecondSession, World, LONG_WAIT, WAIT};
use fantoccini::Locator;

fn planted(w: &World) -> &SecondSession {
    w.second.as_ref().expect("the second session started")
}

/// The app lists the interrupted jobs at start; one is discarded, the other resumed to its end
/// (every segment's suggestion back).
pub async fn interrupted_jobs_are_listed_at_start_then_discarded_or_resumed(
    ui: &Desktop,
    w: &mut World,
) {
    let SecondSession {
        cleanup_job,
        speak_job,
        ..
    } = planted(w);
    let store = w.store();
    ui.find("interrupted-jobs").await;
    assert!(ui
        .text(&format!("job-description-{cleanup_job}"))
        .await
        .contains("clean up (rules only)"));
    ui.screenshot("08-interrupted-jobs").await;
    ui.click(&format!("job-discard-{speak_job}")).await;
    ui.until_gone(&format!("job-{speak_job}"), WAIT).await;
    ui.click(&format!("job-resume-{cleanup_job}")).await;
    ui.until_gone("interrupted-jobs", LONG_WAIT).await;
    assert!(store.jobs("interview").unwrap().is_empty());
    let resumed = store.open("interview").unwrap();
    assert!(
        resumed.segments.iter().all(|s| s.suggestion.is_some()),
        "the resumed cleanup reached every segment"
    );
}

/// The memory chart over the replayed trace: its baseline, peak and delta.
pub async fn the_memory_chart_shows_a_replayed_traces_baseline_peak_and_delta(
    ui: &Desktop,
    _w: &mut World,
) {
    ui.find("gpu-chart").await;
    ui.until_text("gpu-peak", WAIT, |t| t == "peak 22000 MiB")
        .await;
    assert_eq!(ui.text("gpu-baseline").await, "baseline 8000 MiB");
    assert_eq!(ui.text("gpu-delta").await, "delta 14000 MiB");
}

/// The pressure gate refuses cleanup where the user works: Clean up all has every segment
/// refused, each shown where it happened, and the job goes on to the last; one segment's
/// refusal says how much is free and offers the rule-based fallback; the server saw nothing.
pub async fn cleanup_is_refused_at_the_segment_under_gpu_memory_pressure(
    ui: &Desktop,
    w: &mut World,
) {
    let prompts_before = planted(w).prompts_before;
    let segments = w.store().open("interview").unwrap().segments.len();
    ui.click("nav-projects").await;
    ui.click("project-open-interview").await;
    ui.click("nav-cleanup").await;
    ui.click("cleanup-all").await;
    let last = segments - 1;
    for segment in [0, last] {
        ui.until_text(&format!("rejection-reason-segment-{segment}"), WAIT, |t| {
            t == "GPU memory pressure"
        })
        .await;
    }
    ui.find("cleanup-all").await; // the job ended: the button is back
    ui.click("cleanup-segment-2").await;
    assert_eq!(
        ui.text("rejection-reason-segment-2").await,
        "GPU memory pressure"
    );
    let message = ui.text("rejection-message-segment-2").await;
    assert!(
        message.contains("GPU memory is low") && message.contains("2576 MiB free"),
        "{message}"
    );
    ui.find("rejection-fallback-segment-2").await;
    let history = ui.find("rejection-history-item").await;
    assert_eq!(
        history.attr("data-reason").await.unwrap().as_deref(),
        Some("gpu_memory_pressure")
    );
    assert_eq!(
        w.llama.metric("llamacpp:prompt_tokens_total").await,
        prompts_before,
        "refused before the server saw it"
    );
    ui.screenshot("09-gpu-pressure").await;
}

/// A voice profile's take on that cloning server: the Synthesize view names the server
/// (password hidden) and what would go there; nothing is sent until the project allows it,
/// and the project then allows the server's origin, without its password.
pub async fn a_cloning_server_elsewhere_is_shown_redacted_and_gets_nothing_without_consent(
    ui: &Desktop,
    w: &mut World,
) {
    ui.click("nav-projects").await;
    ui.click("project-open-interview").await;
    ui.click("nav-synthesize").await;
    ui.choose_synth_voice("profile:narrator", WAIT).await;
    let shown = ui
        .until_text("voice-destination-url", WAIT, |t| t.contains("192.0.2.1"))
        .await;
    assert!(
        shown.contains("<redacted>@") && !shown.contains("s3cret"),
        "{shown}"
    );
    let consent = ui.find("setting-remote-voice-consent").await;
    assert!(!consent.is_selected().await.unwrap());
    ui.click("synth-segment-0").await;
    let refused = ui
        .until_text("rejection-message-synthesize", WAIT, |t| !t.is_empty())
        .await;
    assert!(refused.contains("is not on this machine"), "{refused}");
    ui.click("setting-remote-voice-consent").await;
    ui.client
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css(
            "[data-testid='setting-remote-voice-consent']:checked",
        ))
        .await
        .expect("the consent is shown as given");
    assert_eq!(
        w.store()
            .open("interview")
            .unwrap()
            .settings
            .remote_voice_allowed
            .as_deref(),
        Some("http://192.0.2.1:4123"),
        "the project allows the server's origin, without its password"
    );
    ui.screenshot("10-voice-consent").await;
}
