//! The Settings view and the benchmark run from it.

use crate::fixture::{Desktop, World, LONG_WAIT};

/// Test the connection to the real llama-server and discover its model; the speech model's
/// state and how the window is drawn are shown.
pub async fn settings_test_the_connection_and_find_the_model(ui: &Desktop, w: &mut World) {
    ui.click("nav-settings").await;
    ui.type_into("settings-server-url", &w.llama.base_url())
        .await;
    ui.click("settings-test-connection").await;
    let result = ui.text("settings-connection-result").await;
    assert!(result.contains("1 model"), "{result}");
    ui.find("settings-discovered-model").await;
    assert_eq!(
        ui.find("model-whisper-tiny.en")
            .await
            .attr("data-state")
            .await
            .unwrap()
            .as_deref(),
        Some("installed")
    );
    let rendering = ui.text("settings-window-rendering").await;
    assert!(rendering.contains("drawn on the CPU"), "{rendering}");
    ui.screenshot("06-settings").await;
}

/// The server just chosen is saved to the config; the benchmark runs against it from the app
/// and writes its report.
pub async fn the_benchmark_runs_from_the_app_against_the_saved_server(ui: &Desktop, w: &mut World) {
    ui.click("nav-settings").await;
    ui.click("settings-save").await;
    ui.find("settings-saved").await;
    let saved_config = std::fs::read_to_string(&w.config).unwrap();
    assert!(saved_config.contains(&w.llama.base_url()), "{saved_config}");
    ui.click("bench-run").await;
    let summary = ui
        .until_text("bench-result", LONG_WAIT, |t| t.contains("TTFT"))
        .await;
    assert!(summary.contains("memory   absent (no NVIDIA GPU") || summary.contains("baseline"));
    let reports: Vec<_> = std::fs::read_dir(w.home.join("bench"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(reports.len(), 1);
    assert!(reports[0].path().join("report.html").exists());
    ui.screenshot("07-benchmark").await;
}
