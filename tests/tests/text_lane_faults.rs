//! The text lane against a fault-injecting upstream: every failure becomes the right typed
//! rejection, slots are always given back, and dropped requests close their connection.

use futures::StreamExt;
use headroom_core::admission::{DeadlineKind, Deadlines, Lane, Priority, RejectReason, YieldRule};
use headroom_core::lanes::{AudioLane, AudioLaneConfig, TextLane, TextLaneConfig};
use headroom_core::llm::{ChatMessage, ChatRequest, LlmClient};
use headroom_core::metrics::Metrics;
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

fn lane_with(upstream: &FakeUpstream, config: TextLaneConfig) -> TextLane {
    let client = LlmClient::new(&upstream.base_url(), None).unwrap();
    TextLane::new(client, config, Arc::new(Metrics::new()))
}

fn lane_with_deadline(upstream: &FakeUpstream, set: impl FnOnce(&mut Deadlines)) -> TextLane {
    let mut config = TextLaneConfig::default();
    set(&mut config.deadlines);
    lane_with(upstream, config)
}

fn lane(upstream: &FakeUpstream) -> TextLane {
    lane_with(upstream, TextLaneConfig::default())
}

/// Submits a request that is admitted and then fails; returns the text before the failure.
async fn failed_reply(lane: &TextLane) -> (String, headroom_core::admission::Rejection) {
    lane.submit(ask("x"))
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap_err()
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::new("user", text)])
}

#[tokio::test]
async fn streams_the_reply_and_gives_the_slot_back() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let lane = lane(&up);
    lane.discover().await.unwrap();
    let text = lane
        .submit(ask("hello world"))
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap();
    assert_eq!(text, "clean: hello world");
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
    let sent = &up.bodies()[0];
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"]["include_usage"], true);
    assert_eq!(sent["model"], "fake-model", "the discovered model fills in");
    assert_eq!(
        sent["max_tokens"], 512,
        "the reply budget is always explicit"
    );
}

#[tokio::test]
async fn two_in_flight_and_the_third_is_shed_without_reaching_upstream() {
    let up = FakeUpstream::start(Behavior::HangAfter(1), 4096).await;
    let lane = lane(&up);
    let mut first = lane.submit(ask("a")).await.unwrap();
    let mut second = lane.submit(ask("b")).await.unwrap();
    first.next().await.unwrap().unwrap();
    second.next().await.unwrap().unwrap();
    let r = lane
        .submit(ask("c"))
        .await
        .err()
        .expect("third is rejected");
    assert_eq!(r.reason, RejectReason::TextLaneFull);
    assert_eq!(
        (r.in_flight, r.limit, r.waiting, r.wait_limit),
        (2, 2, 0, 0)
    );
    assert!(r.retry_after.is_some());
    assert_eq!(up.requests(), 2, "the rejected request never went upstream");
    let snap = lane.snapshot();
    assert_eq!(snap.rejected_total[&RejectReason::TextLaneFull], 1);
    assert_eq!(snap.recent_rejections[0].rejection, r);
}

#[tokio::test]
async fn dropping_a_stream_frees_the_slot_and_closes_the_upstream_connection() {
    let up = FakeUpstream::start(Behavior::HangAfter(2), 4096).await;
    let lane = lane(&up);
    let mut events = lane.subscribe();
    let mut stream = lane.submit(ask("x")).await.unwrap();
    stream.next().await.unwrap().unwrap();
    up.until_open_streams(1).await;
    assert_eq!(lane.snapshot().occupancy.in_flight, 1);
    drop(stream);
    assert_eq!(
        lane.snapshot().occupancy.in_flight,
        0,
        "the slot frees at once"
    );
    up.until_open_streams(0).await;
    // The event stream reported the admission, the release and the cancellation.
    let mut saw_cancel = false;
    while let Ok(event) = events.try_recv() {
        if let headroom_core::lanes::LaneEvent::Finished { outcome, .. } = event {
            saw_cancel |= outcome == "cancelled";
        }
    }
    assert!(saw_cancel);
}

#[tokio::test]
async fn slow_first_token_hits_the_first_chunk_deadline_and_closes_upstream() {
    let gate = Arc::new(Notify::new());
    let up = FakeUpstream::start(Behavior::SlowFirstToken(gate), 4096).await;
    let lane = lane_with_deadline(&up, |d| d.first_chunk = Duration::from_millis(300));
    let (text, r) = failed_reply(&lane).await;
    assert_eq!(text, "");
    assert_eq!(r.reason, RejectReason::DeadlineExceeded);
    assert_eq!(r.deadline, Some(DeadlineKind::FirstChunk));
    assert!(!r.after_output);
    assert!(r.message().contains("first words"), "{}", r.message());
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
    up.until_open_streams(0).await;
}

#[tokio::test]
async fn a_server_that_holds_headers_is_caught_by_the_first_chunk_deadline() {
    let gate = Arc::new(Notify::new());
    let up = FakeUpstream::start(Behavior::HoldHeaders(gate), 4096).await;
    let lane = lane_with_deadline(&up, |d| d.first_chunk = Duration::from_millis(300));
    let r = lane.submit(ask("x")).await.err().unwrap();
    assert_eq!(r.deadline, Some(DeadlineKind::FirstChunk));
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
}

#[tokio::test]
async fn a_hang_mid_stream_hits_the_total_deadline_after_output() {
    let up = FakeUpstream::start(Behavior::HangAfter(2), 4096).await;
    let lane = lane_with_deadline(&up, |d| d.total = Duration::from_millis(400));
    let (text, r) = failed_reply(&lane).await;
    assert_eq!(text, "w0 w1 ");
    assert_eq!(r.reason, RejectReason::DeadlineExceeded);
    assert_eq!(r.deadline, Some(DeadlineKind::Total));
    assert!(r.after_output);
    assert!(!r.is_retryable());
    up.until_open_streams(0).await;
}

#[tokio::test]
async fn a_reset_mid_stream_is_upstream_unavailable() {
    let gate = Arc::new(Notify::new());
    let up = FakeUpstream::start(Behavior::ResetAfter(1, gate.clone()), 4096).await;
    let lane = lane(&up);
    let mut stream = lane.submit(ask("x")).await.unwrap();
    let mut text = String::new();
    while text.is_empty() {
        text.push_str(stream.next().await.unwrap().unwrap().text().unwrap_or(""));
    }
    gate.notify_one();
    let (rest, r) = stream.collect_text().await.unwrap_err();
    assert_eq!((text.as_str(), rest.as_str()), ("w0 ", ""));
    assert_eq!(r.reason, RejectReason::UpstreamUnavailable);
    assert!(r.after_output);
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
}

#[tokio::test]
async fn malformed_sse_is_an_upstream_error() {
    let up = FakeUpstream::start(Behavior::Malformed, 4096).await;
    let lane = lane(&up);
    let (_, r) = lane
        .submit(ask("x"))
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap_err();
    assert_eq!(r.reason, RejectReason::UpstreamError);
    assert!(r.detail.unwrap().contains("not JSON"));
}

#[tokio::test]
async fn an_error_chunk_inside_a_200_stream_is_caught() {
    let up = FakeUpstream::start(
        Behavior::ErrorInStream(json!({"error": {"message": "engine died", "type": "InternalServerError", "param": null, "code": 500}})),
        4096,
    )
    .await;
    let lane = lane(&up);
    let (text, r) = failed_reply(&lane).await;
    assert_eq!(text, "partial ");
    assert_eq!(r.reason, RejectReason::UpstreamError);
    assert!(r.detail.unwrap().contains("engine died"));
}

#[tokio::test]
async fn busy_upstream_statuses_carry_retry_after() {
    let up = FakeUpstream::start(
        Behavior::Status {
            status: 429,
            body:
                r#"{"error":{"message":"slow down","type":"rate_limit","param":null,"code":429}}"#
                    .into(),
            retry_after: Some(7),
        },
        4096,
    )
    .await;
    let lane = lane(&up);
    let r = lane.submit(ask("x")).await.err().unwrap();
    assert_eq!(r.reason, RejectReason::UpstreamBusy);
    assert_eq!(r.retry_after, Some(Duration::from_secs(7)));
    up.push(Behavior::Status {
        status: 503,
        body: "The engine is currently busy".into(),
        retry_after: None,
    });
    let r = lane.submit(ask("x")).await.err().unwrap();
    assert_eq!(r.reason, RejectReason::UpstreamBusy);
    assert!(r.detail.unwrap().contains("HTTP 503"));
}

#[tokio::test]
async fn server_side_context_overflow_is_input_too_long() {
    let up = FakeUpstream::start(
        Behavior::Status {
            status: 400,
            body: r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, your prompt contains 5000 input tokens.","type":"BadRequestError","param":"input_tokens","code":400}"#.into(),
            retry_after: None,
        },
        4096,
    )
    .await;
    let r = lane(&up).submit(ask("x")).await.err().unwrap();
    assert_eq!(r.reason, RejectReason::InputTooLong);
    assert!(r.detail.unwrap().contains("maximum context length is 4096"));
}

#[tokio::test]
async fn overlong_input_is_refused_before_anything_goes_upstream() {
    let up = FakeUpstream::start(Behavior::Echo, 1024).await;
    let lane = lane(&up);
    lane.discover().await.unwrap();
    assert_eq!(lane.context_tokens(), 1024, "max_model_len from /v1/models");
    let r = lane.submit(ask(&"word ".repeat(1000))).await.err().unwrap();
    assert_eq!(r.reason, RejectReason::InputTooLong);
    assert!(r
        .detail
        .as_deref()
        .unwrap()
        .contains("context of 1024 tokens"));
    let r = lane.submit(ask(&"x".repeat(20_000))).await.err().unwrap();
    assert!(r.detail.as_deref().unwrap().contains("characters"));
    assert_eq!(up.requests(), 0);
}

#[tokio::test]
async fn unreachable_upstream_is_explained() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = LlmClient::new(&format!("http://127.0.0.1:{port}/v1"), None).unwrap();
    let lane = TextLane::new(client, TextLaneConfig::default(), Arc::new(Metrics::new()));
    let r = lane.submit(ask("x")).await.err().unwrap();
    assert_eq!(r.reason, RejectReason::UpstreamUnavailable);
    assert!(
        r.message().contains("connection refused"),
        "{}",
        r.message()
    );
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
}

#[tokio::test]
async fn a_bounded_queue_runs_the_waiter_when_a_slot_frees() {
    let up = FakeUpstream::start(Behavior::HangAfter(1), 4096).await;
    let lane = lane_with(
        &up,
        TextLaneConfig {
            max_in_flight: 1,
            max_waiting: 1,
            ..TextLaneConfig::default()
        },
    );
    let mut running = lane.submit(ask("a")).await.unwrap();
    running.next().await.unwrap().unwrap();
    up.push(Behavior::Echo);
    let waiter = {
        let lane = lane.clone();
        tokio::spawn(async move { lane.submit(ask("b")).await.map(|_| ()) })
    };
    let mut events = lane.subscribe();
    while lane.snapshot().occupancy.waiting == 0 {
        events.recv().await.unwrap();
    }
    let shed = lane.submit(ask("c")).await.err().unwrap();
    assert_eq!(shed.reason, RejectReason::TextLaneFull);
    assert_eq!(shed.waiting, 1);
    drop(running);
    waiter
        .await
        .unwrap()
        .expect("the waiter got the freed slot");
}

#[tokio::test]
async fn audio_jobs_run_while_the_text_lane_is_saturated() {
    let up = FakeUpstream::start(Behavior::HangAfter(1), 4096).await;
    let metrics = Arc::new(Metrics::new());
    let text = TextLane::new(
        LlmClient::new(&up.base_url(), None).unwrap(),
        TextLaneConfig::default(),
        metrics.clone(),
    );
    let audio = AudioLane::new(AudioLaneConfig::default(), metrics.clone());
    let mut a = text.submit(ask("a")).await.unwrap();
    let mut b = text.submit(ask("b")).await.unwrap();
    a.next().await.unwrap().unwrap();
    b.next().await.unwrap().unwrap();
    assert_eq!(text.submit(ask("c")).await.err().unwrap().lane, Lane::Text);
    let out = audio
        .run(
            "test",
            Priority::Interactive,
            CancellationToken::new(),
            |_| "transcribed",
        )
        .await
        .expect("audio is not behind text");
    assert_eq!(out, "transcribed");
    let rendered = metrics.render();
    assert!(
        rendered.contains(r#"headroom_in_flight{lane="text"} 2"#),
        "{rendered}"
    );
    assert!(rendered
        .contains(r#"headroom_requests_finished_total{lane="audio",outcome="completed"} 1"#));
}

/// An audio lane with one interactive job held running until the returned sender fires.
async fn interactive_job_running(
    audio: &AudioLane,
) -> (std::sync::mpsc::Sender<()>, tokio::task::JoinHandle<()>) {
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let job = {
        let audio = audio.clone();
        tokio::spawn(async move {
            audio
                .run(
                    "test",
                    Priority::Interactive,
                    CancellationToken::new(),
                    move |_| {
                        started_tx.send(()).unwrap();
                        release_rx.recv().unwrap();
                    },
                )
                .await
                .unwrap();
        })
    };
    tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
        .await
        .unwrap();
    (release_tx, job)
}

fn lanes_with_rule(up: &FakeUpstream, rule: YieldRule) -> (TextLane, AudioLane) {
    let metrics = Arc::new(Metrics::new());
    let audio = AudioLane::new(AudioLaneConfig::default(), metrics.clone());
    let text = TextLane::beside_audio(
        LlmClient::new(&up.base_url(), None).unwrap(),
        TextLaneConfig {
            yield_rule: rule,
            ..TextLaneConfig::default()
        },
        metrics,
        audio.activity(),
    );
    (text, audio)
}

#[tokio::test]
async fn gate_holds_new_text_while_interactive_audio_runs() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let (text, audio) = lanes_with_rule(&up, YieldRule::Gate);
    let (release, job) = interactive_job_running(&audio).await;
    let r = text.submit(ask("x")).await.err().unwrap();
    assert_eq!(r.reason, RejectReason::AudioPriority);
    assert!(r.is_retryable() && r.retry_after.is_some());
    assert_eq!(up.requests(), 0);
    release.send(()).unwrap();
    job.await.unwrap();
    assert!(
        text.submit(ask("x")).await.is_ok(),
        "text flows again once audio is done"
    );
}

#[tokio::test]
async fn preempt_stops_running_text_when_interactive_audio_starts() {
    let up = FakeUpstream::start(Behavior::HangAfter(1), 4096).await;
    let (text, audio) = lanes_with_rule(&up, YieldRule::Preempt);
    let mut stream = text.submit(ask("x")).await.unwrap();
    while stream.next().await.unwrap().unwrap().text().is_none() {}
    let (release, job) = interactive_job_running(&audio).await;
    let r = stream.next().await.unwrap().unwrap_err();
    assert_eq!(r.reason, RejectReason::AudioPriority);
    assert!(r.after_output);
    assert_eq!(text.snapshot().occupancy.in_flight, 0);
    up.until_open_streams(0).await;
    release.send(()).unwrap();
    job.await.unwrap();
}

#[tokio::test]
async fn rule_none_lets_text_run_beside_audio() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let (text, audio) = lanes_with_rule(&up, YieldRule::None);
    let (release, job) = interactive_job_running(&audio).await;
    let reply = text
        .submit(ask("hi"))
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap();
    assert_eq!(reply, "clean: hi");
    release.send(()).unwrap();
    job.await.unwrap();
}

#[tokio::test]
async fn a_reader_that_stops_reading_loses_its_slot_at_the_total_deadline() {
    let up = FakeUpstream::start(Behavior::Endless("word ".into()), 4096).await;
    let lane = lane_with_deadline(&up, |d| d.total = Duration::from_secs(1));
    let mut stream = lane.submit(ask("x")).await.unwrap();
    stream.next().await.unwrap().unwrap();
    // The reader stops reading but keeps the stream. The deadline is a timer, not something
    // checked when the stream is next polled: the slot frees and the upstream is aborted.
    headroom_tests::until_true("the slot to be given back", || {
        lane.snapshot().occupancy.in_flight == 0
    })
    .await;
    tokio::time::timeout(Duration::from_secs(30), up.until_open_streams(0))
        .await
        .expect("the upstream request is aborted");
    // Reading again: what had arrived, then the deadline.
    let mut ending = None;
    while let Some(item) = stream.next().await {
        if let Err(r) = item {
            ending = Some(r);
        }
    }
    let r = ending.expect("the stream ends with the deadline");
    assert_eq!(r.reason, RejectReason::DeadlineExceeded);
    assert_eq!(r.deadline, Some(DeadlineKind::Total));
    assert!(r.after_output);
    assert_eq!(
        lane.snapshot().rejected_total[&RejectReason::DeadlineExceeded],
        1,
        "counted once"
    );
}

#[tokio::test]
async fn tool_definitions_and_content_parts_count_against_the_input_bound() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let lane = lane(&up);
    lane.discover().await.unwrap();
    // A one-word message carrying ~40,000 characters of tool definitions.
    let mut request = ask("hi");
    let tools: Vec<serde_json::Value> = (0..400)
        .map(|i| json!({"type": "function", "function": {"name": format!("tool_{i}"), "description": "x".repeat(100)}}))
        .collect();
    request.extra.insert("tools".into(), json!(tools));
    let r = lane.submit(request).await.err().expect("refused");
    assert_eq!(r.reason, RejectReason::InputTooLong);
    // And an image part is counted like text.
    let mut with_image = ask("look");
    with_image.messages[0].content = json!([
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{}", "A".repeat(40_000))}}
    ]);
    let r = lane.submit(with_image).await.err().expect("refused");
    assert_eq!(r.reason, RejectReason::InputTooLong);
    assert_eq!(up.requests(), 0, "nothing reached the server");
}

#[tokio::test]
async fn a_deadline_that_passes_is_counted_once() {
    // The reading task's timer and the upstream read's timeout both see the total deadline
    // pass; only one may record it (the fault matrix once saw it counted twice).
    let up = FakeUpstream::start(Behavior::HangAfter(1), 4096).await;
    let lane = lane_with_deadline(&up, |d| d.total = Duration::from_millis(200));
    for round in 1..=8u64 {
        let (_, r) = failed_reply(&lane).await;
        assert_eq!(r.deadline, Some(DeadlineKind::Total));
        assert_eq!(
            lane.snapshot().rejected_total[&RejectReason::DeadlineExceeded],
            round,
            "round {round}"
        );
    }
}
