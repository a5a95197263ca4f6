//! The server-sent events parser of streaming chat completions
//! (`headroom_core::llm::parse_sse_chunks`, the body side of `LlmClient::chat_stream`).
//!
//! Input: one byte saying how the body is cut into network chunks (0: one chunk, n: chunks of
//! n bytes, so events and UTF-8 sequences get split across reads), then the body.

#![no_main]

#[path = "alloc_guard.rs"]
mod alloc_guard;

use futures::StreamExt;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, body)) = data.split_first() else {
        return;
    };
    let chunks: Vec<Vec<u8>> = match cut {
        0 => vec![body.to_vec()],
        n => body.chunks(usize::from(n)).map(<[u8]>::to_vec).collect(),
    };
    let items: Vec<_> =
        futures::executor::block_on(headroom_core::llm::parse_sse_chunks(chunks).collect());
    for (i, item) in items.iter().enumerate() {
        match item {
            Ok(chunk) => {
                let _ = format!("{chunk:?}");
            }
            Err(e) => {
                let _ = e.to_string();
                // An error ends the stream.
                assert_eq!(i + 1, items.len(), "the stream went on after {e}");
            }
        }
    }
});
