//! The fault matrix: each way the text model's server can fail, met while an interactive audio
//! job (real speech synthesis with the embedded engine) holds the audio lane of the same
//! services. Every cell checks that the audio job is unharmed, the text slots return to zero,
//! the caller gets the named rejection (or the reply), the matching metric counts it once, and
//! the upstream connection is closed. The test writes the matrix as a readable report to
//! `fault-matrix.md` in Cargo's target temp folder and prints it.

use headroom_base::consent::RemoteConsent;
use headroom_core::admission::{DeadlineKind, Lane, Priority, RejectReason, YieldRule};
use headroom_core::config::Config;
use headroom_core::llm::{ChatMessage, ChatRequest};
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// What the caller should get.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expected {
    Reply,
    Refused(RejectReason, Option<DeadlineKind>),
}

struct Cell {
    fault: &'static str,
    /// `None`: nothing listens on the server's port.
    behavior: Option<Behavior>,
    expected: Expected,
}

fn context_overflow() -> String {
    r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","code":400}"#.into()
}

fn status(status: u16, message: &str, retry_after: Option<u64>) -> Option<Behavior> {
    Some(Behavior::Status {
        status,
        body: format!(r#"{{"error":{{"message":"{message}","type":"server_error"}}}}"#),
        retry_after,
    })
}

fn cells() -> Vec<Cell> {
    use Expected::*;
    use RejectReason as R;
    let reset = Arc::new(Notify::new());
    // The reset comes right after the first chunk.
    reset.notify_one();
    vec![
        Cell {
            fault: "upstream refused (nothing listening)",
            behavior: None,
            expected: Refused(R::UpstreamUnavailable, None),
        },
        Cell {
            fault: "slow first token",
            behavior: Some(Behavior::SlowFirstToken(Arc::new(Notify::new()))),
            expected: Refused(R::DeadlineExceeded, Some(DeadlineKind::FirstChunk)),
        },
        Cell {
            fault: "hang mid-stream",
            behavior: Some(Behavior::HangAfter(2)),
            expected: Refused(R::DeadlineExceeded, Some(DeadlineKind::Total)),
        },
        Cell {
            fault: "connection reset mid-stream",
            behavior: Some(Behavior::ResetAfter(1, reset)),
            expected: Refused(R::UpstreamUnavailable, None),
        },
        Cell {
            fault: "429 Too Many Requests",
            behavior: status(429, "slow down", Some(3)),
            expected: Refused(R::UpstreamBusy, None),
        },
        Cell {
            fault: "500 Internal Server Error",
            behavior: status(500, "CUDA error: out of memory", None),
            expected: Refused(R::UpstreamUnavailable, None),
        },
        Cell {
            fault: "503 Service Unavailable",
            behavior: status(503, "the engine is loading", Some(5)),
            expected: Refused(R::UpstreamBusy, None),
        },
        Cell {
            fault: "400 context overflow",
            behavior: Some(Behavior::Status {
                status: 400,
                body: context_overflow(),
                retry_after: None,
            }),
            expected: Refused(R::InputTooLong, None),
        },
        Cell {
            fault: "malformed SSE",
            behavior: Some(Behavior::Malformed),
            expected: Refused(R::UpstreamError, None),
        },
        Cell {
            fault: "enormous chunk (8 MiB in one event)",
            behavior: Some(Behavior::EnormousChunk(8 << 20)),
            expected: Refused(R::UpstreamError, None),
        },
        Cell {
            fault: "wrong content type (HTML)",
            behavior: Some(Behavior::WrongContentType),
            expected: Refused(R::UpstreamError, None),
        },
        Cell {
            fault: "never closes after [DONE]",
            behavior: Some(Behavior::DoneButOpen),
            expected: Reply,
        },
    ]
}

use headroom_tests::closed_port_url;

/// Short deadlines so the deadline cells end quickly; the text lane keeps running beside the
/// audio job (no yielding), so each fault meets the audio job head on.
fn config(url: &str) -> Config {
    let mut config = Config::default();
    config.llm.url = url.to_string();
    config.text_lane.first_chunk_secs = 1.0;
    config.text_lane.total_secs = 3.0;
    config.text_lane.yield_to_audio = YieldRule::None;
    config
}

struct Row {
    fault: &'static str,
    outcome: String,
    http: String,
    detail: String,
    audio: String,
    slots_after: usize,
    counted: u64,
    took: Duration,
}

async fn run(cell: Cell) -> Result<Row, String> {
    let (url, upstream) = match cell.behavior {
        Some(behavior) => {
            let up = FakeUpstream::start(behavior, 4096).await;
            (up.base_url(), Some(up))
        }
        None => (closed_port_url(), None),
    };
    let services = headroom_tests::services(config(&url));
    let lane = services.default_text_lane(&RemoteConsent::none()).unwrap();

    // The interactive audio job: it holds the audio lane from before the text request until
    // the request's outcome is known, then speaks a sentence with the embedded synthesizer.
    let (started_tx, started) = tokio::sync::oneshot::channel();
    let (outcome_known, wait_for_outcome) = std::sync::mpsc::channel::<()>();
    let synthesizer = services.speech().synthesizer().clone();
    let audio_lane = services.audio_lane().clone();
    let audio_job = tokio::spawn(async move {
        audio_lane
            .run(
                "test",
                Priority::Interactive,
                CancellationToken::new(),
                move |cancel| {
                    let _ = started_tx.send(());
                    let _ = wait_for_outcome.recv();
                    synthesizer.synthesize("The audio job is unharmed.", None, cancel)
                },
            )
            .await
    });
    started.await.unwrap();

    let began = Instant::now();
    let request = ChatRequest::new(vec![ChatMessage::new("user", "clean this up")]);
    let result = match lane.submit(request).await {
        Err(r) => Err(r),
        Ok(stream) => stream.collect_text().await.map_err(|(_, r)| r),
    };
    let took = began.elapsed();
    outcome_known.send(()).unwrap();
    let audio = match audio_job.await.unwrap() {
        Ok(Ok(audio)) if audio.duration_secs() > 0.5 => {
            format!("ok ({:.1} s of speech)", audio.duration_secs())
        }
        Ok(Ok(audio)) => {
            return Err(format!(
                "{}: the audio job's speech is {audio:?}",
                cell.fault
            ))
        }
        Ok(Err(e)) => return Err(format!("{}: the audio job failed: {e}", cell.fault)),
        Err(r) => return Err(format!("{}: the audio job was refused: {r}", cell.fault)),
    };
    if let Some(up) = &upstream {
        tokio::time::timeout(Duration::from_secs(30), up.until_open_streams(0))
            .await
            .map_err(|_| format!("{}: the upstream connection stayed open", cell.fault))?;
    }
    let slots_after = lane.snapshot().occupancy.in_flight;
    let metrics = services.metrics();
    let total_counted: u64 = RejectReason::ALL
        .iter()
        .map(|r| metrics.rejections(Lane::Text, *r))
        .sum();
    let (outcome, http, detail, counted) = match (&result, cell.expected) {
        (Ok(text), Expected::Reply) => (
            "reply".to_string(),
            "200".into(),
            format!("{text:?}"),
            total_counted,
        ),
        (Err(r), Expected::Refused(reason, deadline))
            if r.reason == reason && r.deadline == deadline =>
        {
            let code = match r.deadline {
                Some(kind) => format!("{} ({kind:?})", r.reason.code()),
                None => r.reason.code().to_string(),
            };
            (
                code,
                headroom_server::rejection_status(r).as_u16().to_string(),
                r.detail.clone().unwrap_or_default(),
                metrics.rejections(Lane::Text, reason),
            )
        }
        (got, expected) => {
            return Err(format!(
                "{}: expected {expected:?}, got {got:?}",
                cell.fault
            ))
        }
    };
    let expected_count = u64::from(cell.expected != Expected::Reply);
    if counted != expected_count || total_counted != expected_count {
        return Err(format!(
            "{}: the metric counted {counted} (all reasons {total_counted}), expected {expected_count}",
            cell.fault
        ));
    }
    if slots_after != 0 {
        return Err(format!(
            "{}: {slots_after} text slots still held",
            cell.fault
        ));
    }
    Ok(Row {
        fault: cell.fault,
        outcome,
        http,
        detail,
        audio,
        slots_after,
        counted,
        took,
    })
}

fn report(rows: &[Row]) -> String {
    let mut out = String::from(
        "# Fault matrix\n\nEach fault of the text model's server, met while an interactive audio job \
         (espeak-ng speech) holds the audio lane; deadlines: first words 1 s, whole reply 3 s.\n\n\
         | fault | caller gets | HTTP from `headroom serve` | detail | audio job | text slots after | metric |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let mut detail = r.detail.replace('|', "\\|");
        if detail.chars().count() > 90 {
            detail = detail.chars().take(87).collect::<String>() + "...";
        }
        out.push_str(&format!(
            "| {} | `{}` after {} ms | {} | {} | {} | {} | {} |\n",
            r.fault,
            r.outcome,
            r.took.as_millis(),
            r.http,
            detail,
            r.audio,
            r.slots_after,
            r.counted
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_upstream_fault_is_named_counted_and_leaves_audio_alone() {
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for cell in cells() {
        match run(cell).await {
            Ok(row) => rows.push(row),
            Err(e) => failures.push(e),
        }
    }
    let text = report(&rows);
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fault-matrix.md");
    std::fs::write(&path, &text).unwrap();
    eprintln!("{text}\n(written to {})", path.display());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(rows.len(), 12);
}
