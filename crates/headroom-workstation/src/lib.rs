//! The workstation: projects on disk and the workflows over them — transcribe into a project,
//! clean up segments through the text lane (or the rules), accept or reject, synthesize,
//! record, play, export, benchmark — borrowed from the process's `Services`. The desktop app is
//! a thin shell over [`workstation::Workstation`]; the same calls are tested without a window.
//!
//! ```no_run
//! use headroom_core::config::Config;
//! use headroom_services::{Environment, Services};
//! use headroom_workstation::jobs::JobStop;
//! use headroom_workstation::projects::ProjectStore;
//! use headroom_workstation::workstation::Workstation;
//! use std::sync::Arc;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let env = Environment::from_vars(|_| None, std::env::temp_dir);
//! let store = ProjectStore::new(env.projects_dir.clone());
//! let services = Services::new(Config::default(), env);
//! let desk = Workstation::new(store, services, None);
//! let project = desk.store().create("Interview")?;
//! let project = desk
//!     .transcribe(&project.id, "interview.flac".as_ref(), None, Arc::new(|_| {}), JobStop::new())
//!     .await?;
//! println!("{} segments", project.segments.len());
//! # Ok(()) }
//! ```
//!
//! | module | for |
//! |---|---|
//! | [`projects`] | a visible folder per project, its manifest written atomically, settings and decisions |
//! | [`jobs`] | jobs recorded in their project before they start, listed when paused or interrupted, resumed from their checkpoint |
//! | [`narration`] | a project narrated end to end: text lane and audio lane side by side, takes fitted to the original's timing, WAV, mix and subtitles |
//! | [`resume`] | interrupted jobs resumed from their checkpoints, with the typed [`resume::JobOutcome`] |
//! | [`speakers`] | a project's speakers edited: rename, merge, split a segment, "this is <profile>", a voice profile from a speaker |
//! | [`workstation`] | the workflows, with one typed [`workstation::WorkstationError`] |

pub mod batch;
pub mod editing;
pub mod jobs;
pub mod narration;
pub mod projects;
pub mod resume;
pub mod speakers;
pub mod voice_desk;
pub mod workstation;
