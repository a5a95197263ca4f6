//! The Narration view on the interview project.

use crate::fixture::{Desktop, Responsiveness, World, LONG_WAIT, WAIT};
use fantoccini::Locator;
use std::time::{Duration, Instant};

/// The project narrated in its voice (cleaned by llama-server, the rules standing in where its
/// reply is unusable), every segment's state on the timeline (fitted, or overflowing), the
/// files laid out. The window is measured while it runs (see
/// `the_window_stays_responsive_while_a_narration_runs`): the Memory panel's command and a
/// choice that re-renders the view (the Translate mode shows its language list), made once
/// before, idle, for comparison.
pub async fn the_project_is_narrated_in_its_voice_with_every_segment_fitted(
    ui: &Desktop,
    w: &mut World,
) {
    ui.click("nav-narration").await;
    ui.find("narration-waveform").await;
    ui.find("narration-policy")
        .await
        .select_by_value("fallback")
        .await
        .unwrap();
    ui.click("narration-mix").await;
    // The window while the narration (batch work: the text model, then speech, segment by
    // segment) runs: the Memory panel's command answers and a choice re-renders the view (the
    // Translate mode shows its language list), within 100 ms. The choice is made once before,
    // idle, for comparison.
    let modes = ui.find("narration-mode").await;
    let mode = modes.prop("value").await.unwrap().unwrap_or_default();
    assert_ne!(mode, "translate");
    let option = |value: String| {
        let modes = &modes;
        async move {
            modes
                .find(Locator::Css(&format!("option[value='{value}']")))
                .await
                .unwrap()
        }
    };
    let (translate, back) = (option("translate".into()).await, option(mode.clone()).await);
    let language = "[data-testid='narration-language']";
    let choices = [
        ("choose Translate".to_string(), &translate, true),
        (format!("back to {mode}"), &back, false),
    ];
    for (what, option, shown) in &choices {
        let interaction = ui.interaction(what, option, language, *shown).await;
        w.measurements.idle.interactions.push(interaction);
    }
    ui.click("narration-start").await;
    let during_batch = w
        .measurements
        .during_batch
        .insert(Responsiveness::default());
    let deadline = Instant::now() + LONG_WAIT;
    while ui.gone("narration-summary").await {
        assert!(Instant::now() < deadline, "the narration never finished");
        let running = !ui.gone("narration-running").await;
        let trip = ui.memory_round_trip().await;
        if running {
            during_batch.round_trips.push(trip);
            // Three choices, spread over the run.
            if during_batch.round_trips.len() % 10 == 1 && during_batch.interactions.len() < 6 {
                for (what, option, shown) in &choices {
                    let interaction = ui.interaction(what, option, language, *shown).await;
                    during_batch.interactions.push(interaction);
                }
            }
        }
    }
    eprintln!("while the narration ran: {}", during_batch.summary());
    let summary = ui
        .until_text("narration-summary", LONG_WAIT, |t| t.contains("narrated"))
        .await;
    let rows = ui
        .client
        .find_all(Locator::Css("li[data-testid^='narration-segment-']"))
        .await
        .unwrap();
    assert!(rows.len() >= 3, "{summary}");
    assert!(
        summary.starts_with(&format!("{n} of {n} segments narrated", n = rows.len())),
        "{summary}"
    );
    for row in &rows {
        let state = row.attr("data-state").await.unwrap().unwrap_or_default();
        assert!(state == "fitted" || state == "overflow", "{state}");
    }
    let files = ui.text("narration-files").await;
    assert!(files.contains("interview-narration.en.srt"), "{files}");
    for name in [
        "interview-narration.wav",
        "interview-narration-mix.wav",
        "interview-narration.en.vtt",
    ] {
        assert!(
            w.projects.join("interview/exports").join(name).exists(),
            "{name}"
        );
    }
}

/// A segment of the original and of the narration played from the waveform (A/B), one
/// segment re-run; the Transcribe view's waveform plays a segment and highlights it in the
/// text.
pub async fn segments_play_from_the_waveforms_and_one_is_narrated_again(
    ui: &Desktop,
    _w: &mut World,
) {
    ui.click("nav-narration").await;
    // Which side a row last played ("original" or "narration"); the highlight itself lasts
    // only as long as the segment plays, which on the null device is a moment.
    let played = |testid: &'static str, side: &'static str| async move {
        let deadline = Instant::now() + WAIT;
        loop {
            let row = ui.find(testid).await;
            if row.attr("data-last-played").await.unwrap().as_deref() == Some(side) {
                return;
            }
            assert!(Instant::now() < deadline, "{testid} never played {side}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    ui.click("narration-waveform-region-0").await;
    played("narration-segment-0", "original").await;
    ui.click("narration-ab-narration").await;
    ui.click("narration-waveform-region-1").await;
    played("narration-segment-1", "narration").await;
    ui.click("narration-rerun-0").await;
    ui.until_text("narration-summary", LONG_WAIT, |t| t.contains("(1 redone"))
        .await;
    ui.screenshot("05c-narration").await;
    assert!(
        ui.gone("rejection-narration").await,
        "no error in the Narration view"
    );
    assert!(ui.gone("rejection-narration-play").await, "playback worked");
    // The Transcribe view's waveform plays a segment and highlights it in the text.
    ui.click("nav-transcribe").await;
    ui.click("transcribe-waveform-region-0").await;
    played("segment-0", "original").await;
    assert!(ui.gone("rejection-transcribe-play").await);
}
