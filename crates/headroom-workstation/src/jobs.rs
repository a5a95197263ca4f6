//! Jobs recorded in their project: a long job (transcribe, clean up, synthesize) writes
//! `jobs/<id>.json` in the project folder before it starts — what it works on and how far it
//! got — and holds a lock on `jobs/<id>.lock` while it runs. The kernel releases that lock when
//! the process ends, however it ends, so a record whose lock is free belongs to a job a crash,
//! a kill or a closed app interrupted: it is listed with Resume and Discard, and a resumed job
//! continues from its last checkpoint (a transcription from its last finished window, a
//! cleanup from its last finished segment).

use crate::projects::{json_files, ProjectEntry, ProjectError, ProjectStore, JOBS};
use headroom_base::clock::unix_ms;
use headroom_base::fsutil::Beneath;
use headroom_services::transcription_fleet::ServerChoice;
use headroom_speech::asr::Segment;
use serde::{Deserialize, Serialize};
use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const FORMAT_VERSION: u32 = 1;

/// What a job does, with everything it needs to start again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobKind {
    /// Transcribe the project's audio file `audio` (relative to the project) with `model`:
    /// this machine's, or the name the servers are asked for.
    Transcribe {
        audio: String,
        model: String,
        #[serde(default)]
        language: Option<String>,
        /// Where it is heard (a batch sent to servers): a resumed job goes on there.
        #[serde(default, skip_serializing_if = "ServerChoice::is_embedded")]
        servers: ServerChoice,
    },
    /// Clean every segment as the project's settings say.
    Cleanup { rules_only: bool, accept: bool },
    /// Speak one segment, or the whole text.
    Synthesize { segment: Option<usize> },
    /// Narrate the project (or narrate one segment again); what is finished is saved in the
    /// project's narration, so a resumed job redoes only the rest.
    Narrate {
        #[serde(default)]
        options: crate::projects::NarrationOptions,
        #[serde(default)]
        segment: Option<usize>,
    },
}

impl JobKind {
    pub fn name(&self) -> &'static str {
        match self {
            JobKind::Transcribe { .. } => "transcribe",
            JobKind::Cleanup { .. } => "cleanup",
            JobKind::Synthesize { .. } => "synthesize",
            JobKind::Narrate { .. } => "narrate",
        }
    }
}

/// A segment the text lane refused during a cleanup job, with the reason's code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct RefusedSegment {
    pub segment: usize,
    pub reason: String,
}

/// How far a job got: saved at each checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct JobProgress {
    /// 0.0..=1.0.
    pub fraction: f32,
    /// Transcription: seconds of audio done, and the segments of the windows finished.
    pub done_secs: f64,
    pub duration_secs: f64,
    pub segments: Vec<Segment>,
    /// Cleanup: the first segment not yet finished, and those the text lane refused.
    pub next_segment: usize,
    pub refused: Vec<RefusedSegment>,
}

/// How a running job is told to stop. Cancelled, its record goes and what it would have
/// replaced stays as it was; paused, it stops the same way but its record stays at its last
/// checkpoint, listed as paused, and a resume goes on from there (as after a crash).
#[derive(Debug, Clone, Default)]
pub struct JobStop {
    token: CancellationToken,
    paused: Arc<AtomicBool>,
}

impl JobStop {
    pub fn new() -> JobStop {
        JobStop::default()
    }

    /// What the job's work watches: cancelled by both [`JobStop::cancel`] and
    /// [`JobStop::pause`].
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    pub fn cancel(&self) {
        self.token.cancel();
    }

    pub fn pause(&self) {
        // Set before the token fires, so the job sees it when it stops.
        self.paused.store(true, Ordering::SeqCst);
        self.token.cancel();
    }

    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::SeqCst)
    }
}

/// A job only ever cancelled (the CLI's Ctrl-C, a caller without a pause).
impl From<CancellationToken> for JobStop {
    fn from(token: CancellationToken) -> JobStop {
        JobStop {
            token,
            paused: Arc::default(),
        }
    }
}

impl From<&CancellationToken> for JobStop {
    fn from(token: &CancellationToken) -> JobStop {
        JobStop::from(token.clone())
    }
}

/// `jobs/<id>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    pub format: u32,
    pub id: String,
    #[serde(flatten)]
    pub kind: JobKind,
    pub created_unix_ms: u64,
    pub updated_unix_ms: u64,
    #[serde(default)]
    pub progress: JobProgress,
    /// When the job was paused; `None`: it was not (running, or interrupted by a crash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_unix_ms: Option<u64>,
}

impl JobRecord {
    /// What the job is and how far it got, in a line.
    pub fn describe(&self) -> String {
        let p = &self.progress;
        match &self.kind {
            JobKind::Transcribe {
                audio,
                model,
                servers,
                ..
            } => {
                let on = servers
                    .shown()
                    .map(|shown| format!(" on {shown}"))
                    .unwrap_or_default();
                if p.duration_secs > 0.0 {
                    format!(
                        "transcribe {audio} with {model}{on}: {:.0} s of {:.0} s done",
                        p.done_secs, p.duration_secs
                    )
                } else {
                    format!("transcribe {audio} with {model}{on}: not started")
                }
            }
            JobKind::Cleanup { rules_only, .. } => format!(
                "clean up{}: {} segments done{}",
                if *rules_only { " (rules only)" } else { "" },
                p.next_segment,
                if p.refused.is_empty() {
                    String::new()
                } else {
                    format!(", {} refused", p.refused.len())
                }
            ),
            JobKind::Synthesize { segment: Some(i) } => format!("speak segment {}", i + 1),
            JobKind::Synthesize { segment: None } => "speak the whole text".to_string(),
            JobKind::Narrate {
                segment: Some(i), ..
            } => format!("narrate segment {} again", i + 1),
            JobKind::Narrate { .. } => format!("narrate: {:.0}% done", p.fraction * 100.0),
        }
    }
}

/// A job as listed: the front ends show it with Resume and Discard when it is interrupted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct JobInfo {
    pub id: String,
    pub project: String,
    pub project_name: String,
    /// `transcribe`, `cleanup`, `synthesize` or `narrate`.
    pub kind: String,
    pub description: String,
    pub fraction: f32,
    pub created_unix_ms: u64,
    pub updated_unix_ms: u64,
    /// A process is running it now; otherwise it was paused or interrupted.
    pub running: bool,
    /// Stopped by a person's Pause (not by a crash or a kill).
    pub paused: bool,
}

/// A job this process runs: holds the job's lock (released when dropped, as when the process
/// dies) and writes its checkpoints. Dropped without [`RunningJob::end`], the record stays and
/// the job is listed as interrupted.
#[derive(Debug)]
pub struct RunningJob {
    record: JobRecord,
    /// The project's folder: the record and its lock are written only beneath it.
    project: Beneath,
    /// Relative to the project, as the lock's.
    path: PathBuf,
    lock_path: PathBuf,
    _lock: File,
}

impl RunningJob {
    pub fn record(&self) -> &JobRecord {
        &self.record
    }

    pub fn id(&self) -> &str {
        &self.record.id
    }

    /// Changes the progress and writes the record (atomically, durably). The change is kept in
    /// memory even when the write fails, so the job itself goes on; only a resume would start
    /// from the previous checkpoint.
    pub fn checkpoint(
        &mut self,
        change: impl FnOnce(&mut JobProgress),
    ) -> Result<(), ProjectError> {
        change(&mut self.record.progress);
        self.record.updated_unix_ms = unix_ms();
        write_record(&self.project, &self.path, &self.record)
    }

    /// The job was paused: its record stays at its last checkpoint, marked paused, and its
    /// lock is released, so it is listed to resume.
    pub fn pause(mut self) -> Result<(), ProjectError> {
        self.record.paused_unix_ms = Some(unix_ms());
        self.record.updated_unix_ms = unix_ms();
        write_record(&self.project, &self.path, &self.record)
    }

    /// The job is over (finished, cancelled or failed): its record goes; nothing to resume.
    pub fn end(self) {
        for path in [&self.path, &self.lock_path] {
            if let Err(e) = self.project.remove_file(path) {
                if !e.is_not_found() {
                    tracing::warn!(error = %e, "a finished job's file stays");
                }
            }
        }
    }
}

fn write_record(project: &Beneath, path: &Path, record: &JobRecord) -> Result<(), ProjectError> {
    let json = serde_json::to_vec_pretty(record).expect("a job record serializes");
    project.write_atomic(path, &json)?;
    Ok(())
}

fn read_record(project: &Beneath, relative: &Path) -> Result<JobRecord, ProjectError> {
    let path = project.shown(relative);
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut project.open_file(relative)?, &mut bytes)
        .map_err(ProjectError::from_io(&path))?;
    let path = path.as_path();
    let record: JobRecord =
        serde_json::from_slice(&bytes).map_err(|e| ProjectError::BadManifest {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    if record.format > FORMAT_VERSION {
        return Err(ProjectError::BadManifest {
            path: path.to_path_buf(),
            reason: format!(
                "a job record written by a newer Headroom (format {})",
                record.format
            ),
        });
    }
    Ok(record)
}

/// Opens a job's lock file and takes its lock without waiting; `None` when a process holds it.
fn try_lock(project: &Beneath, path: &Path) -> Result<Option<File>, ProjectError> {
    let file = project.open_or_create(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(ProjectError::from_io(&project.shown(path))(e)),
    }
}

/// A job id is digits and dashes: it names files, so nothing else gets through.
fn plain_job_id(id: &str) -> bool {
    !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

impl ProjectStore {
    /// Records a job in the project and takes its lock, before the job does anything.
    pub fn start_job(&self, project_id: &str, kind: JobKind) -> Result<RunningJob, ProjectError> {
        // The project must exist; its lock keeps a delete from racing the record's creation.
        let _store = self.lock()?;
        self.open(project_id)?;
        let project = self.beneath(project_id)?;
        project.create_dir_all(JOBS)?;
        let dir = Path::new(JOBS);
        let created = unix_ms();
        let mut n = 0;
        let (id, path, lock_path, lock) = loop {
            let id = format!("{created}-{}-{n}", kind.name());
            let path = dir.join(format!("{id}.json"));
            let lock_path = dir.join(format!("{id}.lock"));
            if !project.exists(&path)? {
                if let Some(lock) = try_lock(&project, &lock_path)? {
                    break (id, path, lock_path, lock);
                }
            }
            n += 1;
        };
        let record = JobRecord {
            format: FORMAT_VERSION,
            id,
            kind,
            created_unix_ms: created,
            updated_unix_ms: created,
            progress: JobProgress::default(),
            paused_unix_ms: None,
        };
        write_record(&project, &path, &record)?;
        tracing::info!(project = project_id, job = %record.id, "job recorded");
        Ok(RunningJob {
            record,
            project,
            path,
            lock_path,
            _lock: lock,
        })
    }

    /// Takes an interrupted job to resume or discard it; refused while a process runs it.
    pub fn claim_job(&self, project_id: &str, job_id: &str) -> Result<RunningJob, ProjectError> {
        if !plain_job_id(job_id) {
            return Err(ProjectError::NoSuchJob(job_id.to_string()));
        }
        let project = self.beneath(project_id)?;
        let dir = Path::new(JOBS);
        let path = dir.join(format!("{job_id}.json"));
        if !project.exists(&path)? {
            return Err(ProjectError::NoSuchJob(job_id.to_string()));
        }
        let lock_path = dir.join(format!("{job_id}.lock"));
        let Some(lock) = try_lock(&project, &lock_path)? else {
            return Err(ProjectError::JobRunning(job_id.to_string()));
        };
        // Read after taking the lock: the job may have ended just before.
        let mut record = match read_record(&project, &path) {
            Err(ProjectError::Beneath(e)) if e.is_not_found() => {
                return Err(ProjectError::NoSuchJob(job_id.to_string()))
            }
            other => other?,
        };
        // Taken up again: no longer paused (written with its next checkpoint).
        record.paused_unix_ms = None;
        Ok(RunningJob {
            record,
            project,
            path,
            lock_path,
            _lock: lock,
        })
    }

    /// Discards an interrupted job: its record goes; what it already saved in the project
    /// (imported audio, finished cleanups) stays.
    pub fn discard_job(&self, project_id: &str, job_id: &str) -> Result<(), ProjectError> {
        self.claim_job(project_id, job_id)?.end();
        Ok(())
    }

    /// A project's jobs, oldest first: those running in some process and those interrupted.
    /// A damaged record is skipped (and left alone).
    pub fn jobs(&self, project_id: &str) -> Result<Vec<JobInfo>, ProjectError> {
        let project = self.open(project_id)?;
        self.jobs_of(&project.id, &project.name)
    }

    /// [`ProjectStore::jobs`] for a project whose manifest was already read.
    fn jobs_of(&self, project_id: &str, project_name: &str) -> Result<Vec<JobInfo>, ProjectError> {
        let mut jobs = Vec::new();
        let project = self.beneath(project_id)?;
        if !project.exists(JOBS)? {
            return Ok(jobs);
        }
        for found in json_files(&project.shown(JOBS))? {
            let Some(name) = found.file_name() else {
                continue;
            };
            let path = Path::new(JOBS).join(name);
            let record = match read_record(&project, &path) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "a job record is skipped");
                    continue;
                }
            };
            // Free lock: nobody runs it. The probe's lock is released at once.
            let running = try_lock(&project, &path.with_extension("lock"))?.is_none();
            jobs.push(JobInfo {
                description: record.describe(),
                kind: record.kind.name().to_string(),
                fraction: record.progress.fraction,
                id: record.id,
                project: project_id.to_string(),
                project_name: project_name.to_string(),
                created_unix_ms: record.created_unix_ms,
                updated_unix_ms: record.updated_unix_ms,
                running,
                paused: record.paused_unix_ms.is_some(),
            });
        }
        jobs.sort_by(|a, b| {
            a.created_unix_ms
                .cmp(&b.created_unix_ms)
                .then(a.id.cmp(&b.id))
        });
        Ok(jobs)
    }

    /// Every project's interrupted jobs: what the app offers to resume at start. Each
    /// manifest is read once, by the listing.
    pub fn interrupted_jobs(&self) -> Result<Vec<JobInfo>, ProjectError> {
        let mut jobs = Vec::new();
        for entry in self.list()? {
            if let ProjectEntry::Ok { id, name, .. } = entry {
                match self.jobs_of(&id, &name) {
                    Ok(found) => jobs.extend(found.into_iter().filter(|j| !j.running)),
                    Err(e) => tracing::warn!(project = %id, error = %e, "jobs not listed"),
                }
            }
        }
        Ok(jobs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (ProjectStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        (ProjectStore::new(dir.path().join("projects")), dir)
    }

    fn transcribe() -> JobKind {
        JobKind::Transcribe {
            audio: "audio/talk.wav".into(),
            model: "whisper-tiny.en".into(),
            language: None,
            servers: ServerChoice::embedded(),
        }
    }

    #[test]
    fn a_transcription_record_names_its_servers_and_one_from_before_reads_as_this_machines() {
        let before = r#"{"kind":"transcribe","audio":"audio/talk.wav","model":"whisper-tiny.en"}"#;
        let kind: JobKind = serde_json::from_str(before).unwrap();
        assert_eq!(kind, transcribe());
        let on_servers = JobKind::Transcribe {
            audio: "audio/talk.wav".into(),
            model: "whisper-1".into(),
            language: None,
            servers: ServerChoice {
                urls: vec!["http://127.0.0.1:8089/v1".into()],
                per_server: Some(2),
            },
        };
        let written = serde_json::to_string(&on_servers).unwrap();
        assert_eq!(
            serde_json::from_str::<JobKind>(&written).unwrap(),
            on_servers
        );
        assert!(
            !serde_json::to_string(&transcribe())
                .unwrap()
                .contains("servers"),
            "this machine's engine writes the record as before"
        );
    }

    #[test]
    fn a_job_dropped_without_ending_is_listed_as_interrupted_with_its_checkpoint() {
        let (store, _dir) = store();
        let p = store.create("Talk").unwrap();
        let mut job = store.start_job(&p.id, transcribe()).unwrap();
        let id = job.id().to_string();
        let listed = store.jobs(&p.id).unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].running, "its lock is held");
        assert!(store.interrupted_jobs().unwrap().is_empty());
        assert!(matches!(
            store.claim_job(&p.id, &id),
            Err(ProjectError::JobRunning(_))
        ));
        job.checkpoint(|progress| {
            progress.done_secs = 30.0;
            progress.duration_secs = 67.0;
            progress.segments.push(Segment {
                speaker: None,
                start: 0.0,
                end: 2.0,
                text: "hello".into(),
                words: Vec::new(),
            });
        })
        .unwrap();
        drop(job); // as when the process dies
        let interrupted = store.interrupted_jobs().unwrap();
        assert_eq!(interrupted.len(), 1);
        assert_eq!(interrupted[0].id, id);
        assert_eq!(interrupted[0].project_name, "Talk");
        assert!(interrupted[0].description.contains("30 s of 67 s"));
        let claimed = store.claim_job(&p.id, &id).unwrap();
        assert_eq!(claimed.record().progress.segments.len(), 1);
        assert_eq!(claimed.record().kind, transcribe());
        claimed.end();
        assert!(store.jobs(&p.id).unwrap().is_empty());
        assert!(matches!(
            store.claim_job(&p.id, &id),
            Err(ProjectError::NoSuchJob(_))
        ));
    }

    #[test]
    fn discarding_refuses_a_running_job_and_odd_ids() {
        let (store, _dir) = store();
        let p = store.create("Talk").unwrap();
        let job = store
            .start_job(
                &p.id,
                JobKind::Cleanup {
                    rules_only: true,
                    accept: false,
                },
            )
            .unwrap();
        assert!(matches!(
            store.discard_job(&p.id, job.id()),
            Err(ProjectError::JobRunning(_))
        ));
        for odd in ["", "../project", "a/b", "x.json"] {
            assert!(matches!(
                store.discard_job(&p.id, odd),
                Err(ProjectError::NoSuchJob(_))
            ));
        }
        let id = job.id().to_string();
        drop(job);
        store.discard_job(&p.id, &id).unwrap();
        assert!(store.jobs(&p.id).unwrap().is_empty());
        assert!(store.start_job("nope", transcribe()).is_err());
    }

    #[test]
    fn a_damaged_record_is_skipped_and_left_alone() {
        let (store, _dir) = store();
        let p = store.create("Talk").unwrap();
        let dir = store.folder(&p.id).unwrap().join(JOBS);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("1-x-0.json"), b"{ half").unwrap();
        assert!(store.jobs(&p.id).unwrap().is_empty());
        assert!(dir.join("1-x-0.json").exists());
    }
}
