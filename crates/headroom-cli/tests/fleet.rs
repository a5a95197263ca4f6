//! `headroom serve` over a fleet of real llama-servers (SmolLM2-135M, 2 slots each), the way a
//! studio runs it: every slot of every upstream used, nothing queued beyond them, and an
//! upstream lost mid-run ends only its own streams while new work goes to the others.

use headroom_core::llm::{LlmClient, LlmError};
use headroom_tests::chat::{hello, text_of};
use headroom_tests::llama::{fill_every_slot, LlamaServer};
use headroom_tests::serve_process::ServeProcess;
use serde_json::{json, Value};
use std::time::Instant;

async fn text_lane(http: &reqwest::Client, server: &ServeProcess) -> Value {
    let lanes: Value = http
        .get(format!("{}/headroom/lanes", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    lanes["text"].clone()
}

#[tokio::test]
async fn four_streams_run_on_two_upstreams_a_fifth_is_refused_and_a_lost_upstream_leaves_the_other()
{
    let (a, b) = tokio::join!(LlamaServer::start(), LlamaServer::start());
    let server = ServeProcess::start(
        env!("CARGO_BIN_EXE_headroom").as_ref(),
        &a.base_url(),
        &["--upstream", &b.base_url()],
    )
    .await;
    assert!(
        server.stderr().contains("4 in flight over 2 upstream(s)"),
        "the lane runs both servers' slots (llama-server says 2 each):\n{}",
        server.stderr()
    );
    let proxy = LlmClient::new(&server.base, None).unwrap();
    let http = reqwest::Client::new();

    // Every slot of both servers runs one stream; neither queues anything.
    let holders = fill_every_slot(&proxy, &[&a, &b], 2).await;
    let lane = text_lane(&http, &server).await;
    let upstreams = lane["upstreams"].as_array().unwrap();
    assert_eq!(upstreams.len(), 2);
    for u in upstreams {
        assert_eq!(
            (u["up"].as_bool(), u["in_flight"].as_u64()),
            (Some(true), Some(2)),
            "{u}"
        );
    }

    // A fifth is refused at once (the lane has no wait queue), naming the full lane.
    let asked = Instant::now();
    let fifth = http
        .post(format!("{}/chat/completions", server.base))
        .json(&json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}))
        .send()
        .await
        .unwrap();
    assert_eq!(fifth.status(), 429);
    let body: Value = fifth.json().await.unwrap();
    assert_eq!(body["error"]["code"], "text_lane_full", "{body}");
    let refused_in = asked.elapsed();

    // Lose one upstream mid-run: its two streams end with the reason, the other two go on.
    drop(a);
    let ends = futures::future::join_all(holders.into_iter().map(|s| text_of(Ok(s)))).await;
    let broken: Vec<&LlmError> = ends.iter().filter_map(|e| e.as_ref().err()).collect();
    assert_eq!(
        broken.len(),
        2,
        "only the lost upstream's streams break: {ends:?}"
    );
    for e in broken {
        assert!(
            e.to_string().contains("upstream") || e.to_string().contains("connection"),
            "the stream ends with its reason: {e}"
        );
    }

    // New work goes to the upstream that is left, every request of it.
    for _ in 0..3 {
        let text = text_of(proxy.stream_chat(&hello()).await).await;
        assert!(text.is_ok(), "{text:?}");
    }
    let lane = text_lane(&http, &server).await;
    let lost = &lane["upstreams"][0];
    assert_eq!(lost["up"], false, "{lost}");
    assert!(lost["down_reason"].as_str().is_some(), "{lost}");
    let metrics = http
        .get(format!("{}/metrics", server.root()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let up_line = format!(
        "headroom_upstream_up{{lane=\"text\",upstream=\"{}\"}} 0",
        a_url(&lane)
    );
    assert!(metrics.contains(&up_line), "{up_line} not in:\n{metrics}");
    eprintln!("the fifth was refused in {refused_in:?}");
}

fn a_url(lane: &Value) -> String {
    lane["upstreams"][0]["name"].as_str().unwrap().to_string()
}
