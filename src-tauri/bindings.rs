//! The TypeScript side of the desktop boundary, generated from the Rust definitions: every type
//! a command takes or returns, every event payload, the command names and the event names.
//! `ui/src/bindings.ts` is this output, checked in, so the front end type-checks against the
//! Rust it talks to; a test fails when the two drift. After changing a type, a command or an
//! event, regenerate with `HEADROOM_WRITE_BINDINGS=1 cargo test -p headroom-desktop bindings`.

use crate::command_map;
use crate::commands::{
    AppInfo, FileOutcome, FileProject, GpuView, LiveLine, RecordOutcome, UiError, UiErrorKind,
};
use crate::window_rendering::WindowRendering;
use crate::{event_declarations, event_payloads, COMMAND_NAMES};
use headroom_base::cpu::{BatchWorkView, BesideView, CpuShareView, PausedTotal};
use headroom_base::job_clock::JobTime;
use headroom_bench::harness::BenchmarkRun;
use headroom_core::admission::{
    DeadlineKind, Lane, Occupancy, RejectReason, Rejection, SuggestedAction, YieldRule,
};
use headroom_core::cleanup::{CleanupEvent, CleanupMode, FailurePolicy, PieceSource};
use headroom_core::config::{
    AudioLaneSettings, CleanupSettings, CloningSettings, Config, LlmSettings, PrivacySettings,
    ServerSettings, TextLaneSettings, UpstreamSettings,
};
use headroom_core::lanes::{LaneSnapshot, RejectionRecord, UpstreamView};
use headroom_core::llm::{ModelCard, ServerInfo};
use headroom_core::signals::{CrossedSignal, Severity as SignalSeverity, Unit as SignalUnit};
use headroom_gpu::{DeviceMemory, MemorySample, ProcessMemory, SamplerStatus};
use headroom_services::batch::{FailureReason, FileFailure, AUDIO_EXTENSIONS};
use headroom_services::residency::{MemoryView, ResidentModel};
use headroom_services::voice_work::Closeness;
use headroom_services::voices::{ReferenceClip, VoiceMatch, VoiceProfile};
use headroom_services::LaneView;
use headroom_speech::asr::Speaker;
use headroom_speech::cloning::{CloningKind, Health};
use headroom_speech::edit::{EditList, KeptRange};
use headroom_speech::models::ModelStatus;
use headroom_speech::tts::Style;
use headroom_speech::tts::Voice;
use headroom_speech::voice::matching::{EspeakSetting, MatchOutcome, MatchProgress, Score};
use headroom_speech::voice::{ClipReport, Finding, Severity};
use headroom_workstation::batch::BatchServers;
use headroom_workstation::editing::{
    EditChange, EditIntent, EditSummary, FoundFiller, RecordingEdit, TimeSpan, WordRef,
};
use headroom_workstation::jobs::{JobInfo, RefusedSegment};
use headroom_workstation::narration::{
    LanguageView, NarratedSegment, Narration, NarrationMode, NarrationOptions, NarrationOutput,
    NarrationSettings, NarrationStage, NarrationSummary, NarrationTake, NarrationTimings,
    NarrationView, Overflowed, RefusedNarration, SegmentRefusal, SegmentState, SpeakerVoice,
    SpeakerVoiceSource, VoiceNote,
};
use headroom_workstation::projects::{
    Decision, Project, ProjectEntry, ProjectSegment, ProjectSettings, ProjectWord, SpeechTake,
    SplitAt, Suggestion, SuggestionSource, TextNote, VersionInfo,
};
use headroom_workstation::resume::JobOutcome;
use headroom_workstation::speakers::SpeakerProfile;
use headroom_workstation::voice_desk::{ClipAdded, VoiceTakeView};
use headroom_workstation::workstation::{
    CleanupSummary, ModelView, SegmentOutcome, SegmentSaved, TextDestination, Waveform,
};
use ts_rs::{Config as TsConfig, TS};

/// Where the bindings live, from the repository root.
pub const PATH: &str = "ui/src/bindings.ts";

macro_rules! declarations {
    ($cfg:expr; $($ty:ty),* $(,)?) => {
        vec![$(<$ty as TS>::decl($cfg)),*]
    };
}

/// The whole `ui/src/bindings.ts`.
pub fn typescript() -> String {
    // serde_json writes every integer as a JSON number; none of these come near 2^53.
    let cfg = &TsConfig::new().with_large_int("number");
    let mut decls = declarations!(cfg;
        // Admission and lanes.
        Lane, RejectReason, DeadlineKind, SuggestedAction, Rejection, Occupancy,
        RejectionRecord, UpstreamView, LaneSnapshot, SignalSeverity, SignalUnit, CrossedSignal, LaneView, YieldRule,
        BatchWorkView, BesideView, PausedTotal, CpuShareView, JobTime,
        // Cleanup.
        CleanupMode, FailurePolicy, PieceSource, CleanupEvent,
        // Projects.
        Decision, SuggestionSource, TextNote, Suggestion, ProjectWord, ProjectSegment, Speaker, SpeechTake,
        ProjectSettings, Project, ProjectEntry, TextDestination, VersionInfo, SplitAt, SegmentSaved,
        // Editing the recording by its words.
        KeptRange, EditList, TimeSpan, EditIntent, RecordingEdit, WordRef, FoundFiller, EditSummary, EditChange,
        // Narration.
        NarrationMode, NarrationOptions, NarrationSettings, NarrationStage, SegmentRefusal,
        NarrationTake, NarratedSegment, SegmentState, NarrationOutput, Narration,
        SpeakerVoiceSource, SpeakerVoice, VoiceNote,
        RefusedNarration, Overflowed, NarrationTimings, NarrationSummary, NarrationView, LanguageView, Waveform,
        // Jobs.
        JobInfo, RefusedSegment, SegmentOutcome, CleanupSummary, JobOutcome, BatchServers,
        // Settings, servers, models, voices.
        Config, UpstreamSettings, LlmSettings, TextLaneSettings, AudioLaneSettings, CleanupSettings,
        ServerSettings, CloningSettings, PrivacySettings, ServerInfo, ModelCard, ModelStatus, ModelView, Voice,
        // Voice profiles, matches, cloning.
        Severity, Finding, ClipReport, ReferenceClip, Style, Score, MatchOutcome, EspeakSetting,
        VoiceMatch, VoiceProfile, MatchProgress, Closeness, ClipAdded, VoiceTakeView, SpeakerProfile,
        CloningKind, Health,
        // GPU, benchmark, the shell's own.
        SamplerStatus, ProcessMemory, DeviceMemory, MemorySample, GpuView, BenchmarkRun,
        WindowRendering, AppInfo, UiErrorKind, UiError, FailureReason, FileFailure, FileProject, FileOutcome, ResidentModel, MemoryView, LiveLine,
        RecordOutcome,
    );
    decls.extend(event_declarations(cfg));
    let mut out = String::from(
        "// Generated from the Rust definitions by src-tauri/bindings.rs: do not edit.\n\
         // Regenerate with `HEADROOM_WRITE_BINDINGS=1 cargo test -p headroom-desktop bindings`.\n\n",
    );
    for decl in decls {
        out.push_str("export ");
        out.push_str(&decl);
        out.push('\n');
    }
    out.push_str("\n/** Every command the shell accepts. */\nexport const COMMANDS = [\n");
    for name in COMMAND_NAMES {
        out.push_str(&format!("  \"{name}\",\n"));
    }
    out.push_str("] as const;\nexport type Command = (typeof COMMANDS)[number];\n");
    let extensions: Vec<String> = AUDIO_EXTENSIONS
        .iter()
        .map(|e| format!("\"{e}\""))
        .collect();
    out.push_str(&format!(
        "\n/** The audio file extensions the decoder reads (any case). */\nexport const AUDIO_EXTENSIONS = [{}] as const;\n",
        extensions.join(", ")
    ));
    let commands = command_map::signatures(include_str!("commands.rs"))
        .expect("the commands' signatures read");
    let mut names: Vec<&str> = commands.iter().map(|c| c.name.as_str()).collect();
    let mut registered = COMMAND_NAMES.to_vec();
    names.sort_unstable();
    registered.sort_unstable();
    assert_eq!(
        names, registered,
        "every #[tauri::command] in commands.rs is registered in lib.rs's commands![], and no other"
    );
    out.push_str(&command_map::declarations(&commands));
    out.push_str(
        "\n/** Every event the shell emits, with its payload. */\nexport type EventPayloads = {\n",
    );
    for (name, payload) in event_payloads(cfg) {
        out.push_str(&format!("  \"{name}\": {payload};\n"));
    }
    out.push_str("};\nexport type EventName = keyof EventPayloads;\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn bindings_match_the_rust_definitions() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(PATH);
        let generated = typescript();
        if std::env::var_os("HEADROOM_WRITE_BINDINGS").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            checked_in == generated,
            "{PATH} is out of date with the Rust types, commands or events: regenerate it with \
             `HEADROOM_WRITE_BINDINGS=1 cargo test -p headroom-desktop bindings` and commit it"
        );
    }

    #[test]
    fn every_reason_is_a_literal_of_the_union() {
        let reasons = RejectReason::decl(&TsConfig::new());
        for code in ["text_lane_full", "audio_priority", "gpu_memory_pressure"] {
            assert!(reasons.contains(&format!("\"{code}\"")), "{reasons}");
        }
    }
}
