//! Against a real llama-server (SmolLM2-135M on CPU, 2 slots): the boundary holds with a real
//! model behind it.

use futures::StreamExt;
use headroom_core::admission::RejectReason;
use headroom_core::cleanup::{
    clean_document, CleanupMode, CleanupRequest, FailurePolicy, PieceSource, RetrySettings,
};
use headroom_core::lanes::{TextLane, TextLaneConfig};
use headroom_core::llm::{ChatMessage, ChatRequest, LlmClient};
use headroom_core::metrics::Metrics;
use headroom_tests::chat::long_story;
use headroom_tests::llama::LlamaServer;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

async fn lane_for(llama: &LlamaServer) -> TextLane {
    let lane = TextLane::new(
        LlmClient::new(&llama.base_url(), None).unwrap(),
        TextLaneConfig::default(),
        Arc::new(Metrics::new()),
    );
    lane.discover().await.unwrap();
    lane
}

#[tokio::test]
async fn discovery_reads_the_per_slot_context_and_model() {
    let llama = LlamaServer::start().await;
    let lane = lane_for(&llama).await;
    assert_eq!(lane.context_tokens(), 4096, "8192 split over 2 slots");
    assert_eq!(lane.model().as_deref(), Some("smollm2"));
}

#[tokio::test]
async fn flooded_serve_admits_two_streams_and_rejects_the_rest_while_they_run() {
    let llama = LlamaServer::start().await;
    let server = headroom_tests::serve(&headroom_tests::services_for(&llama.base_url())).await;
    let proxy = LlmClient::new(&server.base_url(), None).unwrap();
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut s = proxy.stream_chat(&long_story(2048)).await.unwrap();
        while s.next().await.unwrap().unwrap().text().is_none() {}
        holders.push(s);
    }
    let http = reqwest::Client::new();
    let flood = futures::future::join_all((0..10).map(|_| {
        http.post(format!("{}/chat/completions", server.base_url()))
            .json(&json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}))
            .send()
    }))
    .await;
    for resp in flood {
        let resp = resp.unwrap();
        assert_eq!(resp.status(), 429);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "text_lane_full");
    }
    // The admitted streams were never disturbed: both still produce text after the flood.
    for s in holders.iter_mut() {
        let mut more = false;
        while !more {
            more = s.next().await.unwrap().unwrap().text().is_some();
        }
    }
    assert_eq!(
        llama.metric("llamacpp:requests_deferred").await,
        0.0,
        "nothing queued upstream"
    );
}

#[tokio::test]
async fn cancelling_frees_the_servers_slot() {
    let llama = LlamaServer::start().await;
    let lane = lane_for(&llama).await;
    let mut a = lane.submit(long_story(2048)).await.unwrap();
    let mut b = lane.submit(long_story(2048)).await.unwrap();
    while a.next().await.unwrap().unwrap().text().is_none() {}
    while b.next().await.unwrap().unwrap().text().is_none() {}
    llama
        .until_metric(
            "llamacpp:requests_processing",
            Duration::from_secs(10),
            |v| v == 2.0,
        )
        .await;
    drop(a);
    drop(b);
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
    // The server aborts both generations once it sees the connections close.
    llama
        .until_metric(
            "llamacpp:requests_processing",
            Duration::from_secs(10),
            |v| v == 0.0,
        )
        .await;
    let mut short = long_story(4);
    short.messages = vec![ChatMessage::new("user", "Say hello.")];
    let text = lane
        .submit(short)
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap();
    assert!(!text.is_empty());
}

#[tokio::test]
async fn overlong_input_is_refused_before_the_server_sees_it() {
    let llama = LlamaServer::start().await;
    let lane = lane_for(&llama).await;
    let before = llama.metric("llamacpp:prompt_tokens_total").await;
    let huge = ChatRequest::new(vec![ChatMessage::new("user", "word ".repeat(3000))]);
    let r = lane.submit(huge).await.err().unwrap();
    assert_eq!(r.reason, RejectReason::InputTooLong);
    assert!(r.detail.unwrap().contains("context of 4096 tokens"));
    assert_eq!(llama.metric("llamacpp:prompt_tokens_total").await, before);
}

#[tokio::test]
async fn a_transcript_is_cleaned_by_the_real_model() {
    let llama = LlamaServer::start().await;
    let lane = lane_for(&llama).await;
    let request = CleanupRequest {
        text: "um so the the meeting is, uh, on tuesday at ten".into(),
        task: CleanupMode::Cleanup.into(),
        length_hint: None,
        policy: FailurePolicy::Reject,
        retry: RetrySettings::default(),
        project: None,
    };
    let out = clean_document(&lane, &request, &CancellationToken::new(), &|_| {})
        .await
        .unwrap();
    assert_eq!(out.pieces.len(), 1);
    assert_eq!(out.pieces[0].source, PieceSource::Llm { attempts: 1 });
    assert!(!out.text().trim().is_empty());
}
