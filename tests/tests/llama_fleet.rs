//! A text lane over two real llama-servers (SmolLM2-135M, 2 slots each) when one of them is
//! slowed to a stop: new work goes to the other and completes, and the stopped one's stream
//! finishes once it runs again.

use futures::StreamExt;
use headroom_core::lanes::{AudioActivity, TextLane, TextLaneConfig, UpstreamSpec};
use headroom_core::llm::{ChatMessage, ChatRequest, LlmClient};
use headroom_core::metrics::Metrics;
use headroom_tests::llama::LlamaServer;
use std::sync::Arc;
use std::time::Duration;

fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill {signal} {pid}");
}

fn ask(text: &str, max_tokens: u32) -> ChatRequest {
    let mut r = ChatRequest::new(vec![ChatMessage::new("user", text)]);
    r.max_tokens = Some(max_tokens);
    r
}

#[tokio::test]
async fn a_stopped_upstream_keeps_its_stream_while_new_work_goes_to_the_other() {
    let (a, b) = tokio::join!(LlamaServer::start(), LlamaServer::start());
    let specs = [&a, &b]
        .iter()
        .map(|l| UpstreamSpec::new(LlmClient::new(&l.base_url(), None).unwrap()))
        .collect();
    let lane = TextLane::over_fleet(
        specs,
        TextLaneConfig::default(),
        Arc::new(Metrics::new()),
        AudioActivity::idle(),
        None,
    );
    lane.discover().await.unwrap();
    assert_eq!(lane.snapshot().occupancy.limit, 4);

    let mut long = lane
        .submit(ask("Write a long story about a lighthouse keeper.", 120))
        .await
        .unwrap();
    while long.next().await.unwrap().unwrap().text().is_none() {}
    let views = lane.snapshot().upstreams;
    let on = views.iter().position(|u| u.in_flight == 1).unwrap();
    let (slowed, other) = if on == 0 { (&a, &b) } else { (&b, &a) };
    signal(slowed.pid(), "-STOP");

    let prompts_before = other.metric("llamacpp:prompt_tokens_total").await;
    for i in 0..3 {
        let text = lane
            .submit(ask("Say hello.", 8))
            .await
            .unwrap()
            .collect_text()
            .await;
        assert!(
            text.is_ok(),
            "request {i} completes on the other server: {text:?}"
        );
    }
    other
        .until_metric(
            "llamacpp:prompt_tokens_total",
            Duration::from_secs(10),
            |v| v > prompts_before,
        )
        .await;
    let views = lane.snapshot().upstreams;
    assert_eq!(
        views[on].in_flight, 1,
        "the stopped server still holds its stream"
    );
    assert!(views.iter().all(|u| u.up), "slow is not down: {views:?}");

    signal(slowed.pid(), "-CONT");
    let rest = tokio::time::timeout(Duration::from_secs(120), async {
        let mut ended = Ok(());
        while let Some(item) = long.next().await {
            if let Err(r) = item {
                ended = Err(r);
                break;
            }
        }
        ended
    })
    .await
    .expect("the resumed server finishes its stream");
    assert!(rest.is_ok(), "{rest:?}");
    drop(long);
    assert!(lane.snapshot().upstreams.iter().all(|u| u.in_flight == 0));
}
