//! GPU-pressure admission against this machine's real device state. With an NVIDIA GPU
//! (scripts/gpu-check runs this there) a headroom above the card's free memory refuses text
//! work with `gpu_memory_pressure`, counted in metrics, before the server sees it; a small
//! headroom admits. Without a GPU the gate cannot know and must not block.

use headroom_core::admission::{Lane, RejectReason};
use headroom_core::config::Config;
use headroom_core::lanes::{TextLane, TextLaneConfig};
use headroom_core::llm::{ChatMessage, ChatRequest};
use headroom_services::Services;
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};

/// A text lane of `services` in front of `fake` that keeps `headroom_mib` free for audio.
fn lane(services: &Services, fake: &FakeUpstream, headroom_mib: u64) -> TextLane {
    services.dedicated_text_lane(
        services.client(&fake.base_url()).unwrap(),
        TextLaneConfig {
            audio_headroom_mib: Some(headroom_mib),
            ..TextLaneConfig::default()
        },
    )
}

fn hello() -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::new("user", "hello")])
}

#[tokio::test]
async fn free_memory_below_the_audio_headroom_refuses_text_work() {
    let fake = FakeUpstream::start(Behavior::Echo, 4096).await;
    let services = headroom_tests::services(Config::default());
    let greedy = lane(&services, &fake, u64::MAX / (1 << 21));
    let result = greedy.submit(hello()).await;
    if !services.gpu().has_gpu() {
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
        services
            .metrics()
            .rejections(Lane::Text, RejectReason::GpuMemoryPressure),
        1
    );

    let modest = lane(&services, &fake, 1);
    modest
        .submit(hello())
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap();
    assert_eq!(fake.requests(), 1);
}
