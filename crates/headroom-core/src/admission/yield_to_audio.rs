//! The text lane yields to interactive audio: on one GPU (or one CPU) text generation and the
//! audio engines compete, and a person waiting on audio comes first.

use super::{Gate, Refusal, RejectReason, RequestShape};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// What the gate needs to know of the audio lane (the lanes' `AudioActivity` answers it).
pub trait InteractiveAudio: Send + Sync {
    /// Interactive audio jobs running now.
    fn interactive_running(&self) -> usize;
}

/// What the text lane does while an interactive audio job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
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
    pub activity: Arc<dyn InteractiveAudio>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Running(AtomicUsize);
    impl InteractiveAudio for Running {
        fn interactive_running(&self) -> usize {
            self.0.load(Ordering::SeqCst)
        }
    }

    const SHAPE: RequestShape = RequestShape {
        chars: 1,
        estimated_tokens: 1,
        max_tokens: 1,
    };

    #[test]
    fn gate_and_preempt_refuse_while_interactive_audio_runs_and_none_never_does() {
        let audio = Arc::new(Running(AtomicUsize::new(1)));
        for rule in [YieldRule::Gate, YieldRule::Preempt] {
            let gate = YieldToAudio {
                rule,
                activity: audio.clone(),
            };
            let refusal = gate.check(&SHAPE).unwrap_err();
            assert_eq!(refusal.reason, RejectReason::AudioPriority);
        }
        let none = YieldToAudio {
            rule: YieldRule::None,
            activity: audio.clone(),
        };
        assert_eq!(none.check(&SHAPE), Ok(()));
        audio.0.store(0, Ordering::SeqCst);
        let gate = YieldToAudio {
            rule: YieldRule::Gate,
            activity: audio,
        };
        assert_eq!(gate.check(&SHAPE), Ok(()));
    }
}
