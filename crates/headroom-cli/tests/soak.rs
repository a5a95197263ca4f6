//! A bounded soak: the real `headroom serve` under a steady mixed load from this (second)
//! process — chat streams read to the end, streams dropped mid-way, requests refused because
//! the text lane is full, transcriptions, and transcriptions whose client goes away — while its
//! resident memory, open file descriptors, threads and async tasks are sampled once a second.
//! After a warm-up, each must stay flat: the last quarter of the run no higher than the second
//! quarter, within a small allowance for allocator retention. `SOAK_SECONDS` sets the length
//! (default 40); the figures are printed as a table.

use futures::StreamExt;
use headroom_speech::audio::{decode_file, wav_bytes, Audio, DecodeLimits};
use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use headroom_tests::serve_process::ServeProcess;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy)]
struct Sample {
    rss_kib: u64,
    fds: u64,
    threads: u64,
    tasks: u64,
}

fn status_field(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in /proc status"))
}

async fn sample(server: &ServeProcess, http: &reqwest::Client) -> Sample {
    let pid = server.pid();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count() as u64;
    Sample {
        rss_kib: status_field(&status, "VmRSS:"),
        fds,
        threads: status_field(&status, "Threads:"),
        tasks: server.metric(http, "headroom_runtime_tasks").await as u64,
    }
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

/// Three seconds of the bundled interview as WAV bytes.
fn short_clip() -> Vec<u8> {
    let sample = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples/interview.flac");
    let audio = decode_file(&sample, DecodeLimits::default()).unwrap();
    let three_seconds = (audio.sample_rate * 3) as usize;
    wav_bytes(&Audio {
        samples: audio.samples[..three_seconds].to_vec(),
        sample_rate: audio.sample_rate,
    })
}

type Tally = Arc<Mutex<BTreeMap<String, u64>>>;

fn count(tally: &Tally, what: String) {
    *tally.lock().unwrap().entry(what).or_default() += 1;
}

fn chat_body(text: &str) -> serde_json::Value {
    json!({"model": "fake-model", "stream": true,
           "messages": [{"role": "user", "content": text}]})
}

/// Streams chat completions until `until`: even rounds read to the end, odd rounds drop the
/// stream after its first data (a client that goes away). Three of these against two slots
/// also get refusals.
async fn chat_worker(base: String, until: Instant, tally: Tally) {
    let http = reqwest::Client::new();
    let mut round = 0u64;
    while Instant::now() < until {
        round += 1;
        let cancel = round % 2 == 1;
        let text = if cancel {
            "go on forever"
        } else {
            "so um the meeting is on tuesday"
        };
        let resp = http
            .post(format!("{base}/chat/completions"))
            .json(&chat_body(text))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        if status != 200 {
            count(&tally, format!("chat {status}"));
            // Refused at once: try again shortly, like a retrying client.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        let mut body = resp.bytes_stream();
        if cancel {
            let _ = body.next().await;
            drop(body);
            count(&tally, "chat dropped mid-stream".into());
        } else {
            while let Some(chunk) = body.next().await {
                chunk.unwrap();
            }
            count(&tally, "chat read to the end".into());
        }
    }
}

/// Transcribes a short clip until `until`; the second client of every three goes away mid-job.
async fn transcription_worker(base: String, until: Instant, tally: Tally) {
    let http = reqwest::Client::new();
    let clip = short_clip();
    let mut round = 0u64;
    while Instant::now() < until {
        round += 1;
        let form = reqwest::multipart::Form::new()
            .part(
                "file",
                reqwest::multipart::Part::bytes(clip.clone()).file_name("clip.wav"),
            )
            .text("model", "whisper-tiny.en");
        let request = http
            .post(format!("{base}/audio/transcriptions"))
            .multipart(form)
            .send();
        if round % 3 == 2 {
            // The client gives up before the answer; the server cancels the job.
            let _ = tokio::time::timeout(Duration::from_millis(150), request).await;
            count(&tally, "transcription abandoned".into());
        } else {
            let status = request.await.unwrap().status().as_u16();
            count(&tally, format!("transcription {status}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_stays_flat_under_a_steady_mixed_load() {
    let seconds: u64 = std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let up = FakeUpstream::start(Behavior::EchoOrEndless("word ".into()), 4096).await;
    let server =
        ServeProcess::start(env!("CARGO_BIN_EXE_headroom").as_ref(), &up.base_url(), &[]).await;
    let started = Instant::now();
    let until = started + Duration::from_secs(seconds);
    let tally: Tally = Arc::default();
    let mut load = Vec::new();
    for _ in 0..3 {
        load.push(tokio::spawn(chat_worker(
            server.base.clone(),
            until,
            tally.clone(),
        )));
    }
    load.push(tokio::spawn(transcription_worker(
        server.base.clone(),
        until,
        tally.clone(),
    )));
    let http = reqwest::Client::new();
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while Instant::now() < until {
        tick.tick().await;
        samples.push(sample(&server, &http).await);
    }
    for worker in load {
        worker.await.unwrap();
    }
    // Idle again: every slot given back, the last abandoned transcription's included once it
    // reaches its next safe point.
    server.lanes_when_idle(&http, Duration::from_secs(10)).await;

    let quarter = samples.len() / 4;
    let early = &samples[quarter..2 * quarter];
    let late = &samples[3 * quarter..];
    let pick = |window: &[Sample], f: fn(&Sample) -> u64| window.iter().map(f).collect::<Vec<_>>();
    let mut table =
        String::from("figure           2nd quarter (median)  last quarter (median)  max\n");
    let mut failures = Vec::new();
    type Figure = (&'static str, fn(&Sample) -> u64, fn(u64) -> u64);
    let figures: [Figure; 4] = [
        // Allocator retention and caches may add a little; a leak grows without bound.
        (
            "rss KiB",
            |s| s.rss_kib,
            |early| early + early / 8 + 16 * 1024,
        ),
        ("open fds", |s| s.fds, |early| early + 4),
        ("threads", |s| s.threads, |early| early + 2),
        ("runtime tasks", |s| s.tasks, |early| early + 8),
    ];
    for (name, f, allowed) in figures {
        let (e, l) = (median(pick(early, f)), median(pick(late, f)));
        let max = samples.iter().map(f).max().unwrap();
        table.push_str(&format!("{name:<16} {e:>20} {l:>22} {max:>6}\n"));
        if l > allowed(e) {
            failures.push(format!("{name} rose from {e} to {l}"));
        }
    }
    let tally = tally.lock().unwrap().clone();
    eprintln!(
        "soak of {seconds} s, {} samples\n{table}requests: {tally:?}",
        samples.len()
    );
    assert!(failures.is_empty(), "{}\n{table}", failures.join("\n"));
    for kind in [
        "chat read to the end",
        "chat dropped mid-stream",
        "chat 429",
        "transcription 200",
        "transcription abandoned",
    ] {
        assert!(
            tally.get(kind).copied().unwrap_or(0) > 0,
            "no {kind}: {tally:?}"
        );
    }
}
