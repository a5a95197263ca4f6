//! Cancellation handles for running jobs, keyed by the id the front end chose, so a job can be
//! cancelled before its command has returned.

use headroom_base::sync::Locked;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

#[derive(Default, Clone)]
pub struct Jobs {
    running: Arc<Mutex<HashMap<String, CancellationToken>>>,
}

/// Removes the job from the registry when the command ends, however it ends.
pub struct JobGuard {
    jobs: Jobs,
    id: String,
    pub cancel: CancellationToken,
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        self.jobs.running.locked().remove(&self.id);
    }
}

impl Jobs {
    pub fn start(&self, id: &str) -> JobGuard {
        let cancel = CancellationToken::new();
        self.running.locked().insert(id.to_string(), cancel.clone());
        JobGuard {
            jobs: self.clone(),
            id: id.to_string(),
            cancel,
        }
    }

    /// Cancels a running job; false when no such job is running.
    pub fn cancel(&self, id: &str) -> bool {
        match self.running.locked().get(id) {
            Some(token) => {
                token.cancel();
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
}
