//! Headroom's core: everything the desktop app, the `headroom` CLI and the tests drive.
//!
//! How the pieces fit:
//! - [`lanes`] run work in two lanes with separate bounded queues: audio jobs never wait behind
//!   text jobs. Each lane publishes its occupancy and rejections as snapshots and events.
//! - [`admission`] is the text lane's policy stack (bounded input, capacity with a bounded wait
//!   queue, deadlines). Every refusal leaves it as one typed [`admission::Rejection`] that the
//!   UI, CLI, HTTP server and metrics all render from the same fields.
//! - [`llm`] is the streaming client for OpenAI-compatible servers (vLLM, llama.cpp).
//! - [`cleanup`] turns a transcript into cleaned or rewritten text through the text lane, with a
//!   per-request failure policy (reject, rule-based fallback, bounded retry).
//! - [`server`] is `headroom serve`: a loopback OpenAI-compatible endpoint over the same lanes.
//! - [`config`] loads settings from defaults, a TOML file and the environment.

pub mod admission;
pub mod asr;
pub mod audio;
pub mod bench;
pub mod cleanup;
pub mod clock;
pub mod config;
pub mod fsutil;
pub mod gpu;
pub mod harness;
pub mod lanes;
pub mod leak;
pub mod llm;
pub mod metrics;
pub mod models;
pub mod plan;
pub mod projects;
pub mod remote_audio;
pub mod server;
mod server_audio;
pub mod speech;
pub mod tts;
pub mod workstation;
