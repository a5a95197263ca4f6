//! The Projects view.

use crate::fixture::{repo_root, Desktop, World, LONG_WAIT, WAIT};

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

/// Several files as one queued job: a project of each readable one, named after its file, and
/// a bad file in the middle named with why; the projects are listed and open, then removed so
/// the session goes on with the projects it had.
pub async fn several_files_become_a_project_each_and_a_bad_one_is_named(
    ui: &Desktop,
    w: &mut World,
) {
    let inbox = w.home.join("inbox");
    std::fs::create_dir_all(&inbox).unwrap();
    let sample = repo_root().join("samples/interview.flac");
    let (first, bad, last) = (
        inbox.join("first take.flac"),
        inbox.join("notes.wav"),
        inbox.join("last.flac"),
    );
    std::fs::copy(&sample, &first).unwrap();
    std::fs::write(&bad, "not a recording").unwrap();
    std::fs::copy(&sample, &last).unwrap();
    let before = listed(&w.projects);
    ui.click("nav-projects").await;
    let paths = [&first, &bad, &last].map(|p| p.display().to_string());
    // One path per line: WebDriver's Enter key types the line break.
    ui.type_into("batch-paths", &paths.join("\u{E007}")).await;
    ui.click("batch-start").await;
    let summary = ui
        .until_text("batch-summary", LONG_WAIT, |t| !t.is_empty())
        .await;
    assert_eq!(summary, "2 projects made, 1 file failed.");
    ui.screenshot("01b-projects-batch").await;
    let state = |i: usize| async move {
        ui.find(&format!("batch-result-{i}"))
            .await
            .attr("data-state")
            .await
            .unwrap()
    };
    assert_eq!(state(0).await.as_deref(), Some("made"));
    assert_eq!(state(1).await.as_deref(), Some("failed"));
    assert_eq!(state(2).await.as_deref(), Some("made"));
    let why = ui.text("batch-error-1").await;
    assert!(why.contains("notes.wav"), "{why}");
    // Worded from its typed reason (in the window's language), the engine's detail beside it.
    assert!(why.contains("not audio Headroom can read"), "{why}");
    let reason = ui
        .find("batch-error-1")
        .await
        .attr("data-reason")
        .await
        .unwrap();
    assert_eq!(reason.as_deref(), Some("not_audio"));
    // Listed, and each opens on its transcript.
    let made = made_since(w, &before);
    assert_eq!(made.len(), 2, "{made:?}");
    for id in &made {
        ui.find(&format!("project-item-{id}")).await;
    }
    ui.click("batch-open-0").await;
    ui.find("view-transcribe").await;
    ui.find("segment-list").await;
    remove_projects(ui, w, &made, &before).await;
}

/// "Transcribe several files" on two real `headroom serve` workers on loopback (each its own
/// services, lane and models): the form names them, the batch says it runs on them, and each
/// file becomes a project made from their transcripts.
pub async fn several_files_are_heard_on_the_servers_the_form_names(ui: &Desktop, w: &mut World) {
    let workers = [
        headroom_tests::services_for("http://127.0.0.1:9/v1"),
        headroom_tests::services_for("http://127.0.0.1:9/v1"),
    ];
    let mut servers = Vec::new();
    for services in &workers {
        servers.push(headroom_tests::serve(services).await);
    }
    let inbox = w.home.join("inbox-servers");
    std::fs::create_dir_all(&inbox).unwrap();
    let sample = repo_root().join("samples/interview.flac");
    let files = [inbox.join("morning.flac"), inbox.join("evening.flac")];
    for file in &files {
        std::fs::copy(&sample, file).unwrap();
    }
    let before = listed(&w.projects);
    ui.click("nav-projects").await;
    let paths = files.map(|p| p.display().to_string());
    ui.type_into("batch-paths", &paths.join("\u{E007}")).await;
    ui.click("batch-servers-toggle").await;
    let urls: Vec<String> = servers.iter().map(|s| s.base_url()).collect();
    ui.type_into("batch-servers", &urls.join("\u{E007}")).await;
    ui.type_into("batch-per-server", "1").await;
    ui.screenshot("01c-projects-batch-servers").await;
    ui.click("batch-start").await;
    let summary = ui
        .until_text("batch-summary", LONG_WAIT, |t| !t.is_empty())
        .await;
    assert_eq!(summary, "2 projects made, no file failed.");
    assert_eq!(ui.text("batch-on-servers").await, "On 2 servers");
    let heard: u64 = workers
        .iter()
        .map(|services| services.audio_lane().snapshot().admitted_total)
        .sum();
    assert!(heard >= 2, "the workers heard the files ({heard} jobs)");
    let made = made_since(w, &before);
    assert_eq!(made.len(), 2, "{made:?}");
    for id in &made {
        let manifest = std::fs::read_to_string(w.projects.join(id).join("project.json")).unwrap();
        assert!(manifest.contains("record"), "a transcript: {manifest}");
    }
    remove_projects(ui, w, &made, &before).await;
}

/// The projects' folders (their ids), sorted.
fn listed(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.'))
        .collect();
    names.sort();
    names
}

/// The projects made since `before` was listed.
fn made_since(w: &World, before: &[String]) -> Vec<String> {
    listed(&w.projects)
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect()
}

/// Removes `made` from the Projects view, so the session goes on with the projects it had.
async fn remove_projects(ui: &Desktop, w: &World, made: &[String], before: &[String]) {
    ui.click("nav-projects").await;
    for id in made {
        ui.click(&format!("project-delete-{id}")).await;
        ui.click("project-delete-confirm").await;
        ui.until_gone(&format!("project-item-{id}"), WAIT).await;
    }
    assert_eq!(listed(&w.projects), before);
}
