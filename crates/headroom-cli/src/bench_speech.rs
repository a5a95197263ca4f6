//! `headroom bench speech`: time to first audio against the whole take through
//! `/v1/audio/speech`. A long text is asked for through a server on loopback (the same
//! router `headroom serve` runs, over these services); the client times the first audio
//! bytes and the last, per voice and format, and the take's length gives the real-time
//! factor.

use anyhow::Context;
use clap::Args;
use headroom_bench::boundary::{summarize, LatencySummary};
use headroom_server::{RunningServer, ServerState};
use headroom_services::Services;
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Ten sentences of plain narration, about 40 s spoken.
const DEFAULT_TEXT: &str = "The river was quiet that morning. A heron stood in the shallows, \
waiting for the light. Across the water, the town was slowly waking up. Shops opened their \
shutters one by one, and the smell of coffee drifted over the square. A baker carried trays of \
bread out to a van that waited by the kerb. Children ran along the old stone bridge toward the \
school, shouting to each other. By nine o'clock the streets were full of people going about \
their day. Nobody noticed the heron, still standing where it had been at dawn. Then a bell rang \
somewhere above the rooftops. And the heron, at last, spread its wings and flew away.";

#[derive(Args, Debug)]
pub struct SpeechBenchArgs {
    /// Voices to time (any `headroom speak --list-voices` name or OpenAI's); repeat.
    #[arg(long = "voice", default_values_t = ["alloy".to_string(), "en-us".to_string()])]
    voices: Vec<String>,
    /// response_format to time; repeat.
    #[arg(long = "format", default_values_t = ["pcm".to_string(), "mp3".to_string(), "opus".to_string()])]
    formats: Vec<String>,
    /// Timed requests per voice and format (after one warm-up).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// A file with the text to speak instead of the built-in ten sentences.
    #[arg(long)]
    text: Option<PathBuf>,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Serialize)]
struct Case {
    voice: String,
    format: String,
    /// From sending the request to the first audio bytes.
    first_audio: Option<LatencySummary>,
    /// From sending the request to the last byte: the whole take.
    whole_take: Option<LatencySummary>,
    /// first audio / whole take, at the medians.
    p50_ratio: Option<f64>,
    bytes: usize,
    chunks: usize,
}

#[derive(Serialize)]
struct Report {
    sentences: usize,
    characters: usize,
    runs: usize,
    cases: Vec<Case>,
}

struct Timed {
    first: Duration,
    whole: Duration,
    bytes: usize,
    chunks: usize,
}

async fn timed_request(
    http: &reqwest::Client,
    url: &str,
    text: &str,
    voice: &str,
    format: &str,
) -> anyhow::Result<Timed> {
    let started = Instant::now();
    let mut response = http
        .post(url)
        .json(&serde_json::json!({
            "model": "tts-1", "input": text, "voice": voice, "response_format": format,
        }))
        .send()
        .await?;
    if !response.status().is_success() {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        anyhow::bail!("{voice} in {format}: {status}: {body}");
    }
    let (mut first, mut bytes, mut chunks) = (None, 0, 0);
    while let Some(chunk) = response.chunk().await? {
        if !chunk.is_empty() {
            first.get_or_insert_with(|| started.elapsed());
            bytes += chunk.len();
            chunks += 1;
        }
    }
    let first = first.with_context(|| format!("{voice} in {format}: no audio came"))?;
    Ok(Timed {
        first,
        whole: started.elapsed(),
        bytes,
        chunks,
    })
}

pub async fn run(args: SpeechBenchArgs, services: &Services) -> anyhow::Result<()> {
    let text = match &args.text {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?
        }
        None => DEFAULT_TEXT.to_string(),
    };
    let sentences = headroom_speech::tts::sentences(&text).len();
    let server = RunningServer::ephemeral(ServerState::from_services(services)?).await?;
    let url = format!("{}/audio/speech", server.base_url());
    let http = headroom_base::http::client();
    let mut cases = Vec::new();
    for voice in &args.voices {
        for format in &args.formats {
            eprintln!(
                "bench: {voice} in {format}: one warm-up, {} timed",
                args.runs
            );
            timed_request(&http, &url, &text, voice, format).await?;
            let mut runs = Vec::new();
            for _ in 0..args.runs {
                runs.push(timed_request(&http, &url, &text, voice, format).await?);
            }
            let first_audio = summarize(&runs.iter().map(|r| r.first).collect::<Vec<_>>());
            let whole_take = summarize(&runs.iter().map(|r| r.whole).collect::<Vec<_>>());
            let p50_ratio = first_audio
                .as_ref()
                .zip(whole_take.as_ref())
                .map(|(f, w)| f.p50_ms / w.p50_ms);
            let last = runs.last();
            cases.push(Case {
                voice: voice.clone(),
                format: format.clone(),
                first_audio,
                whole_take,
                p50_ratio,
                bytes: last.map_or(0, |r| r.bytes),
                chunks: last.map_or(0, |r| r.chunks),
            });
        }
    }
    server.stop().await?;
    eprintln!(
        "{} sentences, {} characters; p50 of {} runs",
        sentences,
        text.chars().count(),
        args.runs
    );
    eprintln!(
        "{:<12} {:<6} {:>16} {:>16} {:>8} {:>7}",
        "voice", "format", "first audio ms", "whole take ms", "ratio", "chunks"
    );
    for c in &cases {
        let p50 = |s: &Option<LatencySummary>| s.as_ref().map_or(f64::NAN, |s| s.p50_ms);
        eprintln!(
            "{:<12} {:<6} {:>16.0} {:>16.0} {:>8.3} {:>7}",
            c.voice,
            c.format,
            p50(&c.first_audio),
            p50(&c.whole_take),
            c.p50_ratio.unwrap_or(f64::NAN),
            c.chunks
        );
    }
    crate::bench_report::write_json(
        &args.json,
        &Report {
            sentences,
            characters: text.chars().count(),
            runs: args.runs,
            cases,
        },
    )?;
    Ok(())
}
