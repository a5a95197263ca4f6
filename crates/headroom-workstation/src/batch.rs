//! Several recordings at once (files or folders dropped on the window together): one job that
//! makes a project of each file and transcribes it, as batch work on the audio lane, by the
//! services' batch rules ([`run_batch`]): a file that cannot be read makes no project, a
//! missing model stops the batch at the first file instead of failing every one, the others go
//! on, and cancelling keeps every project finished.

use crate::projects::{Project, ProjectError, ProjectStore};
use crate::workstation::{blocking, Workstation, WorkstationError};
use headroom_core::admission::Priority;
use headroom_services::batch::{
    audio_failure, expand_inputs, run_batch, BatchEnd, BatchError, BatchWork, FailureReason,
    FileFailure, FileResult, AUDIO_EXTENSIONS,
};
use headroom_services::speech::{AudioInput, SpeechError, SpeechService};
use headroom_services::transcription_fleet::ServerChoice;
use headroom_speech::asr::AsrError;
use headroom_speech::models;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What became of one file of a batch.
#[derive(Debug)]
pub struct FileTranscription {
    pub path: PathBuf,
    /// The project made of it and transcribed, or why there is none.
    pub result: Result<Project, FileFailure>,
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

impl BatchError for WorkstationError {
    fn fails_every_input(&self) -> bool {
        match self {
            WorkstationError::Speech(e) => e.fails_every_input(),
            WorkstationError::Config(_) => true,
            _ => false,
        }
    }

    fn reason(&self) -> FailureReason {
        match self {
            WorkstationError::Speech(e) => e.reason(),
            WorkstationError::Audio(e) => audio_failure(e),
            _ if self.rejection().is_some() => FailureReason::Refused,
            _ => FailureReason::Failed,
        }
    }
}

/// Where a batch's files are heard: this machine's engine, or OpenAI-compatible
/// transcription servers (other machines running `headroom serve`, vLLM serving Whisper, a
/// LiteLLM proxy), as the window's batch form names them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct BatchServers {
    #[serde(flatten)]
    pub choice: ServerChoice,
    /// The person allows the recordings to go to those of the servers that are on other
    /// machines: each project made records it as its own consent (a resumed job goes on
    /// there). Without it a server elsewhere refuses the batch before anything is sent.
    #[serde(default)]
    pub allow_remote: bool,
}

impl BatchServers {
    /// This machine's engine.
    pub fn embedded() -> BatchServers {
        BatchServers::default()
    }

    /// The origins each project made is allowed to send its recording to.
    fn allowed(&self) -> Vec<String> {
        if self.allow_remote {
            self.choice.remote_origins()
        } else {
            Vec::new()
        }
    }
}

/// Each file into a project of its own.
struct IntoProjects<'a> {
    workstation: &'a Workstation,
    model: Option<&'a str>,
    /// The servers, and the speech made for them once: the files share their health and
    /// backoff. `None`: this machine's engine.
    servers: Option<(&'a ServerChoice, Arc<SpeechService>)>,
    /// The consent each project made records (origins of servers elsewhere).
    allowed: Vec<String>,
    progress: Arc<dyn Fn(f32) + Send + Sync>,
    total: f32,
}

impl BatchWork for IntoProjects<'_> {
    type Made = Project;
    type Error = WorkstationError;

    async fn run(
        &mut self,
        index: usize,
        path: &Path,
        _checked: AudioInput,
        cancel: &CancellationToken,
    ) -> Result<Option<Project>, WorkstationError> {
        let total = self.total;
        (self.progress)(index as f32 / total);
        let name = project_name(path);
        let store = self.workstation.store().clone();
        let allowed = self.allowed.clone();
        let project = blocking(move || {
            let project = create_unique(&store, &name)?;
            if allowed.is_empty() {
                return Ok(project);
            }
            let recorded = store.update(&project.id, |p| {
                p.settings.remote_audio_allowed = allowed;
                Ok::<_, ProjectError>(())
            });
            match recorded {
                Ok((project, ())) => Ok(project),
                // A project without the consent it was made with is no project of this batch.
                Err(e) => {
                    if let Err(removed) = store.delete(&project.id) {
                        tracing::warn!(error = %removed, project = %project.id, "an unfinished batch project was not removed");
                    }
                    Err(e.into())
                }
            }
        })
        .await?;
        let share = {
            let progress = self.progress.clone();
            Arc::new(move |f: f32| progress((index as f32 + f.clamp(0.0, 1.0)) / total))
        };
        let result = self
            .workstation
            .transcribe_at(
                &project.id,
                path,
                self.model,
                self.servers
                    .as_ref()
                    .map(|(c, speech)| (*c, speech.clone())),
                Priority::Normal,
                share,
                cancel.clone().into(),
            )
            .await;
        if result.is_err() {
            let (store, id) = (self.workstation.store().clone(), project.id.clone());
            if let Err(e) = blocking(move || Ok(store.delete(&id)?)).await {
                tracing::warn!(error = %e, project = %project.id, "an unfinished batch project was not removed");
            }
        }
        result.map(Some)
    }
}

impl Workstation {
    /// Makes a project of each file (a folder: of each of its audio files), named after it,
    /// and transcribes it (batch priority: an interactive job goes first). A file that is not
    /// audio Headroom reads is reported and makes no project; a transcription that fails
    /// removes the project it made; the others go on, unless the error would hit every file
    /// (a model not installed), which stops the batch and comes back with the outcomes so far.
    /// `progress` gets the fraction of the whole batch (each file an equal share). Cancelling
    /// stops the file in progress (its project is removed) and the rest; the projects finished
    /// before stay, and the outcomes so far come back with `Cancelled`.
    ///
    /// With `servers`, the files are heard there (`model` is the name they are asked for; a
    /// piece a server fails moves on to another) and speakers are still found here. A choice
    /// no job may name, or a server on another machine neither the settings nor `servers`
    /// allow, refuses the batch before a project is made or a byte is sent.
    pub async fn transcribe_files(
        &self,
        paths: &[PathBuf],
        model: Option<&str>,
        servers: &BatchServers,
        progress: Arc<dyn Fn(f32) + Send + Sync>,
        cancel: CancellationToken,
    ) -> Result<Vec<FileTranscription>, (Vec<FileTranscription>, WorkstationError)> {
        let allowed = servers.allowed();
        let speech = match servers.choice.is_embedded() {
            true => None,
            false => {
                // Each file's job record keeps the servers: no secret goes there.
                servers
                    .choice
                    .check_kept()
                    .map_err(|e| (Vec::new(), SpeechError::from(AsrError::from(e)).into()))?;
                let consent = self.audio_consent_allowing(&allowed);
                let model = model.unwrap_or(models::DEFAULT_MODEL);
                let speech = self
                    .services()
                    .speech_for_servers(&servers.choice, model, &consent)
                    .map_err(|e| (Vec::new(), e.into()))?;
                Some((&servers.choice, speech))
            }
        };
        let inputs = paths.to_vec();
        let expanded = blocking(move || Ok(expand_inputs(&inputs)))
            .await
            .map_err(|e| (Vec::new(), e))?;
        let mut outcomes: Vec<FileTranscription> = expanded
            .failures
            .into_iter()
            .chain(
                expanded
                    .empty_folders
                    .into_iter()
                    .map(|folder| FileFailure {
                        message: format!(
                            "{} has no audio files ({})",
                            folder.display(),
                            AUDIO_EXTENSIONS.join(", ")
                        ),
                        path: folder,
                        reason: FailureReason::EmptyFolder,
                    }),
            )
            .map(|failure| FileTranscription {
                path: failure.path.clone(),
                result: Err(failure),
            })
            .collect();
        let mut work = IntoProjects {
            workstation: self,
            model,
            servers: speech,
            allowed,
            progress: progress.clone(),
            total: expanded.files.len().max(1) as f32,
        };
        let report = run_batch(&expanded.files, &mut work, &cancel).await;
        outcomes.extend(report.outcomes.into_iter().map(|o| FileTranscription {
            path: o.path,
            result: match o.result {
                FileResult::Done(project) => Ok(project),
                FileResult::Failed(failure) => Err(failure),
                FileResult::Skipped => unreachable!("a project is never current before it is made"),
            },
        }));
        match report.end {
            BatchEnd::Finished => {
                progress(1.0);
                Ok(outcomes)
            }
            BatchEnd::Cancelled => Err((outcomes, WorkstationError::Cancelled)),
            BatchEnd::Stopped { error, .. } => Err((outcomes, error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_made_on_servers_records_consent_only_for_those_elsewhere_and_only_when_given() {
        let servers = |allow_remote| BatchServers {
            choice: ServerChoice {
                urls: vec![
                    "http://127.0.0.1:8089/v1".into(),
                    "http://gpu.example:8000/v1".into(),
                ],
                per_server: None,
            },
            allow_remote,
        };
        assert_eq!(servers(true).allowed(), ["http://gpu.example:8000"]);
        assert!(servers(false).allowed().is_empty());
        assert!(BatchServers::embedded().allowed().is_empty());
    }

    #[test]
    fn the_window_names_servers_as_one_object() {
        let named: BatchServers = serde_json::from_str(
            r#"{"urls":["http://127.0.0.1:8089/v1"],"per_server":2,"allow_remote":false}"#,
        )
        .unwrap();
        assert_eq!(named.choice.per_server, Some(2));
        assert_eq!(named.choice.urls, ["http://127.0.0.1:8089/v1"]);
    }

    #[test]
    fn a_project_is_named_after_its_file() {
        assert_eq!(project_name(Path::new("/a/Interview 3.mp3")), "Interview 3");
        assert_eq!(project_name(Path::new("take.wav")), "take");
        assert_eq!(project_name(Path::new("/")), "Recording");
    }
}
