//! Periodic GPU memory sampling into a bounded ring buffer.
//!
//! Readings are device-wide (like `nvidia-smi --query-gpu=memory.used`) plus per-process use
//! where the driver reports it. A window ([`GpuSampler::mark`] … [`GpuSampler::window`]) gives
//! the absolute baseline, the peak and peak − baseline: with a preallocated KV cache the delta
//! alone says little, so both are always reported.

use headroom_base::sync::Locked;
use serde::Serialize;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MIB: f64 = 1024.0 * 1024.0;

/// Why a memory reader could not open or read; each keeps its cause.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("NVIDIA management library not available ({0})")]
    NoLibrary(#[source] nvml_wrapper::error::NvmlError),
    #[error("no NVIDIA GPU {index} ({source})")]
    NoDevice {
        index: u32,
        #[source]
        source: nvml_wrapper::error::NvmlError,
    },
    #[error("reading GPU {index} failed: {source}")]
    Nvml {
        index: u32,
        #[source]
        source: nvml_wrapper::error::NvmlError,
    },
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} has no {key}", .path.display())]
    MissingField { path: PathBuf, key: &'static str },
    #[error("{} is not a GPU trace: {source}", .path.display())]
    NotATrace {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: used_mib must be non-empty and at most total_mib", .path.display())]
    ImpossibleTrace { path: PathBuf },
}

/// One process's use of the device.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ProcessMemory {
    pub pid: u32,
    /// `None` when the driver does not say (some containers and drivers).
    pub used_bytes: Option<u64>,
}

/// One reading of a device.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct DeviceMemory {
    pub total_bytes: u64,
    pub used_bytes: u64,
    pub free_bytes: u64,
    pub processes: Vec<ProcessMemory>,
}

/// Where readings come from: NVML on a real machine, a scripted trace in tests.
pub trait MemoryReader: Send + 'static {
    /// The device's name, for reports.
    fn device(&self) -> String;
    fn read(&mut self) -> Result<DeviceMemory, ReadError>;
}

/// Reads one NVIDIA device through NVML.
pub struct NvmlReader {
    nvml: nvml_wrapper::Nvml,
    index: u32,
    name: String,
}

impl NvmlReader {
    /// Opens device `index`; an error says why there is no GPU to sample.
    pub fn open(index: u32) -> Result<NvmlReader, ReadError> {
        let nvml = nvml_wrapper::Nvml::init().map_err(ReadError::NoLibrary)?;
        let device = nvml
            .device_by_index(index)
            .map_err(|source| ReadError::NoDevice { index, source })?;
        let name = device
            .name()
            .unwrap_or_else(|_| "unknown NVIDIA GPU".into());
        Ok(NvmlReader { nvml, index, name })
    }
}

impl MemoryReader for NvmlReader {
    fn device(&self) -> String {
        format!("GPU {} {}", self.index, self.name)
    }

    fn read(&mut self) -> Result<DeviceMemory, ReadError> {
        let index = self.index;
        let failed = |source| ReadError::Nvml { index, source };
        let device = self.nvml.device_by_index(index).map_err(failed)?;
        let memory = device.memory_info().map_err(failed)?;
        let processes = device
            .running_compute_processes()
            .unwrap_or_default()
            .into_iter()
            .map(|p| ProcessMemory {
                pid: p.pid,
                used_bytes: match p.used_gpu_memory {
                    nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b),
                    nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
                },
            })
            .collect();
        Ok(DeviceMemory {
            total_bytes: memory.total,
            used_bytes: memory.used,
            free_bytes: memory.free,
            processes,
        })
    }
}

/// The resident memory of one process (a CPU inference server such as llama-server), read from
/// `/proc`, so the same sampler, windows and leak detector work on machines without a GPU.
pub struct ProcessRssReader {
    pid: u32,
}

fn proc_kib(path: &str, key: &'static str) -> Result<u64, ReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
        path: path.into(),
        source,
    })?;
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| ReadError::MissingField {
            path: path.into(),
            key,
        })
}

/// Process `pid`'s resident memory in bytes (`VmRSS` in `/proc/PID/status`).
pub fn process_resident_bytes(pid: u32) -> Result<u64, ReadError> {
    Ok(proc_kib(&format!("/proc/{pid}/status"), "VmRSS:")? * 1024)
}

impl ProcessRssReader {
    /// Fails (naming `/proc/PID/status`) when the process cannot be read.
    pub fn open(pid: u32) -> Result<ProcessRssReader, ReadError> {
        process_resident_bytes(pid)?;
        Ok(ProcessRssReader { pid })
    }
}

impl MemoryReader for ProcessRssReader {
    fn device(&self) -> String {
        format!("process {} (resident memory)", self.pid)
    }

    fn read(&mut self) -> Result<DeviceMemory, ReadError> {
        let rss = process_resident_bytes(self.pid)?;
        let total = proc_kib("/proc/meminfo", "MemTotal:")? * 1024;
        let available = proc_kib("/proc/meminfo", "MemAvailable:")? * 1024;
        Ok(DeviceMemory {
            total_bytes: total,
            used_bytes: rss,
            free_bytes: available,
            processes: vec![ProcessMemory {
                pid: self.pid,
                used_bytes: Some(rss),
            }],
        })
    }
}

/// Replays recorded device readings from a JSON file (`{"total_mib": N, "used_mib": [...]}`),
/// one per read, then holds the last: for demonstrations and UI tests of the GPU panel and the
/// pressure gate on machines without a GPU. Its device name says it is a replay.
pub struct ReplayReader {
    name: String,
    total_mib: u64,
    used_mib: Vec<u64>,
    next: usize,
}

impl ReplayReader {
    pub fn open(path: &Path) -> Result<ReplayReader, ReadError> {
        #[derive(serde::Deserialize)]
        struct Trace {
            total_mib: u64,
            used_mib: Vec<u64>,
        }
        let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
            path: path.into(),
            source,
        })?;
        let trace: Trace = serde_json::from_str(&text).map_err(|source| ReadError::NotATrace {
            path: path.into(),
            source,
        })?;
        if trace.used_mib.is_empty() || trace.used_mib.iter().any(|&u| u > trace.total_mib) {
            return Err(ReadError::ImpossibleTrace { path: path.into() });
        }
        Ok(ReplayReader {
            name: format!("replayed trace {}", path.display()),
            total_mib: trace.total_mib,
            used_mib: trace.used_mib,
            next: 0,
        })
    }
}

impl MemoryReader for ReplayReader {
    fn device(&self) -> String {
        self.name.clone()
    }

    fn read(&mut self) -> Result<DeviceMemory, ReadError> {
        let used = self.used_mib[self.next.min(self.used_mib.len() - 1)] << 20;
        self.next += 1;
        let total = self.total_mib << 20;
        Ok(DeviceMemory {
            total_bytes: total,
            used_bytes: used,
            free_bytes: total - used,
            processes: Vec::new(),
        })
    }
}

/// A reading and when it was taken (milliseconds since the sampler started).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct MemorySample {
    /// Position in the sampler's sequence of readings (windows are cut by it).
    pub seq: u64,
    pub at_ms: u64,
    #[serde(flatten)]
    pub memory: DeviceMemory,
}

impl MemorySample {
    pub fn used_mib(&self) -> f64 {
        self.memory.used_bytes as f64 / MIB
    }
    pub fn free_mib(&self) -> f64 {
        self.memory.free_bytes as f64 / MIB
    }
    pub fn total_mib(&self) -> f64 {
        self.memory.total_bytes as f64 / MIB
    }
    /// What `pid` holds on the device, when the driver says.
    pub fn process_bytes(&self, pid: u32) -> Option<u64> {
        self.memory
            .processes
            .iter()
            .find(|p| p.pid == pid)
            .and_then(|p| p.used_bytes)
    }
}

/// Baseline, peak and delta of device memory over a window, in MiB.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryWindow {
    pub device: String,
    pub baseline_mib: f64,
    pub peak_mib: f64,
    pub delta_mib: f64,
    /// The lowest reading after the window's first (the floor the work left).
    pub floor_mib: f64,
    pub total_mib: f64,
    pub samples: usize,
    pub duration_ms: u64,
}

/// Whether the sampler has a GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SamplerStatus {
    Sampling {
        device: String,
        period_ms: u64,
        samples: usize,
        /// The last read error, if the last read failed.
        last_error: Option<String>,
    },
    NoGpu {
        reason: String,
    },
}

/// Where a window starts: the first reading at or after this time belongs to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WindowStart {
    /// The first reading that belongs to the window.
    pub seq: u64,
    pub at_ms: u64,
}

struct Ring {
    samples: VecDeque<MemorySample>,
    next_seq: u64,
    capacity: usize,
    last_error: Option<String>,
}

struct Inner {
    reader: Option<Mutex<Box<dyn MemoryReader>>>,
    device: String,
    no_gpu_reason: String,
    ring: Mutex<Ring>,
    period: Duration,
    started: Instant,
    stop: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Samples one device's memory; cheap to clone (all clones share the ring).
#[derive(Clone)]
pub struct GpuSampler {
    inner: Arc<Inner>,
}

/// 200 ms, as the reference harness samples.
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(200);
/// Ten minutes of readings at the default period.
pub const DEFAULT_CAPACITY: usize = 3000;

impl GpuSampler {
    /// Samples NVIDIA device 0 every `period` on a background thread; with no GPU, a sampler in
    /// the no-GPU state.
    pub fn start(period: Duration, capacity: usize) -> GpuSampler {
        match NvmlReader::open(0) {
            Ok(reader) => Self::with_reader(reader, period, capacity, true),
            Err(reason) => Self::no_gpu(reason.to_string()),
        }
    }

    /// A sampler over any reader; `background` starts the periodic thread, otherwise readings
    /// are taken only by [`GpuSampler::sample_now`] (deterministic tests, one-shot checks).
    pub fn with_reader(
        reader: impl MemoryReader,
        period: Duration,
        capacity: usize,
        background: bool,
    ) -> GpuSampler {
        let sampler = GpuSampler {
            inner: Arc::new(Inner {
                device: reader.device(),
                reader: Some(Mutex::new(Box::new(reader))),
                no_gpu_reason: String::new(),
                ring: Mutex::new(Ring {
                    samples: VecDeque::with_capacity(capacity.min(4096)),
                    next_seq: 0,
                    capacity: capacity.max(2),
                    last_error: None,
                }),
                period: period.max(Duration::from_millis(10)),
                started: Instant::now(),
                stop: AtomicBool::new(false),
            }),
        };
        sampler.sample_now();
        if background {
            let weak = Arc::downgrade(&sampler.inner);
            let period = sampler.inner.period;
            std::thread::Builder::new()
                .name("gpu-sampler".into())
                .spawn(move || loop {
                    // Sampling is periodic by nature: this sleep is the sampling period.
                    std::thread::sleep(period);
                    let Some(inner) = weak.upgrade() else { break };
                    if inner.stop.load(Ordering::Relaxed) {
                        break;
                    }
                    GpuSampler { inner }.sample_now();
                })
                .expect("the sampler thread starts");
        }
        sampler
    }

    /// A sampler that says why there is no GPU and never reads.
    pub fn no_gpu(reason: impl Into<String>) -> GpuSampler {
        GpuSampler {
            inner: Arc::new(Inner {
                reader: None,
                device: String::new(),
                no_gpu_reason: reason.into(),
                ring: Mutex::new(Ring {
                    samples: VecDeque::new(),
                    next_seq: 0,
                    capacity: 2,
                    last_error: None,
                }),
                period: DEFAULT_PERIOD,
                started: Instant::now(),
                stop: AtomicBool::new(true),
            }),
        }
    }

    pub fn has_gpu(&self) -> bool {
        self.inner.reader.is_some()
    }

    pub fn period(&self) -> Duration {
        self.inner.period
    }

    pub fn device(&self) -> &str {
        &self.inner.device
    }

    pub fn status(&self) -> SamplerStatus {
        if self.inner.reader.is_none() {
            return SamplerStatus::NoGpu {
                reason: self.inner.no_gpu_reason.clone(),
            };
        }
        let ring = self.inner.ring.locked();
        SamplerStatus::Sampling {
            device: self.inner.device.clone(),
            period_ms: self.inner.period.as_millis() as u64,
            samples: ring.samples.len(),
            last_error: ring.last_error.clone(),
        }
    }

    fn now_ms(&self) -> u64 {
        self.inner.started.elapsed().as_millis() as u64
    }

    /// How long ago a reading was taken.
    pub fn age(&self, sample: &MemorySample) -> Duration {
        Duration::from_millis(self.now_ms().saturating_sub(sample.at_ms))
    }

    /// Takes a reading now (also what the background thread does each period).
    pub fn sample_now(&self) -> Option<MemorySample> {
        let reader = self.inner.reader.as_ref()?;
        let reading = reader.locked().read();
        let at_ms = self.now_ms();
        let mut ring = self.inner.ring.locked();
        match reading {
            Ok(memory) => {
                let sample = MemorySample {
                    seq: ring.next_seq,
                    at_ms,
                    memory,
                };
                ring.next_seq += 1;
                if ring.samples.len() == ring.capacity {
                    ring.samples.pop_front();
                }
                ring.samples.push_back(sample.clone());
                ring.last_error = None;
                Some(sample)
            }
            Err(e) => {
                tracing::warn!(error = %e, "GPU memory reading failed");
                ring.last_error = Some(e.to_string());
                None
            }
        }
    }

    /// Free memory (MiB) from the latest reading, unless it is older than five periods (the
    /// sampler has stalled or its reads fail): `None` then, and with no GPU.
    pub fn fresh_free_mib(&self) -> Option<f64> {
        let latest = self.latest()?;
        (self.age(&latest) <= self.inner.period * 5).then(|| latest.free_mib())
    }

    pub fn latest(&self) -> Option<MemorySample> {
        self.inner.ring.locked().samples.back().cloned()
    }

    fn samples_where(&self, keep: impl Fn(&MemorySample) -> bool) -> Vec<MemorySample> {
        let ring = self.inner.ring.locked();
        ring.samples.iter().filter(|s| keep(s)).cloned().collect()
    }

    /// The lowest memory in use over the readings kept (ten minutes at the defaults): what
    /// stays allocated between bursts of work. A floor that keeps rising is a leak.
    pub fn floor_bytes(&self) -> Option<u64> {
        let ring = self.inner.ring.locked();
        ring.samples.iter().map(|s| s.memory.used_bytes).min()
    }

    /// Readings at or after `at_ms`, oldest first.
    pub fn samples_since(&self, at_ms: u64) -> Vec<MemorySample> {
        self.samples_where(|s| s.at_ms >= at_ms)
    }

    /// Readings from sequence number `seq` on, oldest first.
    pub fn samples_from(&self, seq: u64) -> Vec<MemorySample> {
        self.samples_where(|s| s.seq >= seq)
    }

    /// Starts a window with a fresh reading, which is its baseline.
    pub fn mark(&self) -> WindowStart {
        match self.sample_now() {
            Some(s) => WindowStart {
                seq: s.seq,
                at_ms: s.at_ms,
            },
            None => WindowStart {
                seq: self.inner.ring.locked().next_seq,
                at_ms: self.now_ms(),
            },
        }
    }

    /// Baseline, peak, delta and floor since `start` (a final reading is taken first).
    /// `None` without a GPU or without readings.
    pub fn window(&self, start: WindowStart) -> Option<MemoryWindow> {
        self.sample_now();
        let samples = self.samples_from(start.seq);
        let first = samples.first()?;
        let baseline = first.used_mib();
        let peak = samples
            .iter()
            .map(MemorySample::used_mib)
            .fold(baseline, f64::max);
        let floor = samples
            .iter()
            .skip(1)
            .map(MemorySample::used_mib)
            .fold(f64::INFINITY, f64::min);
        let last = samples.last().expect("non-empty");
        Some(MemoryWindow {
            device: self.inner.device.clone(),
            baseline_mib: baseline,
            peak_mib: peak,
            delta_mib: peak - baseline,
            floor_mib: if floor.is_finite() { floor } else { baseline },
            total_mib: last.total_mib(),
            samples: samples.len(),
            duration_ms: last.at_ms - first.at_ms,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Replays used-memory values (MiB) of a 24 GiB card; then repeats the last one.
    pub(crate) struct Trace {
        pub used_mib: Vec<u64>,
        pub next: usize,
    }

    impl MemoryReader for Trace {
        fn device(&self) -> String {
            "trace".into()
        }
        fn read(&mut self) -> Result<DeviceMemory, ReadError> {
            let i = self.next.min(self.used_mib.len() - 1);
            self.next += 1;
            let total = 24 * 1024 * 1024 * 1024u64;
            let used = self.used_mib[i] * 1024 * 1024;
            Ok(DeviceMemory {
                total_bytes: total,
                used_bytes: used,
                free_bytes: total - used,
                processes: vec![ProcessMemory {
                    pid: 7,
                    used_bytes: Some(used / 2),
                }],
            })
        }
    }

    fn manual(used: &[u64], capacity: usize) -> GpuSampler {
        let trace = Trace {
            used_mib: used.to_vec(),
            next: 0,
        };
        GpuSampler::with_reader(trace, DEFAULT_PERIOD, capacity, false)
    }

    #[test]
    fn a_window_has_baseline_peak_delta_and_floor() {
        // Construction reads 1000 (before the window); mark reads 1200 (baseline).
        let sampler = manual(&[1000, 1200, 5000, 9000, 3000, 1500], 100);
        let start = sampler.mark();
        for _ in 0..3 {
            sampler.sample_now();
        }
        let w = sampler.window(start).unwrap();
        assert_eq!(w.baseline_mib, 1200.0);
        assert_eq!(w.peak_mib, 9000.0);
        assert_eq!(w.delta_mib, 7800.0);
        assert_eq!(w.floor_mib, 1500.0);
        assert_eq!(
            sampler.floor_bytes(),
            Some(1000 * 1024 * 1024),
            "over every reading kept, the one before the window included"
        );
        assert_eq!(w.samples, 5);
        assert_eq!(w.total_mib, 24576.0);
        assert_eq!(
            sampler.latest().unwrap().process_bytes(7),
            Some(750 * 1024 * 1024)
        );
    }

    #[test]
    fn free_memory_is_read_from_the_latest_sample() {
        // 24 GiB card: 23000 MiB used leaves 1576 MiB free, 20000 leaves 4576.
        let sampler = GpuSampler::with_reader(
            Trace {
                used_mib: vec![23000, 20000],
                next: 0,
            },
            Duration::from_secs(60),
            4,
            false,
        );
        assert_eq!(sampler.fresh_free_mib(), Some(1576.0), "the first reading");
        sampler.sample_now();
        assert_eq!(sampler.fresh_free_mib(), Some(4576.0));
        assert_eq!(GpuSampler::no_gpu("none").fresh_free_mib(), None);
    }

    #[test]
    fn the_ring_is_bounded_and_keeps_the_newest() {
        let values: Vec<u64> = (1..=50).collect();
        let sampler = manual(&values, 10);
        for _ in 0..49 {
            sampler.sample_now();
        }
        let all = sampler.samples_since(0);
        assert_eq!(all.len(), 10);
        assert_eq!(all.last().unwrap().used_mib(), 50.0);
        assert_eq!(all.first().unwrap().used_mib(), 41.0);
    }

    #[test]
    fn without_a_gpu_the_sampler_says_why_and_reads_nothing() {
        let sampler = GpuSampler::no_gpu("no driver");
        assert!(!sampler.has_gpu());
        assert_eq!(sampler.sample_now(), None);
        assert_eq!(sampler.window(sampler.mark()), None);
        assert_eq!(
            sampler.status(),
            SamplerStatus::NoGpu {
                reason: "no driver".into()
            }
        );
    }

    #[test]
    fn a_process_can_be_sampled_instead_of_a_gpu() {
        let reader = ProcessRssReader::open(std::process::id()).unwrap();
        let sampler = GpuSampler::with_reader(reader, DEFAULT_PERIOD, 8, false);
        let sample = sampler.latest().unwrap();
        assert!(sample.used_mib() > 1.0 && sample.used_mib() < sample.total_mib());
        assert!(ProcessRssReader::open(u32::MAX).is_err());
    }

    #[test]
    fn a_replayed_trace_is_read_in_order_and_refused_when_malformed() {
        let dir = std::env::temp_dir().join(format!("headroom-replay-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.json");
        std::fs::write(&good, r#"{"total_mib": 1000, "used_mib": [100, 900]}"#).unwrap();
        let sampler =
            GpuSampler::with_reader(ReplayReader::open(&good).unwrap(), DEFAULT_PERIOD, 8, false);
        assert!(sampler.device().starts_with("replayed trace"));
        assert_eq!(sampler.latest().unwrap().used_mib(), 100.0);
        assert_eq!(sampler.sample_now().unwrap().free_mib(), 100.0);
        assert_eq!(
            sampler.sample_now().unwrap().used_mib(),
            900.0,
            "holds the last"
        );
        let bad = dir.join("bad.json");
        std::fs::write(&bad, r#"{"total_mib": 10, "used_mib": [11]}"#).unwrap();
        assert!(ReplayReader::open(&bad).is_err());
        assert!(ReplayReader::open(&dir.join("missing.json")).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn starting_on_this_machine_never_panics() {
        let sampler = GpuSampler::start(Duration::from_millis(50), 16);
        match sampler.status() {
            SamplerStatus::NoGpu { reason } => assert!(!reason.is_empty()),
            SamplerStatus::Sampling { samples, .. } => assert!(samples >= 1),
        }
    }
}
