//! Benchmarks of the admission boundary itself, run against a real server:
//! - how fast an overloaded `headroom serve` answers 429 (rejection latency under flood);
//! - what `headroom serve` adds to time-to-first-token compared with calling the same server
//!   directly, in the same run;
//! - how each yield rule protects an interactive audio job from text load.
//!
//! The first two start `headroom serve` in-process and are there with the `serve` feature only
//! (the CLI's); the rest, and the shared figures and errors, need no HTTP server.

use futures::StreamExt;
use headroom_base::sync::Locked;
use headroom_core::admission::{RejectReason, Rejection};
use headroom_core::lanes::{TextLane, TextLaneConfig};
use headroom_core::llm::{ChatMessage, ChatRequest, LlmClient, LlmError};
use headroom_services::speech::{AudioInput, SpeechError, SpeechService};
use headroom_services::Services;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

#[cfg(feature = "serve")]
mod served;
#[cfg(feature = "serve")]
pub use served::{flood, proxy_overhead, FloodReport, ProxyOverheadReport, ServeBenchError};

/// The synthetic prompt every benchmark request sends (never user data).
pub const BENCH_PROMPT: &str = "Rewrite this narration clearly: Local audio stays private.";

/// Percentiles of a set of durations, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: usize,
    pub mean_ms: f64,
    /// Population standard deviation.
    pub std_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Nearest-rank percentiles; `None` for no samples.
pub fn summarize(samples: &[Duration]) -> Option<LatencySummary> {
    if samples.is_empty() {
        return None;
    }
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let rank = |p: f64| ms[((p / 100.0 * ms.len() as f64).ceil() as usize).clamp(1, ms.len()) - 1];
    let mean = ms.iter().sum::<f64>() / ms.len() as f64;
    let variance = ms.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / ms.len() as f64;
    Some(LatencySummary {
        count: ms.len(),
        mean_ms: mean,
        std_ms: variance.sqrt(),
        p50_ms: rank(50.0),
        p95_ms: rank(95.0),
        p99_ms: rank(99.0),
        max_ms: ms[ms.len() - 1],
    })
}

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Upstream(#[from] LlmError),
    #[error("the audio job failed: {0}")]
    AudioJob(#[source] SpeechError),
    #[error("the audio job's task stopped: {0}")]
    AudioTask(#[source] tokio::task::JoinError),
    #[error("the server's reply had no text")]
    EmptyReply,
    #[error("refusing to send your own prompts to {url}: it is not on this machine. Against a remote endpoint the harness sends only its synthetic prompt.")]
    PromptsToRemote { url: String },
    #[error("concurrency, batches and prompts must not be empty")]
    EmptyWorkload,
    #[error("the server's context of {context} tokens leaves no room for a reply of at least {needed} tokens after the benchmark's prompt; start it with a larger context (e.g. -c 8192 -np 2)")]
    ContextTooSmall { context: u32, needed: u32 },
    #[error("the text load cannot make progress: {0}")]
    NoProgress(String),
}

/// A benchmark request: one user message, temperature 0, a reply budget.
pub(crate) fn chat_request(prompt: &str, model: Option<String>, max_tokens: u32) -> ChatRequest {
    let mut req = ChatRequest::new(vec![ChatMessage::new("user", prompt)]);
    req.model = model;
    req.max_tokens = Some(max_tokens);
    req.temperature = Some(0.0);
    req
}

/// Times one interactive transcription of `clip`; returns the time and the audio's length.
pub async fn time_transcription(
    speech: &SpeechService,
    clip: &AudioInput,
    model: &str,
) -> Result<(Duration, f64), BenchError> {
    let started = Instant::now();
    let transcript = speech
        .transcribe(
            clip.clone(),
            model,
            Default::default(),
            headroom_core::admission::Priority::Interactive,
            Arc::new(|_| {}),
            Default::default(),
        )
        .await
        .map_err(BenchError::AudioJob)?;
    Ok((started.elapsed(), transcript.duration))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let s = summarize(&samples).unwrap();
        assert_eq!(
            (s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms),
            (50.0, 95.0, 99.0, 100.0)
        );
        assert_eq!(s.mean_ms, 50.5);
        assert!(summarize(&[]).is_none());
        let one = summarize(&[Duration::from_millis(7)]).unwrap();
        assert_eq!(one.p99_ms, 7.0);
    }
}

/// Audio latency with and without text load, for one yield rule.
#[derive(Debug, Clone, Serialize)]
pub struct YieldRuleResult {
    pub rule: headroom_core::admission::YieldRule,
    pub audio_under_load: Option<LatencySummary>,
    /// Median audio latency under text load over median idle latency.
    pub p50_ratio: Option<f64>,
    /// Text requests the load generator started, and how they ended.
    pub text_outcomes: BTreeMap<String, usize>,
}

/// How each yield rule protects an interactive audio job from text load on the same machine.
#[derive(Debug, Clone, Serialize)]
pub struct YieldReport {
    pub clip_seconds: f64,
    pub runs_each: usize,
    pub text_streams: usize,
    pub audio_idle: Option<LatencySummary>,
    pub rules: Vec<YieldRuleResult>,
}

/// The longest reply a load generator asks for.
const LOAD_REPLY_TOKENS: u32 = 2048;
/// The shortest reply worth calling load.
const MIN_LOAD_REPLY_TOKENS: u32 = 128;

/// A long-generation request sized to `lane`'s context: up to [`LOAD_REPLY_TOKENS`] of reply,
/// less where the server's context per request is smaller (llama-server `-c 4096 -np 2` gives
/// each request 2048 tokens in all).
fn long_request(lane: &TextLane, prompt: &str) -> Result<ChatRequest, BenchError> {
    let mut request = chat_request(prompt, lane.model(), LOAD_REPLY_TOKENS);
    let room = lane.reply_room(&request);
    if room < MIN_LOAD_REPLY_TOKENS {
        return Err(BenchError::ContextTooSmall {
            context: lane.context_tokens(),
            needed: MIN_LOAD_REPLY_TOKENS,
        });
    }
    request.max_tokens = Some(room.min(LOAD_REPLY_TOKENS));
    Ok(request)
}

/// Keeps a long text request going through `lane` until `stop`, recording outcomes. A refusal
/// that the same request can never get past (input too long, the server refusing it) ends the
/// load with it; the rest (busy, deadlines, yielding to audio) are retried.
async fn text_load(
    lane: TextLane,
    request: ChatRequest,
    stop: tokio_util::sync::CancellationToken,
    outcomes: Arc<std::sync::Mutex<BTreeMap<String, usize>>>,
    generating: Arc<tokio::sync::watch::Sender<usize>>,
) -> Result<(), Rejection> {
    let count = |key: &str| *outcomes.locked().entry(key.to_string()).or_default() += 1;
    while !stop.is_cancelled() {
        let attempt = async {
            match lane.submit(request.clone()).await {
                Err(r) => Err(r),
                Ok(mut stream) => {
                    let mut counted = None;
                    while let Some(item) = stream.next().await {
                        if item?.text().is_some() && counted.is_none() {
                            counted = Some(Generating::new(&generating));
                        }
                    }
                    Ok(())
                }
            }
        };
        tokio::select! {
            result = attempt => match result {
                Ok(()) => count("completed"),
                Err(r) => {
                    count(r.reason.code());
                    if matches!(r.reason, RejectReason::InputTooLong | RejectReason::UpstreamError) {
                        return Err(r);
                    }
                    // A refused load generator tries again shortly, like a retrying client.
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            },
            _ = stop.cancelled() => count("running_at_end"),
        }
    }
    Ok(())
}

/// Counts one request as generating for as long as it lives.
struct Generating(Arc<tokio::sync::watch::Sender<usize>>);

impl Generating {
    fn new(count: &Arc<tokio::sync::watch::Sender<usize>>) -> Self {
        count.send_modify(|n| *n += 1);
        Generating(count.clone())
    }
}

impl Drop for Generating {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// How long the load may take to fill the lane before the benchmark gives up on it.
const LOAD_START_LIMIT: Duration = Duration::from_secs(120);

/// Waits until `streams` load requests are generating (content arriving: admitted and waiting
/// for the server is not yet load). Fails with the reason when a load generator stops on a
/// refusal the same request cannot get past, or the load does not get going in time.
async fn wait_for_load(
    generating: &tokio::sync::watch::Sender<usize>,
    streams: usize,
    load: &mut tokio::task::JoinSet<Result<(), Rejection>>,
    outcomes: &std::sync::Mutex<BTreeMap<String, usize>>,
) -> Result<(), BenchError> {
    let mut count = generating.subscribe();
    let limit = tokio::time::sleep(LOAD_START_LIMIT);
    tokio::pin!(limit);
    tokio::select! {
        _ = count.wait_for(|n| *n >= streams) => Ok(()),
        ended = load.join_next() => {
            let why = match ended {
                Some(Ok(Err(r))) => format!("every request was refused: {}", r.message()),
                Some(Err(e)) => format!("a load generator failed: {e}"),
                _ => "the load generators stopped".to_string(),
            };
            Err(BenchError::NoProgress(why))
        }
        _ = &mut limit => Err(BenchError::NoProgress(format!(
            "{streams} requests were not generating after {} s (outcomes so far: {:?})",
            LOAD_START_LIMIT.as_secs(),
            outcomes.locked()
        ))),
    }
}

/// Times `runs` interactive transcriptions of `clip` on the services' audio lane: idle, then
/// under text load with each yield rule (`streams` long generations kept going against
/// `upstream` on a lane of their own beside that audio lane).
pub async fn yield_rules(
    services: &Services,
    upstream: &LlmClient,
    clip: &AudioInput,
    model: &str,
    runs: usize,
    streams: usize,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<YieldReport, BenchError> {
    use headroom_core::admission::YieldRule;
    let time_audio = |speech: Arc<SpeechService>| async move {
        let mut times = Vec::new();
        let mut seconds = 0.0;
        for _ in 0..runs {
            let (took, length) = time_transcription(&speech, clip, model).await?;
            times.push(took);
            seconds = length;
        }
        Ok::<_, BenchError>((times, seconds))
    };
    let speech = services.speech().clone();
    // Warm-up: load the model once, excluded from the figures.
    progress("audio job: warm-up (model load, excluded)");
    time_audio(speech.clone()).await?;
    progress(&format!("audio job: {runs} idle transcriptions"));
    let (idle, clip_seconds) = time_audio(speech.clone()).await?;
    let audio_idle = summarize(&idle);
    let mut rules = Vec::new();
    for rule in [YieldRule::None, YieldRule::Gate, YieldRule::Preempt] {
        let config = TextLaneConfig {
            yield_rule: rule,
            max_in_flight: streams.max(1),
            ..TextLaneConfig::default()
        };
        let text = services.dedicated_text_lane(upstream.clone(), config);
        text.discover().await?;
        let request = long_request(
            &text,
            "Write a long story about a lighthouse keeper and the sea.",
        )?;
        let rule_name = format!("{rule:?}").to_lowercase();
        progress(&format!(
            "rule {rule_name}: starting {streams} text streams of up to {} tokens",
            request.max_tokens.unwrap_or_default()
        ));
        let stop = tokio_util::sync::CancellationToken::new();
        let outcomes = Arc::new(std::sync::Mutex::new(BTreeMap::new()));
        let generating = Arc::new(tokio::sync::watch::channel(0).0);
        let mut load = tokio::task::JoinSet::new();
        for _ in 0..streams {
            load.spawn(text_load(
                text.clone(),
                request.clone(),
                stop.clone(),
                outcomes.clone(),
                generating.clone(),
            ));
        }
        // Let generation get going before the audio job arrives; a load that stops or never
        // gets going ends the benchmark with the reason instead of waiting forever.
        let started = wait_for_load(&generating, streams, &mut load, &outcomes).await;
        if let Err(e) = started {
            stop.cancel();
            load.shutdown().await;
            return Err(e);
        }
        progress(&format!(
            "rule {rule_name}: {runs} transcriptions under text load"
        ));
        let timed = time_audio(speech.clone()).await;
        stop.cancel();
        while load.join_next().await.is_some() {}
        let (times, _) = timed?;
        let under = summarize(&times);
        let p50_ratio = match (&audio_idle, &under) {
            (Some(i), Some(u)) => Some(u.p50_ms / i.p50_ms),
            _ => None,
        };
        rules.push(YieldRuleResult {
            rule,
            audio_under_load: under,
            p50_ratio,
            text_outcomes: outcomes.locked().clone(),
        });
    }
    Ok(YieldReport {
        clip_seconds,
        runs_each: runs,
        text_streams: streams,
        audio_idle,
        rules,
    })
}
