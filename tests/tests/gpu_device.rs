//! GPU-pressure admission against this machine's real device state. With an NVIDIA GPU
//! (scripts/gpu-check runs this there) a headroom above the card's free memory refuses text
//! work with `gpu_memory_pressure`, counted in metrics, before the server sees it; a small
//! headroom admits. Without a GPU the gate cannot know and must not block.

use headroom_core::admission::{Lane, RejectReason};
use headroom_core::gpu::{GpuSampler, DEFAULT_CAPACITY, DEFAULT_PERIOD};
use headroom_core::lanes::{AudioActivity, TextLane, TextLaneConfig};
use headroom_core::llm::{ChatMessage, ChatRequest, LlmClient};
use headroom_core::metrics::Metrics;
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use std::sync::Arc;

fn lane(
    fake: &FakeUpstream,
    headroom_mib: u64,
    sampler: GpuSampler,
    metrics: Arc<Metrics>,
) -> TextLane {
    TextLane::guarded(
        LlmClient::new(&fake.base_url(), None).unwrap(),
        TextLaneConfig {
            audio_headroom_mib: Some(headroom_mib),
            ..TextLaneConfig::default()
        },
        metrics,
        AudioActivity::idle(),
        Some(sampler),
    )
}

fn hello() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::new("user", "hello")])
}

#[tokio::test]
async fn free_memory_below_the_audio_headroom_refuses_text_work() {
    let fake = FakeUpstream::start(Behavior::Echo, 4096).await;
    let sampler = GpuSampler::start(DEFAULT_PERIOD, DEFAULT_CAPACITY);
    let metrics = Arc::new(Metrics::new());
    let greedy = lane(
        &fake,
        u64::MAX / (1 << 21),
        sampler.clone(),
        metrics.clone(),
    );
    let result = greedy.submit(hello()).await;
    if !sampler.has_gpu() {
        let stream = result.expect("without a GPU the gate lets work through");
        stream.collect_text().await.unwrap();
        assert_eq!(fake.requests(), 1);
        return;
    }
    let rejection = result.err().expect("refused under pressure");
    assert_eq!(rejection.reason, RejectReason::GpuMemoryPressure);
    let detail = rejection.detail.clone().unwrap();
    assert!(detail.contains("MiB free on GPU 0"), "{detail}");
    assert!(rejection.message().contains("GPU memory is low"));
    assert_eq!(fake.requests(), 0, "refused before the server saw it");
    assert_eq!(
        metrics.rejections(Lane::Text, RejectReason::GpuMemoryPressure),
        1
    );

    let modest = lane(&fake, 1, sampler, metrics);
    modest
        .submit(hello())
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap();
    assert_eq!(fake.requests(), 1);
}
