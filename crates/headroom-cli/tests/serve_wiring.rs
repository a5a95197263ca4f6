//! `headroom serve` as a user runs it: the text lane must yield to the audio lane its own speech
//! endpoints run on. Reproduces the report that, with two streams running and
//! `--yield-to-audio preempt`, an interactive transcription let both streams run to their end
//! and `headroom_rejections_total{lane="text",reason="audio_priority"}` stayed 0 (the text lane
//! watched one audio lane while the speech endpoints ran on another).

use futures::StreamExt;
use headroom_speech::audio::{decode_file, write_wav, Audio, DecodeLimits};
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use headroom_tests::serve_process::ServeProcess;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::Notify;

async fn serve(upstream: &str, rule: &str) -> ServeProcess {
    ServeProcess::start(
        env!("CARGO_BIN_EXE_headroom").as_ref(),
        upstream,
        &["--yield-to-audio", rule],
    )
    .await
}

/// About a minute of real speech (the bundled interview, three times), so a transcription is
/// surely still running while the test acts.
fn long_clip(name: &str) -> PathBuf {
    let sample = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples/interview.flac");
    let audio = decode_file(&sample, DecodeLimits::default()).unwrap();
    let long = Audio {
        samples: audio.samples.repeat(3),
        sample_rate: audio.sample_rate,
    };
    let path =
        std::env::temp_dir().join(format!("headroom-wiring-{name}-{}.wav", std::process::id()));
    write_wav(&path, &long).unwrap();
    path
}

fn chat_body() -> Value {
    json!({"model": "fake-model", "stream": true,
           "messages": [{"role": "user", "content": "tell a long story"}]})
}

/// Starts a streamed chat completion and returns its SSE data lines once the first content
/// has arrived (so the request is surely running).
async fn running_stream(
    http: &reqwest::Client,
    base: &str,
) -> futures::stream::BoxStream<'static, String> {
    let resp = http
        .post(format!("{base}/chat/completions"))
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut data = resp
        .bytes_stream()
        .map(|chunk| String::from_utf8_lossy(&chunk.unwrap()).into_owned())
        .flat_map(|text| {
            futures::stream::iter(
                text.lines()
                    .filter_map(|l| l.strip_prefix("data: ").map(str::to_string))
                    .collect::<Vec<_>>(),
            )
        })
        .boxed();
    loop {
        let line = data.next().await.expect("the stream started");
        if line.contains("\"content\"") {
            return data;
        }
    }
}

/// Posts an interactive transcription of `clip` in the background.
fn transcribe(
    http: &reqwest::Client,
    base: &str,
    clip: &PathBuf,
) -> tokio::task::JoinHandle<reqwest::StatusCode> {
    let form = reqwest::multipart::Form::new()
        .part(
            "file",
            reqwest::multipart::Part::bytes(std::fs::read(clip).unwrap()).file_name("long.wav"),
        )
        .text("model", "whisper-tiny.en")
        .text("priority", "interactive");
    let request = http
        .post(format!("{base}/audio/transcriptions"))
        .multipart(form);
    tokio::spawn(async move { request.send().await.unwrap().status() })
}

/// Polls the lanes endpoint until the audio lane runs a job (the transcription).
async fn until_audio_runs(http: &reqwest::Client, base: &str) {
    let url = format!("{base}/headroom/lanes");
    headroom_tests::until("the audio lane to run the transcription", || async {
        let lanes: Value = http.get(&url).send().await.unwrap().json().await.unwrap();
        lanes["audio"]["occupancy"]["in_flight"].as_u64() == Some(1)
    })
    .await;
}

async fn audio_priority_rejections(http: &reqwest::Client, server: &ServeProcess) -> u64 {
    server
        .metric(
            http,
            r#"headroom_rejections_total{lane="text",reason="audio_priority"}"#,
        )
        .await as u64
}

#[tokio::test]
async fn preempt_stops_running_text_streams_when_an_interactive_transcription_starts() {
    let up = FakeUpstream::start(Behavior::HangAfter(1), 4096).await;
    let server = serve(&up.base_url(), "preempt").await;
    let http = reqwest::Client::new();
    let mut first = running_stream(&http, &server.base).await;
    let mut second = running_stream(&http, &server.base).await;
    let clip = long_clip("preempt");
    let job = transcribe(&http, &server.base, &clip);
    for stream in [&mut first, &mut second] {
        let mut stopped = None;
        while let Some(line) = stream.next().await {
            if line.contains("\"error\"") {
                stopped = Some(line);
            }
        }
        let error: Value = serde_json::from_str(&stopped.expect("the stream was stopped")).unwrap();
        assert_eq!(error["error"]["code"], "audio_priority", "{error}");
    }
    assert_eq!(job.await.unwrap(), 200, "the transcription itself succeeds");
    assert_eq!(audio_priority_rejections(&http, &server).await, 2);
}

#[tokio::test]
async fn gate_refuses_new_text_work_during_an_interactive_transcription_and_lets_running_work_finish(
) {
    let release = Arc::new(Notify::new());
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    up.push(Behavior::SlowFirstToken(release.clone()));
    let server = serve(&up.base_url(), "gate").await;
    let http = reqwest::Client::new();
    // A request already running when the audio job arrives: its headers are in, content waits.
    let running = http
        .post(format!("{}/chat/completions", server.base))
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(running.status(), 200);
    let clip = long_clip("gate");
    let job = transcribe(&http, &server.base, &clip);
    until_audio_runs(&http, &server.base).await;
    let refused = http
        .post(format!("{}/chat/completions", server.base))
        .json(&chat_body())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "audio_priority", "{body}");
    assert_eq!(job.await.unwrap(), 200);
    release.notify_one();
    let text = running.text().await.unwrap();
    assert!(
        text.contains("[DONE]") && !text.contains("\"error\""),
        "{text}"
    );
    assert_eq!(audio_priority_rejections(&http, &server).await, 1);
}
