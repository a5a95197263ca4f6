//! A streaming client for OpenAI-compatible servers (vLLM, llama.cpp's llama-server, ...).

mod client;
mod error;
mod types;

#[doc(hidden)]
pub use client::parse_sse_chunks;
pub use client::{is_loopback, ChatStream, LlmClient, ServerInfo};
pub use error::LlmError;
pub use headroom_base::openai::{ApiError, ApiKey, ErrorCode};
pub use types::{ChatChunk, ChatMessage, ChatRequest, ModelCard, Usage};
