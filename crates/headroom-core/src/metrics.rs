//! Prometheus metrics for both lanes, rendered by `GET /metrics`.

use crate::admission::{Lane, Occupancy, RejectReason};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LaneLabel {
    lane: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RejectionLabels {
    lane: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorkLabel {
    work: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BesideLabels {
    job: &'static str,
    batch: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeadlineLabels {
    lane: &'static str,
    kind: &'static str,
}

/// An upstream server, by the lane it serves (`text`: the text model's servers; `audio`: the
/// transcription servers a batch is spread over), so neither lane's signals read the other's.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamLabel {
    lane: &'static str,
    upstream: String,
}

impl UpstreamLabel {
    fn of(lane: Lane, upstream: &str) -> UpstreamLabel {
        UpstreamLabel {
            lane: lane.as_str(),
            upstream: upstream.to_string(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamResultLabels {
    lane: &'static str,
    upstream: String,
    result: &'static str,
}

impl UpstreamResultLabels {
    fn of(lane: Lane, upstream: &str, result: &'static str) -> UpstreamResultLabels {
        UpstreamResultLabels {
            lane: lane.as_str(),
            upstream: upstream.to_string(),
            result,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProjectLabel {
    project: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProjectSourceLabels {
    project: String,
    source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProjectReasonLabels {
    project: String,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    lane: &'static str,
    outcome: &'static str,
}

/// How a request that was admitted ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Completed,
    Failed,
    Cancelled,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
        }
    }
}

fn seconds_histogram() -> Histogram {
    // 1 ms .. ~65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// Every metric Headroom exports.
pub struct Metrics {
    registry: Registry,
    in_flight: Family<LaneLabel, Gauge>,
    waiting: Family<LaneLabel, Gauge>,
    rejections: Family<RejectionLabels, Counter>,
    finished: Family<OutcomeLabels, Counter>,
    queue_wait: Family<LaneLabel, Histogram, fn() -> Histogram>,
    ttft: Family<LaneLabel, Histogram, fn() -> Histogram>,
    latency: Family<LaneLabel, Histogram, fn() -> Histogram>,
    runtime_tasks: Gauge,
    connection_refusals: Family<ReasonLabel, Counter>,
    batch_paused: Family<WorkLabel, Counter<f64>>,
    interactive_beside_batch: Family<BesideLabels, Counter>,
    submitted: Family<LaneLabel, Counter>,
    dispatched: Family<LaneLabel, Counter>,
    deadline_misses: Family<DeadlineLabels, Counter>,
    upstream_requests: Family<UpstreamResultLabels, Counter>,
    upstream_up: Family<UpstreamLabel, Gauge>,
    upstream_health_changes: Family<UpstreamLabel, Counter>,
    upstream_in_flight: Family<UpstreamLabel, Gauge>,
    upstream_capacity: Family<UpstreamLabel, Gauge>,
    upstream_ttft: Family<UpstreamLabel, Histogram, fn() -> Histogram>,
    cleanup_pieces: Family<ProjectSourceLabels, Counter>,
    cleanup_attempts: Family<ProjectLabel, Counter>,
    cleanup_rejections: Family<ProjectReasonLabels, Counter>,
    gpu_used: Gauge,
    gpu_floor: Gauge,
}

/// What a cleanup piece came from, as `headroom_cleanup_pieces_total` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceOrigin {
    Model,
    /// The text model refused and the failure policy fell back to the rules.
    Rules,
    Unchanged,
}

impl PieceOrigin {
    fn as_str(self) -> &'static str {
        match self {
            PieceOrigin::Model => "model",
            PieceOrigin::Rules => "rules",
            PieceOrigin::Unchanged => "unchanged",
        }
    }
}

/// The `project` label of work done outside any project (the CLI's `clean`, `serve`).
pub const NO_PROJECT: &str = "none";

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("headroom");
        let in_flight = Family::<LaneLabel, Gauge>::default();
        let waiting = Family::<LaneLabel, Gauge>::default();
        let rejections = Family::<RejectionLabels, Counter>::default();
        let finished = Family::<OutcomeLabels, Counter>::default();
        let queue_wait = Family::new_with_constructor(seconds_histogram as fn() -> Histogram);
        let ttft = Family::new_with_constructor(seconds_histogram as fn() -> Histogram);
        let latency = Family::new_with_constructor(seconds_histogram as fn() -> Histogram);
        registry.register("in_flight", "Requests running in a lane", in_flight.clone());
        registry.register(
            "waiting",
            "Requests waiting in a lane's bounded queue",
            waiting.clone(),
        );
        registry.register(
            "rejections",
            "Requests refused or abandoned, by lane and reason code",
            rejections.clone(),
        );
        registry.register(
            "requests_finished",
            "Admitted requests by how they ended",
            finished.clone(),
        );
        registry.register(
            "queue_wait_seconds",
            "Time from submission to getting a slot",
            queue_wait.clone(),
        );
        registry.register(
            "time_to_first_token_seconds",
            "Time from submission to the first non-empty content chunk",
            ttft.clone(),
        );
        registry.register(
            "request_latency_seconds",
            "Time from submission to the end of the request",
            latency.clone(),
        );
        let runtime_tasks = Gauge::default();
        registry.register(
            "runtime_tasks",
            "Tasks alive in the server's async runtime (flat under steady load)",
            runtime_tasks.clone(),
        );
        let connection_refusals = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "connection_refusals",
            "Connections and requests `headroom serve` refused or dropped before any lane, by reason (too many connections, too slow, no body memory, no token)",
            connection_refusals.clone(),
        );
        let batch_paused = Family::<WorkLabel, Counter<f64>>::default();
        registry.register(
            "batch_paused_seconds",
            "Time batch audio work spent paused so interactive work had the CPU, by what the batch work was",
            batch_paused.clone(),
        );
        let interactive_beside_batch = Family::<BesideLabels, Counter>::default();
        registry.register(
            "interactive_beside_batch",
            "Interactive audio jobs that ran while batch work was running (and may have been slowed by it), by job and batch work",
            interactive_beside_batch.clone(),
        );
        let submitted = Family::<LaneLabel, Counter>::default();
        registry.register(
            "submitted",
            "Requests submitted to a lane, before admission (the denominator of rejection rates)",
            submitted.clone(),
        );
        let dispatched = Family::<LaneLabel, Counter>::default();
        registry.register(
            "dispatched",
            "Admitted text requests sent upstream, once per request however many upstreams it tried",
            dispatched.clone(),
        );
        let deadline_misses = Family::<DeadlineLabels, Counter>::default();
        registry.register(
            "deadline_misses",
            "Requests that missed a deadline, by lane and kind (queue_wait, first_chunk, total)",
            deadline_misses.clone(),
        );
        let upstream_requests = Family::<UpstreamResultLabels, Counter>::default();
        registry.register(
            "upstream_requests",
            "Requests sent to each upstream, moves to another upstream included, by result (answered, unavailable, busy, error, deadline, unreadable)",
            upstream_requests.clone(),
        );
        let upstream_up = Family::<UpstreamLabel, Gauge>::default();
        registry.register(
            "upstream_up",
            "1 while an upstream is answering, 0 while it is marked down",
            upstream_up.clone(),
        );
        let upstream_health_changes = Family::<UpstreamLabel, Counter>::default();
        registry.register(
            "upstream_health_changes",
            "Times an upstream went down or came back (flaps)",
            upstream_health_changes.clone(),
        );
        let upstream_in_flight = Family::<UpstreamLabel, Gauge>::default();
        registry.register(
            "upstream_in_flight",
            "Requests running on each upstream",
            upstream_in_flight.clone(),
        );
        let upstream_capacity = Family::<UpstreamLabel, Gauge>::default();
        registry.register(
            "upstream_capacity",
            "Requests each upstream is given at once (configured, capped by the slots it says it has)",
            upstream_capacity.clone(),
        );
        let upstream_ttft = Family::new_with_constructor(seconds_histogram as fn() -> Histogram);
        registry.register(
            "upstream_time_to_first_token_seconds",
            "Time from sending a request to an upstream to its first content",
            upstream_ttft.clone(),
        );
        let cleanup_pieces = Family::<ProjectSourceLabels, Counter>::default();
        registry.register(
            "cleanup_pieces",
            "Pieces of text sent for cleanup through the text lane, by project and where their text came from (model; rules: the model was refused and the project falls back to the rules; unchanged: blank)",
            cleanup_pieces.clone(),
        );
        let cleanup_attempts = Family::<ProjectLabel, Counter>::default();
        registry.register(
            "cleanup_attempts",
            "Text-lane requests made for cleanup, retries included, by project",
            cleanup_attempts.clone(),
        );
        let cleanup_rejections = Family::<ProjectReasonLabels, Counter>::default();
        registry.register(
            "cleanup_rejections",
            "Cleanup requests refused or abandoned, by project and reason code",
            cleanup_rejections.clone(),
        );
        let gpu_used = Gauge::default();
        registry.register(
            "gpu_memory_used_bytes",
            "GPU memory in use (NVML), when a GPU is sampled",
            gpu_used.clone(),
        );
        let gpu_floor = Gauge::default();
        registry.register(
            "gpu_memory_floor_bytes",
            "The lowest GPU memory in use over the sampler's recent window: a floor that keeps rising is a leak",
            gpu_floor.clone(),
        );
        let metrics = Metrics {
            submitted,
            dispatched,
            deadline_misses,
            upstream_requests,
            upstream_up,
            upstream_health_changes,
            upstream_in_flight,
            upstream_capacity,
            upstream_ttft,
            cleanup_pieces,
            cleanup_attempts,
            cleanup_rejections,
            gpu_used,
            gpu_floor,
            batch_paused,
            interactive_beside_batch,
            runtime_tasks,
            connection_refusals,
            registry,
            in_flight,
            waiting,
            rejections,
            finished,
            queue_wait,
            ttft,
            latency,
        };
        // Export zeros for every lane and reason so dashboards see the series from the start.
        for lane in [Lane::Audio, Lane::Text] {
            metrics.set_occupancy(lane, Occupancy::default());
            let label = LaneLabel {
                lane: lane.as_str(),
            };
            let _ = metrics.submitted.get_or_create(&label);
            let _ = metrics.dispatched.get_or_create(&label);
            for kind in crate::admission::DeadlineKind::ALL {
                let _ = metrics.deadline_misses.get_or_create(&DeadlineLabels {
                    lane: lane.as_str(),
                    kind: kind.code(),
                });
            }
            for reason in RejectReason::ALL {
                let _ = metrics.rejections.get_or_create(&RejectionLabels {
                    lane: lane.as_str(),
                    reason: reason.code(),
                });
            }
        }
        metrics
    }

    /// Counts a request submitted to `lane`, before admission.
    pub fn count_submitted(&self, lane: Lane) {
        self.submitted
            .get_or_create(&LaneLabel {
                lane: lane.as_str(),
            })
            .inc();
    }

    /// Counts an admitted request sent upstream (once, however many upstreams it tries).
    pub fn count_dispatched(&self, lane: Lane) {
        self.dispatched
            .get_or_create(&LaneLabel {
                lane: lane.as_str(),
            })
            .inc();
    }

    pub fn count_deadline_miss(&self, lane: Lane, kind: &'static str) {
        self.deadline_misses
            .get_or_create(&DeadlineLabels {
                lane: lane.as_str(),
                kind,
            })
            .inc();
    }

    /// Counts a request sent to `upstream` of `lane` by how it went (`UpstreamResult::as_str`).
    pub fn count_upstream_request(&self, lane: Lane, upstream: &str, result: &'static str) {
        self.upstream_requests
            .get_or_create(&UpstreamResultLabels::of(lane, upstream, result))
            .inc();
    }

    pub fn upstream_requests(&self, lane: Lane, upstream: &str, result: &'static str) -> u64 {
        self.upstream_requests
            .get_or_create(&UpstreamResultLabels::of(lane, upstream, result))
            .get()
    }

    /// Sets an upstream's health; `changed` counts a flap. The first call exports a zero for
    /// each of `results`, so the upstream's series exist from the start.
    pub fn set_upstream_up(
        &self,
        lane: Lane,
        upstream: &str,
        up: bool,
        changed: bool,
        results: &[&'static str],
    ) {
        let label = UpstreamLabel::of(lane, upstream);
        self.upstream_up.get_or_create(&label).set(i64::from(up));
        let flaps = self.upstream_health_changes.get_or_create(&label);
        if changed {
            flaps.inc();
        }
        for result in results {
            let _ = self
                .upstream_requests
                .get_or_create(&UpstreamResultLabels::of(lane, upstream, result));
        }
    }

    pub fn upstream_health_changes(&self, lane: Lane, upstream: &str) -> u64 {
        self.upstream_health_changes
            .get_or_create(&UpstreamLabel::of(lane, upstream))
            .get()
    }

    pub fn set_upstream_load(&self, lane: Lane, upstream: &str, in_flight: usize, capacity: usize) {
        let label = UpstreamLabel::of(lane, upstream);
        self.upstream_in_flight
            .get_or_create(&label)
            .set(in_flight as i64);
        self.upstream_capacity
            .get_or_create(&label)
            .set(capacity as i64);
    }

    pub fn observe_upstream_ttft(&self, lane: Lane, upstream: &str, d: Duration) {
        self.upstream_ttft
            .get_or_create(&UpstreamLabel::of(lane, upstream))
            .observe(d.as_secs_f64());
    }

    /// Counts a cleaned piece of `project` ([`NO_PROJECT`] outside one) by where its text came from.
    pub fn count_cleanup_piece(&self, project: &str, origin: PieceOrigin) {
        self.cleanup_pieces
            .get_or_create(&ProjectSourceLabels {
                project: project.to_string(),
                source: origin.as_str(),
            })
            .inc();
    }

    pub fn cleanup_pieces(&self, project: &str, origin: PieceOrigin) -> u64 {
        self.cleanup_pieces
            .get_or_create(&ProjectSourceLabels {
                project: project.to_string(),
                source: origin.as_str(),
            })
            .get()
    }

    pub fn count_cleanup_attempt(&self, project: &str) {
        self.cleanup_attempts
            .get_or_create(&ProjectLabel {
                project: project.to_string(),
            })
            .inc();
    }

    pub fn cleanup_attempts(&self, project: &str) -> u64 {
        self.cleanup_attempts
            .get_or_create(&ProjectLabel {
                project: project.to_string(),
            })
            .get()
    }

    pub fn count_cleanup_rejection(&self, project: &str, reason: RejectReason) {
        self.cleanup_rejections
            .get_or_create(&ProjectReasonLabels {
                project: project.to_string(),
                reason: reason.code(),
            })
            .inc();
    }

    /// GPU memory in use now and the lowest over the sampler's recent window.
    pub fn set_gpu_memory(&self, used_bytes: u64, floor_bytes: u64) {
        self.gpu_used.set(used_bytes.min(i64::MAX as u64) as i64);
        self.gpu_floor.set(floor_bytes.min(i64::MAX as u64) as i64);
    }

    /// Records what a batch job gave way to interactive work.
    pub fn observe_batch_report(
        &self,
        work: &'static str,
        report: &headroom_base::cpu::BatchReport,
    ) {
        let label = WorkLabel { work };
        self.batch_paused
            .get_or_create(&label)
            .inc_by(report.paused.as_secs_f64());
    }

    pub fn batch_paused_secs(&self, work: &'static str) -> f64 {
        self.batch_paused.get_or_create(&WorkLabel { work }).get()
    }

    /// Counts an interactive job that ran while `batch` work was running.
    pub fn count_interactive_beside(&self, job: &'static str, batch: &'static str) {
        self.interactive_beside_batch
            .get_or_create(&BesideLabels { job, batch })
            .inc();
    }

    pub fn interactive_beside(&self, job: &'static str, batch: &'static str) -> u64 {
        self.interactive_beside_batch
            .get_or_create(&BesideLabels { job, batch })
            .get()
    }

    /// Records how many tasks the async runtime has alive (the server sets it when scraped).
    pub fn set_runtime_tasks(&self, tasks: usize) {
        self.runtime_tasks.set(tasks as i64);
    }

    pub fn set_occupancy(&self, lane: Lane, occ: Occupancy) {
        let label = LaneLabel {
            lane: lane.as_str(),
        };
        self.in_flight
            .get_or_create(&label)
            .set(occ.in_flight as i64);
        self.waiting.get_or_create(&label).set(occ.waiting as i64);
    }

    pub fn count_rejection(&self, lane: Lane, reason: RejectReason) {
        self.rejections
            .get_or_create(&RejectionLabels {
                lane: lane.as_str(),
                reason: reason.code(),
            })
            .inc();
    }

    pub fn rejections(&self, lane: Lane, reason: RejectReason) -> u64 {
        self.rejections
            .get_or_create(&RejectionLabels {
                lane: lane.as_str(),
                reason: reason.code(),
            })
            .get()
    }

    /// Counts a refusal that comes before any lane (a connection, a body or a token), by its
    /// code; a code counted with `by = 0` is exported as a zero series.
    pub fn count_connection_refusal(&self, reason: &'static str, by: u64) {
        self.connection_refusals
            .get_or_create(&ReasonLabel { reason })
            .inc_by(by);
    }

    pub fn connection_refusals(&self, reason: &'static str) -> u64 {
        self.connection_refusals
            .get_or_create(&ReasonLabel { reason })
            .get()
    }

    pub fn observe_queue_wait(&self, lane: Lane, d: Duration) {
        self.queue_wait
            .get_or_create(&LaneLabel {
                lane: lane.as_str(),
            })
            .observe(d.as_secs_f64());
    }

    pub fn observe_ttft(&self, lane: Lane, d: Duration) {
        self.ttft
            .get_or_create(&LaneLabel {
                lane: lane.as_str(),
            })
            .observe(d.as_secs_f64());
    }

    pub fn observe_finished(&self, lane: Lane, outcome: Outcome, latency: Duration) {
        let lane = lane.as_str();
        self.finished
            .get_or_create(&OutcomeLabels {
                lane,
                outcome: outcome.as_str(),
            })
            .inc();
        self.latency
            .get_or_create(&LaneLabel { lane })
            .observe(latency.as_secs_f64());
    }

    /// The Prometheus text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_who_had_the_cpu() {
        let m = Metrics::new();
        let report = headroom_base::cpu::BatchReport {
            paused: Duration::from_millis(1500),
            pauses: 2,
        };
        m.observe_batch_report("transcription", &report);
        m.count_interactive_beside("speech", "transcription");
        let text = m.render();
        for line in [
            "headroom_batch_paused_seconds_total{work=\"transcription\"} 1.5",
            "headroom_interactive_beside_batch_total{job=\"speech\",batch=\"transcription\"} 1",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
    }

    #[test]
    fn renders_rejections_by_reason_and_occupancy() {
        let m = Metrics::new();
        m.count_rejection(Lane::Text, RejectReason::TextLaneFull);
        m.count_rejection(Lane::Text, RejectReason::TextLaneFull);
        m.set_occupancy(
            Lane::Text,
            Occupancy {
                in_flight: 2,
                limit: 2,
                waiting: 1,
                wait_limit: 1,
                reserved: 0,
            },
        );
        m.observe_ttft(Lane::Text, Duration::from_millis(120));
        let text = m.render();
        assert!(
            text.contains(r#"headroom_rejections_total{lane="text",reason="text_lane_full"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"headroom_rejections_total{lane="text",reason="input_too_long"} 0"#)
        );
        assert!(text.contains(r#"headroom_in_flight{lane="text"} 2"#));
        assert!(text.contains(r#"headroom_waiting{lane="text"} 1"#));
        assert!(text.contains(r#"headroom_time_to_first_token_seconds_count{lane="text"} 1"#));
        assert_eq!(m.rejections(Lane::Text, RejectReason::TextLaneFull), 2);
    }
}
