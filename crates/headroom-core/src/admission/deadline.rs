//! Three separate deadlines: waiting for a slot, waiting for the first words, and the whole
//! request. A server that queues silently (llama.cpp sends no headers until a slot frees) is
//! caught by the first-chunk deadline, not by a header timeout.

use super::DeadlineKind;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use tokio::time::Instant;

/// The deadlines a text request runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deadlines {
    /// Longest wait for a slot in the bounded queue.
    pub queue_wait: Duration,
    /// Longest wait, after dispatch, for the first non-empty content chunk.
    pub first_chunk: Duration,
    /// Longest time from submission to the end of the stream.
    pub total: Duration,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            queue_wait: Duration::from_secs(10),
            first_chunk: Duration::from_secs(30),
            total: Duration::from_secs(120),
        }
    }
}

/// Tracks one request's deadlines as it moves from queue to stream.
#[derive(Debug, Clone, Copy)]
pub struct DeadlineClock {
    deadlines: Deadlines,
    submitted: Instant,
    dispatched: Option<Instant>,
    first_content: Option<Instant>,
}

impl DeadlineClock {
    pub fn start(deadlines: Deadlines, submitted: Instant) -> Self {
        DeadlineClock {
            deadlines,
            submitted,
            dispatched: None,
            first_content: None,
        }
    }

    pub fn submitted(&self) -> Instant {
        self.submitted
    }

    /// When the wait for a slot must end.
    pub fn queue_deadline(&self) -> Instant {
        (self.submitted + self.deadlines.queue_wait).min(self.total_deadline())
    }

    /// When the whole reply must have ended.
    pub fn total_deadline(&self) -> Instant {
        self.submitted + self.deadlines.total
    }

    pub fn mark_dispatched(&mut self, at: Instant) {
        self.dispatched = Some(at);
    }

    pub fn mark_first_content(&mut self, at: Instant) {
        self.first_content.get_or_insert(at);
    }

    pub fn first_content(&self) -> Option<Instant> {
        self.first_content
    }

    pub fn dispatched(&self) -> Option<Instant> {
        self.dispatched
    }

    /// The deadline that applies now, and which one it is: the earlier of first-chunk (until
    /// content arrives) and total.
    pub fn next_deadline(&self) -> (Instant, DeadlineKind) {
        let total = (self.total_deadline(), DeadlineKind::Total);
        match (self.dispatched, self.first_content) {
            (Some(dispatched), None) => {
                let first = dispatched + self.deadlines.first_chunk;
                if first < total.0 {
                    (first, DeadlineKind::FirstChunk)
                } else {
                    total
                }
            }
            _ => total,
        }
    }

    /// The configured length of a deadline, for messages.
    pub fn length_of(&self, kind: DeadlineKind) -> Duration {
        match kind {
            DeadlineKind::QueueWait => self.deadlines.queue_wait,
            DeadlineKind::FirstChunk => self.deadlines.first_chunk,
            DeadlineKind::Total => self.deadlines.total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deadlines() -> Deadlines {
        Deadlines {
            queue_wait: Duration::from_secs(2),
            first_chunk: Duration::from_secs(5),
            total: Duration::from_secs(20),
        }
    }

    #[test]
    fn first_chunk_applies_until_content_then_total() {
        let t0 = Instant::now();
        let mut clock = DeadlineClock::start(deadlines(), t0);
        assert_eq!(clock.queue_deadline(), t0 + Duration::from_secs(2));
        clock.mark_dispatched(t0 + Duration::from_secs(1));
        assert_eq!(
            clock.next_deadline(),
            (t0 + Duration::from_secs(6), DeadlineKind::FirstChunk)
        );
        clock.mark_first_content(t0 + Duration::from_secs(3));
        assert_eq!(
            clock.next_deadline(),
            (t0 + Duration::from_secs(20), DeadlineKind::Total)
        );
    }

    #[test]
    fn total_wins_when_it_is_earlier() {
        let t0 = Instant::now();
        let mut clock = DeadlineClock::start(
            Deadlines {
                total: Duration::from_secs(3),
                ..deadlines()
            },
            t0,
        );
        clock.mark_dispatched(t0 + Duration::from_secs(1));
        assert_eq!(clock.next_deadline().1, DeadlineKind::Total);
        assert_eq!(clock.queue_deadline(), t0 + Duration::from_secs(2));
    }
}
