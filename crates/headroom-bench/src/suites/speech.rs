//! Streamed speech through `/v1/audio/speech`: time to first audio against the whole take. A
//! long text is asked for through a server on loopback (the same router `headroom serve`
//! runs, over these services); the client times the first audio bytes and the last, per voice
//! and format, and the take's length gives the real-time factor.

use super::{Progress, SuiteError};
use crate::boundary::{summarize, LatencySummary};
use headroom_server::{RunningServer, ServerState};
use headroom_services::Services;
use serde::Serialize;
use std::fmt::Write;
use std::time::{Duration, Instant};

/// Ten sentences of plain narration, about 40 s spoken.
pub const DEFAULT_TEXT: &str = "The river was quiet that morning. A heron stood in the shallows, \
waiting for the light. Across the water, the town was slowly waking up. Shops opened their \
shutters one by one, and the smell of coffee drifted over the square. A baker carried trays of \
bread out to a van that waited by the kerb. Children ran along the old stone bridge toward the \
school, shouting to each other. By nine o'clock the streets were full of people going about \
their day. Nobody noticed the heron, still standing where it had been at dawn. Then a bell rang \
somewhere above the rooftops. And the heron, at last, spread its wings and flew away.";

/// What the speech suite times.
#[derive(Debug, Clone)]
pub struct SpeechBenchConfig {
    /// Voices (any voice-list name or OpenAI's).
    pub voices: Vec<String>,
    /// `response_format`s.
    pub formats: Vec<String>,
    /// Timed requests per voice and format (after one warm-up).
    pub runs: usize,
    /// What is spoken.
    pub text: String,
}

impl Default for SpeechBenchConfig {
    fn default() -> Self {
        SpeechBenchConfig {
            voices: vec!["alloy".into(), "en-us".into()],
            formats: vec!["pcm".into(), "mp3".into(), "opus".into()],
            runs: 3,
            text: DEFAULT_TEXT.into(),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct SpeechCase {
    pub voice: String,
    pub format: String,
    /// From sending the request to the first audio bytes.
    pub first_audio: Option<LatencySummary>,
    /// From sending the request to the last byte: the whole take.
    pub whole_take: Option<LatencySummary>,
    /// first audio / whole take, at the medians.
    pub p50_ratio: Option<f64>,
    pub bytes: usize,
    pub chunks: usize,
}

#[derive(Debug, Serialize)]
pub struct SpeechBenchReport {
    pub sentences: usize,
    pub characters: usize,
    pub runs: usize,
    pub cases: Vec<SpeechCase>,
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
) -> Result<Timed, SuiteError> {
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
        return Err(SuiteError::Measurement(format!(
            "{voice} in {format}: {status}: {body}"
        )));
    }
    let (mut first, mut bytes, mut chunks) = (None, 0, 0);
    while let Some(chunk) = response.chunk().await? {
        if !chunk.is_empty() {
            first.get_or_insert_with(|| started.elapsed());
            bytes += chunk.len();
            chunks += 1;
        }
    }
    let first = first
        .ok_or_else(|| SuiteError::Measurement(format!("{voice} in {format}: no audio came")))?;
    Ok(Timed {
        first,
        whole: started.elapsed(),
        bytes,
        chunks,
    })
}

/// Times every voice in every format through a server on loopback over `services`.
pub async fn run(
    services: &Services,
    config: &SpeechBenchConfig,
    progress: Progress<'_>,
) -> Result<SpeechBenchReport, SuiteError> {
    let text = &config.text;
    let server = RunningServer::ephemeral(ServerState::from_services(services)?).await?;
    let url = format!("{}/audio/speech", server.base_url());
    let http = headroom_base::http::client();
    let mut cases = Vec::new();
    for voice in &config.voices {
        for format in &config.formats {
            progress(&format!(
                "bench: {voice} in {format}: one warm-up, {} timed",
                config.runs
            ));
            timed_request(&http, &url, text, voice, format).await?;
            let mut runs = Vec::new();
            for _ in 0..config.runs {
                runs.push(timed_request(&http, &url, text, voice, format).await?);
            }
            let first_audio = summarize(&runs.iter().map(|r| r.first).collect::<Vec<_>>());
            let whole_take = summarize(&runs.iter().map(|r| r.whole).collect::<Vec<_>>());
            let p50_ratio = first_audio
                .as_ref()
                .zip(whole_take.as_ref())
                .map(|(f, w)| f.p50_ms / w.p50_ms);
            let last = runs.last();
            cases.push(SpeechCase {
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
    Ok(SpeechBenchReport {
        sentences: headroom_speech::tts::sentences(text).len(),
        characters: text.chars().count(),
        runs: config.runs,
        cases,
    })
}

/// The report as a table: each case's medians and their ratio.
pub fn render_text(report: &SpeechBenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} sentences, {} characters; p50 of {} runs",
        report.sentences, report.characters, report.runs
    );
    let _ = writeln!(
        out,
        "{:<12} {:<6} {:>16} {:>16} {:>8} {:>7}",
        "voice", "format", "first audio ms", "whole take ms", "ratio", "chunks"
    );
    for c in &report.cases {
        let p50 = |s: &Option<LatencySummary>| s.as_ref().map_or(f64::NAN, |s| s.p50_ms);
        let _ = writeln!(
            out,
            "{:<12} {:<6} {:>16.0} {:>16.0} {:>8.3} {:>7}",
            c.voice,
            c.format,
            p50(&c.first_audio),
            p50(&c.whole_take),
            c.p50_ratio.unwrap_or(f64::NAN),
            c.chunks
        );
    }
    out
}
