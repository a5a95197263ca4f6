//! Stop handles for running jobs, keyed by the id the front end chose, so a job can be
//! cancelled or paused before its command has returned.

use headroom_base::sync::Locked;
use headroom_workstation::jobs::JobStop;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

#[derive(Default, Clone)]
pub struct Jobs {
    running: Arc<Mutex<HashMap<String, JobStop>>>,
}

/// Removes the job from the registry when the command ends, however it ends.
pub struct JobGuard {
    jobs: Jobs,
    id: String,
    /// What a job that can be paused is given (its project keeps the record to resume).
    pub stop: JobStop,
    /// What any other job watches: cancelled by Cancel and by Pause alike.
    pub cancel: CancellationToken,
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        self.jobs.running.locked().remove(&self.id);
    }
}

impl Jobs {
    pub fn start(&self, id: &str) -> JobGuard {
        let stop = JobStop::new();
        self.running.locked().insert(id.to_string(), stop.clone());
        JobGuard {
            jobs: self.clone(),
            id: id.to_string(),
            cancel: stop.token().clone(),
            stop,
        }
    }

    /// Cancels a running job; false when no such job is running.
    pub fn cancel(&self, id: &str) -> bool {
        self.with(id, JobStop::cancel)
    }

    /// Pauses a running job (one that cannot be paused is cancelled); false when no such job
    /// is running.
    pub fn pause(&self, id: &str) -> bool {
        self.with(id, JobStop::pause)
    }

    fn with(&self, id: &str, act: impl FnOnce(&JobStop)) -> bool {
        match self.running.locked().get(id) {
            Some(stop) => {
                act(stop);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_can_be_cancelled_while_it_runs_and_is_forgotten_after() {
        let jobs = Jobs::default();
        let guard = jobs.start("a");
        assert!(jobs.cancel("a"));
        assert!(guard.cancel.is_cancelled());
        drop(guard);
        assert!(!jobs.cancel("a"));
    }

    #[test]
    fn a_paused_job_stops_and_says_it_was_paused() {
        let jobs = Jobs::default();
        let guard = jobs.start("a");
        assert!(jobs.pause("a"));
        assert!(guard.cancel.is_cancelled(), "its work stops");
        assert!(guard.stop.is_paused());
        let other = jobs.start("b");
        assert!(jobs.cancel("b"));
        assert!(!other.stop.is_paused());
        assert!(!jobs.pause("c"));
    }
}
