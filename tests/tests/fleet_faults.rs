//! A text lane over several upstreams, each failing the ways servers fail: a request moves to
//! another upstream while nothing has reached the caller, ends with its reason once something
//! has, and an upstream that comes back is used again.

use futures::StreamExt;
use headroom_core::admission::{Lane, RejectReason};
use headroom_core::config::{Config, UpstreamSettings};
use headroom_core::lanes::{TextLane, TextLaneConfig, UpstreamSpec};
use headroom_core::llm::{ChatMessage, ChatRequest, LlmClient};
use headroom_core::metrics::Metrics;
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

fn fleet(urls: &[String]) -> (TextLane, Arc<Metrics>) {
    fleet_with(urls, TextLaneConfig::default())
}

fn fleet_with(urls: &[String], config: TextLaneConfig) -> (TextLane, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let specs = urls
        .iter()
        .map(|u| UpstreamSpec::new(LlmClient::new(u, None).unwrap()))
        .collect();
    let lane = TextLane::over_fleet(
        specs,
        config,
        metrics.clone(),
        headroom_core::lanes::AudioActivity::idle(),
        None,
    );
    (lane, metrics)
}

/// Serve's configuration over `first` and then `second`, each at the capacity it reports.
fn two_upstreams(first: String, second: String) -> Config {
    let mut config = Config::default();
    config.llm.url = first;
    config.llm.upstreams = vec![UpstreamSettings {
        url: second,
        capacity: None,
    }];
    config
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
    assert_eq!(
        metrics.upstream_requests(Lane::Text, &shown(&a), "unavailable"),
        1
    );
    assert_eq!(
        metrics.upstream_requests(Lane::Text, &b.base_url(), "answered"),
        1
    );
    assert_eq!(metrics.upstream_health_changes(Lane::Text, &shown(&a)), 1);
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
    assert_eq!(
        metrics.upstream_requests(Lane::Text, &a.base_url(), "busy"),
        2
    );
    assert_eq!(
        metrics.upstream_requests(Lane::Text, &b.base_url(), "busy"),
        1
    );
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
        metrics.upstream_health_changes(Lane::Text, &a.base_url()),
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

/// The first-chunk deadline of the garbage tests: a stall is cut here, well inside the total.
const FIRST_WORDS: Duration = Duration::from_secs(1);

/// Ways an upstream answers without ever answering: what it does, and how its one request is
/// counted in `headroom_upstream_requests_total`.
fn garbage() -> Vec<(&'static str, Behavior, &'static str)> {
    vec![
        (
            "200 with a body that is not JSON",
            Behavior::InvalidJson,
            "unreadable",
        ),
        (
            "an event stream that is not JSON",
            Behavior::Malformed,
            "answered",
        ),
        (
            "headers, then nothing",
            Behavior::StallAfterHeaders,
            "answered",
        ),
        (
            "no headers at all",
            Behavior::HoldHeaders(Arc::new(Notify::new())),
            "deadline",
        ),
    ]
}

/// The value of `headroom_upstream_up` for `upstream`.
fn up_gauge(metrics: &str, upstream: &str) -> String {
    let start = format!("headroom_upstream_up{{lane=\"text\",upstream=\"{upstream}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&start))
        .unwrap_or_else(|| panic!("{start} not in:\n{metrics}"))
        .to_string()
}

#[tokio::test]
async fn an_upstream_that_answers_garbage_or_stalls_loses_its_traffic_to_a_healthy_one() {
    for (what, behavior, counted) in garbage() {
        let a = FakeUpstream::start(behavior, 4096).await;
        let b = FakeUpstream::start(Behavior::Echo, 4096).await;
        let mut config = TextLaneConfig::default();
        config.deadlines.first_chunk = FIRST_WORDS;
        let (lane, metrics) = fleet_with(&[a.base_url(), b.base_url()], config);
        let mut answers = Vec::new();
        for i in 0..20 {
            let answer = match lane.submit(ask(&format!("n{i}"))).await {
                Ok(stream) => stream.collect_text().await.map_err(|(_, r)| r),
                Err(r) => Err(r),
            };
            answers.push(answer);
        }
        let failed: Vec<_> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
        let split = format!(
            "{what}: {} of 20 answered; A was sent {}, B {}; failures: {:?}",
            20 - failed.len(),
            a.requests(),
            b.requests(),
            failed.iter().map(|r| r.reason).collect::<Vec<_>>()
        );
        eprintln!("{split}");
        for (i, answer) in answers.iter().enumerate() {
            assert_eq!(
                answer.as_deref().ok(),
                Some(format!("clean: n{i}").as_str()),
                "{split}"
            );
        }
        assert_eq!(
            (a.requests(), b.requests()),
            (1, 20),
            "A is down after its first failure and B has room: {split}"
        );
        let views = lane.snapshot().upstreams;
        assert!(!views[0].up && views[1].up, "{what}: {views:?}");
        assert!(views[0].down_reason.is_some(), "{what}: {views:?}");
        assert_eq!(up_gauge(&metrics.render(), &a.base_url()), "0", "{what}");
        assert_eq!(up_gauge(&metrics.render(), &b.base_url()), "1", "{what}");
        assert_eq!(
            metrics.upstream_requests(Lane::Text, &a.base_url(), counted),
            1,
            "{what}"
        );
        assert_eq!(
            metrics.upstream_health_changes(Lane::Text, &a.base_url()),
            1,
            "{what}"
        );
        // Its model list still answers: that says nothing of its replies, so a health check
        // does not bring it back (a request that gets words from it will).
        lane.check_health().await;
        assert!(!lane.snapshot().upstreams[0].up, "{what}");
        assert_eq!(lane.snapshot().occupancy.in_flight, 0);
        a.until_open_streams(0).await;
    }
}

#[tokio::test]
async fn with_every_upstream_stalling_a_request_ends_at_its_first_chunk_deadline_on_each() {
    let a = FakeUpstream::start(Behavior::StallAfterHeaders, 4096).await;
    let b = FakeUpstream::start(Behavior::StallAfterHeaders, 4096).await;
    let mut config = TextLaneConfig::default();
    config.deadlines.first_chunk = Duration::from_millis(300);
    let (lane, _) = fleet_with(&[a.base_url(), b.base_url()], config);
    let (text, r) = lane
        .submit(ask("x"))
        .await
        .unwrap()
        .collect_text()
        .await
        .unwrap_err();
    assert_eq!(text, "");
    assert_eq!(r.reason, RejectReason::DeadlineExceeded);
    assert_eq!(
        r.deadline,
        Some(headroom_core::admission::DeadlineKind::FirstChunk)
    );
    assert!(!r.after_output);
    assert_eq!((a.requests(), b.requests()), (1, 1), "each tried once");
    assert!(lane.snapshot().upstreams.iter().all(|u| !u.up));
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
    a.until_open_streams(0).await;
    b.until_open_streams(0).await;
}

#[tokio::test]
async fn serve_sends_every_request_to_the_healthy_upstream_when_the_other_answers_garbage() {
    for (what, behavior) in [
        ("invalid JSON", Behavior::InvalidJson),
        ("a stall after headers", Behavior::StallAfterHeaders),
    ] {
        let a = FakeUpstream::start(behavior, 4096).await;
        let b = FakeUpstream::start(Behavior::Echo, 4096).await;
        let mut config = two_upstreams(a.base_url(), b.base_url());
        config.text_lane.first_chunk_secs = FIRST_WORDS.as_secs_f64();
        let server = headroom_tests::serve(&headroom_tests::services(config)).await;
        let http = reqwest::Client::new();
        let mut answers = Vec::new();
        for i in 0..20 {
            let resp = http
                .post(format!("{}/chat/completions", server.base_url()))
                .json(&json!({"messages": [{"role": "user", "content": format!("n{i}")}]}))
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap();
            answers.push((status, body));
        }
        let ok = answers.iter().filter(|(s, _)| *s == 200).count();
        let split = format!(
            "{what}: {ok} of 20 answered 200 (statuses {:?}); A was sent {}, B {}",
            answers.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            a.requests(),
            b.requests()
        );
        eprintln!("{split}");
        for (i, (status, body)) in answers.iter().enumerate() {
            assert_eq!(*status, 200, "{split}: {body}");
            assert_eq!(
                body["choices"][0]["message"]["content"],
                format!("clean: n{i}"),
                "{split}"
            );
        }
        assert_eq!((a.requests(), b.requests()), (1, 20), "{split}");
        let metrics = http
            .get(format!("http://{}/metrics", server.addr))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(up_gauge(&metrics, &a.base_url()), "0", "{what}");
        assert_eq!(up_gauge(&metrics, &b.base_url()), "1", "{what}");
    }
}

/// `/health` answers from the fleet's own state and asks nothing upstream (it asked the
/// first upstream on every call); with the first upstream down it is 200, saying which is down
/// and why (it was 503), and `/v1/models` asks the one that is up (it asked the first: 502).
#[tokio::test]
async fn serves_health_comes_from_the_fleets_state_and_its_models_from_an_upstream_that_is_up() {
    let http = reqwest::Client::new();
    // Both up: twenty /health answers cost the upstreams nothing (the periodic health check,
    // every 5 s, may ask each once or twice meanwhile).
    let a = FakeUpstream::start(Behavior::Echo, 4096).await;
    let b = FakeUpstream::start(Behavior::Echo, 4096).await;
    let config = two_upstreams(a.base_url(), b.base_url());
    let server = headroom_tests::serve(&headroom_tests::services(config)).await;
    let asked_before = a.other_requests() + b.other_requests();
    for _ in 0..20 {
        let health = http
            .get(format!("http://{}/health", server.addr))
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200);
    }
    let asked = a.other_requests() + b.other_requests() - asked_before;
    assert!(
        asked <= 4,
        "twenty /health answers asked the upstreams {asked} times"
    );

    // The first upstream down, the second up.
    let config = two_upstreams(headroom_tests::closed_port_url(), b.base_url());
    let server = headroom_tests::serve(&headroom_tests::services(config)).await;
    let health = http
        .get(format!("http://{}/health", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200, "one upstream is up");
    let body: Value = health.json().await.unwrap();
    assert_eq!(body["status"], "ok", "{body}");
    let ups = body["upstreams"].as_array().unwrap();
    assert_eq!(ups.len(), 2, "{body}");
    assert_eq!(
        (&ups[0]["up"], &ups[1]["up"]),
        (&json!(false), &json!(true))
    );
    assert!(
        !ups[0]["down_reason"].as_str().unwrap().is_empty(),
        "{body}"
    );
    let models = http
        .get(format!("{}/models", server.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 200);
    let models: Value = models.json().await.unwrap();
    assert_eq!(models["data"][0]["id"], "fake-model", "{models}");
}
