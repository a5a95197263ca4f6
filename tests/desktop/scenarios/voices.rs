//! Speech: the accepted text synthesized and saved; a voice made from a clip, matched and
//! spoken in.

use crate::fixture::{Desktop, World, LONG_WAIT, WAIT};

/// The accepted text synthesized; a path typed outside the project is not where the app
/// writes (only the Save dialog's answer is), a name inside the project is; one take.
pub async fn the_accepted_text_is_synthesized_and_saved_only_inside_the_project(
    ui: &Desktop,
    w: &mut World,
) {
    let cleaned = w.cleaned.as_deref().expect("the accepted cleanup");
    ui.click("nav-synthesize").await;
    assert_eq!(ui.text("synth-text-1").await, cleaned);
    ui.click("synth-segment-1").await;
    ui.find_within("synth-take-0", LONG_WAIT).await;
    // A path typed outside the project is not where the app writes (only the Save dialog's
    // answer is); a name inside the project is.
    let outside = w.home.join("narration.wav");
    ui.type_into("synth-save-path-0", outside.to_str().unwrap())
        .await;
    ui.click("synth-save-0").await;
    let refusal = ui.text("rejection-synthesize").await;
    assert!(refusal.contains("Save dialog"), "{refusal}");
    assert!(!outside.exists());
    ui.click("rejection-dismiss-synthesize").await;
    ui.type_into("synth-save-path-0", "exports/narration.wav")
        .await;
    ui.click("synth-save-0").await;
    ui.find("synth-saved-0").await;
    let saved = w.projects.join("interview/exports/narration.wav");
    let wav = hound::WavReader::open(&saved).expect("a WAV was saved");
    assert!(wav.duration() > wav.spec().sample_rate / 2, "some speech");
    let takes = std::fs::read_dir(w.projects.join("interview/speech"))
        .unwrap()
        .count();
    assert_eq!(takes, 1);
    ui.screenshot("05-synthesize").await;
}

/// A voice from a clip made now (a short clip is refused with advice), an approximate match
/// with progress and similarity bars (the independent judge's score too), a test take scored
/// beside the default voice, A/B played.
pub async fn a_voice_is_made_from_a_clip_and_matched_with_similarity_scores(
    ui: &Desktop,
    w: &mut World,
) {
    let reference = w.home.join("reference.wav");
    let short = w.home.join("short.wav");
    for (path, text) in [
        (&reference, "When the morning train was late again, the whole platform sighed at once. A man with a red umbrella checked his watch and read the timetable aloud."),
        (&short, "Too short."),
    ] {
        assert!(std::process::Command::new("espeak-ng")
            .args(["-v", "en-us+m3", "-w"])
            .arg(path)
            .arg(text)
            .status()
            .unwrap()
            .success());
    }
    ui.click("nav-voices").await;
    ui.find("voices-empty").await;
    ui.type_into("voice-name", "Narrator").await;
    ui.click("voice-create").await;
    ui.until_text("voice-title", WAIT, |t| t == "Narrator")
        .await;
    ui.type_into("voice-clip-path", short.to_str().unwrap())
        .await;
    ui.click("voice-clip-add").await;
    let refused = ui
        .until_text("voice-clip-refused", LONG_WAIT, |t| !t.is_empty())
        .await;
    assert!(refused.contains("at least 5 s"), "{refused}");
    ui.type_into("voice-clip-path", reference.to_str().unwrap())
        .await;
    ui.click("voice-clip-add").await;
    ui.find_within("voice-clip-clip-1", LONG_WAIT).await;
    let transcript = ui
        .find("voice-clip-transcript-clip-1")
        .await
        .prop("value")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(
        transcript.to_lowercase().contains("umbrella"),
        "{transcript}"
    );
    ui.type_into("voice-match-budget", "4").await;
    ui.click("voice-match").await;
    ui.find_within("voice-match-result", LONG_WAIT).await;
    let bar = |id: &'static str| async move {
        ui.find(id)
            .await
            .attr("data-value")
            .await
            .unwrap()
            .unwrap()
            .parse::<f32>()
            .unwrap()
    };
    let (default_sim, match_sim) = (bar("voice-sim-default").await, bar("voice-sim-match").await);
    assert!(
        (0.0..=1.0).contains(&match_sim) && default_sim <= 1.0,
        "{default_sim} {match_sim}"
    );
    // The independent judge (Resemblyzer, installed by scripts/test) scored the match too.
    let independent = ui
        .find("voice-sim-match")
        .await
        .attr("data-independent")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(
        independent
            .parse::<f32>()
            .is_ok_and(|v| (-1.0..=1.0).contains(&v)),
        "independent similarity {independent:?}"
    );
    ui.click("voice-speak").await;
    let method = ui
        .until_text("voice-take-method", LONG_WAIT, |t| !t.is_empty())
        .await;
    assert!(method.starts_with("voice match (approximate"), "{method}");
    ui.find("voice-take-similarity").await;
    // A/B: the reference and the take play (on the null device) without an error.
    ui.click("voice-ab-reference").await;
    ui.click("voice-ab-take").await;
    ui.screenshot("05b-voices").await;
    assert!(
        ui.gone("rejection-voices").await,
        "no error in the Voices view"
    );
    assert!(w.voices_dir.join("narrator/profile.json").exists());
}

/// The Synthesize view offers the voice; a take in it is scored beside the default voice, by
/// the independent judge too.
pub async fn the_synthesize_view_speaks_in_the_made_voice_with_its_similarity(
    ui: &Desktop,
    _w: &mut World,
) {
    ui.click("nav-synthesize").await;
    ui.choose_synth_voice("profile:narrator", LONG_WAIT).await;
    ui.click("synth-segment-0").await;
    let similarity = ui
        .until_text("synth-similarity-0", LONG_WAIT, |t| {
            t.contains("similarity")
        })
        .await;
    assert!(similarity.contains("default voice"), "{similarity}");
    assert!(
        similarity.contains("(independent: Resemblyzer)"),
        "{similarity}"
    );
}
