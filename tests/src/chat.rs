//! Chat requests and streams as the text-lane tests use them against real servers.

use futures::StreamExt;
use headroom_core::llm::{ChatMessage, ChatRequest, ChatStream, LlmError};

/// A request that keeps a model writing for up to `max_tokens` (a long story), so it holds its
/// server's slot while a test looks.
pub fn long_story(max_tokens: u32) -> ChatRequest {
    let mut r = ChatRequest::new(vec![ChatMessage::new(
        "user",
        "Write a long story about a lighthouse keeper.",
    )]);
    r.max_tokens = Some(max_tokens);
    r
}

/// A short request: a greeting of at most a few tokens.
pub fn hello() -> ChatRequest {
    let mut r = long_story(8);
    r.messages = vec![ChatMessage::new("user", "Say hello.")];
    r
}

/// Reads until the first words arrive, so the request surely holds its server's slot.
pub async fn until_first_words(stream: &mut ChatStream) {
    while stream.next().await.unwrap().unwrap().text().is_none() {}
}

/// The whole text of a stream, or the error that ended it (or that refused it).
pub async fn text_of(stream: Result<ChatStream, LlmError>) -> Result<String, LlmError> {
    let mut stream = stream?;
    let mut text = String::new();
    while let Some(chunk) = stream.next().await {
        text.push_str(chunk?.text().unwrap_or_default());
    }
    Ok(text)
}
