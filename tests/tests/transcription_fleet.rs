//! A transcription spread over several audio servers: real `headroom serve` workers on
//! loopback (each its own services, so its own audio lane and models), and beside them, for
//! fault injection, a server that drops every connection and one that never answers.

use headroom_base::consent::RemoteConsent;
use headroom_core::admission::Lane;
use headroom_core::metrics::Metrics;
use headroom_server::RunningServer;
use headroom_services::transcription_fleet::{FleetSettings, TranscriptionFleet};
use headroom_speech::asr::{
    normalized_word_error_rate, TranscribeOptions, Transcriber, Transcript,
};
use headroom_speech::audio::{decode_file, resample, DecodeLimits, PiecePlan};
use headroom_speech::remote::RemoteTranscriber;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

const SENTENCES: [&str; 4] = [
    "The quick brown fox jumps over the lazy dog.",
    "Please call Stella and ask her to bring these things with her.",
    "We walked along the river and watched the boats go by.",
    "The museum opens at nine and closes early on Sundays.",
];

/// espeak-ng reading each sentence, at 16 kHz, with `pause` seconds of silence after each.
fn recording(pause: f64) -> Vec<f32> {
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    for (i, sentence) in SENTENCES.iter().enumerate() {
        let path = dir.path().join(format!("{i}.wav"));
        let status = std::process::Command::new("espeak-ng")
            .args(["-v", "en-us", "-s", "150", "-w"])
            .arg(&path)
            .arg(sentence)
            .status()
            .expect("espeak-ng runs");
        assert!(status.success());
        let audio = decode_file(&path, DecodeLimits::default()).unwrap();
        out.extend(resample(&audio.samples, audio.sample_rate, 16_000).unwrap());
        out.extend(std::iter::repeat_n(0.0, (pause * 16_000.0) as usize));
    }
    out
}

/// Pieces of one sentence each: every pause of a second or more ends one.
fn settings(per_server: usize) -> FleetSettings {
    FleetSettings {
        per_server,
        pieces: PiecePlan {
            target_seconds: 30.0,
            long_pause_seconds: 1.0,
        },
        ..FleetSettings::default()
    }
}

/// A real `headroom serve`, its own services (no text model: nothing listens on port 9), its
/// model loaded by a first request, so a piece's deadline counts the hearing only.
async fn worker() -> RunningServer {
    headroom_tests::models_dir();
    let server =
        headroom_tests::serve(&headroom_tests::services_for("http://127.0.0.1:9/v1")).await;
    let tone: Vec<f32> = (0..16_000).map(|i| (i as f32 * 0.05).sin() * 0.1).collect();
    RemoteTranscriber::new(
        &server.base_url(),
        "whisper-1",
        None,
        &RemoteConsent::default(),
    )
    .unwrap()
    .request(&tone, &TranscribeOptions::default())
    .await
    .unwrap();
    server
}

/// A server that accepts connections and closes each at once (a worker that died).
async fn dropping() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            drop(socket);
        }
    });
    url
}

/// A server that accepts connections and never answers (a worker that hangs).
async fn stalling() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    url
}

fn fleet(urls: &[String], settings: FleetSettings) -> (Arc<TranscriptionFleet>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::new());
    let fleet = TranscriptionFleet::new(
        urls,
        "whisper-1",
        None,
        &RemoteConsent::default(),
        settings,
        metrics.clone(),
    )
    .unwrap();
    (Arc::new(fleet), metrics)
}

/// The recording transcribed by `fleet` on a worker thread (as the audio lane runs it), with
/// the end of each piece as it was handed on.
async fn transcribed(fleet: &Arc<TranscriptionFleet>, audio: Vec<f32>) -> (Transcript, Vec<f64>) {
    let fleet = fleet.clone();
    tokio::task::spawn_blocking(move || {
        let mut ends = Vec::new();
        let transcript = fleet
            .transcribe_from(
                &audio,
                0.0,
                &TranscribeOptions::default(),
                &mut |window| ends.push(window.done_secs),
                &|_| {},
                &Default::default(),
            )
            .unwrap();
        (transcript, ends)
    })
    .await
    .unwrap()
}

/// A word of each sentence Whisper tiny hears surely, in order.
const MARKS: [&str; 4] = ["lazy", "call", "river", "museum"];

/// Whether every sentence is in `said`, in order (by its mark), and the whole near enough to
/// what was said for Whisper tiny on espeak-ng.
fn reads_in_order(said: &str) -> bool {
    let lower = said.to_lowercase();
    let at: Vec<Option<usize>> = MARKS.iter().map(|m| lower.find(m)).collect();
    let wer = normalized_word_error_rate(&SENTENCES.join(" "), said);
    at.iter().all(Option::is_some) && at.windows(2).all(|w| w[0] < w[1]) && wer < 0.35
}

fn text(transcript: &Transcript) -> String {
    let words: Vec<&str> = transcript
        .segments
        .iter()
        .map(|s| s.text.as_str())
        .collect();
    words.join(" ")
}

fn answered(metrics: &Metrics, url: &str, result: &'static str) -> u64 {
    metrics.upstream_requests(Lane::Audio, url.trim_end_matches('/'), result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_recording_spread_over_three_servers_reads_in_order_and_each_server_works() {
    let workers = [worker().await, worker().await, worker().await];
    let urls: Vec<String> = workers.iter().map(|w| w.base_url()).collect();
    let (fleet, metrics) = fleet(&urls, settings(1));
    assert_eq!(fleet.capacity(), 3);

    let (transcript, ends) = transcribed(&fleet, recording(1.5)).await;
    let said = text(&transcript);
    assert!(reads_in_order(&said), "{said}");
    // One piece a sentence, handed on in order and timed in the whole recording.
    assert_eq!(ends.len(), SENTENCES.len(), "{ends:?}");
    assert!(ends.windows(2).all(|w| w[0] < w[1]), "{ends:?}");
    assert!(transcript
        .segments
        .windows(2)
        .all(|w| w[0].start <= w[1].start));
    let per_server: Vec<u64> = urls
        .iter()
        .map(|u| answered(&metrics, u, "answered"))
        .collect();
    assert_eq!(per_server.iter().sum::<u64>(), SENTENCES.len() as u64);
    assert!(
        per_server.iter().all(|&n| n >= 1),
        "every server took a piece: {per_server:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_server_and_a_hung_one_cost_their_pieces_nothing() {
    let workers = [worker().await, worker().await];
    let dead = dropping().await;
    let hung = stalling().await;
    let mut urls: Vec<String> = vec![dead.clone(), hung.clone()];
    urls.extend(workers.iter().map(|w| w.base_url()));
    let settings = FleetSettings {
        // A hung server is given up on after 20 s: a warm worker hears a sentence in a
        // fraction of that, even on two busy cores.
        deadline_base: Duration::from_secs(20),
        deadline_per_second: Duration::ZERO,
        ..settings(1)
    };
    let (fleet, metrics) = fleet(&urls, settings);

    let (transcript, ends) = transcribed(&fleet, recording(1.5)).await;
    let said = text(&transcript);
    assert!(reads_in_order(&said), "every sentence is there: {said}");
    assert_eq!(ends.len(), SENTENCES.len());
    assert!(answered(&metrics, &dead, "unavailable") >= 1);
    assert!(answered(&metrics, &hung, "deadline") >= 1);
    let views = fleet.views();
    for (url, view) in urls.iter().zip(&views).take(2) {
        assert!(!view.up, "{url} is down: {view:?}");
        assert!(view.down_reason.is_some());
    }
    assert!(views[2].up && views[3].up, "{views:?}");
    // Down, each waits out its backoff: the pieces that followed went to the workers.
    let to_workers: u64 = urls[2..]
        .iter()
        .map(|u| answered(&metrics, u, "answered"))
        .sum();
    assert_eq!(to_workers, SENTENCES.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn when_no_server_answers_the_piece_fails_naming_its_place_and_the_last_error() {
    let urls = vec![headroom_tests::closed_port_url(), dropping().await];
    let settings = FleetSettings {
        retry_for: Duration::from_secs(2),
        ..settings(1)
    };
    let (fleet, metrics) = fleet(&urls, settings);
    let audio = recording(1.5);
    let error = tokio::task::spawn_blocking(move || {
        fleet
            .transcribe_from(
                &audio,
                0.0,
                &TranscribeOptions::default(),
                &mut |_| {},
                &|_| {},
                &Default::default(),
            )
            .unwrap_err()
    })
    .await
    .unwrap()
    .to_string();
    // The first piece (the language is heard from it first), from the start.
    assert!(
        error.contains("no audio server could transcribe 0:00–0:0"),
        "{error}"
    );
    assert!(error.contains("tried"), "{error}");
    // Round after round within the time given, not once.
    let tries: u64 = urls
        .iter()
        .map(|u| answered(&metrics, u, "unavailable"))
        .sum();
    assert!(tries > urls.len() as u64, "{tries}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_litellm_proxy_in_front_of_two_workers_is_one_server_beside_a_third() {
    let behind = [worker().await, worker().await];
    let direct = worker().await;
    let proxy = headroom_tests::litellm::LiteLlmProxy::for_transcription(
        &behind.iter().map(|w| w.base_url()).collect::<Vec<_>>(),
    )
    .await;
    let urls = vec![proxy.base_url(), direct.base_url()];
    let metrics = Arc::new(Metrics::new());
    // The proxy's master key; the worker beside it, with no token of its own, ignores it.
    let fleet = Arc::new(
        TranscriptionFleet::new(
            &urls,
            headroom_tests::litellm::LiteLlmProxy::TRANSCRIPTION,
            headroom_base::openai::ApiKey::new(proxy.key.clone()),
            &RemoteConsent::default(),
            settings(2),
            metrics.clone(),
        )
        .unwrap(),
    );
    let (transcript, ends) = transcribed(&fleet, recording(1.5)).await;
    let said = text(&transcript);
    assert!(reads_in_order(&said), "{said}\n{}", proxy.log_text());
    assert_eq!(ends.len(), SENTENCES.len());
    assert!(
        answered(&metrics, &urls[0], "answered") >= 1,
        "the proxy took pieces: {}",
        proxy.log_text()
    );
    assert_eq!(
        urls.iter()
            .map(|u| answered(&metrics, u, "answered"))
            .sum::<u64>(),
        SENTENCES.len() as u64
    );
}
