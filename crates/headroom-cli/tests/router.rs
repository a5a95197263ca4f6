//! `headroom serve` in front of an existing router: LiteLLM's proxy (PyPI `litellm[proxy]`)
//! routing over two real llama-servers (SmolLM2-135M, 2 slots each). Headroom sees one
//! upstream and is told the capacity behind it (`--upstream-capacity 4`): four streams run at
//! once on both servers, a fifth is refused by Headroom before it reaches the router, and the
//! router's own 429 ("no deployment available") comes back as `upstream_busy` with a
//! Retry-After.

use headroom_core::llm::LlmClient;
use headroom_tests::chat::{hello, text_of};
use headroom_tests::litellm::LiteLlmProxy;
use headroom_tests::llama::{fill_every_slot, LlamaServer};
use headroom_tests::serve_process::{ServeOptions, ServeProcess};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// One small non-streamed chat request naming `model`: its status, Retry-After and body.
async fn ask(
    http: &reqwest::Client,
    base: &str,
    key: Option<&str>,
    model: &str,
) -> (u16, Option<String>, Value) {
    let mut request = http
        .post(format!("{base}/chat/completions"))
        .json(&json!({"model": model, "max_tokens": 4,
            "messages": [{"role": "user", "content": "Say hi."}]}));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let resp = request.send().await.unwrap();
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap().to_string());
    let body = resp.json().await.unwrap_or(Value::Null);
    (status, retry_after, body)
}

/// Asks for the rationed model group until an answer is not 200, at most five times: LiteLLM
/// lets each of its two deployments take one request a minute, so at most two answers in a
/// minute (four across a minute's turn) succeed. Returns how many succeeded first, and the
/// first other answer.
async fn until_refused(
    http: &reqwest::Client,
    base: &str,
    key: Option<&str>,
) -> (usize, (u16, Option<String>, Value)) {
    for answered in 0..5 {
        let answer = ask(http, base, key, LiteLlmProxy::RATIONED).await;
        if answer.0 != 200 {
            return (answered, answer);
        }
    }
    panic!("five requests for {base}'s rationed model were all answered (rpm: 1 on 2 deployments)");
}

#[tokio::test]
async fn headroom_in_front_of_litellm_over_two_llama_servers() {
    let (a, b) = tokio::join!(LlamaServer::start(), LlamaServer::start());
    let started = Instant::now();
    let router = LiteLlmProxy::in_front_of(&[&a, &b]).await;
    eprintln!("LiteLLM's proxy was ready in {:?}", started.elapsed());
    let server = ServeProcess::start_with(
        env!("CARGO_BIN_EXE_headroom").as_ref(),
        &router.base_url(),
        ServeOptions {
            args: &["--upstream-capacity", "4"],
            env: &[("HEADROOM_API_KEY", &router.key)],
            ..ServeOptions::default()
        },
    )
    .await;
    assert!(
        server.stderr().contains("4 in flight over 1 upstream(s)"),
        "the router's capacity is the configured one (it has no /props to say its own):\n{}",
        server.stderr()
    );
    let proxy = LlmClient::new(&server.base, None).unwrap();
    let http = reqwest::Client::new();

    // Four streams at once: the router spreads them, both servers run two, neither queues.
    let holders = fill_every_slot(&proxy, &[&a, &b], 2).await;

    // A fifth is refused by Headroom at once, naming its full lane; it never reaches the router.
    let asked = Instant::now();
    let (status, retry_after, body) = ask(&http, &server.base, None, LiteLlmProxy::MODEL).await;
    let refused_in = asked.elapsed();
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (429, Some("text_lane_full")),
        "{body}"
    );
    assert!(
        retry_after.is_some(),
        "a full lane says when to retry: {body}"
    );
    for llama in [&a, &b] {
        assert_eq!(
            (
                llama.metric("llamacpp:requests_processing").await,
                llama.metric("llamacpp:requests_deferred").await
            ),
            (2.0, 0.0),
            "the fifth request reached a llama-server through the router"
        );
    }

    // Once the streams are gone, a normal request completes through the router.
    drop(holders);
    server.lanes_when_idle(&http, Duration::from_secs(30)).await;
    let reply = text_of(proxy.stream_chat(&hello()).await).await;
    let reply = reply.unwrap_or_else(|e| {
        panic!(
            "a request through the router failed: {e}\nLiteLLM's log:\n{}",
            router.log_text()
        )
    });
    assert!(!reply.trim().is_empty(), "the reply had no text");

    // The router's 429: once both rationed deployments had their request this minute, LiteLLM
    // has none left. What it sends (asked directly): 429, and no Retry-After of its own.
    let (answered, (status, litellm_retry_after, body)) =
        until_refused(&http, &router.base_url(), Some(&router.key)).await;
    assert!(answered >= 2, "each deployment takes one: {answered}");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (429, Some("429")),
        "LiteLLM refuses with 429 when no deployment is left: {body}"
    );
    // Through Headroom: upstream_busy with a Retry-After (the router's, else Headroom's own
    // estimate from the lane's recent requests).
    let (answered, (status, retry_after, body)) = until_refused(&http, &server.base, None).await;
    assert!(answered <= 4, "{answered}");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("upstream_busy")),
        "the router's 429 reads as upstream_busy: {body}"
    );
    let retry_after: u64 = retry_after
        .unwrap_or_else(|| panic!("upstream_busy carries Retry-After: {body}"))
        .parse()
        .unwrap();
    match &litellm_retry_after {
        Some(theirs) => assert_eq!(retry_after.to_string(), *theirs, "the router's Retry-After"),
        None => assert!(
            (1..=60).contains(&retry_after),
            "Headroom's own estimate: {retry_after}"
        ),
    }
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("429")),
        "the message names the router's answer: {body}"
    );
    // A router that is busy is still up: the next request may go through.
    let lanes: Value = http
        .get(format!("{}/headroom/lanes", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let upstream = &lanes["text"]["upstreams"][0];
    assert_eq!(upstream["up"], true, "{upstream}");
    eprintln!(
        "the fifth was refused in {refused_in:?}; LiteLLM's 429 came with Retry-After {:?}, \
         Headroom's upstream_busy with {retry_after} s",
        litellm_retry_after
    );
}
