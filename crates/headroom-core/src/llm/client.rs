use super::{ApiError, ApiKey, ChatChunk, ChatRequest, LlmError, ModelCard};
use eventsource_stream::Eventsource;
use futures::{Stream, StreamExt};
use headroom_base::redact::{self, SecretUrl};
use serde_json::Value;
use std::fmt;
use std::pin::Pin;
use std::time::Duration;
use url::Url;

/// A stream of parsed chunks. Dropping it closes the connection, which makes vLLM and
/// llama-server abort the request and free its slot.
pub type ChatStream = Pin<Box<dyn Stream<Item = Result<ChatChunk, LlmError>> + Send>>;

/// What `headroom doctor` and context discovery learn from a server.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct ServerInfo {
    pub models: Vec<ModelCard>,
    /// The context length per request, when the server says: vLLM's `max_model_len`, or
    /// llama.cpp's per-slot `n_ctx` from `/props`.
    pub context_tokens: Option<u32>,
    /// How many requests the server runs at once, when it says (llama.cpp's `--parallel`).
    pub slots: Option<usize>,
}

/// When the server says to try again: `Retry-After` in seconds, else the header LiteLLM's
/// proxy sends with its 429s (`llm_provider-retry-after`).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    ["retry-after", "llm_provider-retry-after"]
        .iter()
        .find_map(|name| {
            headers
                .get(*name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// Sums the waiting-request gauges of a Prometheus text exposition (one per model for vLLM).
fn parse_waiting_requests(metrics: &str) -> Option<f64> {
    let values: Vec<f64> = metrics
        .lines()
        .filter(|l| {
            l.starts_with("vllm:num_requests_waiting")
                || l.starts_with("llamacpp:requests_deferred")
        })
        .filter_map(|l| l.split_whitespace().last()?.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// Whether `url` names this machine (localhost or a loopback address): text sent there does
/// not leave it.
pub fn is_loopback(url: &Url) -> bool {
    headroom_base::consent::Destination::of(url.as_str()).on_this_machine
}

/// An OpenAI-compatible server at a base URL such as `http://127.0.0.1:8000/v1`.
#[derive(Clone)]
pub struct LlmClient {
    base: Url,
    http: reqwest::Client,
    api_key: Option<ApiKey>,
}

impl fmt::Debug for LlmClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LlmClient")
            .field("base", &self.base.as_str())
            .field("api_key", &self.api_key)
            .finish()
    }
}

impl LlmClient {
    pub fn new(base_url: &str, api_key: Option<ApiKey>) -> Result<Self, LlmError> {
        let invalid = |reason: String| LlmError::InvalidUrl {
            url: base_url.trim().into(),
            reason,
        };
        let mut base = Url::parse(base_url.trim()).map_err(|e| invalid(e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(invalid("the scheme must be http or https".into()));
        }
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        // No redirect to another origin: the consent given for this server is not consent for
        // wherever it points.
        let http = headroom_base::http::client_builder()
            .connect_timeout(Duration::from_secs(5))
            // No idle connection reuse: servers close idle keep-alive connections on their own
            // schedule (llama-server after 5 s), and a POST sent on a connection the server is
            // closing fails with no way to know it was never processed. A fresh loopback
            // connection costs well under a millisecond.
            .pool_max_idle_per_host(0)
            // Streams can legitimately idle while the server prefills; deadlines live in the
            // text lane, where they can say which one passed.
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        Ok(LlmClient {
            base,
            http,
            api_key,
        })
    }

    pub fn base_url(&self) -> &Url {
        &self.base
    }

    /// The base URL as it may be shown: without user information or secret parameters.
    pub fn shown_url(&self) -> String {
        redact::urls(self.base.as_str().trim_end_matches('/'))
    }

    fn endpoint(&self, path: &str) -> Url {
        self.base
            .join(path)
            .expect("relative path joins onto the base")
    }

    /// The server root (the base without a trailing `v1/`), where `/health` and `/props` live.
    fn root_endpoint(&self, path: &str) -> Url {
        let mut root = self.base.clone();
        if let Some(stripped) = root.path().strip_suffix("v1/").map(str::to_string) {
            root.set_path(&stripped);
        }
        root.join(path).expect("relative path joins onto the root")
    }

    fn authorized(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.api_key {
            Some(key) => req.bearer_auth(key.expose()),
            None => req,
        }
    }

    /// The base URL, kept whole for the request and shown redacted.
    fn secret_url(&self) -> SecretUrl {
        self.base.as_str().trim_end_matches('/').into()
    }

    fn unreachable(&self, err: reqwest::Error) -> LlmError {
        LlmError::Unreachable {
            url: self.secret_url(),
            message: describe_transport_error(&err),
        }
    }

    async fn get_json(&self, url: Url) -> Result<Value, LlmError> {
        let resp = self
            .authorized(self.http.get(url))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let status = resp.status().as_u16();
        let body = resp.text().await.map_err(|e| self.unreachable(e))?;
        if !(200..300).contains(&status) {
            return Err(LlmError::from_status(status, &body, None));
        }
        serde_json::from_str(&body).map_err(|e| LlmError::Malformed(e.to_string()))
    }

    /// `GET /v1/models`.
    pub async fn models(&self) -> Result<Vec<ModelCard>, LlmError> {
        let value = self.get_json(self.endpoint("models")).await?;
        let data = value
            .get("data")
            .cloned()
            .ok_or_else(|| LlmError::Malformed("no `data` list in /v1/models".into()))?;
        serde_json::from_value(data).map_err(|e| LlmError::Malformed(e.to_string()))
    }

    /// `GET /health` at the server root: Ok when the engine is alive.
    pub async fn health(&self) -> Result<(), LlmError> {
        let resp = self
            .authorized(self.http.get(self.root_endpoint("health")))
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(());
        }
        let body = error_body(resp).await;
        Err(LlmError::from_status(status, &body, None))
    }

    /// Requests the server itself holds waiting, from its Prometheus `/metrics`
    /// (`vllm:num_requests_waiting`, or llama.cpp's `llamacpp:requests_deferred`); `None`
    /// when the server exports neither.
    pub async fn waiting_requests(&self) -> Option<f64> {
        let resp = self
            .authorized(self.http.get(self.root_endpoint("metrics")))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        if !resp.status().is_success() {
            return None;
        }
        parse_waiting_requests(&resp.text().await.ok()?)
    }

    /// Models and context length, from `/v1/models` and (for llama.cpp) `/props`.
    pub async fn server_info(&self) -> Result<ServerInfo, LlmError> {
        let models = self.models().await?;
        let mut context_tokens = models.iter().find_map(|m| m.max_model_len);
        let mut slots = None;
        // llama.cpp says how many requests it runs at once (`--parallel`) in `/props`, and
        // splits its context among them: `n_ctx` there is the per-slot size. vLLM has no such
        // endpoint (its `--max-num-seqs` is not exported), so its capacity is configured.
        if let Ok(props) = self.get_json(self.root_endpoint("props")).await {
            if context_tokens.is_none() {
                context_tokens = props
                    .pointer("/default_generation_settings/n_ctx")
                    .and_then(Value::as_u64)
                    .map(|n| n.min(u32::MAX as u64) as u32);
            }
            slots = props
                .get("total_slots")
                .and_then(Value::as_u64)
                .filter(|n| *n > 0)
                .map(|n| n.min(usize::MAX as u64) as usize);
        }
        Ok(ServerInfo {
            models,
            context_tokens,
            slots,
        })
    }

    /// Sends a streamed chat completion and returns once the server answers with its headers.
    /// Errors before the stream (400 context overflow, 429, 503, connection refused) come back
    /// here; errors inside the stream come as items.
    pub async fn stream_chat(&self, request: &ChatRequest) -> Result<ChatStream, LlmError> {
        let mut body =
            serde_json::to_value(request).map_err(|e| LlmError::Malformed(e.to_string()))?;
        body["stream"] = Value::Bool(true);
        body["stream_options"] = serde_json::json!({"include_usage": true});
        let resp = self
            .authorized(self.http.post(self.endpoint("chat/completions")))
            .json(&body)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let status = resp.status().as_u16();
        if let Some(redirect) = headroom_base::http::unfollowed_redirect(&resp) {
            return Err(LlmError::Unreachable {
                url: self.secret_url(),
                message: redirect.to_string(),
            });
        }
        if !(200..300).contains(&status) {
            let retry_after = retry_after(resp.headers());
            let body = error_body(resp).await;
            return Err(LlmError::from_status(status, &body, retry_after));
        }
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        if !content_type
            .to_ascii_lowercase()
            .starts_with("text/event-stream")
        {
            return Err(LlmError::Malformed(format!(
                "the server answered {} instead of an event stream",
                if content_type.is_empty() {
                    "with no content type".to_string()
                } else {
                    format!("{content_type:?}")
                }
            )));
        }
        Ok(Box::pin(parse_sse(resp)))
    }
}

/// The most of an error answer's body kept: enough for any server's message.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// An error answer's body, read up to [`MAX_ERROR_BODY_BYTES`] (a server that sends more is not
/// read to the end).
async fn error_body(resp: reqwest::Response) -> String {
    let mut body = Vec::new();
    let mut chunks = resp.bytes_stream();
    while let Some(Ok(chunk)) = chunks.next().await {
        let room = MAX_ERROR_BODY_BYTES - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() == MAX_ERROR_BODY_BYTES {
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// Turns an SSE body into chunks: stops at `[DONE]`, turns `{"error": ...}` chunks into
/// errors, and reports a stream that ends without `[DONE]` or a finish reason.
fn parse_sse(resp: reqwest::Response) -> impl Stream<Item = Result<ChatChunk, LlmError>> + Send {
    parse_event_stream(resp.bytes_stream(), |t| {
        LlmError::Disconnected(describe_transport_error(&t))
    })
}

/// The fuzzing entry point: [`parse_sse`] over an in-memory body that arrives in `chunks`.
#[doc(hidden)]
pub fn parse_sse_chunks(
    chunks: Vec<Vec<u8>>,
) -> impl Stream<Item = Result<ChatChunk, LlmError>> + Send {
    let body = futures::stream::iter(chunks.into_iter().map(Ok::<_, std::convert::Infallible>));
    parse_event_stream(body, |never| match never {})
}

/// The body with the one leading byte order mark SSE allows removed, after a comment line.
///
/// eventsource-stream 0.2.3 panics on a body whose first text starts with U+FEFF (it slices
/// the 3-byte character at byte 1). The comment line makes its first text start with `:`, so
/// it never looks; the leading BOM it would have skipped is skipped here instead, even when it
/// arrives split across reads. A second BOM is text, as the format says.
fn without_leading_bom<S, B, E>(body: S) -> impl Stream<Item = Result<Vec<u8>, E>> + Send + Unpin
where
    S: Stream<Item = Result<B, E>> + Send + Unpin,
    B: AsRef<[u8]>,
    E: Send,
{
    const BOM: &[u8] = "\u{feff}".as_bytes();
    // Bytes of a leading BOM skipped so far; `None` once past the start.
    let mut skipped = Some(0);
    let body = body.map(move |chunk| {
        chunk.map(|chunk| {
            let mut bytes = chunk.as_ref();
            let mut out = Vec::with_capacity(bytes.len());
            while let Some(n) = skipped {
                match bytes.first() {
                    None => break,
                    Some(&b) if n < BOM.len() && b == BOM[n] => {
                        skipped = Some(n + 1);
                        bytes = &bytes[1..];
                    }
                    Some(_) => {
                        // Past a whole BOM; or what was held back was no BOM, and is text.
                        if n < BOM.len() {
                            out.extend_from_slice(&BOM[..n]);
                        }
                        skipped = None;
                    }
                }
            }
            out.extend_from_slice(bytes);
            out
        })
    });
    futures::stream::iter([Ok(b":\n".to_vec())]).chain(body)
}

/// The most an event (its `data:` lines) may hold. A chat chunk is a few hundred bytes; a
/// server that sends more in one event is broken or hostile, and buffering it would cost
/// memory without bound.
const MAX_EVENT_BYTES: usize = 1 << 20;

/// What can go wrong reading the body: the transport's own error, or an event over the bound.
enum BodyError<E> {
    Transport(E),
    EventTooLarge,
}

impl<E: fmt::Display> fmt::Display for BodyError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::Transport(e) => e.fmt(f),
            BodyError::EventTooLarge => write!(f, "an event over {MAX_EVENT_BYTES} bytes"),
        }
    }
}

/// Fails the body once an event grows past [`MAX_EVENT_BYTES`] before its blank line, so the
/// event parser never buffers more.
fn bounded_events<S, E>(body: S) -> impl Stream<Item = Result<Vec<u8>, BodyError<E>>> + Send + Unpin
where
    S: Stream<Item = Result<Vec<u8>, E>> + Send + Unpin,
    E: Send,
{
    let mut in_event = 0usize;
    let mut in_line = 0usize;
    let mut failed = false;
    body.map(move |chunk| {
        let chunk = chunk.map_err(BodyError::Transport)?;
        for &b in &chunk {
            match b {
                b'\n' if in_line == 0 => in_event = 0,
                b'\n' => in_line = 0,
                b'\r' => {}
                _ => {
                    in_line += 1;
                    in_event += 1;
                }
            }
            if in_event > MAX_EVENT_BYTES {
                failed = true;
            }
        }
        if failed {
            return Err(BodyError::EventTooLarge);
        }
        Ok(chunk)
    })
}

/// [`parse_sse`] over any byte stream; `transport` turns the stream's own errors into ours.
fn parse_event_stream<S, B, E>(
    body: S,
    transport: fn(E) -> LlmError,
) -> impl Stream<Item = Result<ChatChunk, LlmError>> + Send
where
    S: Stream<Item = Result<B, E>> + Send + Unpin + 'static,
    B: AsRef<[u8]> + Send + 'static,
    E: fmt::Display + Send + 'static,
{
    struct State<S> {
        events: S,
        finished: bool,
        done: bool,
    }
    let events = bounded_events(without_leading_bom(body)).eventsource();
    futures::stream::unfold(
        State {
            events,
            finished: false,
            done: false,
        },
        move |mut st| async move {
            if st.done {
                return None;
            }
            loop {
                match st.events.next().await {
                    None => {
                        st.done = true;
                        return if st.finished {
                            None
                        } else {
                            Some((Err(LlmError::Truncated), st))
                        };
                    }
                    Some(Err(e)) => {
                        st.done = true;
                        let err = match e {
                            eventsource_stream::EventStreamError::Transport(
                                BodyError::Transport(t),
                            ) => transport(t),
                            eventsource_stream::EventStreamError::Transport(
                                BodyError::EventTooLarge,
                            ) => LlmError::Malformed(format!(
                                "the server sent an event over {} MiB",
                                MAX_EVENT_BYTES >> 20
                            )),
                            other => LlmError::Malformed(other.to_string()),
                        };
                        return Some((Err(err), st));
                    }
                    Some(Ok(event)) => {
                        let data = event.data.trim();
                        if data.is_empty() {
                            continue;
                        }
                        if data == "[DONE]" {
                            return None;
                        }
                        let value: Value = match serde_json::from_str(data) {
                            Ok(v) => v,
                            Err(e) => {
                                st.done = true;
                                return Some((
                                    Err(LlmError::Malformed(format!(
                                        "a stream chunk is not JSON ({e})"
                                    ))),
                                    st,
                                ));
                            }
                        };
                        if let Some(error) = ApiError::from_value(&value) {
                            st.done = true;
                            return Some((Err(LlmError::InStream(Box::new(error))), st));
                        }
                        let chunk = ChatChunk::parse(data, &value);
                        if chunk.finish_reason.is_some() {
                            st.finished = true;
                        }
                        return Some((Ok(chunk), st));
                    }
                }
            }
        },
    )
}

/// The words of a transport error a person can act on. reqwest's own Display is about the
/// request ("error sending request for url ..."); the cause at the bottom of the chain says
/// what happened.
/// What went wrong on the wire, in words, with any URL in it redacted.
fn describe_transport_error(err: &reqwest::Error) -> String {
    headroom_base::http::describe(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_event_over_the_bound_fails_the_stream_and_many_small_ones_do_not() {
        let huge = vec![vec![b'd'; 600 * 1024], vec![b'a'; 600 * 1024]];
        let items: Vec<_> = parse_sse_chunks(huge).collect().await;
        assert!(
            matches!(&items[..], [Err(LlmError::Malformed(m))] if m.contains("over 1 MiB")),
            "{items:?}"
        );
        // Two megabytes in small events is a long reply, not a problem.
        let chunk = br#"data: {"choices":[{"delta":{"content":"word "}}]}"#.to_vec();
        let mut body: Vec<Vec<u8>> = (0..40_000)
            .map(|_| [chunk.as_slice(), b"\r\n\r\n"].concat())
            .collect();
        body.push(b"data: [DONE]\n\n".to_vec());
        let items: Vec<_> = parse_sse_chunks(body).collect().await;
        assert_eq!(items.len(), 40_000);
        assert!(items.iter().all(|i| i.is_ok()));
    }

    #[tokio::test]
    async fn a_byte_order_mark_at_the_start_is_skipped_not_a_panic() {
        // Found by fuzzing (fuzz/corpus/sse/crash-bom): eventsource-stream panicked on it.
        let event = b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n";
        let bom = "\u{feff}".as_bytes();
        for cut in [0, 1, 2, 3, 4] {
            let body = [bom, event.as_slice()].concat();
            let chunks = match cut {
                0 => vec![body],
                n => body.chunks(n).map(<[u8]>::to_vec).collect(),
            };
            let items: Vec<_> = parse_sse_chunks(chunks).collect().await;
            assert!(
                matches!(&items[..], [Ok(c)] if c.text() == Some("hi")),
                "cut {cut}: {items:?}"
            );
        }
        // A second BOM is text: the line it starts is an unknown field, ignored; no panic.
        let items: Vec<_> = parse_sse_chunks(vec![[bom, bom, event.as_slice()].concat()])
            .collect()
            .await;
        assert!(items.is_empty(), "{items:?}");
        let items: Vec<_> = parse_sse_chunks(vec![b"\xef\xbb".to_vec(), b"data: x\n\n".to_vec()])
            .collect()
            .await;
        assert!(matches!(&items[..], [Err(_)]), "{items:?}");
    }

    #[test]
    fn waiting_requests_come_from_either_servers_gauge() {
        let vllm = "# HELP x\nvllm:num_requests_waiting{model_name=\"a\"} 3.0\nvllm:num_requests_running{model_name=\"a\"} 2.0\n";
        assert_eq!(parse_waiting_requests(vllm), Some(3.0));
        assert_eq!(
            parse_waiting_requests("llamacpp:requests_deferred 1\n"),
            Some(1.0)
        );
        assert_eq!(parse_waiting_requests("other_metric 5\n"), None);
    }

    #[test]
    fn api_key_never_prints_through_the_client() {
        let key = ApiKey::new("sk-secret-123").unwrap();
        let client = LlmClient::new("http://127.0.0.1:9/v1", Some(key)).unwrap();
        assert!(!format!("{client:?}").contains("secret"));
    }

    #[test]
    fn endpoints_resolve_under_v1_and_root() {
        let c = LlmClient::new("http://127.0.0.1:8000/v1", None).unwrap();
        assert_eq!(
            c.endpoint("chat/completions").as_str(),
            "http://127.0.0.1:8000/v1/chat/completions"
        );
        assert_eq!(
            c.root_endpoint("health").as_str(),
            "http://127.0.0.1:8000/health"
        );
        let c = LlmClient::new("http://127.0.0.1:8000/proxy/v1/", None).unwrap();
        assert_eq!(
            c.root_endpoint("props").as_str(),
            "http://127.0.0.1:8000/proxy/props"
        );
    }

    #[test]
    fn rejects_bad_urls() {
        assert!(matches!(
            LlmClient::new("ftp://x/v1", None),
            Err(LlmError::InvalidUrl { .. })
        ));
        assert!(LlmClient::new("not a url", None).is_err());
    }

    #[test]
    fn retry_after_is_read_from_the_standard_header_then_litellms() {
        use reqwest::header::{HeaderMap, HeaderValue};
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("llm_provider-retry-after", HeaderValue::from_static("60"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(60)));
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after", HeaderValue::from_static("-1"));
        assert_eq!(retry_after(&h), None, "a nonsense value is no hint");
    }
}
