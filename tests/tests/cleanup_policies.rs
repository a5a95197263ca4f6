//! Cleanup through the text lane: chunking keeps one slot per document, and each failure
//! policy does what it says, marking which path produced each piece.

use headroom_core::admission::RejectReason;
use headroom_core::cleanup::{
    clean_document, CleanupError, CleanupEvent, CleanupMode, CleanupOutput, CleanupRequest,
    FailurePolicy, PieceSource, RetrySettings,
};
use headroom_core::lanes::{TextLane, TextLaneConfig};
use headroom_core::llm::LlmClient;
use headroom_core::metrics::{Metrics, PieceOrigin};
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const TRANSCRIPT: &str = "um so the the results were good\nwe, you know, tested it twice";

fn busy() -> Behavior {
    Behavior::Status {
        status: 503,
        body: r#"{"error":{"message":"The engine is currently busy","type":"ServiceUnavailable","param":null,"code":503}}"#.into(),
        retry_after: None,
    }
}

async fn lane(up: &FakeUpstream, config: TextLaneConfig) -> TextLane {
    let lane = TextLane::new(
        LlmClient::new(&up.base_url(), None).unwrap(),
        config,
        Arc::new(Metrics::new()),
    );
    lane.discover().await.unwrap();
    lane
}

fn request(text: &str, policy: FailurePolicy) -> CleanupRequest {
    CleanupRequest {
        text: text.into(),
        task: CleanupMode::Cleanup.into(),
        length_hint: None,
        policy,
        retry: RetrySettings {
            max_attempts: 3,
            base_backoff: Duration::from_millis(10),
            budget: Duration::from_secs(30),
        },
        project: Some("cleanup policies".into()),
    }
}

fn ignore(_: CleanupEvent) {}

async fn clean(
    lane: &TextLane,
    text: &str,
    policy: FailurePolicy,
) -> Result<CleanupOutput, CleanupError> {
    clean_document(
        lane,
        &request(text, policy),
        &CancellationToken::new(),
        &ignore,
    )
    .await
}

#[tokio::test]
async fn the_model_cleans_and_the_result_says_so() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let lane = lane(&up, TextLaneConfig::default()).await;
    let out = clean(&lane, TRANSCRIPT, FailurePolicy::Reject)
        .await
        .unwrap();
    assert_eq!(out.text(), format!("clean: {TRANSCRIPT}"));
    assert_eq!(out.pieces[0].source, PieceSource::Llm { attempts: 1 });
    let sent = &up.bodies()[0];
    assert_eq!(sent["messages"][0]["role"], "system");
    assert!(sent["messages"][0]["content"]
        .as_str()
        .unwrap()
        .contains("Do not summarize"));
    assert_eq!(sent["temperature"], 0.0);
}

#[tokio::test]
async fn a_long_document_is_sent_in_chunks_one_at_a_time_within_the_bound() {
    let up = FakeUpstream::start(Behavior::Echo, 1024).await;
    let lane = lane(&up, TextLaneConfig::default()).await;
    let line =
        "[00:00:01] Speaker: this is a segment of a long recording with quite a few words in it.";
    let doc = vec![line; 80].join("\n");
    let events = Mutex::new(Vec::new());
    let record = |e: CleanupEvent| events.lock().unwrap().push(e);
    let out = clean_document(
        &lane,
        &request(&doc, FailurePolicy::Reject),
        &CancellationToken::new(),
        &record,
    )
    .await
    .unwrap();
    let chunks = up.requests();
    assert!(chunks > 2, "{chunks} chunks");
    assert_eq!(
        up.max_concurrent(),
        1,
        "a document never holds more than one slot"
    );
    assert_eq!(out.pieces.len(), chunks);
    // Every piece is a whole set of lines, and together they are the document.
    let originals: Vec<&str> = out.pieces.iter().map(|p| p.original.as_str()).collect();
    assert_eq!(originals.join("\n"), doc);
    assert!(originals.iter().all(|o| o.starts_with("[00:00:01]")));
    assert!(
        matches!(events.lock().unwrap()[0], CleanupEvent::Planned { chunks: n } if n == chunks)
    );
}

#[tokio::test]
async fn reject_policy_stops_with_the_rejection_and_keeps_finished_pieces() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    up.push(Behavior::Echo);
    up.push(busy());
    let lane = lane(&up, TextLaneConfig::default()).await;
    // Two chunks: force a tiny context so each line is its own chunk.
    let mut config = lane.config().clone();
    config.context_tokens = Some(300);
    let lane = self::lane(&up, config).await;
    let doc = format!(
        "{}\n{}",
        "first line of words ".repeat(12).trim(),
        "second line of words ".repeat(12).trim()
    );
    let err = clean(&lane, &doc, FailurePolicy::Reject).await.unwrap_err();
    match err {
        CleanupError::Rejected {
            rejection,
            chunk,
            completed,
        } => {
            assert_eq!(rejection.reason, RejectReason::UpstreamBusy);
            assert_eq!(chunk, 1);
            assert_eq!(completed.len(), 1);
            assert!(completed[0].text.starts_with("clean: first line"));
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn fallback_policy_cleans_refused_chunks_with_the_rules() {
    let up = FakeUpstream::start(busy(), 4096).await;
    let lane = lane(&up, TextLaneConfig::default()).await;
    let out = clean(&lane, TRANSCRIPT, FailurePolicy::Fallback)
        .await
        .unwrap();
    assert_eq!(out.text(), "So the results were good.\nWe tested it twice.");
    let reasons: Vec<RejectReason> = out.fallbacks().map(|r| r.reason).collect();
    assert_eq!(reasons, vec![RejectReason::UpstreamBusy]);
    // The project's fallback rate and attempts are what an operator's alert reads.
    let metrics = lane.metrics();
    let project = "cleanup policies";
    let pieces = |origin| metrics.cleanup_pieces(project, origin);
    assert_eq!(pieces(PieceOrigin::Rules), reasons.len() as u64);
    assert_eq!(
        pieces(PieceOrigin::Model) + pieces(PieceOrigin::Rules),
        out.pieces.len() as u64
    );
    assert_eq!(metrics.cleanup_attempts(project), out.pieces.len() as u64);
    assert!(metrics.render().contains(
        r#"headroom_cleanup_rejections_total{project="cleanup policies",reason="upstream_busy"} 1"#
    ));
}

#[tokio::test]
async fn retry_policy_retries_retryable_rejections_then_succeeds() {
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    up.push(busy());
    up.push(busy());
    let lane = lane(&up, TextLaneConfig::default()).await;
    let retries = Mutex::new(0);
    let count = |e: CleanupEvent| {
        if let CleanupEvent::Retrying { .. } = e {
            *retries.lock().unwrap() += 1;
        }
    };
    let out = clean_document(
        &lane,
        &request(TRANSCRIPT, FailurePolicy::Retry),
        &CancellationToken::new(),
        &count,
    )
    .await
    .unwrap();
    assert_eq!(out.pieces[0].source, PieceSource::Llm { attempts: 3 });
    assert_eq!(*retries.lock().unwrap(), 2);
    assert_eq!(up.requests(), 3);
}

#[tokio::test]
async fn retry_policy_gives_up_after_its_attempts_and_never_retries_input_too_long() {
    let up = FakeUpstream::start(busy(), 4096).await;
    let lane = lane(&up, TextLaneConfig::default()).await;
    let err = clean(&lane, TRANSCRIPT, FailurePolicy::Retry)
        .await
        .unwrap_err();
    assert!(
        matches!(err, CleanupError::Rejected { ref rejection, .. } if rejection.reason == RejectReason::UpstreamBusy)
    );
    assert_eq!(up.requests(), 3);

    let up = FakeUpstream::start(
        Behavior::Status {
            status: 400,
            body: r#"{"error":{"message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","param":"input_tokens","code":400}}"#.into(),
            retry_after: None,
        },
        4096,
    )
    .await;
    let lane = self::lane(&up, TextLaneConfig::default()).await;
    let err = clean(&lane, TRANSCRIPT, FailurePolicy::Retry)
        .await
        .unwrap_err();
    assert!(
        matches!(err, CleanupError::Rejected { ref rejection, .. } if rejection.reason == RejectReason::InputTooLong)
    );
    assert_eq!(up.requests(), 1, "not retryable");
}

#[tokio::test]
async fn cancelling_stops_the_document_and_closes_the_request() {
    let up = FakeUpstream::start(Behavior::HangAfter(1), 4096).await;
    let lane = lane(&up, TextLaneConfig::default()).await;
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    let on_delta = move |e: CleanupEvent| {
        if let CleanupEvent::Delta { .. } = e {
            trigger.cancel();
        }
    };
    let err = clean_document(
        &lane,
        &request(TRANSCRIPT, FailurePolicy::Fallback),
        &cancel,
        &on_delta,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, CleanupError::Cancelled { ref completed } if completed.is_empty()));
    assert_eq!(lane.snapshot().occupancy.in_flight, 0);
    up.until_open_streams(0).await;
}

#[tokio::test]
async fn a_reply_that_drifts_from_the_transcript_is_not_used() {
    let chatter = "I'm so glad to have you on the show. ".repeat(3);
    let up = FakeUpstream::start(Behavior::Reply(vec![chatter]), 4096).await;
    let lane = lane(&up, TextLaneConfig::default()).await;
    let out = clean(&lane, TRANSCRIPT, FailurePolicy::Fallback)
        .await
        .unwrap();
    assert_eq!(out.text(), "So the results were good.\nWe tested it twice.");
    let reasons: Vec<RejectReason> = out.fallbacks().map(|r| r.reason).collect();
    assert_eq!(reasons, vec![RejectReason::UnusableReply]);
    let err = clean(&lane, TRANSCRIPT, FailurePolicy::Retry)
        .await
        .unwrap_err();
    assert!(
        matches!(err, CleanupError::Rejected { ref rejection, .. } if rejection.reason == RejectReason::UnusableReply)
    );
    assert_eq!(up.requests(), 2, "an unusable reply is not retried");
}
