//! Helpers for Headroom's cross-process tests: a fault-injecting OpenAI-compatible server on
//! loopback, and a real llama-server.

pub mod fake_upstream;
pub mod llama;
