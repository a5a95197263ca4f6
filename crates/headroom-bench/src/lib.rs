//! Benchmarks are part of the product: the serving harness (TTFT, latency, tokens/s, memory
//! baseline/peak/delta, with and without an audio job, soak with leak detection) and its JSON
//! and HTML reports, the boundary's own benchmarks (rejection latency under flood, proxy
//! overhead, audio latency under text load per yield rule), the GPU memory planner and the
//! leak detector. Every lane it measures comes from the process's `Services`.
//!
//! ```no_run
//! use headroom_bench::harness::{self, HarnessConfig};
//! use headroom_core::config::Config;
//! use headroom_services::{Environment, Services};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let env = Environment::from_vars(|_| None, std::env::temp_dir);
//! let services = Services::new(Config::default(), env);
//! let upstream = services.client("http://127.0.0.1:8000/v1")?;
//! let report = harness::run(&services, &upstream, HarnessConfig::default(), None, "no GPU", &|line| eprintln!("{line}")).await?;
//! println!("{}", harness::render_text(&report));
//! # Ok(()) }
//! ```
//!
//! | module | for |
//! |---|---|
//! | [`harness`] | the serving harness and its reports |
//! | [`boundary`] | flood and proxy overhead (feature `serve`: `headroom serve` in-process) and yield-rule benchmarks of the admission boundary |
//! | `fleet` (feature `fleet`) | one text lane over 1, 2, 3 upstreams (throughput and TTFT at the same rejection rate; routing around a killed upstream), on llama-servers it starts, servers given, or simulated ones |
//! | `suites` (feature `suites`) | the audio suites: interactive work under batch work (isolation, narration), diarization (speakers), streamed speech, the voices and the voice match; each a configuration, a `run` returning its report and a `render_text` |
//! | [`plan`] | how much GPU memory vLLM may take beside the audio backends |
//! | [`leak`] | a rising memory floor over repeated identical work, told apart from retention |

pub mod boundary;
#[cfg(feature = "fleet")]
pub mod fleet;
pub mod harness;
pub mod leak;
pub mod plan;
#[cfg(feature = "suites")]
pub mod suites;
