//! The one value every refusal becomes, whatever layer produced it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// Which lane a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    Audio,
    Text,
}

impl Lane {
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Audio => "audio",
            Lane::Text => "text",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Lane::Audio => "audio engine",
            Lane::Text => "text model",
        }
    }
}

/// Why a request was refused or abandoned. The serialized form is the stable reason code that
/// the HTTP error body, metrics labels and the UI use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// Every text slot is busy and the wait queue is full.
    TextLaneFull,
    /// Every audio slot is busy and the audio wait queue is full.
    AudioLaneFull,
    /// The input cannot fit the model's context (or the character bound).
    InputTooLong,
    /// A queue-wait, first-chunk or total deadline passed.
    DeadlineExceeded,
    /// The upstream server could not be reached, reset the connection, or failed with 5xx.
    UpstreamUnavailable,
    /// The upstream server answered that it is overloaded (429 / 503).
    UpstreamBusy,
    /// The upstream server refused the request or answered something unusable.
    UpstreamError,
    /// The model answered, but not with a usable cleanup (chatter, cut off, empty).
    UnusableReply,
    /// The text lane is yielding to an interactive audio job (rules `gate` and `preempt`).
    AudioPriority,
    /// Free GPU memory is below the headroom reserved for audio.
    GpuMemoryPressure,
    /// The text would go to a server on another machine, and this project has not allowed it.
    RemoteNotAllowed,
    /// The user (or the client) cancelled.
    Cancelled,
}

impl RejectReason {
    pub const ALL: [RejectReason; 12] = [
        RejectReason::TextLaneFull,
        RejectReason::AudioLaneFull,
        RejectReason::InputTooLong,
        RejectReason::DeadlineExceeded,
        RejectReason::UpstreamUnavailable,
        RejectReason::UpstreamBusy,
        RejectReason::UpstreamError,
        RejectReason::UnusableReply,
        RejectReason::AudioPriority,
        RejectReason::GpuMemoryPressure,
        RejectReason::RemoteNotAllowed,
        RejectReason::Cancelled,
    ];

    pub fn code(self) -> &'static str {
        match self {
            RejectReason::TextLaneFull => "text_lane_full",
            RejectReason::AudioLaneFull => "audio_lane_full",
            RejectReason::InputTooLong => "input_too_long",
            RejectReason::DeadlineExceeded => "deadline_exceeded",
            RejectReason::UpstreamUnavailable => "upstream_unavailable",
            RejectReason::UpstreamBusy => "upstream_busy",
            RejectReason::UpstreamError => "upstream_error",
            RejectReason::UnusableReply => "unusable_reply",
            RejectReason::AudioPriority => "audio_priority",
            RejectReason::GpuMemoryPressure => "gpu_memory_pressure",
            RejectReason::RemoteNotAllowed => "remote_not_allowed",
            RejectReason::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Which deadline passed, for [`RejectReason::DeadlineExceeded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum DeadlineKind {
    QueueWait,
    FirstChunk,
    Total,
}

impl DeadlineKind {
    pub const ALL: [DeadlineKind; 3] = [
        DeadlineKind::QueueWait,
        DeadlineKind::FirstChunk,
        DeadlineKind::Total,
    ];

    /// The serialized name, also the `kind` label of `headroom_deadline_misses_total`.
    pub fn code(self) -> &'static str {
        match self {
            DeadlineKind::QueueWait => "queue_wait",
            DeadlineKind::FirstChunk => "first_chunk",
            DeadlineKind::Total => "total",
        }
    }
}

/// What the user can do about a rejection; the UI turns each into a button.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum SuggestedAction {
    RetryAfter { after_ms: u64 },
    UseRuleBasedCleanup,
    SplitInput,
    CheckServer,
}

/// A typed refusal: what is busy, how full it is, where the request stood and when to retry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[error("{}", self.message())]
pub struct Rejection {
    pub reason: RejectReason,
    pub lane: Lane,
    /// Requests running in the lane when this was decided.
    pub in_flight: usize,
    /// The lane's concurrency limit.
    pub limit: usize,
    /// Requests waiting in the lane's queue when this was decided.
    pub waiting: usize,
    /// The lane's wait-queue bound.
    pub wait_limit: usize,
    /// 1-based place in the wait queue, when the request had one.
    pub position: Option<usize>,
    /// When a retry has a fair chance, estimated from recent latencies.
    #[serde(with = "millis", rename = "retry_after_ms")]
    #[cfg_attr(feature = "typescript", ts(type = "number | null"))]
    pub retry_after: Option<Duration>,
    /// Which deadline passed, for `deadline_exceeded`.
    pub deadline: Option<DeadlineKind>,
    /// The specific facts behind the reason (sizes, limits, the server's own words).
    pub detail: Option<String>,
    /// True when some output had already been delivered before the failure.
    pub after_output: bool,
}

impl Rejection {
    pub fn new(lane: Lane, reason: RejectReason) -> Self {
        Rejection {
            reason,
            lane,
            in_flight: 0,
            limit: 0,
            waiting: 0,
            wait_limit: 0,
            position: None,
            retry_after: None,
            deadline: None,
            detail: None,
            after_output: false,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    pub fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.retry_after = retry_after;
        self
    }

    pub fn with_deadline(mut self, kind: DeadlineKind) -> Self {
        self.deadline = Some(kind);
        self
    }

    pub fn with_position(mut self, position: usize) -> Self {
        self.position = Some(position);
        self
    }

    /// Whether trying the same request again later can succeed.
    pub fn is_retryable(&self) -> bool {
        match self.reason {
            RejectReason::TextLaneFull
            | RejectReason::AudioLaneFull
            | RejectReason::UpstreamUnavailable
            | RejectReason::UpstreamBusy
            | RejectReason::AudioPriority
            | RejectReason::GpuMemoryPressure => true,
            RejectReason::DeadlineExceeded => self.deadline != Some(DeadlineKind::Total),
            RejectReason::InputTooLong
            | RejectReason::UpstreamError
            | RejectReason::UnusableReply
            | RejectReason::RemoteNotAllowed
            | RejectReason::Cancelled => false,
        }
    }

    /// One sentence a person can act on: what is busy, how full, where the request stood.
    pub fn message(&self) -> String {
        let what = self.lane.describe();
        let occupancy = format!(
            "{} of {} running, {} of {} waiting",
            self.in_flight, self.limit, self.waiting, self.wait_limit
        );
        let retry = self
            .retry_after
            .map(|d| format!(" Try again in about {}.", human_duration(d)))
            .unwrap_or_default();
        let detail = self
            .detail
            .as_deref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default();
        match self.reason {
            RejectReason::TextLaneFull | RejectReason::AudioLaneFull => format!(
                "The {what} is busy: {occupancy}{detail}, so this request was turned away \
                 instead of queued without bound.{retry}"
            ),
            RejectReason::InputTooLong => {
                format!("The input is too long for the {what}{detail}. Split it into shorter parts.")
            }
            RejectReason::DeadlineExceeded => {
                let which = match self.deadline {
                    Some(DeadlineKind::QueueWait) => match self.position {
                        Some(p) => format!("waiting in the queue at position {p}"),
                        None => "waiting in the queue".to_string(),
                    },
                    Some(DeadlineKind::FirstChunk) => "waiting for the first words".to_string(),
                    Some(DeadlineKind::Total) | None => "running".to_string(),
                };
                format!("The {what} ran out of time while {which}{detail}.{retry}")
            }
            RejectReason::UpstreamUnavailable => format!(
                "The {what} server is unavailable{detail}. Start it or check the server URL.{retry}"
            ),
            RejectReason::UpstreamBusy => {
                format!("The {what} server says it is overloaded{detail}.{retry}")
            }
            RejectReason::UpstreamError => {
                format!("The {what} server refused the request{detail}.")
            }
            RejectReason::UnusableReply => {
                format!("The {what}'s reply could not be used{detail}.")
            }
            RejectReason::AudioPriority => format!(
                "The {what} is paused while audio work a person is waiting on runs{detail}.{retry}"
            ),
            RejectReason::GpuMemoryPressure => format!(
                "GPU memory is low, so new {what} work is paused to keep audio responsive{detail}.{retry}"
            ),
            RejectReason::RemoteNotAllowed => format!(
                "Not sent: the text would leave this machine{detail}. Allow it in this project's \
                 cleanup settings, or use rule-based cleanup."
            ),
            RejectReason::Cancelled => format!("The {what} request was cancelled{detail}."),
        }
    }

    /// The choices that apply to this rejection, in the order a UI should offer them.
    pub fn suggested_actions(&self) -> Vec<SuggestedAction> {
        let mut actions = Vec::new();
        if self.is_retryable() {
            let after = self.retry_after.unwrap_or(Duration::from_secs(1));
            actions.push(SuggestedAction::RetryAfter {
                after_ms: after.as_millis() as u64,
            });
        }
        match self.reason {
            RejectReason::InputTooLong => actions.push(SuggestedAction::SplitInput),
            RejectReason::UpstreamUnavailable | RejectReason::UpstreamError => {
                actions.push(SuggestedAction::CheckServer)
            }
            _ => {}
        }
        if self.lane == Lane::Text && self.reason != RejectReason::Cancelled {
            actions.push(SuggestedAction::UseRuleBasedCleanup);
        }
        actions
    }
}

/// "850 ms", "4 s", "2 min".
pub fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 120_000 {
        format!("{} s", ms.div_ceil(1000))
    } else {
        format!("{} min", ms.div_ceil(60_000))
    }
}

mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_millis() as u64)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_text_lane() -> Rejection {
        Rejection {
            in_flight: 2,
            limit: 2,
            waiting: 0,
            wait_limit: 0,
            ..Rejection::new(Lane::Text, RejectReason::TextLaneFull)
        }
        .with_retry_after(Some(Duration::from_millis(3200)))
    }

    #[test]
    fn lane_full_message_names_what_is_busy_how_full_and_when_to_retry() {
        let msg = full_text_lane().message();
        assert!(msg.contains("text model is busy"), "{msg}");
        assert!(msg.contains("2 of 2 running"), "{msg}");
        assert!(msg.contains("0 of 0 waiting"), "{msg}");
        assert!(msg.contains("Try again in about 4 s"), "{msg}");
    }

    #[test]
    fn serializes_with_stable_codes_and_round_trips() {
        let r = full_text_lane().with_position(3);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["reason"], "text_lane_full");
        assert_eq!(json["lane"], "text");
        assert_eq!(json["retry_after_ms"], 3200);
        assert_eq!(json["position"], 3);
        let back: Rejection = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn codes_match_serde_names() {
        for reason in RejectReason::ALL {
            let json = serde_json::to_value(reason).unwrap();
            assert_eq!(json, reason.code());
        }
    }

    #[test]
    fn retryability_follows_the_reason() {
        assert!(full_text_lane().is_retryable());
        assert!(!Rejection::new(Lane::Text, RejectReason::InputTooLong).is_retryable());
        let total = Rejection::new(Lane::Text, RejectReason::DeadlineExceeded)
            .with_deadline(DeadlineKind::Total);
        assert!(!total.is_retryable());
        let queue = Rejection::new(Lane::Text, RejectReason::DeadlineExceeded)
            .with_deadline(DeadlineKind::QueueWait);
        assert!(queue.is_retryable());
    }

    #[test]
    fn actions_offer_retry_and_rule_based_cleanup_for_a_full_text_lane() {
        let actions = full_text_lane().suggested_actions();
        assert_eq!(
            actions,
            vec![
                SuggestedAction::RetryAfter { after_ms: 3200 },
                SuggestedAction::UseRuleBasedCleanup
            ]
        );
        let too_long = Rejection::new(Lane::Text, RejectReason::InputTooLong).suggested_actions();
        assert!(too_long.contains(&SuggestedAction::SplitInput));
        assert!(!too_long
            .iter()
            .any(|a| matches!(a, SuggestedAction::RetryAfter { .. })));
    }

    #[test]
    fn queue_deadline_message_gives_the_position() {
        let r = Rejection::new(Lane::Text, RejectReason::DeadlineExceeded)
            .with_deadline(DeadlineKind::QueueWait)
            .with_position(2);
        assert!(
            r.message().contains("queue at position 2"),
            "{}",
            r.message()
        );
    }

    #[test]
    fn human_durations() {
        assert_eq!(human_duration(Duration::from_millis(850)), "850 ms");
        assert_eq!(human_duration(Duration::from_millis(3001)), "4 s");
        assert_eq!(human_duration(Duration::from_secs(600)), "10 min");
    }
}
