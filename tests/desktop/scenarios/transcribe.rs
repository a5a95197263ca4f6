//! The Transcribe view: the interview project and its sample, editing, a live recording.

use crate::fixture::{repo_root, Desktop, Responsiveness, World, LONG_WAIT, WAIT};
use fantoccini::Locator;
use std::time::Instant;

/// The working project ("Interview"): created, its sample transcribed (the window measured
/// idle first, then while the model loads: see
/// `the_window_stays_responsive_while_a_model_loads`), timed segments, the audio copied in,
/// SRT exported.
pub async fn a_project_is_created_and_its_sample_transcribed_and_exported_as_srt(
    ui: &Desktop,
    w: &mut World,
) {
    let projects = &w.projects;
    ui.click("nav-projects").await;
    ui.type_into("project-name-input", "Interview").await;
    ui.click("project-create").await;
    ui.until_text("current-project-name", WAIT, |t| t == "Interview")
        .await;
    assert!(projects.join("interview/project.json").exists());

    // The window idle, for comparison with it busy below: what the measurement itself costs
    // (the WebDriver requests through tauri-driver and WebKitWebDriver).
    let nav_projects = ui.find("nav-projects").await;
    let nav_transcribe = ui.find("nav-transcribe").await;
    let idle = &mut w.measurements.idle;
    for _ in 0..20 {
        let trip = ui.memory_round_trip().await;
        idle.round_trips.push(trip);
    }
    for (what, nav, view) in [
        ("open Projects", &nav_projects, "view-projects"),
        ("back to Transcribe", &nav_transcribe, "view-transcribe"),
    ] {
        let css = format!("[data-testid='{view}']");
        let interaction = ui.interaction(what, nav, &css, true).await;
        idle.interactions.push(interaction);
    }
    eprintln!("idle: {}", idle.summary());

    // Transcribe the sample and export SRT.
    let sample = repo_root().join("samples/interview.flac");
    ui.type_into("transcribe-path", sample.to_str().unwrap())
        .await;
    ui.click("transcribe-start").await;
    // The window while the first transcription loads its model and runs: the Memory panel's
    // command answers (saying a model is loading) and the views switch.
    let during_load = w.measurements.during_load.insert(Responsiveness::default());
    let deadline = Instant::now() + LONG_WAIT;
    while ui.gone("segment-list").await {
        assert!(
            Instant::now() < deadline,
            "the transcription never finished"
        );
        let trip = ui.memory_round_trip().await;
        let loading = trip.loading;
        during_load.round_trips.push(trip);
        // Up to three view switches while the model loads.
        if loading && during_load.interactions.len() < 6 {
            for (what, nav, view) in [
                ("open Projects", &nav_projects, "view-projects"),
                ("back to Transcribe", &nav_transcribe, "view-transcribe"),
            ] {
                let css = format!("[data-testid='{view}']");
                let mut interaction = ui.interaction(what, nav, &css, true).await;
                let still = ui.memory_round_trip().await;
                interaction.loading_after = still.loading;
                during_load.interactions.push(interaction);
                during_load.round_trips.push(still);
            }
        }
    }
    eprintln!("while a model loaded: {}", during_load.summary());
    ui.find_within("segment-list", LONG_WAIT).await;
    let first = ui.find("segment-text-0").await.prop("value").await.unwrap();
    assert!(
        first.unwrap_or_default().trim().len() > 5,
        "the first segment has text"
    );
    assert!(ui.text("segment-time-0").await.starts_with("00:00"));
    assert!(projects.join("interview/audio/interview.flac").exists());
    ui.find("export-format")
        .await
        .select_by_value("srt")
        .await
        .unwrap();
    ui.click("export-button").await;
    ui.find("export-result").await;
    let srt = std::fs::read_to_string(projects.join("interview/exports/interview.srt")).unwrap();
    assert!(srt.starts_with("1\n00:00:0"), "{srt}");
    assert!(srt.contains(" --> "));
    ui.screenshot("02-transcribe").await;
}

/// Segment 1 gets a sentence the small test model cleans reliably (editing is a feature too):
/// saved as typed (after a pause), without leaving the field.
pub async fn an_edited_segment_is_saved_as_typed(ui: &Desktop, w: &mut World) {
    ui.click("nav-transcribe").await;
    let edit = ui.find("segment-text-1").await;
    edit.clear().await.unwrap();
    edit.send_keys("um so the the meeting is, uh, on tuesday at ten")
        .await
        .unwrap();
    let store = w.store();
    ui.until_text("segment-time-0", WAIT, |_| {
        store
            .open("interview")
            .is_ok_and(|p| p.segments[1].text.contains("the the meeting"))
    })
    .await;
}

/// Record with live transcription (into the conversation project, the current one): each
/// phrase's final text shows as it is heard, and once stopped the recording's transcript is
/// the project's (nothing transcribed again).
pub async fn a_recording_is_transcribed_live_and_becomes_the_transcript(
    ui: &Desktop,
    _w: &mut World,
) {
    ui.click("nav-transcribe").await;
    assert_eq!(ui.text("current-project-name").await, "Conversation");
    assert_eq!(
        ui.find("record-live")
            .await
            .prop("checked")
            .await
            .unwrap()
            .as_deref(),
        Some("true"),
        "live transcription is on by default"
    );
    ui.click("record-start").await;
    // The null device has no clock, so the microphone's speech arrives faster than real time
    // and the recording may reach its length by itself; Stop is pressed if it is still going.
    let heard = ui
        .until_text("live-transcript", LONG_WAIT, |t| {
            t.to_lowercase().contains("field recording")
        })
        .await;
    assert!(heard.contains("00:0"), "live lines are timed: {heard}");
    ui.screenshot("08-live-transcript").await;
    if let Ok(stop) = ui
        .client
        .find(Locator::Css("[data-testid='record-stop']"))
        .await
    {
        let _ = stop.click().await;
    }
    ui.until_text("transcript-summary", LONG_WAIT, |t| {
        t.contains("recording-")
    })
    .await;
    let first = ui.find("segment-text-0").await.prop("value").await.unwrap();
    assert!(
        first
            .unwrap_or_default()
            .to_lowercase()
            .contains("field recording"),
        "the live transcript became the project's"
    );
}

/// A transcription paused while it runs keeps its place: nothing replaces the transcript, the
/// job is listed under Interrupted jobs as paused, and Resume takes it to the transcript.
pub async fn a_transcription_is_paused_then_resumed_from_interrupted_jobs(
    ui: &Desktop,
    w: &mut World,
) {
    use headroom_speech::audio::{decode_file, wav_bytes, Audio, DecodeLimits};
    // The sample ten times over (about four minutes): still running when Pause is pressed.
    let once = decode_file(
        &repo_root().join("samples/interview.flac"),
        DecodeLimits::default(),
    )
    .unwrap();
    let long = w.home.join("long-interview.wav");
    let audio = Audio {
        samples: once.samples.repeat(10),
        sample_rate: once.sample_rate,
    };
    std::fs::write(&long, wav_bytes(&audio)).unwrap();

    ui.click("nav-projects").await;
    ui.type_into("project-name-input", "Paused").await;
    ui.click("project-create").await;
    ui.until_text("current-project-name", WAIT, |t| t == "Paused")
        .await;
    ui.click("nav-transcribe").await;
    ui.type_into("transcribe-path", long.to_str().unwrap())
        .await;
    ui.click("transcribe-start").await;
    ui.click("transcribe-pause").await;
    ui.find_within("interrupted-jobs", LONG_WAIT).await;
    let jobs = w.projects.join("paused/jobs");
    let records: Vec<String> = std::fs::read_dir(&jobs)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json").map(str::to_string)
        })
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    let id = &records[0];
    ui.find(&format!("job-paused-{id}")).await;
    assert!(
        ui.gone("segment-list").await,
        "a paused transcription replaces nothing"
    );
    ui.screenshot("02b-transcription-paused").await;
    ui.click(&format!("job-resume-{id}")).await;
    ui.until_gone("interrupted-jobs", LONG_WAIT).await;
    ui.find_within("segment-list", LONG_WAIT).await;
    assert!(!jobs.join(format!("{id}.json")).exists());
}
