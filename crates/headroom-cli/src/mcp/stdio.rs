//! The protocol's stdio transport, as JSON-RPC 2.0 asks: one message a line, each line bounded
//! before it is held, and every request answered. A line that is not JSON gets a parse error
//! (-32700, id null); a request that is JSON but not a message, or that is over the bound, gets
//! an invalid request error (-32600) carrying its id, read from the line's head for an oversized
//! one. The SDK's own stdio transport drops both silently, so a client waits forever.

use rmcp::model::{ErrorCode, ErrorData, RequestId};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use std::sync::Arc;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex;

/// The longest message read, in bytes: a tool call's arguments are names, paths and at most
/// [`headroom_services::speech::MAX_SPEECH_INPUT_CHARS`] characters of text.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;
/// How much of an oversized line is kept to find its id in.
const HEAD_BYTES: usize = 64 << 10;

/// One line read, or why there is none.
enum Line {
    Whole,
    Oversized,
    End,
}

/// Messages in from `read`, out to `write`, one a line.
pub struct BoundedStdio<R, W> {
    read: R,
    /// The line being read (kept across cancelled reads: `receive` runs inside a `select!`).
    line: Vec<u8>,
    /// The head of a line over the bound, while the rest of it is skipped.
    oversized: Option<Vec<u8>>,
    write: Arc<Mutex<W>>,
    max_bytes: usize,
}

impl<R, W> BoundedStdio<R, W>
where
    R: AsyncBufRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    pub fn new(read: R, write: W) -> Self {
        Self::with_max_bytes(read, write, MAX_MESSAGE_BYTES)
    }

    pub fn with_max_bytes(read: R, write: W, max_bytes: usize) -> Self {
        BoundedStdio {
            read,
            line: Vec::new(),
            oversized: None,
            write: Arc::new(Mutex::new(write)),
            max_bytes,
        }
    }

    /// Reads up to the next newline, holding at most `max_bytes` of it.
    async fn read_line(&mut self) -> std::io::Result<Line> {
        loop {
            let available = self.read.fill_buf().await?;
            if available.is_empty() {
                return Ok(Line::End);
            }
            let newline = available.iter().position(|b| *b == b'\n');
            let take = newline.map_or(available.len(), |at| at + 1);
            let chunk = &available[..take];
            match &mut self.oversized {
                Some(head) => {
                    let room = HEAD_BYTES.saturating_sub(head.len());
                    head.extend_from_slice(&chunk[..room.min(chunk.len())]);
                }
                None if self.line.len() + take > self.max_bytes => {
                    let mut head = std::mem::take(&mut self.line);
                    head.truncate(HEAD_BYTES);
                    let room = HEAD_BYTES.saturating_sub(head.len());
                    head.extend_from_slice(&chunk[..room.min(chunk.len())]);
                    self.oversized = Some(head);
                }
                None => self.line.extend_from_slice(chunk),
            }
            self.read.consume(take);
            if newline.is_some() {
                return Ok(if self.oversized.is_some() {
                    Line::Oversized
                } else {
                    Line::Whole
                });
            }
        }
    }
}

async fn write_line<W: AsyncWrite + Unpin>(
    write: &Mutex<W>,
    message: &impl serde::Serialize,
) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(message)?;
    bytes.push(b'\n');
    let mut write = write.lock().await;
    write.write_all(&bytes).await?;
    write.flush().await
}

/// What a line that is not a message gets, if anything.
#[derive(Debug, PartialEq)]
enum Refusal {
    /// Not JSON at all.
    Parse(String),
    /// JSON, but no message; answered when it has an id (a notification is never answered).
    Invalid { id: Option<RequestId>, why: String },
}

fn error_reply(code: ErrorCode, message: String, id: Option<&RequestId>) -> serde_json::Value {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": ErrorData::new(code, message, None),
    })
}

/// A line read as a message, or its refusal; `Ok(None)` for a line to skip (blank, or a
/// notification the protocol does not know).
fn parse(line: &[u8]) -> Result<Option<RxJsonRpcMessage<RoleServer>>, Refusal> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let value: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| Refusal::Parse(e.to_string()))?;
    let id = value
        .get("id")
        .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
    match serde_json::from_value(value.clone()) {
        Ok(message) => Ok(Some(message)),
        // A notification is never answered, whatever it holds.
        Err(_) if value.get("id").is_none() && value.get("method").is_some() => Ok(None),
        Err(e) => Err(Refusal::Invalid {
            id,
            why: e.to_string(),
        }),
    }
}

/// The id of a request from the head of its line: `"id":` followed by a number or a string,
/// as the first member or after the method (clients write it near the start).
fn id_in_head(head: &[u8]) -> Option<RequestId> {
    let text = String::from_utf8_lossy(head);
    let mut rest = text.as_ref();
    while let Some(at) = rest.find("\"id\"") {
        let after = rest[at + 4..].trim_start();
        rest = &rest[at + 4..];
        let Some(value) = after.strip_prefix(':') else {
            continue;
        };
        let mut values =
            serde_json::Deserializer::from_str(value.trim_start()).into_iter::<serde_json::Value>();
        if let Some(Ok(id)) = values.next() {
            if let Ok(id) = serde_json::from_value::<RequestId>(id) {
                return Some(id);
            }
        }
    }
    None
}

impl<R, W> Transport<RoleServer> for BoundedStdio<R, W>
where
    R: AsyncBufRead + Send + Unpin,
    W: AsyncWrite + Send + Unpin + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        let write = self.write.clone();
        async move { write_line(&write, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let read = match self.read_line().await {
                Ok(read) => read,
                Err(e) => {
                    tracing::error!("mcp: cannot read standard input: {e}");
                    return None;
                }
            };
            let reply = match read {
                Line::End => return None,
                Line::Oversized => {
                    let head = self.oversized.take().unwrap_or_default();
                    let id = id_in_head(&head);
                    tracing::warn!(?id, "mcp: refused a message over {} bytes", self.max_bytes);
                    Some(error_reply(
                        ErrorCode::INVALID_REQUEST,
                        format!(
                            "the message is over {} bytes, the most one may be",
                            self.max_bytes
                        ),
                        id.as_ref(),
                    ))
                }
                Line::Whole => {
                    let line = std::mem::take(&mut self.line);
                    match parse(&line) {
                        Ok(Some(message)) => return Some(message),
                        Ok(None) => None,
                        Err(Refusal::Parse(why)) => {
                            tracing::debug!("mcp: a line that is not JSON: {why}");
                            Some(error_reply(
                                ErrorCode::PARSE_ERROR,
                                format!("parse error: not JSON ({why})"),
                                None,
                            ))
                        }
                        Err(Refusal::Invalid { id, why }) => {
                            tracing::debug!(?id, "mcp: JSON that is no message: {why}");
                            Some(error_reply(
                                ErrorCode::INVALID_REQUEST,
                                format!("invalid request: {why}"),
                                id.as_ref(),
                            ))
                        }
                    }
                }
            };
            if let Some(reply) = reply {
                // Through its own handle: the future holds no reference to the transport.
                let write = self.write.clone();
                if let Err(e) = write_line(&write, &reply).await {
                    tracing::error!("mcp: cannot write to standard output: {e}");
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.write.lock().await.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the lines through the transport; returns what it passed on and what it answered.
    async fn exchange(input: &[u8], max_bytes: usize) -> (usize, Vec<serde_json::Value>) {
        let (ours, mut theirs) = tokio::io::duplex(1 << 20);
        let mut transport =
            BoundedStdio::with_max_bytes(tokio::io::BufReader::new(input), ours, max_bytes);
        let mut passed = 0;
        while transport.receive().await.is_some() {
            passed += 1;
        }
        drop(transport);
        let mut written = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut theirs, &mut written)
            .await
            .unwrap();
        let replies = written
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (passed, replies)
    }

    #[tokio::test]
    async fn a_line_that_is_not_json_gets_a_parse_error() {
        let (passed, replies) = exchange(b"{not json}\n", 1024).await;
        assert_eq!(passed, 0);
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0]["error"]["code"], -32700);
        assert_eq!(replies[0]["id"], serde_json::Value::Null);
        assert_eq!(replies[0]["jsonrpc"], "2.0");
    }

    #[tokio::test]
    async fn an_oversized_request_is_answered_with_its_id_and_the_next_one_still_read() {
        let text = "x".repeat(5000);
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":"call-7","method":"tools/call","params":{{"name":"speak","arguments":{{"text":"{text}"}}}}}}"#
        );
        let ping = r#"{"jsonrpc":"2.0","id":8,"method":"ping"}"#;
        let input = format!("{big}\n{ping}\n");
        let (passed, replies) = exchange(input.as_bytes(), 1024).await;
        assert_eq!(passed, 1, "the ping after it is read");
        assert_eq!(replies.len(), 1);
        assert_eq!(replies[0]["id"], "call-7");
        assert_eq!(replies[0]["error"]["code"], -32600);
        let message = replies[0]["error"]["message"].as_str().unwrap();
        assert!(message.contains("over 1024 bytes"), "{message}");
    }

    #[tokio::test]
    async fn json_that_is_no_request_is_answered_with_its_id_and_notifications_never() {
        let input = concat!(
            r#"{"jsonrpc":"2.0","id":3,"method":7}"#,
            "\n",
            // A notification with params no notification has: never answered.
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":7}"#,
            "\n",
            "\n",
            r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
            "\n",
        );
        let (passed, replies) = exchange(input.as_bytes(), 1024).await;
        assert_eq!(passed, 1);
        assert_eq!(replies.len(), 1, "{replies:?}");
        assert_eq!(replies[0]["id"], 3);
        assert_eq!(replies[0]["error"]["code"], -32600);
    }

    #[test]
    fn an_id_is_found_in_the_head_of_a_line_wherever_it_stands() {
        assert_eq!(
            id_in_head(br#"{"jsonrpc":"2.0","method":"tools/call","id": 12, "params":{"#),
            Some(RequestId::Number(12))
        );
        assert_eq!(
            id_in_head(br#"{"params":{"arguments":{"id":[1]}},"id":"a"#),
            None,
            "a string cut short is no id"
        );
        assert_eq!(
            id_in_head(br#"{"params":{"arguments":{"id":[1]}},"id":"a","x"#),
            Some(RequestId::String("a".into()))
        );
        assert_eq!(id_in_head(b"no id here"), None);
    }
}
