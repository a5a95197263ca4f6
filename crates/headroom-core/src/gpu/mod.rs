//! GPU memory, measured rather than assumed: what GPU is present ([`GpuStatus`]), a sampler that
//! reads device and per-process memory on a fixed period into a bounded ring buffer
//! ([`GpuSampler`], with baseline/peak/delta over any window), and the admission gate that turns
//! low free memory into a `gpu_memory_pressure` rejection ([`GpuPressure`]). NVML is loaded at
//! run time, so Headroom builds and runs anywhere; with no NVIDIA driver or device every part is
//! in a clear "no GPU" state, never a crash.

mod pressure;
mod sampler;

pub use pressure::GpuPressure;
pub use sampler::{
    DeviceMemory, GpuSampler, MemoryReader, MemorySample, MemoryWindow, NvmlReader, ProcessMemory,
    ProcessRssReader, ReplayReader, SamplerStatus, WindowStart, DEFAULT_CAPACITY, DEFAULT_PERIOD,
};

use serde::Serialize;

/// One device's memory, in MiB.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuDevice {
    pub index: u32,
    pub name: String,
    pub total_mib: u64,
    pub used_mib: u64,
    pub free_mib: u64,
}

/// Whether NVML found NVIDIA GPUs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum GpuStatus {
    Present {
        devices: Vec<GpuDevice>,
    },
    /// No driver, no library, or no device; `reason` says which.
    NoGpu {
        reason: String,
    },
}

const MIB: u64 = 1024 * 1024;

impl GpuStatus {
    pub fn probe() -> GpuStatus {
        let no_gpu = |reason: String| GpuStatus::NoGpu { reason };
        let nvml = match nvml_wrapper::Nvml::init() {
            Ok(n) => n,
            Err(e) => return no_gpu(format!("NVIDIA management library not available ({e})")),
        };
        let count = match nvml.device_count() {
            Ok(c) => c,
            Err(e) => return no_gpu(format!("cannot count devices ({e})")),
        };
        let mut devices = Vec::new();
        for index in 0..count {
            let Ok(device) = nvml.device_by_index(index) else {
                continue;
            };
            let name = device
                .name()
                .unwrap_or_else(|_| "unknown NVIDIA GPU".into());
            if let Ok(mem) = device.memory_info() {
                devices.push(GpuDevice {
                    index,
                    name,
                    total_mib: mem.total / MIB,
                    used_mib: mem.used / MIB,
                    free_mib: mem.free / MIB,
                });
            }
        }
        if devices.is_empty() {
            return no_gpu("the driver reports no usable device".into());
        }
        GpuStatus::Present { devices }
    }

    /// One line for a terminal.
    pub fn describe(&self) -> String {
        match self {
            GpuStatus::NoGpu { reason } => format!("no NVIDIA GPU detected: {reason}"),
            GpuStatus::Present { devices } => devices
                .iter()
                .map(|d| {
                    format!(
                        "GPU {} {}: {} MiB used of {} MiB ({} MiB free)",
                        d.index, d.name, d.used_mib, d.total_mib, d.free_mib
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probing_never_panics_and_says_what_it_found() {
        let status = GpuStatus::probe();
        let line = status.describe();
        match status {
            GpuStatus::NoGpu { .. } => assert!(line.starts_with("no NVIDIA GPU detected")),
            GpuStatus::Present { devices } => {
                assert!(!devices.is_empty());
                assert!(devices.iter().all(|d| d.total_mib >= d.used_mib));
            }
        }
    }
}
