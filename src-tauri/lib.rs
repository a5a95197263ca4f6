//! Headroom's desktop shell: a thin Tauri layer over [`headroom_workstation`]. Commands come in
//! from the web view; progress, lane status, rejections and GPU samples go out as events. No
//! workflow logic lives here, and nothing that touches a file or starts a process runs on the
//! main thread.

pub mod bindings;
mod chosen;
mod command_map;
mod commands;
mod jobs;
pub mod window_rendering;

use headroom_core::config::Config;
use headroom_services::{Environment, Services};
use headroom_workstation::projects::ProjectStore;
use headroom_workstation::workstation::Workstation;
use std::sync::Arc;
use std::time::Instant;
use tauri::{Emitter, Manager};
use window_rendering::{WindowRendering, WindowSetup};

/// Declares the events the shell emits, each with its payload type, once: the constants the
/// shell emits by, and the table the TypeScript bindings are generated from.
macro_rules! events {
    ($($(#[$doc:meta])* $constant:ident = $name:literal => $payload:ty),* $(,)?) => {
        /// Event names the front end listens to.
        pub mod events {
            $($(#[$doc])* pub const $constant: &str = $name;)*
        }

        /// Each event's name and payload type, for the bindings.
        fn event_payloads(cfg: &ts_rs::Config) -> Vec<(&'static str, String)> {
            vec![$(($name, <$payload as ts_rs::TS>::name(cfg))),*]
        }

        /// The payload types' declarations, for the bindings.
        fn event_declarations(cfg: &ts_rs::Config) -> Vec<String> {
            vec![$(<$payload as ts_rs::TS>::decl(cfg)),*]
        }
    };
}

events! {
    /// A lane's occupancy changed, a request was rejected, or one finished.
    LANE = "lane" => headroom_core::lanes::LaneEvent,
    /// Progress of a long job, in 0..=1 (model installs add the step).
    JOB_PROGRESS = "job-progress" => commands::JobProgress,
    /// Streamed cleanup of a segment.
    CLEANUP = "cleanup" => headroom_workstation::workstation::SegmentCleanupEvent,
    /// A segment of a clean-all finished (or was refused, with the error to show).
    CLEANUP_PROGRESS = "cleanup-progress" => commands::CleanupProgress,
    /// The input level while recording, in dBFS.
    RECORD_LEVEL = "record-level" => commands::RecordLevel,
    /// Live text while recording: the phrase being spoken, or its final segments.
    LIVE_TRANSCRIPT = "live-transcript" => commands::LiveTranscript,
    /// A GPU memory reading (or the no-GPU state).
    GPU = "gpu" => commands::GpuEvent,
    /// A progress line of a running benchmark.
    BENCH = "bench" => commands::BenchProgress,
    /// A step of an approximate voice match.
    VOICE_MATCH_PROGRESS = "voice-match-progress" => commands::VoiceMatchProgress,
    /// A narration's plan, each segment's new state, and its files once laid out.
    NARRATION = "narration" => headroom_workstation::narration::NarrationEvent,
}

/// Declares the commands once: the handler Tauri dispatches by, and the names the TypeScript
/// bindings list.
macro_rules! commands {
    ($($name:ident),* $(,)?) => {
        /// Every command the web view may call.
        pub const COMMAND_NAMES: &[&str] = &[$(stringify!($name)),*];

        fn invoke_handler() -> impl Fn(tauri::ipc::Invoke<tauri::Wry>) -> bool + Send + Sync + 'static {
            tauri::generate_handler![$(commands::$name),*]
        }
    };
}

commands![
    app_info,
    app_ready,
    list_projects,
    create_project,
    open_project,
    rename_project,
    delete_project,
    update_project_settings,
    text_destination,
    voice_destination,
    project_versions,
    restore_version,
    transcribe,
    transcribe_files,
    rename_speaker,
    merge_speakers,
    attach_speaker,
    profile_from_speaker,
    split_segment,
    set_segment_speaker,
    cancel_job,
    pause_job,
    edit_segment,
    segment_words,
    segments_words,
    clean_segment,
    clean_all,
    interrupted_jobs,
    resume_job,
    discard_job,
    decide,
    export_transcript,
    list_voices,
    synthesize,
    narration,
    narrate,
    narrate_segment,
    narration_languages,
    waveform,
    play_range,
    change_edit,
    export_edited,
    play_edited,
    play,
    choose_save_path,
    save_copy,
    record,
    resident_models,
    free_memory,
    lanes,
    gpu_status,
    get_settings,
    save_settings,
    test_connection,
    models,
    install_model,
    run_benchmark,
    open_report,
    voice_profiles,
    create_voice,
    rename_voice,
    delete_voice,
    add_voice_clip,
    record_voice_clip,
    remove_voice_clip,
    set_clip_transcript,
    match_voice,
    speak_as_voice,
    play_voice_file,
    cloning_health,
];

/// What the shell holds for the commands.
pub struct Shell {
    pub workstation: Arc<Workstation>,
    pub jobs: jobs::Jobs,
    pub started: Instant,
    /// Paths the Save dialog returned, the only places outside a project the app writes to.
    pub chosen: chosen::ChosenPaths,
    /// How the window is drawn, as decided before it opened.
    pub window_rendering: WindowRendering,
}

/// Starts the desktop app; `window` is what `main` set up for the toolkit before anything else
/// ran ([`window_rendering::plan`]).
pub fn run(window: WindowSetup) {
    let started = Instant::now();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                "headroom=info,headroom_core=info,headroom_desktop=info".into()
            }),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Some(problem) = &window.problem {
        tracing::warn!("{problem}");
    }
    tracing::info!(
        rendering = ?window.rendering,
        set = ?window.variables,
        "window drawing"
    );
    // Where the services' environment is read (the window's was read by `main`).
    let env = Environment::from_vars(|name| std::env::var_os(name), std::env::temp_dir);
    let config = match Config::load(env.config_file.as_deref(), |name| std::env::var(name).ok()) {
        Ok(c) => c,
        Err(e) => {
            // A broken config file is reported and left alone; the app starts on defaults.
            tracing::error!("{e}; starting with the default settings");
            Config::default()
        }
    };
    let config_path = env.config_file_to_write();
    let store = ProjectStore::new(env.projects_dir.clone());
    tracing::info!(projects = %store.root().display(), "starting");
    let workstation = tauri::async_runtime::block_on(async move {
        Workstation::new(store, Services::new(config, env), config_path)
    });
    // What a crash left (recordings in progress, writes cut short) is mended before anything
    // else opens it.
    let recovered = workstation.recover_after_crash();
    if !recovered.recordings.is_empty() {
        tracing::warn!(
            count = recovered.recordings.len(),
            "recovered interrupted recordings"
        );
    }
    let shell = Shell {
        workstation,
        jobs: jobs::Jobs::default(),
        started,
        chosen: chosen::ChosenPaths::default(),
        window_rendering: window.rendering,
    };
    tauri::Builder::default()
        .plugin(tauri_plugin_dialog::init())
        .manage(shell)
        .setup(|app| {
            let handle = app.handle().clone();
            let shell = app.state::<Shell>();
            let mut lane_events = shell.workstation.subscribe_lanes();
            tauri::async_runtime::spawn(async move {
                use tokio::sync::broadcast::error::RecvError;
                loop {
                    match lane_events.recv().await {
                        Ok(event) => {
                            let _ = handle.emit(events::LANE, &event);
                        }
                        Err(RecvError::Lagged(_)) => continue,
                        Err(RecvError::Closed) => break,
                    }
                }
            });
            commands::start_gpu_events(app.handle().clone(), shell.workstation.gpu().clone());
            Ok(())
        })
        .invoke_handler(invoke_handler())
        .run(tauri::generate_context!())
        .expect("the desktop window could not start");
}
