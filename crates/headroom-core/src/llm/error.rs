//! What went wrong talking to an OpenAI-compatible server.

use super::ApiError;
use headroom_base::redact::SecretUrl;
use std::time::Duration;

/// What went wrong talking to the server.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("invalid server URL {url:?}: {reason}")]
    InvalidUrl { url: SecretUrl, reason: String },
    #[error("cannot reach {url}: {message}")]
    Unreachable { url: SecretUrl, message: String },
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
}
