//! Speech streams nobody reads (issue 39, item 7), against `headroom serve` as a user runs it.
//!
//! Reported on main: a client that read only the headers of a streamed Kokoro answer from
//! `POST /v1/audio/speech` kept serve synthesizing at 100% CPU for 90 s (the kernel's socket
//! buffers took megabytes of it), and nine such connections filled the speech queue, so every
//! speech request, interactive ones too, got 429 while they stayed open. Now synthesis waits
//! for the client to take what was made, a client that takes nothing for the write timeout
//! (`server.write_timeout_secs`, 10 s) is disconnected and its job stopped, and the streams'
//! later sentences take turns outside the lane's queue (`audio_lane.stream_places`), so a
//! request a person waits on still gets in.
//!
//! Needs Kokoro (`scripts/test` installs it). `stalled_speech_readers_measured` (ignored: it
//! takes minutes) prints serve's CPU time and peak memory under 20 stalled MP3 readers.

use headroom_tests::fake_upstream::{Behavior, FakeUpstream};
use headroom_tests::serve_process::ServeProcess;
use serde_json::json;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `HOST:PORT` of a server.
fn authority(server: &ServeProcess) -> String {
    server.root().trim_start_matches("http://").to_string()
}

/// A text of `sentences` sentences, minutes of speech at the longest.
fn long_text(sentences: usize) -> String {
    (1..=sentences)
        .map(|n| {
            format!("Sentence number {n} of the long report, read aloud slowly for nobody at all.")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The status of an HTTP/1.1 answer's head.
fn status_of(head: &[u8]) -> Option<u16> {
    let text = String::from_utf8_lossy(head);
    text.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// A client that asks for a streamed take, reads the answer's headers (and whatever came with
/// them in the same read) and then never reads again. `Err(status)` when it was refused.
async fn stalled_speech(authority: &str, text: &str, format: &str) -> Result<TcpStream, u16> {
    let mut stream = TcpStream::connect(authority).await.unwrap();
    let body = json!({"input": text, "voice": "kokoro", "response_format": format}).to_string();
    let head = format!(
        "POST /v1/audio/speech HTTP/1.1\r\nHost: {authority}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(120), stream.read(&mut buf))
            .await
            .expect("the answer's headers within two minutes")
            .unwrap();
        assert!(
            n > 0,
            "closed before the headers: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    match status_of(&got) {
        Some(200) => Ok(stream),
        status => Err(status.unwrap_or(0)),
    }
}

/// serve's CPU time so far (user and system), from `/proc/PID/stat`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces), from field 3 (state).
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields[i].parse::<f64>().unwrap();
    // utime and stime are fields 14 and 15, in USER_HZ (100 a second on Linux).
    (ticks(14 - 3) + ticks(15 - 3)) / 100.0
}

/// Polls until serve's CPU time grew by less than 0.1 s over 2 s (it stopped computing), and
/// returns when that was; `None` when it never did within `within`.
async fn until_cpu_is_quiet(pid: u32, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut samples: Vec<(Instant, f64)> = Vec::new();
    while started.elapsed() < within {
        let now = Instant::now();
        samples.push((now, cpu_seconds(pid)));
        if let Some((_, before)) = samples
            .iter()
            .rev()
            .find(|(at, _)| now.duration_since(*at) >= Duration::from_secs(2))
        {
            if samples.last().unwrap().1 - before < 0.1 {
                return Some(started.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    None
}

/// How many connections serve closed because their clients took nothing.
async fn not_reading(server: &ServeProcess, http: &reqwest::Client) -> f64 {
    server
        .metric(
            http,
            "headroom_connection_refusals_total{reason=\"client_not_reading\"}",
        )
        .await
}

/// Speaks a short line the way an interactive client does, reading the answer whole.
async fn speak_a_line(http: &reqwest::Client, server: &ServeProcess) -> (u16, Vec<u8>) {
    let resp = http
        .post(format!("{}/audio/speech", server.base))
        .json(
            &json!({"input": "The meeting starts at ten.", "voice": "kokoro",
                      "response_format": "wav"}),
        )
        .timeout(Duration::from_secs(120))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.bytes().await.unwrap().to_vec())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speech_streams_nobody_reads_are_dropped_and_leave_the_lane_to_a_person() {
    headroom_tests::models_dir();
    // More than the queue's 8 places, which nine stalled streams used to fill.
    const STALLED: usize = 12;
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    // Defaults: a 10 s write timeout, one stream place, a queue of 8.
    let server =
        ServeProcess::start(env!("CARGO_BIN_EXE_headroom").as_ref(), &up.base_url(), &[]).await;
    let authority = authority(&server);
    let http = reqwest::Client::new();
    let pid = server.pid();
    let text = long_text(30);

    // Clients ask for a long streamed take one after another (PCM: the kernel's buffers hold
    // the fewest seconds of it), each reading the headers and stopping. Each is a request like
    // any other: it used to be refused (429 audio_lane_full) once nine were open.
    let mut stalled: Vec<TcpStream> = Vec::new();
    for n in 0..STALLED {
        match stalled_speech(&authority, &text, "pcm").await {
            Ok(stream) => stalled.push(stream),
            Err(status) => {
                panic!("a speech request got {status} while {n} streams nobody reads were open")
            }
        }
    }
    let all_open = Instant::now();
    let cpu_at_open = cpu_seconds(pid);

    // (a) A person's request is served while they are open (it got 429 audio_lane_full).
    let (status, wav) = speak_a_line(&http, &server).await;
    assert_eq!(
        status,
        200,
        "an interactive request while {STALLED} streams stall: {}",
        String::from_utf8_lossy(&wav)
    );
    assert!(wav.len() > 24_000, "{} bytes", wav.len());
    let served_after = all_open.elapsed();

    // (c) serve stops computing for clients that take nothing (it synthesized the whole text
    // for each of them, minutes of CPU).
    let quiet_after = until_cpu_is_quiet(pid, Duration::from_secs(150))
        .await
        .expect("serve's CPU time still grows 150 s after the streams stalled");
    let cpu_spent = cpu_seconds(pid) - cpu_at_open;

    // (b) ...and closes them once they have taken nothing for the write timeout; their jobs are
    // gone and the lane is empty.
    let deadline = Instant::now() + Duration::from_secs(60);
    while not_reading(&server, &http).await < STALLED as f64 {
        assert!(
            Instant::now() < deadline,
            "serve closed {} of {STALLED} stalled streams a minute after it stopped computing",
            not_reading(&server, &http).await
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let dropped_after = all_open.elapsed();
    let lanes = server.lanes_when_idle(&http, Duration::from_secs(10)).await;
    assert_eq!(lanes["audio"]["occupancy"]["waiting"], 0, "{lanes}");
    // Each stalled client, reading at last, gets what was buffered and then the end: far less
    // than the take (about 2 minutes of 48 KB/s PCM).
    for mut stream in stalled {
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut rest))
            .await
            .expect("the server closed the connection");
        assert!(
            rest.len() < 2 * 1024 * 1024,
            "{} bytes after the headers ({read:?})",
            rest.len()
        );
    }
    // And the lane serves as before.
    let (status, _) = speak_a_line(&http, &server).await;
    assert_eq!(status, 200);
    let resident = server.resident();
    eprintln!(
        "{STALLED} stalled PCM streams: a line spoken {served_after:.1?} after they were open; \
         serve quiet {quiet_after:.1?} later, having spent {cpu_spent:.1} s of CPU on them; \
         all closed {dropped_after:.1?} after they were open; peak resident {:.1} MiB",
        resident.peak_kib as f64 / 1024.0
    );
}

/// The figures for the README: serve's CPU time and peak memory while 20 clients each ask for
/// a long streamed MP3 take (the reported case) and read only its headers. Each is opened once
/// the one before has its headers (a refused one is asked again every second, for up to 30 s);
/// then serve is watched until three minutes after the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "minutes long; prints figures (cargo test --test serve_streams -- --ignored)"]
async fn stalled_speech_readers_measured() {
    const READERS: usize = 20;
    const WATCH: Duration = Duration::from_secs(180);
    let up = FakeUpstream::start(Behavior::Echo, 4096).await;
    let server =
        ServeProcess::start(env!("CARGO_BIN_EXE_headroom").as_ref(), &up.base_url(), &[]).await;
    let authority = authority(&server);
    let http = reqwest::Client::new();
    let pid = server.pid();
    // About OpenAI's 4096-character bound: some four minutes of speech.
    let text = long_text(50);
    let started = Instant::now();
    let cpu_before = cpu_seconds(pid);
    let mut stalled = Vec::new();
    let mut refused = 0usize;
    for _ in 0..READERS {
        let asked = Instant::now();
        loop {
            match stalled_speech(&authority, &text, "mp3").await {
                Ok(stream) => {
                    stalled.push(stream);
                    break;
                }
                Err(_) => refused += 1,
            }
            if asked.elapsed() > Duration::from_secs(30) || started.elapsed() > WATCH {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let opened = stalled.len();
    let all_opened = started.elapsed();
    let quiet_at = until_cpu_is_quiet(pid, WATCH.saturating_sub(started.elapsed()))
        .await
        .map(|_| started.elapsed());
    // The rest of the window, so the CPU figure always covers the same three minutes.
    tokio::time::sleep(WATCH.saturating_sub(started.elapsed())).await;
    let cpu = cpu_seconds(pid) - cpu_before;
    let watched = started.elapsed();
    let closed = not_reading(&server, &http).await;
    let (status, _) = speak_a_line(&http, &server).await;
    let lanes = server.lanes_when_idle(&http, Duration::from_secs(10)).await;
    let resident = server.resident();
    eprintln!(
        "{READERS} stalled MP3 readers: {opened} opened (in {all_opened:.1?}; {refused} refusals \
         on the way); over {watched:.1?} serve spent {cpu:.1} s of CPU, peak resident {:.1} MiB; \
         quiet from {quiet_at:.1?}; closed as not reading: {closed}; a line spoken afterwards: \
         {status}; audio lane in flight {}, waiting {}",
        resident.peak_kib as f64 / 1024.0,
        lanes["audio"]["occupancy"]["in_flight"],
        lanes["audio"]["occupancy"]["waiting"],
    );
    drop(stalled);
}
