//! The text lane yields to interactive audio: on one GPU (or one CPU) text generation and the
//! audio engines compete, and a person waiting on audio comes first.

use super::{Gate, Refusal, RequestShape};
use crate::admission::RejectReason;
use crate::lanes::AudioActivity;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What the text lane does while an interactive audio job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum YieldRule {
    /// Nothing: text and audio run side by side.
    None,
    /// No new text request is dispatched; running ones finish.
    #[default]
    Gate,
    /// As `gate`, and running text requests are stopped (and told so).
    Preempt,
}

impl std::str::FromStr for YieldRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(YieldRule::None),
            "gate" => Ok(YieldRule::Gate),
            "preempt" => Ok(YieldRule::Preempt),
            other => Err(format!(
                "unknown yield rule {other:?}: use none, gate or preempt"
            )),
        }
    }
}

/// Refuses new text work while interactive audio runs (rules `gate` and `preempt`).
pub struct YieldToAudio {
    pub rule: YieldRule,
    pub activity: AudioActivity,
}

impl Gate for YieldToAudio {
    fn name(&self) -> &'static str {
        "yield_to_audio"
    }

    fn check(&self, _shape: &RequestShape) -> Result<(), Refusal> {
        let running = self.activity.interactive_running();
        if self.rule == YieldRule::None || running == 0 {
            return Ok(());
        }
        Err(Refusal {
            reason: RejectReason::AudioPriority,
            detail: format!("{running} interactive audio job(s) running"),
            retry_after: Some(Duration::from_secs(1)),
        })
    }
}
