//! The window in each of its languages and in the pseudo-locale (English made longer and
//! accented): every view, full of the interview project's work, shown with no text cut off.
//! The screenshots (`lang-<language>-<view>.png`) are for a reader to look over as well.

use crate::fixture::{Desktop, World, WAIT};
use std::time::{Duration, Instant};

/// The views, as the navigation names them.
const VIEWS: [&str; 7] = [
    "projects",
    "transcribe",
    "cleanup",
    "synthesize",
    "narration",
    "voices",
    "settings",
];

/// The pseudo-locale first: it is the longest.
const LANGUAGES: [&str; 6] = ["pseudo", "de", "es", "fr", "ja", "zh-Hans"];

/// Chooses `language` in Settings and waits until the window speaks it.
async fn speak(ui: &Desktop, language: &str, page_language: &str) {
    ui.click("nav-settings").await;
    ui.choose("setting-language", language, WAIT).await;
    let deadline = Instant::now() + WAIT;
    while ui.page_language().await != page_language {
        assert!(
            Instant::now() < deadline,
            "the window never spoke {language}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every view in every language, with nothing cut off; then the system's language again.
pub async fn every_view_shows_its_text_whole_in_each_language_and_the_pseudo_locale(
    ui: &Desktop,
    _w: &mut World,
) {
    ui.open_project("interview", "Interview").await;
    // The check finds cut-off text in this window: a button too narrow for its words.
    ui.client
        .execute(
            r#"const b = document.createElement("button");
               b.dataset.testid = "cut-off-probe";
               b.style.cssText = "width: 40px; white-space: nowrap; overflow: hidden";
               b.textContent = "A label far too long for its button";
               document.querySelector(".content").append(b);"#,
            vec![],
        )
        .await
        .unwrap();
    let probe = ui.cut_off_text().await;
    assert!(
        probe.iter().any(|c| c.contains("cut-off-probe")),
        "the check missed a cut-off label: {probe:?}"
    );
    ui.client
        .execute(
            "document.querySelector(\"[data-testid='cut-off-probe']\").remove();",
            vec![],
        )
        .await
        .unwrap();
    let english = ui.text("nav-transcribe").await;
    let mut cut_off = Vec::new();
    for language in LANGUAGES {
        let page_language = if language == "pseudo" {
            "en-XA"
        } else {
            language
        };
        speak(ui, language, page_language).await;
        let named = ui.text("nav-transcribe").await;
        assert_ne!(
            named, english,
            "{language}: the navigation is still in English"
        );
        for view in VIEWS {
            ui.click(&format!("nav-{view}")).await;
            ui.find(&format!("view-{view}")).await;
            // The screenshot waits for the view's data to arrive and paint.
            ui.screenshot(&format!("lang-{language}-{view}")).await;
            cut_off.extend(
                ui.cut_off_text()
                    .await
                    .into_iter()
                    .map(|c| format!("{language} {view}: {c}")),
            );
        }
    }
    speak(ui, "system", "en").await;
    assert_eq!(ui.text("nav-transcribe").await, english);
    assert!(cut_off.is_empty(), "text cut off:\n{}", cut_off.join("\n"));
}
