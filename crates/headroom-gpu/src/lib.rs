//! GPU memory, measured rather than assumed: what GPU is present ([`GpuStatus`]) and a sampler
//! that reads device and per-process memory on a fixed period into a bounded ring buffer
//! ([`GpuSampler`], with baseline/peak/delta over any window). NVML is loaded at run time, so
//! Headroom builds and runs anywhere; with no NVIDIA driver or device every part is in a clear
//! "no GPU" state, never a crash. The admission gate that reads the sampler lives with the other
//! gates in `headroom-core`; this crate knows nothing of lanes.
//!
//! ```no_run
//! use headroom_gpu::{GpuSampler, DEFAULT_CAPACITY, DEFAULT_PERIOD};
//!
//! let sampler = GpuSampler::start(DEFAULT_PERIOD, DEFAULT_CAPACITY);
//! let start = sampler.mark();
//! // ... run the work to measure ...
//! sampler.sample_now();
//! match sampler.window(start) {
//!     Some(w) => println!("baseline {:.0} MiB, peak {:.0} MiB", w.baseline_mib, w.peak_mib),
//!     None => println!("{:?}", sampler.status()),
//! }
//! ```
//!
//! | item | for |
//! |---|---|
//! | [`GpuStatus`] | which NVIDIA GPUs are present, or why none |
//! | [`GpuSampler`] | periodic readings, windows (baseline, peak, delta), fresh free memory |
//! | [`MemoryReader`] | where readings come from: [`NvmlReader`], [`ProcessRssReader`] (CPU servers), [`ReplayReader`] (recorded traces) |

mod sampler;

pub use sampler::{
    process_resident_bytes, DeviceMemory, GpuSampler, MemoryReader, MemorySample, MemoryWindow,
    NvmlReader, ProcessMemory, ProcessRssReader, ReadError, ReplayReader, SamplerStatus,
    WindowStart, DEFAULT_CAPACITY, DEFAULT_PERIOD,
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
