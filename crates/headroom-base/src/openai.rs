//! The OpenAI wire protocol's shared pieces: a bearer key that never prints, and the error body
//! every OpenAI-compatible server (text or speech) answers with, parsed from each shape seen in
//! the wild.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

/// A bearer key for the server. Its `Debug` and `Display` never show the secret, so it cannot
/// leak into logs or error messages.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into();
        (!key.trim().is_empty()).then(|| ApiKey(key.trim().to_string()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

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
            // FastAPI's shape (the Python speech servers): a message, or validation errors.
            _ => match value.get("detail") {
                Some(Value::String(message)) => Some(ApiError {
                    message: message.clone(),
                    ..ApiError::default()
                }),
                Some(Value::Array(problems)) => {
                    let message = problems
                        .iter()
                        .map(|p| {
                            let field = p["loc"]
                                .as_array()
                                .and_then(|l| l.last())
                                .and_then(Value::as_str)
                                .unwrap_or("request");
                            format!("{field}: {}", p["msg"].as_str().unwrap_or("invalid"))
                        })
                        .collect::<Vec<_>>()
                        .join("; ");
                    Some(ApiError {
                        message,
                        ..ApiError::default()
                    })
                }
                _ => None,
            },
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fastapi_details_are_read_as_messages() {
        let e = ApiError::from_body(r#"{"detail": "Language code sent is either unsupported"}"#);
        assert_eq!(e.message, "Language code sent is either unsupported");
        let e = ApiError::from_body(
            r#"{"detail": [{"loc": ["body", "input"], "msg": "Field required", "type": "missing"}]}"#,
        );
        assert_eq!(e.message, "input: Field required");
    }

    #[test]
    fn api_key_never_prints() {
        let key = ApiKey::new("sk-secret-123").unwrap();
        assert!(!format!("{key:?} {key}").contains("secret"));
        assert_eq!(key.expose(), "sk-secret-123");
        assert!(ApiKey::new("  ").is_none());
    }

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
    fn string_error_field() {
        let e = ApiError::from_body(r#"{"error":"Model not loaded"}"#);
        assert_eq!(e.message, "Model not loaded");
    }
}
