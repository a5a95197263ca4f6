//! The side panels: the GPU's state and the models in memory.

use crate::fixture::{content, Desktop, World, LONG_WAIT, WAIT};
use headroom_gpu::GpuStatus;

/// The GPU panel shows this machine's true state.
pub async fn the_gpu_panel_shows_this_machines_state(ui: &Desktop, _w: &mut World) {
    match GpuStatus::probe() {
        GpuStatus::NoGpu { .. } => {
            let state = ui.find("gpu-state").await;
            assert_eq!(
                state.attr("data-state").await.unwrap().as_deref(),
                Some("no_gpu")
            );
            assert!(content(&state).await.contains("No NVIDIA GPU detected"));
        }
        GpuStatus::Present { .. } => {
            ui.find("gpu-chart").await;
            assert!(ui.text("gpu-peak").await.contains("MiB"));
        }
    }
}

/// The Memory panel lists the models the work before loaded, each with its cost (Whisper for
/// the transcription); Free memory lets go of them.
pub async fn the_memory_panel_lists_the_loaded_models_and_frees_them(ui: &Desktop, _w: &mut World) {
    let whisper = "memory-model-whisper-tiny.en (int8)";
    let shown = ui
        .until_text(whisper, LONG_WAIT, |t| t.contains("MiB"))
        .await;
    assert!(shown.contains("transcription"), "{shown}");
    ui.click("free-memory").await;
    let freed = ui
        .until_text("memory-freed", WAIT, |t| t.contains("whisper-tiny.en"))
        .await;
    assert!(freed.contains("MiB"), "{freed}");
    assert!(ui.gone(whisper).await, "the model is no longer listed");
    ui.screenshot("09-memory").await;
}
