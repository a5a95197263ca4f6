//! `headroom serve` over HTTP against a fault-injecting upstream: OpenAI-shaped answers,
//! immediate 429s with Retry-After, 400 without touching upstream, 502 when upstream is down.

use futures::StreamExt;
use headroom_base::consent::RemoteConsent;
use headroom_core::llm::LlmClient;
use headroom_server::RunningServer;
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use serde_json::{json, Value};

async fn serve(upstream_url: &str) -> RunningServer {
    headroom_tests::serve(&headroom_tests::services_for(upstream_url)).await
}

async fn post_chat(server: &RunningServer, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/chat/completions", server.base_url()))
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn chat(stream: bool, text: &str) -> Value {
    json!({"model": "fake-model", "stream": stream, "messages": [{"role": "user", "content": text}]})
}

#[tokio::test]
async fn non_streaming_answer_is_a_chat_completion() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let server = serve(&up.base_url()).await;
    let resp = post_chat(&server, chat(false, "hi there")).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["content"], "clean: hi there");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["usage"]["total_tokens"], 13);
}

#[tokio::test]
async fn streaming_relays_chunks_and_ends_with_done_without_usage_unless_asked() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let server = serve(&up.base_url()).await;
    let text = post_chat(&server, chat(true, "a b"))
        .await
        .text()
        .await
        .unwrap();
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    assert!(text.contains(r#""content":"clean: ""#));
    assert!(
        !text.contains("usage"),
        "usage only when stream_options asks: {text}"
    );
}

/// The events of an SSE body: each event's `data:` lines joined with `\n`, as the standard
/// says; a line in an event that is not a field fails the test.
fn sse_events(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|event| {
            event
                .lines()
                .map(|line| {
                    line.strip_prefix("data:")
                        .map(|d| d.strip_prefix(' ').unwrap_or(d))
                        .unwrap_or_else(|| panic!("not an SSE field: {line:?} in {body}"))
                })
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}

#[tokio::test]
async fn multi_line_upstream_events_reach_the_client_whole() {
    let up = FakeUpstream::start(
        Behavior::MultiLineData(vec!["first ".into(), "second".into()]),
        4096,
    )
    .await;
    let server = serve(&up.base_url()).await;
    let body = post_chat(&server, chat(true, "x"))
        .await
        .text()
        .await
        .unwrap();
    let events = sse_events(&body);
    let contents: Vec<String> = events
        .iter()
        .filter(|e| *e != "[DONE]")
        .map(|e| serde_json::from_str::<Value>(e).unwrap_or_else(|err| panic!("{err}: {e}")))
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(contents, vec!["first ", "second"], "{body}");
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
}

#[tokio::test]
async fn fields_headroom_does_not_know_reach_the_upstream_untouched() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let server = serve(&up.base_url()).await;
    let extra = json!({
        "top_p": 0.25,
        "seed": 1234567890123u64,
        "stop": ["\n\n", "END"],
        "logit_bias": {"50256": -100},
        "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}],
        "response_format": {"type": "json_object"},
        "user": "tester",
    });
    let mut body = chat(true, "hello");
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let resp = post_chat(&server, body).await;
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap();
    let received = up.bodies().pop().unwrap();
    for (k, v) in extra.as_object().unwrap() {
        assert_eq!(&received[k], v, "{k} changed on the way: {received}");
    }
    assert_eq!(received["messages"][0]["content"], "hello");
}

#[tokio::test]
async fn a_flood_gets_429_at_once_with_retry_after_and_the_reason_code() {
    let up = FakeUpstream::start(Behavior::HangAfter(1), 4096).await;
    let server = serve(&up.base_url()).await;
    let proxy = LlmClient::new(&server.base_url(), None).unwrap();
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut s = proxy
            .stream_chat(&serde_json::from_value(chat(true, "hold")).unwrap())
            .await
            .unwrap();
        while s.next().await.unwrap().unwrap().text().is_none() {}
        holders.push(s);
    }
    let http = reqwest::Client::new();
    let answers = futures::future::join_all((0..8).map(|_| {
        http.post(format!("{}/chat/completions", server.base_url()))
            .json(&chat(true, "flood"))
            .send()
    }))
    .await;
    for resp in answers {
        let resp = resp.unwrap();
        assert_eq!(resp.status(), 429);
        let retry_after: u64 = resp.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(retry_after >= 1);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "text_lane_full");
        assert_eq!(body["error"]["type"], "rate_limit_error");
        assert_eq!(body["error"]["headroom"]["in_flight"], 2);
        assert!(body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2 of 2 running"));
    }
    assert_eq!(up.requests(), 2, "no flood request reached the upstream");
    let metrics = http
        .get(format!("http://{}/metrics", server.addr))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(r#"headroom_rejections_total{lane="text",reason="text_lane_full"} 8"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"headroom_in_flight{lane="text"} 2"#));
    let lanes: Value = http
        .get(format!("{}/headroom/lanes", server.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(lanes["text"]["occupancy"]["in_flight"], 2);
    assert_eq!(
        lanes["text"]["recent_rejections"].as_array().unwrap().len(),
        8
    );
    drop(holders);
    up.until_open_streams(0).await;
}

#[tokio::test]
async fn oversized_input_is_400_and_oversized_bodies_413_without_touching_upstream() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let server = serve(&up.base_url()).await;
    let resp = post_chat(&server, chat(false, &"long words ".repeat(1400))).await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "input_too_long");
    let resp = post_chat(&server, chat(false, &"x".repeat(1100 * 1024))).await;
    assert_eq!(resp.status(), 413);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "input_too_long");
    assert_eq!(up.requests(), 0);
}

#[tokio::test]
async fn bad_json_is_a_clear_400() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let server = serve(&up.base_url()).await;
    let resp = reqwest::Client::new()
        .post(format!("{}/chat/completions", server.base_url()))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_json");
}

#[tokio::test]
async fn upstream_down_is_502_and_health_says_so() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = serve(&format!("http://127.0.0.1:{port}/v1")).await;
    let http = reqwest::Client::new();
    let resp = post_chat(&server, chat(false, "hi")).await;
    assert_eq!(resp.status(), 502);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_unavailable");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("connection refused"));
    let health = http
        .get(format!("http://{}/health", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 503);
}

#[tokio::test]
async fn a_mid_stream_failure_reaches_the_client_as_an_error_event() {
    let up = FakeUpstream::start(
        Behavior::ErrorInStream(
            json!({"error": {"message": "engine died", "type": "x", "param": null, "code": 500}}),
        ),
        4096,
    )
    .await;
    let server = serve(&up.base_url()).await;
    let text = post_chat(&server, chat(true, "hi"))
        .await
        .text()
        .await
        .unwrap();
    assert!(text.contains(r#""code":"upstream_error""#), "{text}");
    assert!(text.contains("engine died"));
    assert!(text.trim_end().ends_with("data: [DONE]"));
}

/// Sends one raw HTTP/1.1 request (headers exactly as given) and returns the status and body.
async fn raw(server: &RunningServer, request: String) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text[9..12].parse().unwrap();
    (status, text)
}

fn chat_post(host: &str, extra_headers: &str, content_type: &str) -> String {
    let body = chat(false, "my private transcript").to_string();
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n{extra_headers}Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn a_web_page_cannot_post_to_serve_and_nothing_reaches_the_upstream() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let server = serve(&up.base_url()).await;
    let host = server.addr.to_string();
    // What a page on evil.example makes the browser send: a "simple" request, no preflight.
    let (status, text) = raw(
        &server,
        chat_post(&host, "Origin: http://evil.example\r\n", "text/plain"),
    )
    .await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("origin_not_allowed"), "{text}");
    assert!(!text
        .to_ascii_lowercase()
        .contains("access-control-allow-origin"));
    // The same body as text/plain without an Origin is still not a client's request.
    let (status, text) = raw(&server, chat_post(&host, "", "text/plain")).await;
    assert_eq!(status, 415, "{text}");
    assert_eq!(up.requests(), 0, "nothing was forwarded upstream");
    // A client's own request passes.
    let (status, _) = raw(&server, chat_post(&host, "", "application/json")).await;
    assert_eq!(status, 200);
    assert_eq!(up.requests(), 1);
}

#[tokio::test]
async fn a_rebinding_page_gets_no_answer_for_its_own_host_name() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let server = serve(&up.base_url()).await;
    let port = server.addr.port();
    for path in ["/v1/models", "/metrics", "/v1/headroom/lanes", "/health"] {
        let (status, text) = raw(
            &server,
            format!(
                "GET {path} HTTP/1.1\r\nHost: attacker.example:{port}\r\nConnection: close\r\n\r\n"
            ),
        )
        .await;
        assert_eq!(status, 421, "{path}: {text}");
        assert!(text.contains("host_not_allowed"), "{text}");
        assert!(
            !text.contains("fake-model") && !text.contains("headroom_"),
            "{text}"
        );
    }
    let (status, _) = raw(
        &server,
        chat_post(&format!("attacker.example:{port}"), "", "application/json"),
    )
    .await;
    assert_eq!(status, 421);
    assert_eq!(up.requests(), 0);
    let (status, _) = raw(
        &server,
        format!("GET /v1/models HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert_eq!(status, 200, "localhost with the port is this server");
}

#[tokio::test]
async fn an_allowed_origin_is_answered_with_cors_headers() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let mut config = headroom_core::config::Config::default();
    config.llm.url = up.base_url();
    config.server.allowed_origins = vec!["http://localhost:5173".into()];
    let server = headroom_tests::serve(&headroom_tests::services(config)).await;
    let host = server.addr.to_string();
    let (status, text) = raw(
        &server,
        chat_post(
            &host,
            "Origin: http://localhost:5173\r\n",
            "application/json",
        ),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("access-control-allow-origin: http://localhost:5173"),
        "{text}"
    );
    let (status, text) = raw(
        &server,
        format!("OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nOrigin: http://localhost:5173\r\nAccess-Control-Request-Method: POST\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert_eq!(status, 204, "{text}");
}

#[tokio::test]
async fn a_client_that_stops_reading_loses_its_slot_and_the_upstream_is_aborted() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let up = FakeUpstream::start(Behavior::Endless("word ".repeat(500)), 4096).await;
    let mut config = headroom_core::config::Config::default();
    config.llm.url = up.base_url();
    config.text_lane.total_secs = 1.0;
    let services = headroom_tests::services(config);
    let server = headroom_tests::serve(&services).await;
    let lane = services.default_text_lane(&RemoteConsent::none()).unwrap();
    // A client that asks for a stream, reads the start of the answer, then reads no more.
    let mut client = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let body = chat(true, "go on forever").to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        server.addr,
        body.len()
    );
    client.write_all(request.as_bytes()).await.unwrap();
    let mut start = [0u8; 64];
    let n = client.read(&mut start).await.unwrap();
    assert!(start[..n].starts_with(b"HTTP/1.1 200"));
    // The server's socket buffers fill and its writes stall; the total deadline still ends
    // the request: the slot is free and the upstream connection closed.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while lane.snapshot().occupancy.in_flight != 0 {
        assert!(
            std::time::Instant::now() < give_up,
            "the slot is still held"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    tokio::time::timeout(std::time::Duration::from_secs(30), up.until_open_streams(0))
        .await
        .expect("the upstream request is aborted");
    drop(client);
}

#[tokio::test]
async fn a_body_that_breaks_is_a_read_error_not_too_large() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let server = serve(&up.base_url()).await;
    let mut client = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    // A chunked body whose second chunk size is not a number.
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{{\"mes\r\nzz\r\n",
        server.addr
    );
    client.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    client.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("body_unreadable"), "{answer}");
    assert_eq!(up.requests(), 0);
}

#[tokio::test]
async fn metrics_carry_the_gpu_memory_in_use_and_its_floor() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    // Work comes and goes above a floor of 1000 MiB.
    std::fs::write(
        &trace,
        r#"{"total_mib": 24576, "used_mib": [1000, 5000, 3000, 1200]}"#,
    )
    .unwrap();
    let mut config = headroom_core::config::Config::default();
    config.llm.url = up.base_url();
    let env = headroom_services::Environment::from_vars(
        |name| match name {
            "HEADROOM_GPU_REPLAY" => Some(trace.clone().into_os_string()),
            other => std::env::var_os(other),
        },
        std::env::temp_dir,
    );
    let services = headroom_services::Services::new(config, env);
    let server = headroom_tests::serve(&services).await;
    let metrics = reqwest::get(format!("http://{}/metrics", server.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let value = |name: &str| -> u64 {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} not in:\n{metrics}"))
    };
    assert_eq!(value("headroom_gpu_memory_floor_bytes"), 1000 << 20);
    let used = value("headroom_gpu_memory_used_bytes") >> 20;
    assert!([1000, 5000, 3000, 1200].contains(&used), "{used} MiB");
}
