//! The GPU-pressure gate: new text work is refused while free device memory is below the
//! headroom the user keeps for audio, so a text burst cannot push an audio job out of memory.
//! The gate reads a [`MemoryGauge`]; `headroom-services` plugs the GPU sampler in.

use super::{Gate, Refusal, RejectReason, RequestShape};
use std::sync::Arc;
use std::time::Duration;

/// Free device memory as the gate sees it.
pub trait MemoryGauge: Send + Sync {
    /// Free memory in MiB from a fresh reading; `None` with no device or no fresh reading.
    fn free_mib(&self) -> Option<f64>;
    /// The device's name, for the refusal's detail.
    fn device(&self) -> String;
    /// How often the gauge is read; a refusal suggests retrying after ten periods.
    fn period(&self) -> Duration;
}

/// Refuses with `gpu_memory_pressure` while free memory < `audio_headroom_mib`. Without a
/// reading it lets work through (it cannot know better).
pub struct GpuPressure {
    pub gauge: Arc<dyn MemoryGauge>,
    pub audio_headroom_mib: u64,
}

impl Gate for GpuPressure {
    fn name(&self) -> &'static str {
        "gpu_pressure"
    }

    fn check(&self, _shape: &RequestShape) -> Result<(), Refusal> {
        let Some(free) = self.gauge.free_mib() else {
            return Ok(());
        };
        if free >= self.audio_headroom_mib as f64 {
            return Ok(());
        }
        Err(Refusal {
            reason: RejectReason::GpuMemoryPressure,
            detail: format!(
                "{:.0} MiB free on {}, below the {} MiB kept for audio",
                free,
                self.gauge.device(),
                self.audio_headroom_mib
            ),
            retry_after: Some(self.gauge.period() * 10),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use headroom_base::sync::Locked;
    use std::sync::Mutex;

    /// Free-memory readings handed out in order; the last one repeats.
    pub(crate) struct Readings(pub Mutex<Vec<Option<f64>>>);

    impl MemoryGauge for Readings {
        fn free_mib(&self) -> Option<f64> {
            let mut list = self.0.locked();
            if list.len() > 1 {
                list.remove(0)
            } else {
                list[0]
            }
        }
        fn device(&self) -> String {
            "test GPU".into()
        }
        fn period(&self) -> Duration {
            Duration::from_millis(200)
        }
    }

    fn shape() -> RequestShape {
        RequestShape {
            chars: 10,
            estimated_tokens: 4,
            max_tokens: 16,
        }
    }

    #[test]
    fn refuses_below_the_headroom_and_admits_again_when_memory_frees() {
        let gate = GpuPressure {
            gauge: Arc::new(Readings(Mutex::new(vec![
                Some(4576.0),
                Some(1576.0),
                Some(4576.0),
            ]))),
            audio_headroom_mib: 4096,
        };
        assert_eq!(gate.check(&shape()), Ok(()));
        let refusal = gate.check(&shape()).unwrap_err();
        assert_eq!(refusal.reason, RejectReason::GpuMemoryPressure);
        assert!(
            refusal.detail.contains("1576 MiB free on test GPU")
                && refusal.detail.contains("4096 MiB"),
            "{}",
            refusal.detail
        );
        assert_eq!(refusal.retry_after, Some(Duration::from_secs(2)));
        assert_eq!(gate.check(&shape()), Ok(()));
    }

    #[test]
    fn without_a_reading_nothing_is_refused() {
        let gate = GpuPressure {
            gauge: Arc::new(Readings(Mutex::new(vec![None]))),
            audio_headroom_mib: u64::MAX,
        };
        assert_eq!(gate.check(&shape()), Ok(()));
    }
}
