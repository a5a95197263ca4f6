use crate::admission::{Lane, Occupancy, RejectReason, Rejection};
use crate::metrics::{Metrics, Outcome};
use headroom_base::sync::Locked;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast;

/// How many rejections a snapshot keeps for the UI's history.
const REJECTION_HISTORY: usize = 50;
/// How many recent latencies feed the retry-after estimate.
const LATENCY_WINDOW: usize = 64;
/// The retry hint before any request has finished.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(2);

/// A rejection and when it happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct RejectionRecord {
    pub at_unix_ms: u64,
    pub rejection: Rejection,
}

/// What changed in a lane, for the UI and other observers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LaneEvent {
    Occupancy {
        lane: Lane,
        occupancy: Occupancy,
    },
    Rejected(RejectionRecord),
    Finished {
        lane: Lane,
        outcome: &'static str,
        latency_ms: u64,
    },
}

/// A lane's state at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct LaneSnapshot {
    pub lane: Lane,
    pub occupancy: Occupancy,
    pub admitted_total: u64,
    pub rejected_total: BTreeMap<RejectReason, u64>,
    pub recent_rejections: Vec<RejectionRecord>,
    pub median_latency_ms: Option<u64>,
    /// A text lane's upstreams, each with its own slots and health (empty for the audio lane).
    pub upstreams: Vec<super::UpstreamView>,
}

#[derive(Default)]
struct State {
    occupancy: Occupancy,
    admitted: u64,
    rejected: BTreeMap<RejectReason, u64>,
    recent: VecDeque<RejectionRecord>,
    latencies: VecDeque<Duration>,
}

/// Observes one lane: occupancy, rejections, latencies; feeds metrics, snapshots and events.
pub struct LaneMonitor {
    lane: Lane,
    metrics: Arc<Metrics>,
    events: broadcast::Sender<LaneEvent>,
    state: Mutex<State>,
}

impl LaneMonitor {
    pub fn new(lane: Lane, metrics: Arc<Metrics>) -> Arc<Self> {
        let (events, _) = broadcast::channel(256);
        Arc::new(LaneMonitor {
            lane,
            metrics,
            events,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.locked()
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub fn subscribe(&self) -> broadcast::Receiver<LaneEvent> {
        self.events.subscribe()
    }

    /// The observer to give the lane's capacity limit.
    pub fn occupancy_observer(self: &Arc<Self>) -> crate::admission::OccupancyObserver {
        let monitor = Arc::downgrade(self);
        Arc::new(move |occ: Occupancy| {
            if let Some(m) = monitor.upgrade() {
                m.on_occupancy(occ)
            }
        })
    }

    fn on_occupancy(&self, occupancy: Occupancy) {
        {
            let mut st = self.state();
            if occupancy.in_flight > st.occupancy.in_flight {
                st.admitted += 1;
            }
            st.occupancy = occupancy;
        }
        self.metrics.set_occupancy(self.lane, occupancy);
        let _ = self.events.send(LaneEvent::Occupancy {
            lane: self.lane,
            occupancy,
        });
    }

    /// Records a rejection (history, counters, event) and hands it back.
    pub fn reject(&self, rejection: Rejection) -> Rejection {
        tracing::info!(lane = self.lane.as_str(), reason = %rejection.reason, "{}", rejection.message());
        let record = RejectionRecord {
            at_unix_ms: headroom_base::clock::unix_ms(),
            rejection: rejection.clone(),
        };
        {
            let mut st = self.state();
            *st.rejected.entry(rejection.reason).or_default() += 1;
            if st.recent.len() == REJECTION_HISTORY {
                st.recent.pop_front();
            }
            st.recent.push_back(record.clone());
        }
        self.metrics.count_rejection(self.lane, rejection.reason);
        if let Some(kind) = rejection.deadline {
            self.metrics.count_deadline_miss(self.lane, kind.code());
        }
        let _ = self.events.send(LaneEvent::Rejected(record));
        rejection
    }

    /// Records how an admitted request ended.
    pub fn finished(&self, outcome: Outcome, latency: Duration) {
        if outcome == Outcome::Completed {
            let mut st = self.state();
            if st.latencies.len() == LATENCY_WINDOW {
                st.latencies.pop_front();
            }
            st.latencies.push_back(latency);
        }
        self.metrics.observe_finished(self.lane, outcome, latency);
        let outcome = match outcome {
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
        };
        let _ = self.events.send(LaneEvent::Finished {
            lane: self.lane,
            outcome,
            latency_ms: latency.as_millis() as u64,
        });
    }

    fn median_latency(st: &State) -> Option<Duration> {
        let mut sorted: Vec<Duration> = st.latencies.iter().copied().collect();
        sorted.sort();
        sorted.get(sorted.len() / 2).copied()
    }

    /// When a retry has a fair chance: a slot frees on average after half a typical request,
    /// and each waiter ahead needs its own slot turn.
    pub fn retry_after(&self, occ: Occupancy) -> Option<Duration> {
        let median = Self::median_latency(&self.state()).unwrap_or(DEFAULT_RETRY_AFTER * 2);
        let turns = (occ.waiting as u32 + 1).div_ceil(occ.limit.max(1) as u32);
        let estimate = median / 2 * turns;
        Some(estimate.clamp(Duration::from_millis(250), Duration::from_secs(60)))
    }

    pub fn snapshot(&self, occupancy: Occupancy) -> LaneSnapshot {
        let st = self.state();
        LaneSnapshot {
            lane: self.lane,
            occupancy,
            admitted_total: st.admitted,
            rejected_total: st.rejected.clone(),
            recent_rejections: st.recent.iter().cloned().collect(),
            median_latency_ms: Self::median_latency(&st).map(|d| d.as_millis() as u64),
            upstreams: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn occ(in_flight: usize, limit: usize, waiting: usize) -> Occupancy {
        Occupancy {
            in_flight,
            limit,
            waiting,
            wait_limit: 4,
            reserved: 0,
        }
    }

    #[test]
    fn retry_estimate_follows_recent_latency_and_queue_depth() {
        let m = LaneMonitor::new(Lane::Text, Arc::new(Metrics::new()));
        assert_eq!(m.retry_after(occ(2, 2, 0)), Some(DEFAULT_RETRY_AFTER));
        for s in [4, 6, 8] {
            m.finished(Outcome::Completed, Duration::from_secs(s));
        }
        // median 6 s: half a request for a free slot
        assert_eq!(m.retry_after(occ(2, 2, 0)), Some(Duration::from_secs(3)));
        // 3 waiting ahead on 2 slots: two turns
        assert_eq!(m.retry_after(occ(2, 2, 3)), Some(Duration::from_secs(6)));
    }

    #[test]
    fn rejections_are_counted_kept_and_broadcast() {
        let m = LaneMonitor::new(Lane::Text, Arc::new(Metrics::new()));
        let mut rx = m.subscribe();
        for _ in 0..(REJECTION_HISTORY + 3) {
            m.reject(Rejection::new(Lane::Text, RejectReason::TextLaneFull));
        }
        let snap = m.snapshot(Occupancy::default());
        assert_eq!(snap.rejected_total[&RejectReason::TextLaneFull], 53);
        assert_eq!(snap.recent_rejections.len(), REJECTION_HISTORY);
        assert!(matches!(rx.try_recv().unwrap(), LaneEvent::Rejected(_)));
        assert_eq!(
            m.metrics()
                .rejections(Lane::Text, RejectReason::TextLaneFull),
            53
        );
    }
}
