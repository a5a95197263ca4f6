//! Headroom's core: the boundary around the text model. Two lanes with separate bounded queues,
//! the text lane's admission policies, the streaming client for OpenAI-compatible servers, and
//! cleanup through the lane. It knows nothing of speech engines, GPUs, HTTP serving or windows
//! (no candle, ONNX Runtime, cpal, NVML, Tauri or zip in its dependency tree), so the admission
//! tests build in seconds and every front end shares one behaviour.
//!
//! ```no_run
//! use headroom_core::lanes::{TextLane, TextLaneConfig};
//! use headroom_core::llm::{ChatMessage, ChatRequest, LlmClient};
//! use headroom_core::metrics::Metrics;
//! use std::sync::Arc;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = LlmClient::new("http://127.0.0.1:8000/v1", None)?;
//! let lane = TextLane::new(client, TextLaneConfig::default(), Arc::new(Metrics::new()));
//! let request = ChatRequest::new(vec![ChatMessage::new("user", "Tidy: um so yeah it works")]);
//! match lane.submit(request).await {
//!     Ok(stream) => println!("{}", stream.collect_text().await.map_err(|(_, r)| r)?),
//!     // Refused at once, with a reason every front end renders the same way.
//!     Err(rejection) => eprintln!("{}", rejection.message()),
//! }
//! # Ok(()) }
//! ```
//!
//! | module | for |
//! |---|---|
//! | [`admission`] | the text lane's policies: bounded input, yielding to audio, GPU pressure, capacity with a bounded wait queue, deadlines; one typed [`admission::Rejection`] |
//! | [`lanes`] | the audio lane and the text lanes, their occupancy snapshots and events |
//! | [`llm`] | the streaming client for OpenAI-compatible servers (vLLM, llama.cpp) |
//! | [`cleanup`] | transcript cleanup or rewrite through the text lane, with failure policies and rules |
//! | [`metrics`] | the Prometheus registry every lane reports to |
//! | [`signals`] | the rates that say the failure policy is wrong: thresholds, the alerting rules, an in-process evaluator |
//! | [`config`] | settings from defaults, a TOML file and the environment |
//!
//! The layers depend downwards only: `admission` on small traits
//! ([`admission::InteractiveAudio`], [`admission::MemoryGauge`]), `lanes` and `metrics` on
//! `admission`, `cleanup` on `lanes`, `config` on all of them.

pub mod admission;
pub mod cleanup;
pub mod config;
pub mod lanes;
pub mod llm;
pub mod metrics;
pub mod signals;
