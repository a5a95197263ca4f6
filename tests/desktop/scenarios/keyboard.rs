//! The main path by keyboard alone: nothing clicked, nothing focused by the test; Tab,
//! Enter, Space, arrows and typing, as a keyboard user works (forward only:
//! WebKitWebDriver sends Shift+Tab as an unidentified key; the Tab order wraps around, from
//! the views through the side panels to the navigation). Where an action takes away the
//! control that had the focus, the app puts the focus somewhere sensible, and the results
//! are announced through the window's live region.

use crate::fixture::{keys, repo_root, Desktop, World, LONG_WAIT, WAIT};

/// A new project ("Keyboard") created, its sample imported and transcribed, a segment edited,
/// the transcript exported, a segment cleaned up and the suggestion accepted, the project
/// narrated; then the interview project opened again for the scenarios after this one.
pub async fn the_main_path_is_done_by_keyboard_alone(ui: &Desktop, w: &mut World) {
    let project = w.projects.join("keyboard");
    let announced = |expected: &'static str| move |t: &str| t.contains(expected);

    // Create: the Projects view, the name typed, Enter.
    ui.tab_to("nav-projects").await;
    ui.press(keys::ENTER).await;
    ui.find("view-projects").await;
    ui.tab_to("project-name-input").await;
    ui.press("Keyboard").await;
    ui.press(keys::ENTER).await;
    ui.until_text("current-project-name", WAIT, |t| t == "Keyboard")
        .await;
    // Opened in the Transcribe view: its heading has the focus, the opening is announced.
    ui.find("view-transcribe").await;
    ui.until_focused("view-title", WAIT).await;
    ui.until_text("announcer", WAIT, announced("Project Keyboard opened"))
        .await;

    // Import and transcribe: the file's path typed, then Transcribe pressed. The button
    // disables itself while the job runs; when it ends, the focus is on the first segment.
    let sample = repo_root().join("samples/interview.flac");
    ui.tab_to("transcribe-path").await;
    ui.press(sample.to_str().unwrap()).await;
    ui.tab_to("transcribe-start").await;
    ui.press(keys::ENTER).await;
    ui.until_text("announcer", LONG_WAIT, announced("Transcribed: "))
        .await;
    ui.until_focused("segment-text-0", WAIT).await;

    // The waveform is one Tab stop; the arrow keys move between its segments and Space plays
    // the one focused, which the transcript marks.
    ui.tab_to("transcribe-waveform-region-0").await;
    let segments = ui
        .client
        .find_all(fantoccini::Locator::Css("[data-testid^='segment-text-']"))
        .await
        .unwrap()
        .len();
    ui.press(keys::END).await;
    ui.until_focused(
        &format!("transcribe-waveform-region-{}", segments - 1),
        WAIT,
    )
    .await;
    ui.press(keys::HOME).await;
    ui.until_focused("transcribe-waveform-region-0", WAIT).await;
    ui.press(keys::RIGHT).await;
    ui.until_focused("transcribe-waveform-region-1", WAIT).await;
    ui.press(keys::SPACE).await;
    let played = ui.find("segment-1").await;
    let deadline = std::time::Instant::now() + WAIT;
    while played.attr("data-last-played").await.unwrap().as_deref() != Some("original") {
        assert!(std::time::Instant::now() < deadline, "Space played nothing");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // Edit: segment 2 extended by typing; leaving the field (Tab) saves it.
    ui.tab_to("segment-text-1").await;
    ui.press(keys::CTRL_END).await;
    ui.press(" edited by keyboard").await;
    ui.press(keys::TAB).await;
    // Saved as the project reads it (the manifest with the journal of typed edits).
    let store = w.store();
    ui.until_text("segment-time-0", WAIT, |_| {
        store
            .open("keyboard")
            .is_ok_and(|p| p.segments[1].text.contains("edited by keyboard"))
    })
    .await;

    // Export: on to Export (Tab wraps around), Enter: the transcript saved in the format
    // shown (the last one chosen).
    ui.tab_to("export-button").await;
    ui.press(keys::ENTER).await;
    ui.find("export-result").await;
    ui.until_text("announcer", WAIT, announced("Saved ")).await;
    let format = ui
        .find("export-format")
        .await
        .prop("value")
        .await
        .unwrap()
        .unwrap_or_default();
    let exported = std::fs::read_to_string(project.join(format!("exports/keyboard.{format}")))
        .unwrap_or_else(|e| panic!("no {format} export: {e}"));
    assert!(exported.contains("edited by keyboard"), "{exported}");

    // Clean up segment 2 (rule-based: the new project's text model is off): the button keeps
    // the focus through the job; the suggestion is announced, then accepted with the focus
    // staying on Accept.
    ui.tab_to("nav-cleanup").await;
    ui.press(keys::ENTER).await;
    ui.find("view-cleanup").await;
    ui.until_focused("view-title", WAIT).await;
    ui.tab_to("cleanup-segment-1").await;
    ui.press(keys::ENTER).await;
    ui.until_text(
        "announcer",
        WAIT,
        announced("Suggestion ready for segment 2"),
    )
    .await;
    assert_eq!(ui.focused().await, "cleanup-segment-1");
    ui.tab_to("cleanup-accept-1").await;
    ui.press(keys::ENTER).await;
    ui.until_text("cleanup-status-1", WAIT, |t| t == "accepted")
        .await;
    ui.until_text("announcer", WAIT, announced("Segment 2 accepted"))
        .await;
    assert_eq!(ui.focused().await, "cleanup-accept-1");
    ui.screenshot("keyboard-cleanup").await;

    // Narrate: Start pressed; when the run ends the focus is on its summary, which is also
    // announced; the files are laid out in the project.
    ui.tab_to("nav-narration").await;
    ui.press(keys::ENTER).await;
    ui.find("view-narration").await;
    ui.tab_to("narration-start").await;
    ui.press(keys::ENTER).await;
    ui.until_text("announcer", LONG_WAIT, announced(" narrated ("))
        .await;
    ui.until_focused("narration-summary", WAIT).await;
    assert!(project.join("exports/keyboard-narration.wav").exists());
    // The narration speaks the accepted text (the rules made a sentence of the addition).
    let spoken = ui.text("narration-text-1").await;
    assert!(
        spoken.to_lowercase().contains("edited by keyboard"),
        "{spoken}"
    );
    ui.screenshot("keyboard-narration").await;

    // The interview project again, opened by keyboard, for the scenarios that follow.
    ui.tab_to("nav-projects").await;
    ui.press(keys::ENTER).await;
    ui.tab_to("project-open-interview").await;
    ui.press(keys::ENTER).await;
    ui.until_text("current-project-name", WAIT, |t| t == "Interview")
        .await;
}
