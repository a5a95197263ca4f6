//! `headroom bench run` against a real llama-server on this CPU: every figure of the reference
//! harness is produced (GPU fields absent, or the server's resident memory when asked), the
//! audio job runs alongside, the soak feeds the leak detector, and a remote endpoint never
//! receives the user's own prompts.

use headroom_bench::harness::{self, AudioJob, HarnessConfig, MemoryFigures};
use headroom_core::config::Config;
use headroom_core::llm::LlmClient;
use headroom_gpu::{GpuSampler, ProcessRssReader, DEFAULT_CAPACITY, DEFAULT_PERIOD};
use headroom_services::speech::AudioInput;
use headroom_tests::llama::LlamaServer;
use std::path::PathBuf;

fn quick() -> HarnessConfig {
    HarnessConfig {
        max_tokens: 24,
        ..HarnessConfig::default()
    }
}

#[tokio::test]
async fn the_article_figures_are_all_produced_on_a_cpu_machine() {
    let llama = LlamaServer::start().await;
    let client = LlmClient::new(&llama.base_url(), None).unwrap();
    let services = headroom_tests::services(Config::default());
    let report = harness::run(
        &services,
        &client,
        quick(),
        None,
        "no NVIDIA GPU: test",
        &|_| {},
    )
    .await
    .unwrap();
    assert!(report.loopback);
    assert_eq!(
        (report.concurrency, report.batches, report.warmup_batches),
        (2, 3, 1)
    );
    let pass = &report.text_only;
    assert_eq!(pass.requests.len(), 6, "3 batches × 2, warm-up excluded");
    assert_eq!(pass.succeeded, 6, "{:?}", pass.failures);
    assert_eq!(
        pass.requests.iter().map(|r| r.batch).collect::<Vec<_>>(),
        vec![0, 0, 1, 1, 2, 2]
    );
    for r in &pass.requests {
        let ttft = r.ttft_ms.expect("ttft");
        assert!(ttft > 0.0 && ttft <= r.latency_ms, "{r:?}");
        assert!(r.completion_tokens.unwrap() > 1);
        assert!(r.tpot_ms.unwrap() > 0.0);
        assert!(!r.itl_ms.is_empty());
    }
    for s in [&pass.ttft, &pass.latency, &pass.tpot, &pass.itl] {
        let s = s.as_ref().unwrap();
        assert!(s.p50_ms <= s.p95_ms && s.p95_ms <= s.p99_ms && s.p99_ms <= s.max_ms);
    }
    assert!(pass.output_tokens_per_s > 0.0 && pass.requests_per_s > 0.0);
    assert!(
        matches!(&pass.memory, MemoryFigures::Absent { reason } if reason.contains("no NVIDIA GPU"))
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["text_only"]["memory"]["state"], "absent");
    let html = harness::render_html(&report);
    assert!(html.contains("latency CDF") && html.contains("TPOT"));
    assert!(
        !html.contains("<script") && !html.contains("src=\"http"),
        "self-contained"
    );
    assert!(harness::render_text(&report).contains("TTFT"));
}

#[tokio::test]
async fn memory_soak_and_audio_job_beside_the_text_load() {
    let llama = LlamaServer::start().await;
    let client = LlmClient::new(&llama.base_url(), None).unwrap();
    let sampler = GpuSampler::with_reader(
        ProcessRssReader::open(llama.pid()).unwrap(),
        DEFAULT_PERIOD,
        DEFAULT_CAPACITY,
        true,
    );
    let clip = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../samples/interview.flac");
    let config = HarnessConfig {
        audio: Some(AudioJob {
            clip: AudioInput::from_file(&clip).unwrap(),
            model: headroom_speech::models::DEFAULT_MODEL.into(),
            runs: 2,
        }),
        soak_runs: Some(5),
        ..quick()
    };
    let services = headroom_tests::services(Config::default());
    let report = harness::run(
        &services,
        &client,
        config,
        Some((sampler, "llama-server resident memory".into())),
        "",
        &|_| {},
    )
    .await
    .unwrap();
    match &report.text_only.memory {
        MemoryFigures::Measured { window, .. } => {
            assert!(window.baseline_mib > 10.0, "llama-server holds its model");
            assert!(window.peak_mib >= window.baseline_mib);
            assert_eq!(window.delta_mib, window.peak_mib - window.baseline_mib);
            assert!(window.samples >= 2);
        }
        other => panic!("{other:?}"),
    }
    assert!(!report.text_only.memory_timeline.is_empty());
    let audio = report.audio.as_ref().unwrap();
    assert_eq!(audio.idle.as_ref().unwrap().count, 2);
    assert!(audio.under_text_load.as_ref().unwrap().count >= 1);
    assert!(audio.p50_ratio.unwrap() > 0.0);
    assert_eq!(report.with_audio.as_ref().unwrap().requests.len(), 6);
    let soak = report.soak.as_ref().unwrap();
    assert_eq!(soak.runs.len(), 5);
    assert!(soak
        .runs
        .iter()
        .all(|r| r.floor_mib.is_finite() && r.throughput > 0.0));
    assert!(!soak.report.summary.is_empty());
    assert!(soak.report.reasoning.len() >= 3);
    // llama-server (with --metrics) exports its deferred-request gauge: the queue depth is real.
    assert!(soak.runs.iter().all(|r| r.queue_depth >= 0.0));
    assert!(
        !soak
            .report
            .reasoning
            .iter()
            .any(|l| l.contains("no waiting-request gauge")),
        "{:?}",
        soak.report.reasoning
    );
}

#[tokio::test]
async fn own_prompts_never_go_to_a_remote_endpoint() {
    // TEST-NET-1: nothing answers there, and nothing must be sent.
    let client = LlmClient::new("http://192.0.2.1:8000/v1", None).unwrap();
    let config = HarnessConfig {
        prompts: vec!["my private transcript".into()],
        custom_prompts: true,
        ..quick()
    };
    let services = headroom_tests::services(Config::default());
    let err = harness::run(&services, &client, config, None, "", &|_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("refusing to send your own prompts"), "{err}");
}

fn interview() -> AudioInput {
    let clip = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../samples/interview.flac");
    AudioInput::from_file(&clip).unwrap()
}

#[tokio::test]
async fn the_yield_bench_fits_its_load_to_a_2048_token_slot() {
    // The report: llama-server `-c 4096 -np 2` gives each request 2048 tokens, the load asked
    // for 2048 reply tokens on top of its prompt, every request was refused input_too_long and
    // retried every 200 ms, and `headroom bench yield` printed nothing for 400 s.
    let llama = LlamaServer::start_with_context(4096).await;
    let client = LlmClient::new(&llama.base_url(), None).unwrap();
    let services = headroom_tests::services(Config::default());
    let report = tokio::time::timeout(
        std::time::Duration::from_secs(600),
        headroom_bench::boundary::yield_rules(
            &services,
            &client,
            &interview(),
            headroom_speech::models::DEFAULT_MODEL,
            1,
            2,
            &|_| {},
        ),
    )
    .await
    .expect("the benchmark ends")
    .unwrap();
    assert_eq!(report.rules.len(), 3);
    for rule in &report.rules {
        assert!(rule.audio_under_load.is_some(), "{rule:?}");
        assert!(
            !rule.text_outcomes.contains_key("input_too_long"),
            "{rule:?}"
        );
    }
}

#[tokio::test]
async fn the_yield_bench_stops_with_the_reason_when_its_load_cannot_run() {
    use headroom_bench::boundary::{yield_rules, BenchError};
    use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
    let services = headroom_tests::services(Config::default());
    // A context that cannot hold the prompt and a reply: refused before any load starts.
    let tiny = FakeUpstream::start(Behavior::Echo, 100).await;
    let client = LlmClient::new(&tiny.base_url(), None).unwrap();
    let err = yield_rules(
        &services,
        &client,
        &interview(),
        "whisper-tiny.en",
        1,
        2,
        &|_| {},
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, BenchError::ContextTooSmall { context: 100, .. }),
        "{err}"
    );
    // A server that refuses every request as too long for its context: the load stops and
    // says why, instead of retrying forever.
    let refusing = FakeUpstream::start(
        Behavior::Status {
            status: 400,
            body: r#"{"object":"error","message":"This model's maximum context length is 2048 tokens.","type":"BadRequestError","code":400}"#.into(),
            retry_after: None,
        },
        4096,
    )
    .await;
    let client = LlmClient::new(&refusing.base_url(), None).unwrap();
    let err = yield_rules(
        &services,
        &client,
        &interview(),
        "whisper-tiny.en",
        1,
        2,
        &|_| {},
    )
    .await
    .unwrap_err();
    assert!(matches!(err, BenchError::NoProgress(_)), "{err}");
    assert!(
        err.to_string().contains("maximum context length is 2048"),
        "{err}"
    );
}
