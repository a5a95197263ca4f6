//! The GPU-pressure admission gate: new text work is refused while free device memory is below
//! the headroom the user keeps for audio, so a text burst cannot push an audio job out of memory.

use super::GpuSampler;
use crate::admission::{Gate, Refusal, RejectReason, RequestShape};
use std::time::Duration;

/// Refuses with `gpu_memory_pressure` while free memory < `audio_headroom_mib`. Without a GPU,
/// or without a fresh reading, it lets work through (it cannot know better).
pub struct GpuPressure {
    pub sampler: GpuSampler,
    pub audio_headroom_mib: u64,
}

impl GpuPressure {
    /// Readings older than this are not trusted (the sampler has stalled or failed).
    fn max_age(&self) -> Duration {
        self.sampler.period() * 5
    }
}

impl Gate for GpuPressure {
    fn name(&self) -> &'static str {
        "gpu_pressure"
    }

    fn check(&self, _shape: &RequestShape) -> Result<(), Refusal> {
        let Some(latest) = self.sampler.latest() else {
            return Ok(());
        };
        if self.sampler.age(&latest) > self.max_age() {
            return Ok(());
        }
        let free = latest.free_mib();
        if free >= self.audio_headroom_mib as f64 {
            return Ok(());
        }
        Err(Refusal {
            reason: RejectReason::GpuMemoryPressure,
            detail: format!(
                "{:.0} MiB free on {}, below the {} MiB kept for audio",
                free,
                self.sampler.device(),
                self.audio_headroom_mib
            ),
            retry_after: Some(self.sampler.period() * 10),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::sampler::tests::Trace;
    use super::*;

    fn shape() -> RequestShape {
        RequestShape {
            chars: 10,
            estimated_tokens: 4,
            max_tokens: 16,
        }
    }

    #[test]
    fn refuses_below_the_headroom_and_admits_again_when_memory_frees() {
        // 24 GiB card: 20000 MiB used leaves 4576 MiB free; 23000 used leaves 1576.
        let trace = Trace {
            used_mib: vec![20000, 23000, 20000],
            next: 0,
        };
        let sampler = GpuSampler::with_reader(trace, Duration::from_secs(60), 16, false);
        let gate = GpuPressure {
            sampler: sampler.clone(),
            audio_headroom_mib: 4096,
        };
        assert_eq!(gate.check(&shape()), Ok(()));
        sampler.sample_now();
        let refusal = gate.check(&shape()).unwrap_err();
        assert_eq!(refusal.reason, RejectReason::GpuMemoryPressure);
        assert!(
            refusal.detail.contains("1576 MiB free") && refusal.detail.contains("4096 MiB"),
            "{}",
            refusal.detail
        );
        sampler.sample_now();
        assert_eq!(gate.check(&shape()), Ok(()));
    }

    #[test]
    fn without_a_gpu_nothing_is_refused() {
        let gate = GpuPressure {
            sampler: GpuSampler::no_gpu("none"),
            audio_headroom_mib: u64::MAX,
        };
        assert_eq!(gate.check(&shape()), Ok(()));
    }
}
