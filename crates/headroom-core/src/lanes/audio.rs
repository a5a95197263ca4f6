use super::monitor::{LaneEvent, LaneMonitor, LaneSnapshot};
use crate::admission::{
    AdmissionStack, CapacityLimit, Deadlines, InteractiveAudio, Lane, Priority, RejectReason,
    Rejection, RequestShape,
};
use crate::metrics::{Metrics, Outcome};
use headroom_base::cpu::{CpuShare, CpuShareView};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Far enough away to never pass, near enough not to overflow `Instant` arithmetic.
const NO_LIMIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// The audio lane's limits: one heavy job at a time by default, a short bounded queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AudioLaneConfig {
    pub max_in_flight: usize,
    /// Slots beyond `max_in_flight` kept for interactive work: a person's job starts beside a
    /// running batch job (a narration's take, a voice match's) instead of waiting for it.
    pub interactive_reserve: usize,
    /// Places in the lane (running or waiting) that the later sentences of streamed speech
    /// hold at once, all streams together ([`AudioLane::run_streamed`]); the other streams
    /// wait their turn outside the lane's queue. So the queue and the interactive reserve stay
    /// for requests a person is waiting on however many streams are open. At least 1.
    pub stream_places: usize,
    pub max_waiting: usize,
    /// Longest wait for a slot before a job is refused.
    pub queue_wait: Duration,
    /// Batch jobs give the CPU to interactive ones while both run: they pause at safe points,
    /// their model runs under way are stopped and run again, and their compute runs at the
    /// system's idle priority ([`headroom_base::cpu`]). Off: both compete for the cores.
    pub batch_gives_way: bool,
}

impl Default for AudioLaneConfig {
    fn default() -> Self {
        AudioLaneConfig {
            max_in_flight: 1,
            interactive_reserve: 1,
            stream_places: 1,
            max_waiting: 8,
            queue_wait: Duration::from_secs(60),
            batch_gives_way: true,
        }
    }
}

/// How many interactive audio jobs are running. The text lane watches it to yield to audio.
#[derive(Clone)]
pub struct AudioActivity {
    rx: watch::Receiver<usize>,
    /// For an idle activity: the sender, held so waiting on `rx` waits instead of failing.
    _idle_sender: Option<Arc<watch::Sender<usize>>>,
}

impl AudioActivity {
    /// An activity that never becomes active (a text lane with no audio lane beside it).
    pub fn idle() -> Self {
        let (tx, rx) = watch::channel(0);
        AudioActivity {
            rx,
            _idle_sender: Some(Arc::new(tx)),
        }
    }

    pub fn interactive_running(&self) -> usize {
        *self.rx.borrow()
    }

    /// Resolves when an interactive audio job is running.
    pub async fn until_interactive(&self) {
        let mut rx = self.rx.clone();
        let _ = rx.wait_for(|n| *n > 0).await;
    }

    /// Resolves when no interactive audio job is running: batch text work waits here instead
    /// of being refused by the text lane's yield gate.
    pub async fn until_no_interactive(&self) {
        let mut rx = self.rx.clone();
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

impl InteractiveAudio for AudioActivity {
    fn interactive_running(&self) -> usize {
        AudioActivity::interactive_running(self)
    }
}

/// Counts one running interactive job while it lives.
struct InteractiveGuard(Arc<watch::Sender<usize>>);

impl Drop for InteractiveGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// The lane audio engines run on. It shares nothing with the text lane: no queue, no slot, no
/// lock, so text work can never delay it.
#[derive(Clone)]
pub struct AudioLane {
    stack: Arc<AdmissionStack>,
    capacity: CapacityLimit,
    monitor: Arc<LaneMonitor>,
    interactive: Arc<watch::Sender<usize>>,
    cpu: Arc<CpuShare>,
    /// Turns for the later sentences of streamed speech ([`AudioLaneConfig::stream_places`]).
    stream_turns: Arc<Semaphore>,
}

impl AudioLane {
    pub fn new(config: AudioLaneConfig, metrics: Arc<Metrics>) -> Self {
        let monitor = LaneMonitor::new(Lane::Audio, metrics);
        let capacity = CapacityLimit::new(
            config.max_in_flight.max(1),
            config.max_waiting,
            Some(monitor.occupancy_observer()),
        )
        .with_interactive_reserve(config.interactive_reserve);
        let deadlines = Deadlines {
            queue_wait: config.queue_wait,
            // Audio jobs report progress and are cancelled by the user; no wall-clock cap.
            total: NO_LIMIT,
            first_chunk: NO_LIMIT,
        };
        AudioLane {
            stack: Arc::new(AdmissionStack::capacity_only(
                Lane::Audio,
                capacity.clone(),
                deadlines,
            )),
            capacity,
            monitor,
            interactive: Arc::new(watch::channel(0).0),
            cpu: CpuShare::new(config.batch_gives_way),
            stream_turns: Arc::new(Semaphore::new(config.stream_places.max(1))),
        }
    }

    /// Who has the CPU now: interactive jobs running, and batch work running or paused.
    pub fn cpu_share(&self) -> CpuShareView {
        self.cpu.view()
    }

    /// Whether interactive audio is running, for the text lane's yield rule.
    pub fn activity(&self) -> AudioActivity {
        AudioActivity {
            rx: self.interactive.subscribe(),
            _idle_sender: None,
        }
    }

    pub fn snapshot(&self) -> LaneSnapshot {
        self.monitor.snapshot(self.capacity.occupancy())
    }

    pub fn subscribe(&self) -> broadcast::Receiver<LaneEvent> {
        self.monitor.subscribe()
    }

    /// Runs light batch work that takes no slot (a narration's fitting and assembly) on the
    /// calling blocking thread as batch work: its compute at the idle priority, giving way to
    /// interactive jobs. Call it from a blocking thread.
    pub fn as_batch<T: Send>(&self, job: &'static str, work: impl FnOnce() -> T + Send) -> T {
        let (out, report) = self
            .cpu
            .batch(job, || false, || headroom_base::cpu::compute(work));
        self.monitor.metrics().observe_batch_report(job, &report);
        out
    }

    /// Runs the next sentence of a streamed answer (whose first sentence ran as interactive
    /// work, a person waiting for the first sound): this is the one place that decides what of
    /// the lane streams may take. It waits for one of the [`AudioLaneConfig::stream_places`]
    /// turns shared by every open stream, outside the lane's queue (never refused for want of
    /// a place, first come first served), then runs as interactive work. So however many
    /// streams are open (a client that stopped reading, twenty listeners) they hold at most
    /// that many places, and the wait queue and the interactive reserve stay for requests a
    /// person is waiting on. A stream whose client takes nothing asks for no turn at all (the
    /// server synthesizes a sentence only once the client has taken the one before).
    pub async fn run_streamed<T, F>(
        &self,
        job: &'static str,
        cancel: CancellationToken,
        work: F,
    ) -> Result<T, Rejection>
    where
        T: Send + 'static,
        F: FnOnce(&CancellationToken) -> T + Send + 'static,
    {
        let turn = tokio::select! {
            turn = self.stream_turns.clone().acquire_owned() => {
                turn.expect("the stream turns are never closed")
            }
            _ = cancel.cancelled() => {
                return Err(self.monitor.reject(self.stack.rejection(RejectReason::Cancelled)
                    .with_detail("while waiting for a stream's turn")));
            }
        };
        let out = self.run(job, Priority::Interactive, cancel, work).await;
        drop(turn);
        out
    }

    /// Runs blocking audio work on a worker thread once a slot is free; interactive jobs are
    /// queued ahead of normal ones. The job receives the cancel token and should check it
    /// between steps; the slot is held until the work has really stopped, so a cancelled
    /// job's memory is gone before the next one starts. `job` names the work (e.g.
    /// `transcription`) in metrics and the lanes panel. While it runs, an interactive job has
    /// the CPU before batch ones, which give way to it ([`AudioLaneConfig::batch_gives_way`]).
    pub async fn run<T, F>(
        &self,
        job: &'static str,
        priority: Priority,
        cancel: CancellationToken,
        work: F,
    ) -> Result<T, Rejection>
    where
        T: Send + 'static,
        F: FnOnce(&CancellationToken) -> T + Send + 'static,
    {
        let submitted = Instant::now();
        let shape = RequestShape {
            chars: 0,
            estimated_tokens: 0,
            max_tokens: 0,
        };
        let monitor = &self.monitor;
        let estimate = |occ| monitor.retry_after(occ);
        let admitted = tokio::select! {
            admitted = self.stack.admit_with(&shape, priority, &estimate) => {
                admitted.map_err(|r| monitor.reject(r))?
            }
            _ = cancel.cancelled() => {
                return Err(monitor.reject(self.stack.rejection(RejectReason::Cancelled)
                    .with_detail("while waiting for a slot")));
            }
        };
        monitor
            .metrics()
            .observe_queue_wait(Lane::Audio, admitted.queue_wait);
        let job_cancel = cancel.clone();
        let permit = admitted.permit;
        let interactive = (priority == Priority::Interactive).then(|| {
            self.interactive.send_modify(|n| *n += 1);
            InteractiveGuard(self.interactive.clone())
        });
        let cpu = self.cpu.clone();
        let metrics = monitor.metrics().clone();
        let result = tokio::task::spawn_blocking(move || {
            let out = if let Some(counted) = interactive {
                let turn = cpu.interactive(job);
                let out = work(&job_cancel);
                for batch in turn.end() {
                    metrics.count_interactive_beside(job, batch);
                }
                drop(counted);
                out
            } else {
                let cancelled = job_cancel.clone();
                let (out, report) =
                    cpu.batch(job, move || cancelled.is_cancelled(), || work(&job_cancel));
                metrics.observe_batch_report(job, &report);
                if report.pauses > 0 {
                    tracing::debug!(
                        job,
                        paused_ms = report.paused.as_millis() as u64,
                        "batch job gave way to interactive work"
                    );
                }
                out
            };
            drop(permit);
            out
        })
        .await;
        let latency = submitted.elapsed();
        match result {
            Ok(value) if !cancel.is_cancelled() => {
                monitor.finished(Outcome::Completed, latency);
                Ok(value)
            }
            Ok(_) => {
                monitor.finished(Outcome::Cancelled, latency);
                Err(monitor.reject(
                    self.stack
                        .rejection(RejectReason::Cancelled)
                        .with_detail("while running"),
                ))
            }
            Err(join) => {
                monitor.finished(Outcome::Failed, latency);
                std::panic::resume_unwind(join.into_panic())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn lane(limit: usize, waiting: usize) -> AudioLane {
        AudioLane::new(
            AudioLaneConfig {
                max_in_flight: limit,
                interactive_reserve: 0,
                stream_places: 1,
                max_waiting: waiting,
                queue_wait: Duration::from_secs(30),
                batch_gives_way: true,
            },
            Arc::new(Metrics::new()),
        )
    }

    #[tokio::test]
    async fn runs_work_and_returns_its_value() {
        let lane = lane(1, 0);
        let v = lane
            .run("test", Priority::Normal, CancellationToken::new(), |_| {
                6 * 7
            })
            .await
            .unwrap();
        assert_eq!(v, 42);
        assert_eq!(lane.snapshot().occupancy.in_flight, 0);
    }

    #[tokio::test]
    async fn a_full_audio_lane_rejects_with_its_own_reason() {
        let lane = lane(1, 0);
        let (started_tx, started_rx) = mpsc::channel();
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let busy = {
            let lane = lane.clone();
            tokio::spawn(async move {
                lane.run(
                    "test",
                    Priority::Normal,
                    CancellationToken::new(),
                    move |_| {
                        started_tx.send(()).unwrap();
                        release_rx.recv().unwrap();
                    },
                )
                .await
            })
        };
        tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
            .await
            .unwrap();
        let r = lane
            .run("test", Priority::Normal, CancellationToken::new(), |_| ())
            .await
            .unwrap_err();
        assert_eq!(r.reason, RejectReason::AudioLaneFull);
        assert_eq!(r.lane, Lane::Audio);
        release_tx.send(()).unwrap();
        busy.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn streams_take_turns_outside_the_queue_and_leave_it_to_interactive_work() {
        let lane = AudioLane::new(
            AudioLaneConfig {
                max_in_flight: 1,
                interactive_reserve: 1,
                stream_places: 1,
                max_waiting: 1,
                ..AudioLaneConfig::default()
            },
            Arc::new(Metrics::new()),
        );
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (release, released) = mpsc::channel::<()>();
        let released = Arc::new(std::sync::Mutex::new(released));
        let streams: Vec<_> = (0..4)
            .map(|_| {
                let (lane, order, released) = (lane.clone(), order.clone(), released.clone());
                tokio::spawn(async move {
                    lane.run_streamed("speech", CancellationToken::new(), move |_| {
                        order.lock().unwrap().push("stream");
                        released.lock().unwrap().recv().unwrap();
                    })
                    .await
                })
            })
            .collect();
        let occupancy = || lane.snapshot().occupancy;
        async fn until(what: &str, done: impl Fn() -> bool) {
            let give_up = Instant::now() + Duration::from_secs(10);
            while !done() {
                assert!(Instant::now() < give_up, "waited 10 s for {what}");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        until("a stream's sentence to run", || occupancy().in_flight == 1).await;
        // Four streams, one place: the other three wait for their turn outside the queue.
        assert_eq!((occupancy().in_flight, occupancy().waiting), (1, 0));
        // A cancelled stream stops waiting for its turn.
        let cancel = CancellationToken::new();
        cancel.cancel();
        let gone = lane
            .run_streamed("speech", cancel, |_| unreachable!("never runs"))
            .await
            .unwrap_err();
        assert_eq!(gone.reason, RejectReason::Cancelled);
        // A request a person waits on finds the queue free, and runs before the streams' next
        // sentences.
        let person = {
            let (lane, order) = (lane.clone(), order.clone());
            tokio::spawn(async move {
                lane.run(
                    "speech",
                    Priority::Interactive,
                    CancellationToken::new(),
                    move |_| order.lock().unwrap().push("interactive"),
                )
                .await
            })
        };
        until("the request to wait in the queue", || {
            occupancy().waiting == 1
        })
        .await;
        for _ in 0..4 {
            release.send(()).unwrap();
        }
        person.await.unwrap().unwrap();
        for stream in streams {
            stream.await.unwrap().unwrap();
        }
        assert_eq!(
            *order.lock().unwrap(),
            ["stream", "interactive", "stream", "stream", "stream"]
        );
        assert_eq!(occupancy().in_flight, 0);
    }

    #[tokio::test]
    async fn cancelling_a_running_job_reports_cancelled_after_the_work_stops() {
        let lane = lane(1, 0);
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        let r = lane
            .run("test", Priority::Interactive, cancel, move |token| {
                trigger.cancel();
                // A cooperative job notices the token and stops.
                while !token.is_cancelled() {}
                "partial"
            })
            .await
            .unwrap_err();
        assert_eq!(r.reason, RejectReason::Cancelled);
        assert_eq!(lane.snapshot().occupancy.in_flight, 0);
    }
}
