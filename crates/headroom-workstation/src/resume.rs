//! Resuming an interrupted job: each kind continues from its checkpoint (a transcription
//! from its last finished window, a cleanup from its first unfinished segment, a narration with
//! the segments it had not finished, a synthesis from the start).

use crate::jobs::{JobKind, JobStop};
use crate::narration::{NarrationEvent, NarrationSummary};
use crate::projects::{Project, SpeechTake};
use crate::workstation::{
    blocking, end_job, CleanAllEvent, CleanupSummary, Workstation, WorkstationError,
};
use headroom_core::admission::Priority;
use serde::Serialize;
use std::sync::Arc;

/// What a resumed job produced.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "kind", content = "result", rename_all = "snake_case")]
pub enum JobOutcome {
    Transcribed(Box<Project>),
    Cleaned(CleanupSummary),
    Synthesized(SpeechTake),
    Narrated(Box<NarrationSummary>),
}

impl Workstation {
    /// Resumes an interrupted job from its checkpoint: a transcription from its last finished
    /// window, a cleanup from its first unfinished segment, a narration with what it had not finished, a synthesis from the
    /// start.
    /// Refused while another process runs it.
    pub async fn resume_job(
        &self,
        project_id: &str,
        job_id: &str,
        progress: Arc<dyn Fn(f32) + Send + Sync>,
        on_event: &(dyn Fn(CleanAllEvent) + Send + Sync),
        stop: impl Into<JobStop>,
    ) -> Result<JobOutcome, WorkstationError> {
        let stop = stop.into();
        let (store, id, claimed) = (
            self.store().clone(),
            project_id.to_string(),
            job_id.to_string(),
        );
        let job = blocking(move || Ok(store.claim_job(&id, &claimed)?)).await?;
        tracing::info!(project = project_id, job = job_id, "resuming a job");
        match job.record().kind.clone() {
            JobKind::Transcribe { .. } => Ok(JobOutcome::Transcribed(Box::new(
                // Resumed when the person asks for it: they are waiting.
                self.run_transcription(
                    project_id,
                    job,
                    None,
                    Priority::Interactive,
                    progress,
                    stop,
                )
                .await?,
            ))),
            JobKind::Cleanup { .. } => Ok(JobOutcome::Cleaned(
                self.run_cleanup(project_id, job, on_event, &stop).await?,
            )),
            JobKind::Synthesize { segment } => {
                let result = self
                    .run_synthesis(project_id, segment, stop.token().clone())
                    .await;
                end_job(job).await;
                Ok(JobOutcome::Synthesized(result?))
            }
            JobKind::Narrate { .. } => {
                let report = move |event: NarrationEvent| {
                    if let NarrationEvent::Segment { done, of, .. } = event {
                        progress(done as f32 / of.max(1) as f32);
                    }
                };
                Ok(JobOutcome::Narrated(Box::new(
                    self.run_narration(project_id, job, &report, &stop).await?,
                )))
            }
        }
    }
}
