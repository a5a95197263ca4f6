//! The window itself: how it is drawn, how fast it answers while work runs, and that no
//! error showed in either session.

use crate::fixture::{gl_driver_mappings, repo_root, Desktop, World, AUDITED, AUDITS};

/// Drawn on the CPU (the default), the window loads no GL driver into the app's process.
pub async fn the_window_is_drawn_on_the_cpu_without_a_gl_driver(_ui: &Desktop, w: &mut World) {
    let gl_in_app = gl_driver_mappings(w.measurements.app_tree[0]);
    assert!(gl_in_app.is_empty(), "GL driver in the app: {gl_in_app:?}");
}

/// While the first transcription loads its model and runs, the Memory panel's command answers
/// (saying a model is loading) and the views switch, within 100 ms (measured by
/// `a_project_is_created_and_its_sample_transcribed_and_exported_as_srt`).
pub async fn the_window_stays_responsive_while_a_model_loads(_ui: &Desktop, w: &mut World) {
    let during_load = w
        .measurements
        .during_load
        .as_ref()
        .expect("measured while the sample was transcribed");
    assert!(
        during_load.round_trips.iter().any(|r| r.loading),
        "the first transcription's model load was never seen: {}",
        during_load.summary()
    );
    during_load.check("while a model loaded");
}

/// While the narration (batch work: the text model, then speech, segment by segment) runs, the
/// Memory panel's command answers and a choice re-renders the view, within 100 ms (measured by
/// `the_project_is_narrated_in_its_voice_with_every_segment_fitted`).
pub async fn the_window_stays_responsive_while_a_narration_runs(_ui: &Desktop, w: &mut World) {
    let during_batch = w
        .measurements
        .during_batch
        .as_ref()
        .expect("measured while the project was narrated");
    assert!(
        !during_batch.interactions.is_empty(),
        "the narration ended before it was measured: {}",
        during_batch.summary()
    );
    during_batch.check("while the narration ran");
}

pub async fn the_first_session_shows_no_app_error_or_script_error(ui: &Desktop, _w: &mut World) {
    assert!(ui.gone("rejection-app").await, "no app-level error showed");
    assert!(ui.gone("app-crash").await, "no script error");
}

pub async fn the_second_session_shows_no_script_error(ui: &Desktop, _w: &mut World) {
    assert!(ui.gone("app-crash").await, "no script error");
}

/// axe-core ran inside the window on every view and state the suite took a screenshot of (both
/// sessions): none breaks a serious or critical rule. Every finding, minor ones too, is written
/// to target/ui-axe.json.
pub async fn every_screen_the_suite_showed_passes_axe_without_serious_or_critical_violations(
    _ui: &Desktop,
    _w: &mut World,
) {
    let audited = AUDITED.lock().unwrap().clone();
    let found = AUDITS.lock().unwrap().clone();
    let report = serde_json::json!({ "screens": audited, "violations": found });
    std::fs::write(
        repo_root().join("target/ui-axe.json"),
        serde_json::to_string_pretty(&report).unwrap(),
    )
    .unwrap();
    assert!(
        audited.len() >= 10,
        "only {} screens audited",
        audited.len()
    );
    let grave: Vec<_> = found
        .iter()
        .filter(|v| v.impact == "serious" || v.impact == "critical")
        .collect();
    assert!(grave.is_empty(), "{grave:#?}");
}
