//! The parts of the OpenAI chat-completions shape Headroom reads; everything else passes
//! through untouched.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One chat message. `content` may be a string or a list of content parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ChatMessage {
    pub fn new(role: &str, content: impl Into<String>) -> Self {
        ChatMessage {
            role: role.to_string(),
            content: Value::String(content.into()),
            extra: Map::new(),
        }
    }

    /// The message's text: the string, or the text parts joined.
    pub fn text(&self) -> String {
        match &self.content {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }
}

/// A chat-completions request. Unknown fields (`top_p`, `stop`, `seed`, ...) are kept in
/// `extra` and forwarded; `stream` and `stream_options` are set by the client itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub messages: Vec<ChatMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ChatRequest {
    pub fn new(messages: Vec<ChatMessage>) -> Self {
        ChatRequest {
            model: None,
            messages,
            max_tokens: None,
            temperature: None,
            extra: Map::new(),
        }
    }

    /// Everything in the request that the server turns into prompt tokens, as texts: each
    /// message's text, its other content parts (images, audio, files) and fields (tool calls,
    /// names), and the request's tool and function definitions and response format. The input
    /// bound counts all of it, so a small message cannot carry a huge tool list past it.
    pub fn prompt_texts(&self) -> Vec<String> {
        const PROMPT_FIELDS: [&str; 4] = ["tools", "functions", "tool_choice", "response_format"];
        let mut texts = Vec::with_capacity(self.messages.len() + 1);
        for message in &self.messages {
            texts.push(message.text());
            if let Value::Array(parts) = &message.content {
                texts.extend(
                    parts
                        .iter()
                        .filter(|p| p.get("type").and_then(Value::as_str) != Some("text"))
                        .map(Value::to_string),
                );
            }
            if !message.extra.is_empty() {
                texts.push(Value::Object(message.extra.clone()).to_string());
            }
        }
        texts.extend(
            PROMPT_FIELDS
                .iter()
                .filter_map(|field| self.extra.get(*field))
                .map(Value::to_string),
        );
        texts
    }

    /// The reply budget, whichever of the two OpenAI field names the caller used.
    pub fn reply_budget(&self) -> Option<u32> {
        self.max_tokens.or_else(|| {
            self.extra
                .get("max_completion_tokens")
                .and_then(Value::as_u64)
                .map(|v| v.min(u32::MAX as u64) as u32)
        })
    }
}

/// Token counts from the final usage chunk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
}

/// One streamed chunk: what Headroom reads of it, and the raw JSON to relay unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatChunk {
    pub raw: String,
    pub role: Option<String>,
    pub content: Option<String>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub model: Option<String>,
}

impl ChatChunk {
    /// Parses the JSON of one `data:` line that is not an error.
    pub fn parse(raw: &str, value: &Value) -> Self {
        let choice = value
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first());
        let delta = choice.and_then(|c| c.get("delta"));
        let text = |v: Option<&Value>, key: &str| {
            v.and_then(|v| v.get(key))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        ChatChunk {
            raw: raw.to_string(),
            role: text(delta, "role"),
            content: text(delta, "content"),
            finish_reason: text(choice, "finish_reason"),
            usage: value
                .get("usage")
                .filter(|u| !u.is_null())
                .and_then(|u| serde_json::from_value(u.clone()).ok()),
            model: text(Some(value), "model"),
        }
    }

    /// Non-empty generated text in this chunk.
    pub fn text(&self) -> Option<&str> {
        self.content.as_deref().filter(|c| !c.is_empty())
    }
}

/// A model card from `GET /v1/models`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ModelCard {
    pub id: String,
    /// vLLM's context length for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u32>,
    #[serde(flatten)]
    #[cfg_attr(feature = "typescript", ts(skip))]
    pub extra: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_keeps_unknown_fields() {
        let body = json!({
            "model": "m", "messages": [{"role": "user", "content": "hi"}],
            "top_p": 0.5, "max_completion_tokens": 64
        });
        let req: ChatRequest = serde_json::from_value(body).unwrap();
        assert_eq!(req.reply_budget(), Some(64));
        let back = serde_json::to_value(&req).unwrap();
        assert_eq!(back["top_p"], 0.5);
    }

    #[test]
    fn message_text_from_parts() {
        let m: ChatMessage = serde_json::from_value(json!({
            "role": "user",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
        }))
        .unwrap();
        assert_eq!(m.text(), "a\nb");
    }

    #[test]
    fn prompt_texts_count_tools_content_parts_and_tool_calls() {
        let request: ChatRequest = serde_json::from_value(json!({
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
                ]},
                {"role": "assistant", "content": null,
                 "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
            ],
            "tools": [{"type": "function", "function": {"name": "f", "description": "does f"}}],
            "top_p": 0.5
        }))
        .unwrap();
        let texts = request.prompt_texts();
        let all = texts.join(" ");
        assert!(texts.contains(&"look".to_string()));
        assert!(all.contains("data:image/png;base64,AAAA"));
        assert!(all.contains("tool_calls"));
        assert!(all.contains("does f"));
        assert!(
            !all.contains("0.5"),
            "sampling settings are not prompt: {all}"
        );
    }

    #[test]
    fn chunk_fields() {
        let v = json!({"model": "m", "choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": null}]});
        let c = ChatChunk::parse(&v.to_string(), &v);
        assert_eq!(c.text(), Some("Hi"));
        assert_eq!(c.model.as_deref(), Some("m"));
        let u = json!({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}});
        let c = ChatChunk::parse(&u.to_string(), &u);
        assert_eq!(c.usage.unwrap().completion_tokens, 7);
        assert_eq!(c.text(), None);
    }
}
