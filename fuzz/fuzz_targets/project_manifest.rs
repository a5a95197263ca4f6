//! A project's manifest, `project.json` (`Project::from_manifest`, what `ProjectStore::open`
//! parses), and what the app then does with a loaded project: speech text, decisions,
//! transcript exports and saving it again.

#![no_main]

#[path = "alloc_guard.rs"]
mod alloc_guard;

use headroom_speech::asr::export::{render, ExportFormat};
use headroom_workstation::projects::{Decision, Project};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(mut project) = Project::from_manifest(data, Path::new("fuzz/project.json")) else {
        return;
    };
    let _ = project.speech_text(None);
    for i in [0, 1, project.segments.len()] {
        let _ = project.speech_text(Some(i));
        let _ = project.decide(i, Decision::Accepted);
    }
    project.decide_all(Decision::Rejected);
    let transcript = project.transcript();
    for format in [
        ExportFormat::Txt,
        ExportFormat::Srt,
        ExportFormat::Vtt,
        ExportFormat::Json,
    ] {
        let _ = render(&transcript, format);
    }
    project.set_transcript(&transcript);
    // Saving writes what it read back: the manifest must serialize and parse again.
    let json = serde_json::to_vec_pretty(&project).expect("a project serializes");
    Project::from_manifest(&json, Path::new("fuzz/again.json")).expect("a saved manifest reads");
});
