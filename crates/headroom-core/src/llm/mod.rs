//! A streaming client for OpenAI-compatible servers (vLLM, llama.cpp's llama-server, ...).

mod client;
mod error;
mod types;

pub use client::{ApiKey, ChatStream, LlmClient, ServerInfo};
pub use error::{ApiError, ErrorCode, LlmError};
pub use types::{ChatChunk, ChatMessage, ChatRequest, ModelCard, Usage};
