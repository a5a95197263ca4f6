//! The Projects view.

use crate::fixture::{Desktop, World, WAIT};

/// Create, rename (the name changes, the folder stays), delete (the folder goes).
pub async fn a_project_is_created_renamed_and_deleted(ui: &Desktop, w: &mut World) {
    let projects = &w.projects;
    ui.click("nav-projects").await;
    ui.screenshot("01-projects-empty").await;
    ui.type_into("project-name-input", "Scratch").await;
    ui.click("project-create").await;
    ui.find("view-transcribe").await;
    ui.click("nav-projects").await;
    ui.click("project-rename-scratch").await;
    ui.type_into("project-rename-input", "Scratch Two").await;
    ui.click("project-rename-save").await;
    // The name changes; the folder (the project's id) stays, so running jobs still find it.
    ui.until_text("project-name-scratch", WAIT, |t| t == "Scratch Two")
        .await;
    let manifest = std::fs::read_to_string(projects.join("scratch/project.json")).unwrap();
    assert!(manifest.contains("Scratch Two"), "{manifest}");
    ui.click("project-delete-scratch").await;
    ui.click("project-delete-confirm").await;
    ui.find("project-list-empty").await;
    assert!(!projects.join("scratch").exists());
}
