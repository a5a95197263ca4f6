//! The boundary benchmarks that need `headroom serve` itself, started in-process on an
//! ephemeral loopback port: rejection latency under flood and what the proxy adds to
//! time-to-first-token. Behind the `serve` feature, so that a front end that never serves (the
//! desktop app) does not link the HTTP server.

use super::{chat_request, long_request, summarize, BenchError, LatencySummary, BENCH_PROMPT};
use futures::StreamExt;
use headroom_core::lanes::{TextLane, TextLaneConfig};
use headroom_core::llm::{ChatRequest, LlmClient, LlmError};
use headroom_server::{RunningServer, ServerError, ServerState};
use headroom_services::Services;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// Why a benchmark through the in-process server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeBenchError {
    #[error(transparent)]
    Bench(#[from] BenchError),
    #[error(transparent)]
    Server(#[from] ServerError),
    #[error("the in-process server stopped badly: {0}")]
    ServerStopped(#[source] std::io::Error),
}

impl From<LlmError> for ServeBenchError {
    fn from(e: LlmError) -> Self {
        ServeBenchError::Bench(e.into())
    }
}

/// Starts `headroom serve` in-process on an ephemeral loopback port in front of `upstream`,
/// on a lane of its own from `services`.
async fn start_proxy(
    services: &Services,
    upstream: &LlmClient,
    config: TextLaneConfig,
) -> Result<(RunningServer, TextLane), ServeBenchError> {
    let lane = services.dedicated_text_lane(upstream.clone(), config);
    lane.discover().await?;
    let state = ServerState::with_text_lane(services, lane.clone());
    Ok((RunningServer::ephemeral(state).await?, lane))
}

fn bench_request(model: Option<String>, max_tokens: u32) -> ChatRequest {
    chat_request(BENCH_PROMPT, model, max_tokens)
}

/// Rejection latency while every text slot is held by a long stream.
#[derive(Debug, Clone, Serialize)]
pub struct FloodReport {
    pub slots_held: usize,
    pub flood_requests: usize,
    pub concurrency: usize,
    /// Status codes of the flood's answers (all 429 when the boundary holds).
    pub statuses: BTreeMap<u16, usize>,
    /// `error.code` of the rejections.
    pub reasons: BTreeMap<String, usize>,
    /// Send → complete 429 answer, over loopback HTTP.
    pub rejection_latency: Option<LatencySummary>,
}

/// Holds every slot of a default lane with long streams, then sends `requests` more, at most
/// `concurrency` at a time, and times each answer.
pub async fn flood(
    services: &Services,
    upstream: &LlmClient,
    requests: usize,
    concurrency: usize,
) -> Result<FloodReport, ServeBenchError> {
    let config = TextLaneConfig::default();
    let slots = config.max_in_flight;
    let (server, lane) = start_proxy(services, upstream, config).await?;
    let proxy = LlmClient::new(&server.base_url(), None)?;
    let mut holders = Vec::new();
    for _ in 0..slots {
        let mut stream = proxy
            .stream_chat(&long_request(&lane, BENCH_PROMPT)?)
            .await?;
        // In flight for sure once content flows.
        loop {
            match stream.next().await {
                Some(Ok(chunk)) if chunk.text().is_some() => break,
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(e.into()),
                None => return Err(BenchError::EmptyReply.into()),
            }
        }
        holders.push(stream);
    }
    let http = headroom_base::http::client();
    let url = format!("{}/chat/completions", server.base_url());
    let body = serde_json::to_value(bench_request(lane.model(), 16)).expect("request serializes");
    let results: Vec<(u16, Option<String>, Duration)> = futures::stream::iter(0..requests)
        .map(|_| {
            let http = http.clone();
            let url = url.clone();
            let body = body.clone();
            async move {
                let started = Instant::now();
                match http.post(&url).json(&body).send().await {
                    Ok(resp) => {
                        let status = resp.status().as_u16();
                        let text = resp.text().await.unwrap_or_default();
                        let elapsed = started.elapsed();
                        let code = serde_json::from_str::<serde_json::Value>(&text)
                            .ok()
                            .and_then(|v| {
                                v.pointer("/error/code")
                                    .and_then(|c| c.as_str())
                                    .map(str::to_string)
                            });
                        (status, code, elapsed)
                    }
                    Err(_) => (0, None, started.elapsed()),
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    drop(holders);
    server
        .stop()
        .await
        .map_err(ServeBenchError::ServerStopped)?;
    let mut statuses = BTreeMap::new();
    let mut reasons = BTreeMap::new();
    let mut rejection_times = Vec::new();
    for (status, code, elapsed) in results {
        *statuses.entry(status).or_default() += 1;
        if let Some(code) = code {
            *reasons.entry(code).or_default() += 1;
        }
        if status == 429 {
            rejection_times.push(elapsed);
        }
    }
    Ok(FloodReport {
        slots_held: slots,
        flood_requests: requests,
        concurrency,
        statuses,
        reasons,
        rejection_latency: summarize(&rejection_times),
    })
}

/// Time to first token directly and through `headroom serve`, same server, same run.
#[derive(Debug, Clone, Serialize)]
pub struct ProxyOverheadReport {
    pub requests_each: usize,
    pub warmup_each: usize,
    pub direct_ttft: Option<LatencySummary>,
    pub via_headroom_ttft: Option<LatencySummary>,
    /// via-headroom p50 / direct p50.
    pub p50_ratio: Option<f64>,
    pub p50_overhead_ms: Option<f64>,
}

async fn ttft(client: &LlmClient, model: Option<String>) -> Result<Duration, BenchError> {
    let started = Instant::now();
    let mut stream = client.stream_chat(&bench_request(model, 8)).await?;
    let mut first = None;
    while let Some(item) = stream.next().await {
        if item?.text().is_some() && first.is_none() {
            first = Some(started.elapsed());
        }
    }
    first.ok_or(BenchError::EmptyReply)
}

/// Alternates direct and proxied requests (one at a time) so both see the same server state.
pub async fn proxy_overhead(
    services: &Services,
    upstream: &LlmClient,
    requests: usize,
    warmup: usize,
) -> Result<ProxyOverheadReport, ServeBenchError> {
    let (server, lane) = start_proxy(services, upstream, TextLaneConfig::default()).await?;
    let proxy = LlmClient::new(&server.base_url(), None)?;
    let model = lane.model();
    let mut direct = Vec::new();
    let mut via = Vec::new();
    for i in 0..(warmup + requests) {
        let d = ttft(upstream, model.clone()).await?;
        let v = ttft(&proxy, model.clone()).await?;
        if i >= warmup {
            direct.push(d);
            via.push(v);
        }
    }
    server
        .stop()
        .await
        .map_err(ServeBenchError::ServerStopped)?;
    let direct_ttft = summarize(&direct);
    let via_headroom_ttft = summarize(&via);
    let (p50_ratio, p50_overhead_ms) = match (&direct_ttft, &via_headroom_ttft) {
        (Some(d), Some(v)) => (Some(v.p50_ms / d.p50_ms), Some(v.p50_ms - d.p50_ms)),
        _ => (None, None),
    };
    Ok(ProxyOverheadReport {
        requests_each: requests,
        warmup_each: warmup,
        direct_ttft,
        via_headroom_ttft,
        p50_ratio,
        p50_overhead_ms,
    })
}
