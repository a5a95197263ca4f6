//! GPU-pressure admission. On every machine, against a recorded device (`HEADROOM_GPU_REPLAY`):
//! a headroom above the free memory refuses text work with `gpu_memory_pressure`, counted in
//! metrics, before the server sees it; a small headroom admits. Against this machine's real
//! device state: with an NVIDIA GPU (scripts/gpu-check runs this there) the same; without one
//! the gate cannot know and must not block.

use headroom_core::admission::{Lane, RejectReason};
use headroom_core::config::Config;
use headroom_core::lanes::{TextLane, TextLaneConfig};
use headroom_core::llm::{ChatMessage, ChatRequest};
use headroom_services::{Environment, Services};
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

/// Refused under pressure, admitted with room: what every GPU machine must see.
async fn the_gate_refuses_below_the_headroom_and_admits_above_it(services: &Services) {
    let fake = FakeUpstream::start(Behavior::Echo, 4096).await;
    let greedy = lane(services, &fake, u64::MAX / (1 << 21));
    let rejection = greedy
        .submit(hello())
        .await
        .err()
        .expect("refused under pressure");
    assert_eq!(rejection.reason, RejectReason::GpuMemoryPressure);
    let detail = rejection.detail.clone().unwrap();
    assert!(
        detail.contains(&format!("MiB free on {}", services.gpu().device())),
        "{detail}"
    );
    assert!(rejection.message().contains("GPU memory is low"));
    assert_eq!(fake.requests(), 0, "refused before the server saw it");
    assert_eq!(
        services
            .metrics()
            .rejections(Lane::Text, RejectReason::GpuMemoryPressure),
        1
    );

    let modest = lane(services, &fake, 1);
    modest
        .submit(hello())
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap();
    assert_eq!(fake.requests(), 1);
}

/// A recorded card with 4576 MiB free: the refusal is tested on every machine.
#[tokio::test]
async fn free_memory_below_the_audio_headroom_refuses_text_work() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.json");
    std::fs::write(&trace, r#"{"total_mib": 24576, "used_mib": [20000]}"#).unwrap();
    let env = Environment::from_vars(
        |name| match name {
            "HEADROOM_GPU_REPLAY" => Some(trace.clone().into_os_string()),
            other => std::env::var_os(other),
        },
        std::env::temp_dir,
    );
    let services = Services::new(Config::default(), env);
    headroom_tests::until("the recorded card's first reading", || {
        std::future::ready(services.gpu().fresh_free_mib().is_some())
    })
    .await;
    the_gate_refuses_below_the_headroom_and_admits_above_it(&services).await;
}

/// This machine's own device: refused and admitted as above with an NVIDIA GPU; without one
/// the gate cannot know, and lets the work through.
#[tokio::test]
async fn on_this_machines_device_the_gate_refuses_with_a_gpu_and_never_blocks_without_one() {
    let services = headroom_tests::services(Config::default());
    if services.gpu().has_gpu() {
        the_gate_refuses_below_the_headroom_and_admits_above_it(&services).await;
        return;
    }
    let fake = FakeUpstream::start(Behavior::Echo, 4096).await;
    let greedy = lane(&services, &fake, u64::MAX / (1 << 21));
    let stream = greedy
        .submit(hello())
        .await
        .expect("without a GPU the gate lets work through");
    stream.collect_text().await.unwrap();
    assert_eq!(fake.requests(), 1);
}
