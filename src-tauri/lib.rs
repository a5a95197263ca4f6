//! Headroom's desktop shell: a thin Tauri layer over [`headroom_workstation`]. Commands come in
//! from the web view; progress, lane status, rejections and GPU samples go out as events. No
//! workflow logic lives here, and nothing that touches a file or starts a process runs on the
//! main thread.

mod commands;
mod jobs;

use headroom_core::config::Config;
use headroom_services::{Environment, Services};
use headroom_workstation::projects::ProjectStore;
use headroom_workstation::workstation::Workstation;
use std::sync::Arc;
use std::time::Instant;
use tauri::{Emitter, Manager};

/// Event names the front end listens to.
pub mod events {
    /// A lane's occupancy changed, a request was rejected, or one finished.
    pub const LANE: &str = "lane";
    /// Progress of a long job: `{ job, progress }` with progress in 0..=1.
    pub const JOB_PROGRESS: &str = "job-progress";
    /// Streamed cleanup of a segment.
    pub const CLEANUP: &str = "cleanup";
    /// The input level while recording, in dBFS.
    pub const RECORD_LEVEL: &str = "record-level";
    /// A GPU memory reading (or the no-GPU state).
    pub const GPU: &str = "gpu";
    /// A progress line of a running benchmark.
    pub const BENCH: &str = "bench";
}

/// What the shell holds for the commands.
pub struct Shell {
    pub workstation: Arc<Workstation>,
    pub jobs: jobs::Jobs,
    pub started: Instant,
}

/// Starts the desktop app.
pub fn run() {
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
    // The one place the process environment is read.
    let env = Environment::from_vars(|name| std::env::var_os(name));
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
    let shell = Shell {
        workstation,
        jobs: jobs::Jobs::default(),
        started,
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
        .invoke_handler(tauri::generate_handler![
            commands::app_info,
            commands::app_ready,
            commands::list_projects,
            commands::create_project,
            commands::open_project,
            commands::rename_project,
            commands::delete_project,
            commands::update_project_settings,
            commands::transcribe,
            commands::cancel_job,
            commands::edit_segment,
            commands::clean_segment,
            commands::decide,
            commands::export_transcript,
            commands::list_voices,
            commands::synthesize,
            commands::play,
            commands::save_copy,
            commands::record,
            commands::lanes,
            commands::gpu_status,
            commands::get_settings,
            commands::save_settings,
            commands::test_connection,
            commands::models,
            commands::install_model,
            commands::run_benchmark,
            commands::open_report,
        ])
        .run(tauri::generate_context!())
        .expect("the desktop window could not start");
}
