//! Errors from an OpenAI-compatible server, parsed from every shape seen in the wild.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// An error body: `{"error": {message, type, param, code}}` (OpenAI, vLLM, llama.cpp) or the
/// flat `{"object": "error", message, type, param, code}` of older vLLM. `code` may be an
/// integer or a string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ApiError {
    pub message: String,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub param: Option<String>,
    #[serde(default)]
    pub code: Option<ErrorCode>,
    /// llama.cpp reports the prompt size on context overflow.
    #[serde(default)]
    pub n_prompt_tokens: Option<u64>,
    #[serde(default)]
    pub n_ctx: Option<u64>,
}

/// An error code as the server sent it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ErrorCode {
    Number(i64),
    Text(String),
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorCode::Number(n) => write!(f, "{n}"),
            ErrorCode::Text(s) => f.write_str(s),
        }
    }
}

impl ApiError {
    /// Reads an error from a JSON value in either shape; `None` if it is not an error.
    pub fn from_value(value: &Value) -> Option<ApiError> {
        match value.get("error") {
            Some(Value::String(message)) => Some(ApiError {
                message: message.clone(),
                ..ApiError::default()
            }),
            Some(inner @ Value::Object(_)) => serde_json::from_value(inner.clone()).ok(),
            _ if value.get("object").and_then(Value::as_str) == Some("error") => {
                serde_json::from_value(value.clone()).ok()
            }
            _ => None,
        }
    }

    /// Reads an error body; keeps the raw text when it is not JSON.
    pub fn from_body(body: &str) -> ApiError {
        serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| ApiError::from_value(&v))
            .unwrap_or_else(|| ApiError {
                message: truncate(body.trim(), 300),
                ..ApiError::default()
            })
    }

    /// Whether this is the server saying the prompt does not fit the context.
    pub fn is_context_overflow(&self) -> bool {
        let kind = self.kind.as_deref().unwrap_or("");
        let message = self.message.to_ascii_lowercase();
        kind == "exceed_context_size_error"
            || self.param.as_deref() == Some("input_tokens")
            || message.contains("maximum context length")
            || message.contains("context length")
            || message.contains("exceeds the available context")
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// What went wrong talking to the server.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("invalid server URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("cannot reach {url}: {message}")]
    Unreachable { url: String, message: String },
    #[error("the prompt does not fit the model's context: {}", .error.message)]
    ContextOverflow { error: Box<ApiError> },
    #[error("the server is overloaded (HTTP {status}): {}", .error.message)]
    Busy {
        status: u16,
        error: Box<ApiError>,
        retry_after: Option<Duration>,
    },
    #[error("HTTP {status}: {}", .error.message)]
    Status { status: u16, error: Box<ApiError> },
    #[error("error inside the stream: {}", .0.message)]
    InStream(Box<ApiError>),
    #[error("malformed response: {0}")]
    Malformed(String),
    #[error("the connection broke mid-response: {0}")]
    Disconnected(String),
    #[error("the stream ended before the reply was finished")]
    Truncated,
}

impl LlmError {
    /// Classifies a non-2xx answer.
    pub fn from_status(status: u16, body: &str, retry_after: Option<Duration>) -> LlmError {
        let error = Box::new(ApiError::from_body(body));
        match status {
            400 | 413 if error.is_context_overflow() => LlmError::ContextOverflow { error },
            429 | 503 => LlmError::Busy {
                status,
                error,
                retry_after,
            },
            _ => LlmError::Status { status, error },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_error_with_integer_code() {
        let e = ApiError::from_body(
            r#"{"error":{"message":"This model's maximum context length is 4096 tokens. However, your prompt contains 5000 input tokens.","type":"BadRequestError","param":"input_tokens","code":400}}"#,
        );
        assert_eq!(e.code, Some(ErrorCode::Number(400)));
        assert!(e.is_context_overflow());
    }

    #[test]
    fn flat_vllm_error_and_string_code() {
        let e = ApiError::from_body(
            r#"{"object":"error","message":"bad","type":"BadRequestError","param":null,"code":"invalid_value"}"#,
        );
        assert_eq!(e.message, "bad");
        assert_eq!(e.code, Some(ErrorCode::Text("invalid_value".into())));
        assert!(!e.is_context_overflow());
    }

    #[test]
    fn llama_cpp_overflow() {
        let body = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}"#;
        match LlmError::from_status(400, body, None) {
            LlmError::ContextOverflow { error } => {
                assert_eq!(error.n_prompt_tokens, Some(5000));
                assert_eq!(error.n_ctx, Some(4096));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn busy_statuses_and_plain_text_bodies() {
        assert!(matches!(
            LlmError::from_status(503, "The engine is currently busy", None),
            LlmError::Busy { status: 503, .. }
        ));
        match LlmError::from_status(500, "<html>oops</html>", None) {
            LlmError::Status { status, error } => {
                assert_eq!(status, 500);
                assert_eq!(error.message, "<html>oops</html>");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn string_error_field() {
        let e = ApiError::from_body(r#"{"error":"Model not loaded"}"#);
        assert_eq!(e.message, "Model not loaded");
    }
}
