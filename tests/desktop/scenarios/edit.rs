//! Editing the recording by its words, in the Transcribe view: the Hear fillers setting saved,
//! fillers removed (one kept),
//! words struck by selection and Delete, undo and redo by keyboard, pauses shortened, the edit
//! played from a word, exported as audio and as a cut list, and an earlier edit restored.

use crate::fixture::{keys, repo_root, Desktop, World, LONG_WAIT, WAIT};
use fantoccini::Locator;
use headroom_speech::audio::{decode_file, DecodeLimits};

async fn is_cut(ui: &Desktop, word: &str, cut: bool) {
    let want = if cut { "true" } else { "false" };
    ui.until_attr(word, "data-cut", WAIT, |v| v == want).await;
}

fn words_cut(summary: &str) -> usize {
    summary
        .parse()
        .unwrap_or_else(|_| panic!("{summary:?} counts no words"))
}

pub async fn a_recording_is_edited_by_its_words_played_and_exported(ui: &Desktop, w: &mut World) {
    let store = w.store();
    ui.click("nav-projects").await;
    ui.type_into("project-name-input", "Edited").await;
    ui.click("project-create").await;
    ui.until_text("current-project-name", WAIT, |t| t == "Edited")
        .await;
    // Hear fillers is the project's setting, saved as it is ticked (and cleared again: the
    // words below are Whisper's own).
    for on in [true, false] {
        ui.click("transcribe-hear-fillers").await;
        let saved = format!("\"hear_fillers\": {on}");
        ui.until_text("current-project-name", WAIT, |_| {
            std::fs::read_to_string(w.projects.join("edited/project.json"))
                .is_ok_and(|m| m.contains(&saved))
        })
        .await;
    }
    let sample = repo_root().join("samples/interview.flac");
    ui.type_into("transcribe-path", sample.to_str().unwrap())
        .await;
    ui.click("transcribe-start").await;
    ui.find_within("segment-list", LONG_WAIT).await;

    // Edit mode: the words instead of text fields, nothing cut yet.
    ui.click("edit-mode").await;
    ui.find("edit-panel").await;
    ui.until_text("edit-summary", WAIT, |t| t.contains("Nothing cut yet"))
        .await;
    ui.find("word-0-0").await;
    assert!(
        ui.gone("segment-text-0").await,
        "words replace the text field"
    );

    // Remove fillers: the sample's "um" (Whisper writes it) is listed and cut.
    let label = ui
        .until_text("edit-remove-fillers", WAIT, |t| {
            t.starts_with("Remove fillers (")
        })
        .await;
    let count: usize = label
        .trim_start_matches("Remove fillers (")
        .trim_end_matches(')')
        .parse()
        .unwrap();
    assert!(count >= 1, "the sample's fillers are found: {label}");
    ui.click("edit-remove-fillers").await;
    ui.until_attr("edit-remove-fillers", "aria-pressed", WAIT, |v| v == "true")
        .await;
    let after_fillers = words_cut(
        &ui.until_attr("edit-summary", "data-words-cut", WAIT, |v| {
            v.parse::<usize>().is_ok_and(|n| n >= count)
        })
        .await,
    );
    let toggles = ui
        .client
        .find_all(Locator::Css("[data-testid^='edit-filler-toggle-']"))
        .await
        .unwrap();
    assert_eq!(toggles.len(), count);
    let toggle = toggles[0].attr("data-testid").await.unwrap().unwrap();
    // `edit-filler-toggle-S-W` names word W of segment S, both from 1.
    let place: Vec<usize> = toggle
        .trim_start_matches("edit-filler-toggle-")
        .split('-')
        .map(|n| n.parse().unwrap())
        .collect();
    let filler = format!("word-{}-{}", place[0] - 1, place[1] - 1);
    is_cut(ui, &filler, true).await;
    assert!(
        ui.find("transcribe-waveform-cuts")
            .await
            .attr("data-count")
            .await
            .unwrap()
            .is_some(),
        "the waveform shows what is cut"
    );
    // Kept from the list: it comes back; cut again.
    ui.find("edit-fillers").await.click().await.unwrap();
    ui.click(&toggle).await;
    is_cut(ui, &filler, false).await;
    ui.click(&toggle).await;
    is_cut(ui, &filler, true).await;

    // Three words of segment 2 selected (a click, then Shift+Right twice) and Delete: cut.
    ui.click("word-1-0").await;
    ui.press(keys::SHIFT_RIGHT_TWICE).await;
    ui.until_attr("word-1-2", "aria-selected", WAIT, |v| v == "true")
        .await;
    ui.press(keys::DELETE).await;
    for k in 0..3 {
        is_cut(ui, &format!("word-1-{k}"), true).await;
    }
    let struck = words_cut(
        &ui.until_attr("edit-summary", "data-words-cut", WAIT, |v| {
            v.parse::<usize>().is_ok_and(|n| n > after_fillers)
        })
        .await,
    );
    let project = store.open("edited").unwrap();
    let intent = &project.edit.as_ref().unwrap().intent;
    assert!(intent.cut_fillers);
    assert!(!intent.struck_words.is_empty(), "{intent:?}");

    // Undo and redo by keyboard (the focus is on the words).
    ui.press(keys::UNDO).await;
    is_cut(ui, "word-1-0", false).await;
    ui.press(keys::REDO).await;
    is_cut(ui, "word-1-0", true).await;

    // One of them selected alone, Delete again: it comes back, the others stay cut.
    ui.click("word-1-1").await;
    ui.press(keys::DELETE).await;
    is_cut(ui, "word-1-1", false).await;
    is_cut(ui, "word-1-0", true).await;
    is_cut(ui, "word-1-2", true).await;
    ui.until_attr("edit-summary", "data-words-cut", WAIT, |v| {
        v.parse::<usize>().is_ok_and(|n| n == struck - 1)
    })
    .await;

    // Pauses over 0.3 s shortened to it.
    let before_pauses: f64 = ui
        .find("edit-summary")
        .await
        .attr("data-edited-secs")
        .await
        .unwrap()
        .unwrap()
        .parse()
        .unwrap();
    ui.type_into("edit-pause-limit", "0.3").await;
    ui.click("edit-shorten-pauses").await;
    ui.until_attr("edit-shorten-pauses", "aria-pressed", WAIT, |v| v == "true")
        .await;
    let edited_secs: f64 = ui
        .until_attr("edit-summary", "data-edited-secs", WAIT, |v| {
            v.parse::<f64>().is_ok_and(|s| s < before_pauses)
        })
        .await
        .parse()
        .unwrap();
    let intent = store.open("edited").unwrap().edit.unwrap().intent;
    assert_eq!(intent.max_pause, Some(0.3));
    ui.screenshot("03-edit-by-words").await;

    // Played from a word of segment 3 to the end (the null sound device plays at once).
    ui.click("word-2-0").await;
    ui.click("edit-play").await;
    let from: f64 = ui
        .until_attr("edit-play", "data-played-from", WAIT, |v| !v.is_empty())
        .await
        .parse()
        .unwrap();
    let third = &store.open("edited").unwrap().segments[2];
    assert!(
        (from - third.words[0].start).abs() < 1e-2,
        "played from {from}, the word is at {}",
        third.words[0].start
    );
    assert!(ui.gone("rejection-edit").await, "playing failed");

    // Exported: the audio as long as the edit, and a cut list at 25 fps.
    ui.find("edit-export-format")
        .await
        .select_by_value("wav")
        .await
        .unwrap();
    ui.click("edit-export").await;
    ui.until_text("edit-export-result", WAIT, |t| t.contains("edited.wav"))
        .await;
    let wav = w.projects.join("edited/exports/edited-edited.wav");
    let audio = decode_file(&wav, DecodeLimits::default()).unwrap();
    assert!(
        (audio.duration_secs() - edited_secs).abs() < 0.01,
        "{} s exported, the edit is {edited_secs} s",
        audio.duration_secs()
    );
    ui.find("edit-export-format")
        .await
        .select_by_value("otio")
        .await
        .unwrap();
    ui.find("edit-export-fps")
        .await
        .select_by_value("25")
        .await
        .unwrap();
    ui.click("edit-export").await;
    ui.until_text("edit-export-result", WAIT, |t| t.contains("edited.otio"))
        .await;
    let otio: serde_json::Value = serde_json::from_slice(
        &std::fs::read(w.projects.join("edited/exports/edited-edited.otio")).unwrap(),
    )
    .unwrap();
    assert_eq!(otio["OTIO_SCHEMA"], "Timeline.1");
    assert!(otio.to_string().contains("\"rate\":25"), "{otio}");

    // The edit before the pauses were shortened, restored from Earlier versions.
    ui.find("versions").await.click().await.unwrap();
    let restore = ui
        .client
        .find_all(Locator::Css("[data-testid^='version-restore-']"))
        .await
        .unwrap();
    restore[0].click().await.unwrap();
    ui.until_attr("edit-shorten-pauses", "aria-pressed", WAIT, |v| {
        v == "false"
    })
    .await;
    assert_eq!(
        store.open("edited").unwrap().edit.unwrap().intent.max_pause,
        None
    );

    // The interview project again, for the scenarios that follow.
    ui.open_project("interview", "Interview").await;
}
