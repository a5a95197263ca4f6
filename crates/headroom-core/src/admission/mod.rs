//! Admission control: the policies a request passes before it may use the text model.
//!
//! Each policy is small and named. Request-local checks ([`Gate`]s: bounded input, later GPU
//! pressure) run first, so a request that can never succeed does not take a slot; then the
//! [`CapacityLimit`] (slots plus a bounded wait queue, shedding beyond it) under the queue-wait
//! deadline; the first-chunk and total deadlines then follow the request into its stream
//! ([`DeadlineClock`]). The stack is assembled in one place: [`AdmissionStack::for_text_lane`].

mod capacity;
mod deadline;
mod gpu_pressure;
mod input_bound;
mod rejection;
mod yield_to_audio;

pub use capacity::{
    CapacityLimit, Entry, Full, Occupancy, OccupancyObserver, Permit, Priority, QueueTicket,
};
pub use deadline::{DeadlineClock, Deadlines};
pub use gpu_pressure::{GpuPressure, MemoryGauge};
pub use input_bound::{estimate_chat_tokens, estimate_tokens, ContextWindow, InputBound};
pub use rejection::{human_duration, DeadlineKind, Lane, RejectReason, Rejection, SuggestedAction};
pub use yield_to_audio::{InteractiveAudio, YieldRule, YieldToAudio};

use std::time::Duration;
use tokio::time::Instant;

/// What the policies need to know about a request, computed once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestShape {
    /// Characters of message text.
    pub chars: usize,
    /// Conservative prompt-token estimate ([`estimate_chat_tokens`]).
    pub estimated_tokens: u32,
    /// Tokens reserved for the reply.
    pub max_tokens: u32,
}

/// A gate's "no", before the lane adds its occupancy to make a [`Rejection`].
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub reason: RejectReason,
    pub detail: String,
    pub retry_after: Option<Duration>,
}

impl Refusal {
    pub fn new(reason: RejectReason, detail: impl Into<String>) -> Self {
        Refusal {
            reason,
            detail: detail.into(),
            retry_after: None,
        }
    }
}

/// A request-local admission check that needs no slot.
pub trait Gate: Send + Sync {
    fn name(&self) -> &'static str;
    fn check(&self, shape: &RequestShape) -> Result<(), Refusal>;
}

/// A request that passed admission: it holds a slot until `permit` is dropped.
pub struct Admitted {
    pub permit: Permit,
    pub clock: DeadlineClock,
    pub queue_wait: Duration,
}

/// Estimates when a retry has a fair chance, from the lane's recent latencies.
pub type RetryEstimate<'a> = &'a (dyn Fn(Occupancy) -> Option<Duration> + Sync);

/// The ordered policies of one lane.
pub struct AdmissionStack {
    lane: Lane,
    gates: Vec<Box<dyn Gate>>,
    capacity: CapacityLimit,
    deadlines: Deadlines,
}

impl AdmissionStack {
    /// The text lane's stack, in order: bounded input, yielding to interactive audio, GPU
    /// memory pressure (when a headroom is set), then capacity with a bounded wait queue under
    /// the queue-wait deadline; first-chunk and total deadlines (and preemption by audio)
    /// travel with the stream.
    pub fn for_text_lane(
        input: InputBound,
        yield_to_audio: YieldToAudio,
        gpu_pressure: Option<GpuPressure>,
        capacity: CapacityLimit,
        deadlines: Deadlines,
    ) -> Self {
        let mut gates: Vec<Box<dyn Gate>> = vec![Box::new(input), Box::new(yield_to_audio)];
        if let Some(gate) = gpu_pressure {
            gates.push(Box::new(gate));
        }
        AdmissionStack {
            lane: Lane::Text,
            gates,
            capacity,
            deadlines,
        }
    }

    /// A stack with only a capacity limit (the audio lane's).
    pub fn capacity_only(lane: Lane, capacity: CapacityLimit, deadlines: Deadlines) -> Self {
        AdmissionStack {
            lane,
            gates: Vec::new(),
            capacity,
            deadlines,
        }
    }

    /// Adds a request-local gate after the existing ones.
    pub fn with_gate(mut self, gate: impl Gate + 'static) -> Self {
        self.gates.push(Box::new(gate));
        self
    }

    pub fn gate_names(&self) -> Vec<&'static str> {
        self.gates.iter().map(|g| g.name()).collect()
    }

    pub fn occupancy(&self) -> Occupancy {
        self.capacity.occupancy()
    }

    pub fn deadlines(&self) -> Deadlines {
        self.deadlines
    }

    /// A rejection for this lane carrying its occupancy now.
    pub fn rejection(&self, reason: RejectReason) -> Rejection {
        let occ = self.capacity.occupancy();
        Rejection {
            in_flight: occ.in_flight,
            limit: occ.limit,
            waiting: occ.waiting,
            wait_limit: occ.wait_limit,
            ..Rejection::new(self.lane, reason)
        }
    }

    /// Runs the gates, then takes a slot (waiting in the bounded queue at most until the
    /// queue-wait deadline). Never waits when the queue is full: that is answered at once.
    pub async fn admit(
        &self,
        shape: &RequestShape,
        retry_estimate: RetryEstimate<'_>,
    ) -> Result<Admitted, Rejection> {
        self.admit_with(shape, Priority::Normal, retry_estimate)
            .await
    }

    /// [`AdmissionStack::admit`] with a queue priority.
    pub async fn admit_with(
        &self,
        shape: &RequestShape,
        priority: Priority,
        retry_estimate: RetryEstimate<'_>,
    ) -> Result<Admitted, Rejection> {
        let submitted = Instant::now();
        let clock = DeadlineClock::start(self.deadlines, submitted);
        for gate in &self.gates {
            if let Err(refusal) = gate.check(shape) {
                tracing::debug!(gate = gate.name(), reason = %refusal.reason, "gate refused");
                return Err(self
                    .rejection(refusal.reason)
                    .with_detail(refusal.detail)
                    .with_retry_after(refusal.retry_after));
            }
        }
        let reason_when_full = match self.lane {
            Lane::Text => RejectReason::TextLaneFull,
            Lane::Audio => RejectReason::AudioLaneFull,
        };
        let permit = match self.capacity.try_enter_with(priority) {
            Ok(Entry::Admitted(permit)) => permit,
            Ok(Entry::Queued(ticket)) => {
                let position = ticket.position();
                match tokio::time::timeout_at(clock.queue_deadline(), ticket.wait()).await {
                    Ok(permit) => permit,
                    Err(_) => {
                        let r = self.rejection(RejectReason::DeadlineExceeded);
                        let retry = retry_estimate(self.capacity.occupancy());
                        return Err(r
                            .with_deadline(DeadlineKind::QueueWait)
                            .with_position(position)
                            .with_retry_after(retry)
                            .with_detail(format!(
                                "no slot within {}",
                                human_duration(self.deadlines.queue_wait)
                            )));
                    }
                }
            }
            Err(Full(occ)) => {
                let r = Rejection {
                    in_flight: occ.in_flight,
                    limit: occ.limit,
                    waiting: occ.waiting,
                    wait_limit: occ.wait_limit,
                    ..Rejection::new(self.lane, reason_when_full)
                };
                return Err(r.with_retry_after(retry_estimate(occ)));
            }
        };
        Ok(Admitted {
            permit,
            clock,
            queue_wait: submitted.elapsed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_stack_runs_its_gates_in_the_documented_order() {
        let gpu = GpuPressure {
            gauge: std::sync::Arc::new(gpu_pressure::tests::Readings(std::sync::Mutex::new(vec![
                None,
            ]))),
            audio_headroom_mib: 1024,
        };
        let stack = stack_with_gpu(1, 0, Duration::from_secs(1), Some(gpu));
        assert_eq!(
            stack.gate_names(),
            vec!["input_bound", "yield_to_audio", "gpu_pressure"]
        );
    }

    fn stack(limit: usize, wait: usize, queue_wait: Duration) -> AdmissionStack {
        stack_with_gpu(limit, wait, queue_wait, None)
    }

    fn stack_with_gpu(
        limit: usize,
        wait: usize,
        queue_wait: Duration,
        gpu: Option<GpuPressure>,
    ) -> AdmissionStack {
        AdmissionStack::for_text_lane(
            InputBound {
                max_chars: 1000,
                context: ContextWindow::new(4096),
            },
            YieldToAudio {
                rule: YieldRule::Gate,
                activity: std::sync::Arc::new(NoAudio),
            },
            gpu,
            CapacityLimit::new(limit, wait, None),
            Deadlines {
                queue_wait,
                ..Deadlines::default()
            },
        )
    }

    struct NoAudio;
    impl InteractiveAudio for NoAudio {
        fn interactive_running(&self) -> usize {
            0
        }
    }

    const SMALL: RequestShape = RequestShape {
        chars: 10,
        estimated_tokens: 10,
        max_tokens: 10,
    };

    fn no_estimate(_: Occupancy) -> Option<Duration> {
        Some(Duration::from_secs(3))
    }

    #[tokio::test]
    async fn oversized_input_is_refused_before_taking_a_slot() {
        let s = stack(1, 0, Duration::from_secs(1));
        let big = RequestShape {
            chars: 5000,
            ..SMALL
        };
        let r = s.admit(&big, &no_estimate).await.err().unwrap();
        assert_eq!(r.reason, RejectReason::InputTooLong);
        assert_eq!(s.occupancy().in_flight, 0);
    }

    #[tokio::test]
    async fn full_lane_rejects_at_once_with_occupancy_and_retry_estimate() {
        let s = stack(2, 0, Duration::from_secs(1));
        let _a = s.admit(&SMALL, &no_estimate).await.ok().unwrap();
        let _b = s.admit(&SMALL, &no_estimate).await.ok().unwrap();
        let r = s.admit(&SMALL, &no_estimate).await.err().unwrap();
        assert_eq!(r.reason, RejectReason::TextLaneFull);
        assert_eq!(
            (r.in_flight, r.limit, r.waiting, r.wait_limit),
            (2, 2, 0, 0)
        );
        assert_eq!(r.retry_after, Some(Duration::from_secs(3)));
    }

    #[tokio::test(start_paused = true)]
    async fn queued_request_gives_up_at_the_queue_deadline_with_its_position() {
        let s = stack(1, 1, Duration::from_millis(500));
        let _running = s.admit(&SMALL, &no_estimate).await.ok().unwrap();
        let r = s.admit(&SMALL, &no_estimate).await.err().unwrap();
        assert_eq!(r.reason, RejectReason::DeadlineExceeded);
        assert_eq!(r.deadline, Some(DeadlineKind::QueueWait));
        assert_eq!(r.position, Some(1));
        assert_eq!(s.occupancy().waiting, 0, "the queue place is given back");
    }

    #[tokio::test]
    async fn queued_request_runs_when_a_slot_frees() {
        let s = std::sync::Arc::new(stack(1, 1, Duration::from_secs(30)));
        let running = s.admit(&SMALL, &no_estimate).await.ok().unwrap();
        let s2 = s.clone();
        let waiter = tokio::spawn(async move { s2.admit(&SMALL, &no_estimate).await.is_ok() });
        // The waiter is queued once occupancy says so; then free the slot.
        let mut occ = s.occupancy();
        while occ.waiting == 0 {
            tokio::task::yield_now().await;
            occ = s.occupancy();
        }
        drop(running);
        assert!(waiter.await.unwrap());
    }
}
