//! A text lane over several upstreams, each failing the ways servers fail: a request moves to
//! another upstream while nothing has reached the caller, ends with its reason once something
//! has, and an upstream that comes back is used again.

use futures::StreamExt;
use headroom_core::admission::RejectReason;
use headroom_core::lanes::{TextLane, TextLaneConfig, UpstreamSpec};
use headroom_core::llm::{ChatMessage, ChatRequest, LlmClient};
use headroom_core::metrics::Metrics;
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

fn fleet(urls: &[String]) -> (TextLane, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let specs = urls
        .iter()
        .map(|u| UpstreamSpec::new(LlmClient::new(u, None).unwrap()))
        .collect();
    let lane = TextLane::over_fleet(
        specs,
        TextLaneConfig::default(),
        metrics.clone(),
        headroom_core::lanes::AudioActivity::idle(),
        None,
    );
    (lane, metrics)
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest::new(vec![ChatMessage::new("user", text)])
}

fn shown(url: &str) -> String {
    url.trim_end_matches('/').to_string()
}

#[tokio::test]
async fn a_request_moves_on_from_an_upstream_that_refuses_connections() {
    let b = FakeUpstream::start(Behavior::Echo, 4096).await;
    let a = headroom_tests::closed_port_url();
    let (lane, metrics) = fleet(&[a.clone(), b.base_url()]);
    assert!(
        !lane.in_use(),
        "nothing sent yet: health checks would not ask anything"
    );
    let text = lane
        .submit(ask("hi"))
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap();
    assert_eq!(text, "clean: hi");
    assert!(lane.in_use());
    let views = lane.snapshot().upstreams;
    assert!(!views[0].up, "{views:?}");
    assert!(views[1].up);
    assert_eq!(metrics.upstream_requests(&shown(&a), "unavailable"), 1);
    assert_eq!(metrics.upstream_requests(&b.base_url(), "answered"), 1);
    assert_eq!(metrics.upstream_health_changes(&shown(&a)), 1);
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
    assert!(views.iter().all(|v| v.in_flight == 0));
}

#[tokio::test]
async fn a_server_error_or_a_break_before_the_first_words_hands_the_request_on() {
    let a = FakeUpstream::start(Behavior::Echo, 4096).await;
    let b = FakeUpstream::start(Behavior::Echo, 4096).await;
    let (lane, _) = fleet(&[a.base_url(), b.base_url()]);
    a.push(Behavior::Status {
        status: 500,
        body: "boom".into(),
        retry_after: None,
    });
    let text = lane.submit(ask("one")).await.unwrap().collect_text().await;
    assert_eq!(text.unwrap(), "clean: one");
    assert_eq!((a.requests(), b.requests()), (1, 1));

    // Headers and the role chunk, then the connection breaks before any content: the caller
    // has read nothing, so the request goes on to the other upstream.
    let c = FakeUpstream::start(Behavior::Echo, 4096).await;
    let d = FakeUpstream::start(Behavior::Echo, 4096).await;
    let (lane, _) = fleet(&[c.base_url(), d.base_url()]);
    let gate = Arc::new(Notify::new());
    gate.notify_one();
    c.push(Behavior::ResetAfter(0, gate));
    let text = lane.submit(ask("two")).await.unwrap().collect_text().await;
    assert_eq!(text.unwrap(), "clean: two");
    assert_eq!((c.requests(), d.requests()), (1, 1));
    assert!(!lane.snapshot().upstreams[0].up);
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
}

#[tokio::test]
async fn a_stream_that_breaks_after_its_first_words_ends_with_the_reason_and_is_not_repeated() {
    let a = FakeUpstream::start(Behavior::Echo, 4096).await;
    let b = FakeUpstream::start(Behavior::Echo, 4096).await;
    let (lane, _) = fleet(&[a.base_url(), b.base_url()]);
    let gate = Arc::new(Notify::new());
    a.push(Behavior::ResetAfter(2, gate.clone()));
    let mut stream = lane.submit(ask("x")).await.unwrap();
    let mut words = 0;
    while words < 2 {
        if stream.next().await.unwrap().unwrap().text().is_some() {
            words += 1;
        }
    }
    gate.notify_one();
    let ended = loop {
        match stream.next().await {
            Some(Ok(_)) => continue,
            Some(Err(r)) => break r,
            None => panic!("the stream must end with its reason"),
        }
    };
    assert_eq!(ended.reason, RejectReason::UpstreamUnavailable);
    assert!(ended.after_output, "the caller already has words");
    assert_eq!(
        b.requests(),
        0,
        "what was said is never said again elsewhere"
    );
    drop(stream);
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
}

#[tokio::test]
async fn a_busy_upstream_passes_the_request_on_and_a_busy_fleet_refuses_with_its_retry_after() {
    let a = FakeUpstream::start(Behavior::Echo, 4096).await;
    let b = FakeUpstream::start(Behavior::Echo, 4096).await;
    let (lane, metrics) = fleet(&[a.base_url(), b.base_url()]);
    let busy = || Behavior::Status {
        status: 429,
        body: r#"{"error":{"message":"No deployments available","code":"429"}}"#.into(),
        retry_after: Some(7),
    };
    a.push(busy());
    let text = lane.submit(ask("hi")).await.unwrap().collect_text().await;
    assert_eq!(text.unwrap(), "clean: hi");
    assert!(
        lane.snapshot().upstreams[0].up,
        "busy is not down: the upstream keeps its place"
    );

    a.push(busy());
    b.push(busy());
    let refused = lane.submit(ask("hi")).await.err().unwrap();
    assert_eq!(refused.reason, RejectReason::UpstreamBusy);
    assert_eq!(refused.retry_after, Some(Duration::from_secs(7)));
    assert_eq!(metrics.upstream_requests(&a.base_url(), "busy"), 2);
    assert_eq!(metrics.upstream_requests(&b.base_url(), "busy"), 1);
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
}

#[tokio::test]
async fn an_upstream_that_comes_back_is_used_again_once_a_health_check_finds_it() {
    let a = FakeUpstream::start(Behavior::Echo, 4096).await;
    let b = FakeUpstream::start(Behavior::Echo, 4096).await;
    let (lane, metrics) = fleet(&[a.base_url(), b.base_url()]);
    a.push(Behavior::Status {
        status: 502,
        body: "bad gateway".into(),
        retry_after: None,
    });
    lane.submit(ask("1"))
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap();
    assert!(!lane.snapshot().upstreams[0].up);
    // While it is down, requests go to the other one.
    lane.submit(ask("2"))
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap();
    assert_eq!((a.requests(), b.requests()), (1, 2));

    lane.check_health().await;
    assert!(
        lane.snapshot().upstreams[0].up,
        "it answers its models again"
    );
    // Both idle, the one that came back has no recent first-token time against it: it is
    // chosen again.
    lane.submit(ask("3"))
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap();
    assert_eq!(a.requests(), 2);
    assert_eq!(
        metrics.upstream_health_changes(&a.base_url()),
        2,
        "down, then up"
    );
}

#[tokio::test]
async fn four_requests_fill_two_upstreams_of_two_and_a_fifth_is_refused_at_once() {
    let a = FakeUpstream::start(Behavior::HangAfter(1), 4096).await;
    let b = FakeUpstream::start(Behavior::HangAfter(1), 4096).await;
    let (lane, _) = fleet(&[a.base_url(), b.base_url()]);
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut s = lane.submit(ask("hold")).await.unwrap();
        while s.next().await.unwrap().unwrap().text().is_none() {}
        held.push(s);
    }
    assert_eq!((a.open_streams(), b.open_streams()), (2, 2));
    let refused = lane.submit(ask("fifth")).await.err().unwrap();
    assert_eq!(refused.reason, RejectReason::TextLaneFull);
    assert_eq!((refused.in_flight, refused.limit), (4, 4));
    drop(held);
    a.until_open_streams(0).await;
    b.until_open_streams(0).await;
    assert!(lane.snapshot().upstreams.iter().all(|u| u.in_flight == 0));
}

#[tokio::test]
async fn a_failed_probe_while_the_others_are_full_is_refused_as_a_full_lane() {
    let a = FakeUpstream::start(Behavior::Echo, 4096).await;
    let b = FakeUpstream::start(Behavior::HangAfter(1), 4096).await;
    let (lane, _) = fleet(&[a.base_url(), b.base_url()]);
    // a fails once: down, and tried again as soon as its backoff ends.
    a.push(Behavior::Status {
        status: 500,
        body: "boom".into(),
        retry_after: None,
    });
    let mut held = Vec::new();
    let mut s = lane.submit(ask("hold")).await.unwrap();
    while s.next().await.unwrap().unwrap().text().is_none() {}
    held.push(s);
    assert!(!lane.snapshot().upstreams[0].up);
    let mut s = lane.submit(ask("hold")).await.unwrap();
    while s.next().await.unwrap().unwrap().text().is_none() {}
    held.push(s);
    assert_eq!(lane.snapshot().upstreams[1].in_flight, 2, "b is full");
    // a answers its health check, so the next request goes to it, and fails again: with b
    // full there is nowhere else, and the refusal is the full lane, not a's failure.
    lane.check_health().await;
    assert!(lane.snapshot().upstreams[0].up);
    a.push(Behavior::Status {
        status: 500,
        body: "boom".into(),
        retry_after: None,
    });
    let refused = lane.submit(ask("third")).await.err().unwrap();
    assert_eq!(refused.reason, RejectReason::TextLaneFull, "{refused:?}");
    assert!(
        refused.detail.as_deref().unwrap_or("").contains("down"),
        "{refused:?}"
    );
    drop(held);
}

#[tokio::test]
async fn one_server_breaking_before_its_first_words_ends_the_stream_with_the_reason() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let (lane, _) = fleet(&[up.base_url()]);
    let gate = Arc::new(Notify::new());
    up.push(Behavior::ResetAfter(0, gate.clone()));
    // The reply has begun (its headers are here) when the connection breaks, before any
    // words: with nowhere else to go the stream ends with upstream_unavailable, not an empty
    // success.
    let stream = lane.submit(ask("x")).await.unwrap();
    gate.notify_one();
    let ended = stream.collect_text().await;
    let (text, r) = ended.expect_err("a broken reply is not a reply");
    assert_eq!(text, "");
    assert_eq!(r.reason, RejectReason::UpstreamUnavailable);
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
}
