//! Several recordings at once (files dropped on the window together): one job that makes a
//! project of each and transcribes it, as batch work on the audio lane, going on past a file
//! that cannot be read and keeping every project finished when it is cancelled.

use crate::projects::{Project, ProjectError, ProjectStore};
use crate::workstation::{blocking, Workstation, WorkstationError};
use headroom_core::admission::Priority;
use headroom_services::speech::AudioInput;
use headroom_speech::audio::Decode;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What became of one file of a batch.
#[derive(Debug)]
pub struct FileTranscription {
    pub path: PathBuf,
    /// The project made of it and transcribed, or why there is none.
    pub result: Result<Project, WorkstationError>,
}

/// The project name for a recording: its file name without the extension.
fn project_name(path: &Path) -> String {
    path.file_stem()
        .or_else(|| path.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| "Recording".into())
}

/// A new project named `name`, or `name (2)`, `name (3)`... when that is taken (a second
/// `take.wav` from another folder).
fn create_unique(store: &ProjectStore, name: &str) -> Result<Project, ProjectError> {
    let mut n = 1;
    loop {
        let candidate = match n {
            1 => name.to_string(),
            n => format!("{name} ({n})"),
        };
        match store.create(&candidate) {
            Err(ProjectError::NameTaken(_)) if n < MAX_NAME_TRIES => n += 1,
            other => return other,
        }
    }
}

/// How many numbered names are tried before a taken name is reported.
const MAX_NAME_TRIES: usize = 100;

impl Workstation {
    /// Makes a project of each file, named after it, and transcribes it (batch priority: an
    /// interactive job goes first). A file that is not audio Headroom reads is reported and
    /// makes no project; a transcription that fails removes the project it made; the others go
    /// on. `progress` gets the fraction of the whole batch (each file an equal share).
    /// Cancelling stops the file in progress (its project is removed) and the rest; the
    /// projects finished before stay, and the outcomes so far come back with `Cancelled`.
    pub async fn transcribe_files(
        &self,
        paths: &[PathBuf],
        model: Option<&str>,
        progress: Arc<dyn Fn(f32) + Send + Sync>,
        cancel: CancellationToken,
    ) -> Result<Vec<FileTranscription>, (Vec<FileTranscription>, WorkstationError)> {
        let total = paths.len().max(1) as f32;
        let mut outcomes = Vec::with_capacity(paths.len());
        for (i, path) in paths.iter().enumerate() {
            if cancel.is_cancelled() {
                return Err((outcomes, WorkstationError::Cancelled));
            }
            progress(i as f32 / total);
            tracing::info!(file = %path.display(), "batch: {} of {}", i + 1, paths.len());
            let checked = {
                let path = path.clone();
                // Checked before a project is made, so a bad file leaves nothing behind.
                blocking(move || {
                    AudioInput::from_file(&path)?;
                    Decode::default().probe(&path)?;
                    Ok(())
                })
                .await
            };
            if let Err(e) = checked {
                outcomes.push(FileTranscription {
                    path: path.clone(),
                    result: Err(e),
                });
                continue;
            }
            let name = project_name(path);
            let store = self.store().clone();
            let project = match blocking(move || Ok(create_unique(&store, &name)?)).await {
                Ok(project) => project,
                Err(e) => {
                    outcomes.push(FileTranscription {
                        path: path.clone(),
                        result: Err(e),
                    });
                    continue;
                }
            };
            let share = {
                let progress = progress.clone();
                Arc::new(move |f: f32| progress((i as f32 + f.clamp(0.0, 1.0)) / total))
            };
            let result = self
                .transcribe_at(
                    &project.id,
                    path,
                    model,
                    Priority::Normal,
                    share,
                    cancel.clone(),
                )
                .await;
            if result.is_err() {
                let (store, id) = (self.store().clone(), project.id.clone());
                if let Err(e) = blocking(move || Ok(store.delete(&id)?)).await {
                    tracing::warn!(error = %e, project = %project.id, "an unfinished batch project was not removed");
                }
            }
            // However the cancellation surfaced (the lane's refusal, the engine's stop).
            if result.is_err() && cancel.is_cancelled() {
                return Err((outcomes, WorkstationError::Cancelled));
            }
            outcomes.push(FileTranscription {
                path: path.clone(),
                result,
            });
        }
        progress(1.0);
        Ok(outcomes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_is_named_after_its_file() {
        assert_eq!(project_name(Path::new("/a/Interview 3.mp3")), "Interview 3");
        assert_eq!(project_name(Path::new("take.wav")), "take");
        assert_eq!(project_name(Path::new("/")), "Recording");
    }
}
