//! `headroom bench fleet`: one text lane over 1, 2, 3… upstreams.
//!
//! - **Scaling at the same rejection rate.** Requests arrive open-loop (Poisson, seeded) at a
//!   rate chosen so the lane refuses about the same share with every fleet size: the rate for
//!   a target share comes from the Erlang loss formula (the lane is a loss system: a full
//!   fleet refuses at once, nothing queues) with the measured service time, then is corrected
//!   from the share measured in a run, for a few rounds. The share actually measured is
//!   reported beside each row, with completed requests/s, output tokens/s and TTFT p50/p99.
//!   A fixed rate per upstream can be asked for instead.
//! - **Routing around a killed upstream.** Under the same load, one of 2 or 3 upstreams the
//!   bench started is killed (SIGKILL, or a simulated server dropping every connection):
//!   how long until the lane marks it down, what was still sent to it afterwards (the
//!   breaker's probes), how many streams the kill failed (bounded by its slots) and how many
//!   requests were refused while the fleet had fewer slots.
//!
//! Requests go through the lane `headroom serve` runs ([`Services::text_lane_over`] with the
//! default limits: two per upstream, no queue), with its health checks every 5 s.

pub mod llama;
mod report;
pub mod sim;

pub use report::render_text;

use crate::boundary::{chat_request, summarize, LatencySummary};
use futures::StreamExt;
use headroom_base::process::ProcessError;
use headroom_core::admission::Lane;
use headroom_core::lanes::{TextLane, TextLaneConfig, UpstreamSpec};
use headroom_core::llm::{ChatRequest, LlmError};
use headroom_services::{Services, ServicesError};
use llama::{LlamaServer, LlamaServerConfig};
use serde::Serialize;
use sim::{SimulatedServer, SimulatedUpstream};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The prompt every fleet request sends: one that keeps a model writing to `max_tokens`.
pub const FLEET_PROMPT: &str = "Write a long story about a lighthouse keeper and the sea.";

/// How often the lane's upstreams are health-checked, as `headroom serve` does.
const HEALTH_CHECK_EVERY: Duration = Duration::from_secs(5);

/// Why the fleet benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum FleetBenchError {
    #[error(transparent)]
    Process(#[from] ProcessError),
    #[error("{url} did not become ready: {why}{log}")]
    NotReady {
        url: String,
        why: String,
        log: String,
    },
    #[error(transparent)]
    Upstream(#[from] LlmError),
    #[error(transparent)]
    Services(#[from] ServicesError),
    #[error("I/O: {0}")]
    Io(#[source] std::io::Error),
    #[error("{asked} upstreams asked for, {given} given with --upstream")]
    TooFewUpstreams { asked: usize, given: usize },
    #[error(
        "killing an upstream needs upstreams the bench starts itself (simulated or llama-server)"
    )]
    CannotKill,
    #[error("a kill needs at least 2 upstreams (asked: {0})")]
    KillNeedsTwo(usize),
    #[error("nothing to measure: give upstream counts of at least 1")]
    EmptyPlan,
    #[error("no request was answered at {rate:.2} requests/s over {upstreams} upstream(s): {outcomes:?}")]
    NoProgress {
        rate: f64,
        upstreams: usize,
        outcomes: BTreeMap<String, usize>,
    },
    #[error("cancelled")]
    Cancelled,
}

/// Where the upstreams come from.
#[derive(Debug, Clone)]
pub enum Backend {
    /// In-process simulated servers (fixed token rate per slot).
    Simulated(SimulatedServer),
    /// llama-servers the bench starts.
    LlamaServer(LlamaServerConfig),
    /// Servers the user runs (no kill measurement).
    External(Vec<String>),
}

/// How much load each point gets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Load {
    /// Arrivals at the rate that makes the lane refuse about this share.
    TargetRejection(f64),
    /// Arrivals at this many requests/s per upstream.
    RatePerUpstream(f64),
}

/// What to run.
#[derive(Debug, Clone)]
pub struct FleetBenchConfig {
    /// Fleet sizes measured for throughput and TTFT.
    pub counts: Vec<usize>,
    pub load: Load,
    /// Measured seconds per run.
    pub seconds: f64,
    /// Seconds of arrivals before the measured window (excluded).
    pub warmup_seconds: f64,
    pub max_tokens: u32,
    /// Most runs per point when aiming at a rejection share.
    pub calibration_rounds: usize,
    /// Fleet sizes in which one upstream is killed under load.
    pub kill_with: Vec<usize>,
    /// Seconds of load before the kill.
    pub kill_after_s: f64,
    /// Seconds of load watched after the kill.
    pub kill_watch_s: f64,
    pub seed: u64,
}

impl Default for FleetBenchConfig {
    fn default() -> Self {
        FleetBenchConfig {
            counts: vec![1, 2, 3],
            load: Load::TargetRejection(0.10),
            seconds: 20.0,
            warmup_seconds: 2.0,
            max_tokens: 32,
            calibration_rounds: 3,
            kill_with: vec![2, 3],
            kill_after_s: 4.0,
            kill_watch_s: 6.0,
            seed: 1,
        }
    }
}

/// One run at a rate, as calibration keeps it.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrationRound {
    pub rate_per_s: f64,
    pub rejection_rate: f64,
    /// Mean submit → end of the requests that completed.
    pub mean_service_ms: Option<f64>,
}

/// One fleet size's figures (the last calibration round's run).
#[derive(Debug, Clone, Serialize)]
pub struct FleetRow {
    pub upstreams: usize,
    /// Requests the lane runs at once (the slots its upstreams said they have, at most 2 each).
    pub capacity: usize,
    pub rate_per_s: f64,
    pub rate_per_upstream: f64,
    /// Requests that arrived in the measured window, and per second (Poisson arrivals scatter
    /// around the rate set).
    pub offered: usize,
    pub offered_per_s: f64,
    /// Refused without being run.
    pub rejected: usize,
    pub rejection_rate: f64,
    pub rejections_by_reason: BTreeMap<String, usize>,
    /// Admitted, then ended with an error.
    pub failed: usize,
    pub failures_by_reason: BTreeMap<String, usize>,
    /// Requests that arrived in the measured window and completed.
    pub completed: usize,
    pub completed_per_s: f64,
    pub output_tokens_per_s: f64,
    /// Submit → first non-empty delta, through the lane.
    pub ttft: Option<LatencySummary>,
    /// Submit → end of the stream.
    pub latency: Option<LatencySummary>,
    /// Requests each upstream answered in the run (lane metrics).
    pub answered_per_upstream: BTreeMap<String, u64>,
    pub calibration: Vec<CalibrationRound>,
}

/// Requests in one part of the kill run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Window {
    pub seconds: f64,
    pub offered: usize,
    pub refused: usize,
    pub rejection_rate: f64,
    pub refused_by_reason: BTreeMap<String, usize>,
}

/// One upstream killed under load.
#[derive(Debug, Clone, Serialize)]
pub struct KillReport {
    pub upstreams: usize,
    pub killed: String,
    pub rate_per_s: f64,
    /// Seconds of load before the kill.
    pub killed_after_s: f64,
    /// Slots of the lane before and after (the killed upstream's gone).
    pub capacity_before: usize,
    pub capacity_after: usize,
    /// Streams running on it when it was killed.
    pub streams_on_it: usize,
    /// Requests running at the kill that then ended with an error (its streams that had
    /// already delivered text: the rest move to another upstream).
    pub failed_by_kill: usize,
    pub failures_by_reason: BTreeMap<String, usize>,
    /// Kill → the lane marks it down (no request is sent to it after that but the breaker's
    /// probes).
    pub marked_down_after_ms: Option<f64>,
    /// Every request sent to it after the kill (ms after the kill): each met a refused
    /// connection and moved to another upstream, or was refused when none had a free slot.
    pub attempts_after_kill_ms: Vec<f64>,
    pub attempts_before_marked_down: usize,
    /// Later attempts: the breaker trying it again after its backoff.
    pub breaker_probes: usize,
    /// Requests it answered after the kill (none: it is dead).
    pub answered_by_it_after_kill: u64,
    /// The first request that arrived after the kill and was served (by another upstream):
    /// kill → its first token, and → its end.
    pub first_token_elsewhere_after_ms: Option<f64>,
    pub first_completion_elsewhere_after_ms: Option<f64>,
    pub before: Window,
    pub after: Window,
    /// Refused after the kill beyond the share refused before it, at the same arrival rate:
    /// the requests the lost slots cost.
    pub excess_refused: f64,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BackendInfo {
    Simulated {
        #[serde(flatten)]
        server: SimulatedServer,
    },
    LlamaServer {
        #[serde(flatten)]
        config: LlamaServerConfig,
    },
    External {
        urls: Vec<String>,
    },
}

/// Everything `headroom bench fleet` measured.
#[derive(Debug, Clone, Serialize)]
pub struct FleetReport {
    pub backend: BackendInfo,
    /// The lane's limits (the defaults `headroom serve` starts with).
    pub max_in_flight_per_upstream: usize,
    pub max_waiting: usize,
    pub load: Load,
    pub arrivals: &'static str,
    pub seconds: f64,
    pub warmup_seconds: f64,
    pub max_tokens: u32,
    pub seed: u64,
    pub started_unix_ms: u64,
    pub rows: Vec<FleetRow>,
    pub kills: Vec<KillReport>,
}

/// One upstream of the pool.
enum Member {
    Simulated(SimulatedUpstream),
    Llama(LlamaServer),
    External(String),
}

impl Member {
    fn url(&self) -> String {
        match self {
            Member::Simulated(s) => s.base_url(),
            Member::Llama(l) => l.base_url(),
            Member::External(url) => url.clone(),
        }
    }

    async fn kill(&mut self) -> Result<(), FleetBenchError> {
        match self {
            Member::Simulated(s) => {
                s.kill().await;
                Ok(())
            }
            Member::Llama(l) => l.kill(),
            Member::External(_) => Err(FleetBenchError::CannotKill),
        }
    }
}

/// The upstreams, started as they are needed.
struct Pool {
    backend: Backend,
    members: Vec<Member>,
}

impl Pool {
    async fn start_one(&self, cancel: &CancellationToken) -> Result<Member, FleetBenchError> {
        match &self.backend {
            Backend::Simulated(server) => Ok(Member::Simulated(
                SimulatedUpstream::start(*server)
                    .await
                    .map_err(FleetBenchError::Io)?,
            )),
            Backend::LlamaServer(config) => {
                Ok(Member::Llama(LlamaServer::start(config, cancel).await?))
            }
            Backend::External(urls) => Err(FleetBenchError::TooFewUpstreams {
                asked: self.members.len() + 1,
                given: urls.len(),
            }),
        }
    }

    /// Makes sure there are at least `n`.
    async fn ensure(
        &mut self,
        n: usize,
        cancel: &CancellationToken,
        progress: &(dyn Fn(&str) + Sync),
    ) -> Result<(), FleetBenchError> {
        while self.members.len() < n {
            let member = self.start_one(cancel).await?;
            if matches!(member, Member::Llama(_)) {
                progress(&format!("llama-server ready at {}", member.url()));
            }
            self.members.push(member);
        }
        Ok(())
    }

    /// A fresh upstream in the place of a killed one.
    async fn replace(
        &mut self,
        i: usize,
        cancel: &CancellationToken,
    ) -> Result<(), FleetBenchError> {
        self.members[i] = self.start_one(cancel).await?;
        Ok(())
    }
}

/// How one request went.
#[derive(Debug, Clone)]
struct Record {
    submitted: Instant,
    /// `ok`, or the reason code.
    outcome: String,
    /// Refused by `submit` (never ran), as opposed to failed mid-stream.
    refused: bool,
    first_token: Option<Instant>,
    end: Instant,
    tokens: u64,
}

impl Record {
    fn ok(&self) -> bool {
        self.outcome == "ok"
    }
}

async fn one_request(lane: TextLane, request: ChatRequest) -> Record {
    let submitted = Instant::now();
    let mut record = Record {
        submitted,
        outcome: "ok".into(),
        refused: false,
        first_token: None,
        end: submitted,
        tokens: 0,
    };
    let mut stream = match lane.submit(request).await {
        Ok(stream) => stream,
        Err(r) => {
            record.outcome = r.reason.code().to_string();
            record.refused = true;
            record.end = Instant::now();
            return record;
        }
    };
    let mut chunks = 0;
    let mut usage = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(chunk) => {
                if chunk.text().is_some() {
                    record.first_token.get_or_insert_with(Instant::now);
                    chunks += 1;
                }
                if let Some(u) = chunk.usage {
                    usage = Some(u.completion_tokens);
                }
            }
            Err(r) => {
                record.outcome = r.reason.code().to_string();
                break;
            }
        }
    }
    record.end = Instant::now();
    record.tokens = usage.unwrap_or(chunks);
    if record.ok() && record.first_token.is_none() {
        record.outcome = "no_content".into();
    }
    record
}

/// A small seeded generator for the arrival times (splitmix64).
struct Arrivals(u64);

impl Arrivals {
    fn next_unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // In (0, 1]: never 0, so the logarithm is finite.
        ((z >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// The gap to the next arrival of a Poisson process at `rate` a second.
    fn gap(&mut self, rate: f64) -> Duration {
        Duration::from_secs_f64(-self.next_unit().ln() / rate.max(1e-9))
    }
}

/// Erlang's loss formula: the share refused by `servers` slots offered `load` erlangs.
pub fn erlang_b(servers: usize, load: f64) -> f64 {
    let mut b = 1.0;
    for k in 1..=servers {
        b = load * b / (k as f64 + load * b);
    }
    b
}

/// The load (erlangs) at which `servers` slots refuse `share` of the arrivals.
pub fn erlang_load_for(servers: usize, share: f64) -> f64 {
    let share = share.clamp(1e-6, 1.0 - 1e-6);
    let mut hi = 1.0;
    while erlang_b(servers, hi) < share && hi < 1e6 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..100 {
        let mid = (lo + hi) / 2.0;
        if erlang_b(servers, mid) < share {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// Sends requests to `lane` at `rate` a second (Poisson arrivals) for `seconds`, from
/// `start`, and waits for every one to end.
async fn open_loop(
    lane: &TextLane,
    request: &ChatRequest,
    rate: f64,
    start: Instant,
    seconds: f64,
    seed: u64,
    cancel: &CancellationToken,
) -> Result<Vec<Record>, FleetBenchError> {
    let mut arrivals = Arrivals(seed);
    let end = start + Duration::from_secs_f64(seconds);
    let mut at = start;
    let mut running = tokio::task::JoinSet::new();
    loop {
        at += arrivals.gap(rate);
        if at >= end {
            break;
        }
        tokio::select! {
            _ = cancel.cancelled() => return Err(FleetBenchError::Cancelled),
            _ = tokio::time::sleep_until(at) => {}
        }
        running.spawn(one_request(lane.clone(), request.clone()));
    }
    let mut records = Vec::new();
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return Err(FleetBenchError::Cancelled),
            next = running.join_next() => match next {
                Some(Ok(record)) => records.push(record),
                Some(Err(e)) => tracing::warn!(error = %e, "a bench request's task failed"),
                None => break,
            },
        }
    }
    records.sort_by_key(|r| r.submitted);
    Ok(records)
}

/// Checks the lane's upstreams every few seconds while `work` runs, as `headroom serve` does
/// for a lane over several.
async fn with_health_checks<T>(lane: &TextLane, work: impl std::future::Future<Output = T>) -> T {
    tokio::pin!(work);
    let mut ticker =
        tokio::time::interval_at(Instant::now() + HEALTH_CHECK_EVERY, HEALTH_CHECK_EVERY);
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = ticker.tick(), if lane.fleet().len() > 1 => lane.check_health().await,
        }
    }
}

fn count_by(records: &[&Record]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in records {
        *out.entry(r.outcome.clone()).or_default() += 1;
    }
    out
}

fn window(records: &[&Record], seconds: f64) -> Window {
    let refused: Vec<&Record> = records.iter().copied().filter(|r| r.refused).collect();
    Window {
        seconds,
        offered: records.len(),
        refused: refused.len(),
        rejection_rate: share(refused.len(), records.len()),
        refused_by_reason: count_by(&refused),
    }
}

fn share(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The lane over the first `n` upstreams of the pool, with the default limits.
async fn lane_over(
    services: &Services,
    pool: &Pool,
    n: usize,
) -> Result<TextLane, FleetBenchError> {
    let specs = pool.members[..n]
        .iter()
        .map(|m| Ok(UpstreamSpec::new(services.client(&m.url())?)))
        .collect::<Result<Vec<_>, ServicesError>>()?;
    let lane = services.text_lane_over(specs, TextLaneConfig::default());
    lane.discover().await?;
    Ok(lane)
}

fn answered(services: &Services, lane: &TextLane) -> BTreeMap<String, u64> {
    lane.fleet()
        .views()
        .into_iter()
        .map(|v| {
            let n = services
                .metrics()
                .upstream_requests(Lane::Text, &v.name, "answered");
            (v.name, n)
        })
        .collect()
}

/// Every slot busy for two rounds: warms the servers up and gives the service time to start
/// the calibration from (ms).
async fn service_time(
    lane: &TextLane,
    request: &ChatRequest,
    cancel: &CancellationToken,
) -> Result<f64, FleetBenchError> {
    let slots = lane.fleet().capacity().max(1);
    let mut times = Vec::new();
    let mut outcomes = BTreeMap::new();
    for _ in 0..2 {
        let round = futures::future::join_all(
            (0..slots).map(|_| one_request(lane.clone(), request.clone())),
        );
        let records = tokio::select! {
            _ = cancel.cancelled() => return Err(FleetBenchError::Cancelled),
            records = round => records,
        };
        for r in records {
            if r.ok() {
                times.push(ms(r.end - r.submitted));
            }
            *outcomes.entry(r.outcome).or_default() += 1;
        }
    }
    if times.is_empty() {
        return Err(FleetBenchError::NoProgress {
            rate: 0.0,
            upstreams: lane.fleet().len(),
            outcomes,
        });
    }
    Ok(times.iter().sum::<f64>() / times.len() as f64)
}

/// The figures of one open-loop run.
struct Run {
    rate: f64,
    records: Vec<Record>,
    measured_from: Instant,
    measured_to: Instant,
    answered: BTreeMap<String, u64>,
}

impl Run {
    fn in_window(&self) -> Vec<&Record> {
        self.records
            .iter()
            .filter(|r| r.submitted >= self.measured_from && r.submitted < self.measured_to)
            .collect()
    }

    fn rejection_rate(&self) -> f64 {
        let offered = self.in_window();
        share(offered.iter().filter(|r| r.refused).count(), offered.len())
    }

    fn mean_service_ms(&self) -> Option<f64> {
        let done: Vec<f64> = self
            .in_window()
            .iter()
            .filter(|r| r.ok())
            .map(|r| ms(r.end - r.submitted))
            .collect();
        (!done.is_empty()).then(|| done.iter().sum::<f64>() / done.len() as f64)
    }
}

async fn run_at(
    services: &Services,
    lane: &TextLane,
    request: &ChatRequest,
    rate: f64,
    config: &FleetBenchConfig,
    seed: u64,
    cancel: &CancellationToken,
) -> Result<Run, FleetBenchError> {
    let before = answered(services, lane);
    let start = Instant::now();
    let total = config.warmup_seconds + config.seconds;
    let records = with_health_checks(
        lane,
        open_loop(lane, request, rate, start, total, seed, cancel),
    )
    .await?;
    let after = answered(services, lane);
    let answered = after
        .into_iter()
        .map(|(name, n)| {
            let was = before.get(&name).copied().unwrap_or(0);
            (name, n - was)
        })
        .collect();
    Ok(Run {
        rate,
        records,
        measured_from: start + Duration::from_secs_f64(config.warmup_seconds),
        measured_to: start + Duration::from_secs_f64(total),
        answered,
    })
}

fn row(
    n: usize,
    capacity: usize,
    run: &Run,
    calibration: Vec<CalibrationRound>,
    seconds: f64,
) -> FleetRow {
    let offered = run.in_window();
    let refused: Vec<&Record> = offered.iter().copied().filter(|r| r.refused).collect();
    let failed: Vec<&Record> = offered
        .iter()
        .copied()
        .filter(|r| !r.refused && !r.ok())
        .collect();
    // Throughput of the requests that arrived in the window (each waited for to its end): in
    // a steady state the same as what ended in it, without a short window's edge effects.
    let ok_offered: Vec<&Record> = offered.iter().copied().filter(|r| r.ok()).collect();
    let completed = &ok_offered;
    let durations = |f: &dyn Fn(&Record) -> Option<Duration>| -> Vec<Duration> {
        ok_offered.iter().filter_map(|r| f(r)).collect()
    };
    FleetRow {
        upstreams: n,
        capacity,
        rate_per_s: run.rate,
        rate_per_upstream: run.rate / n as f64,
        offered: offered.len(),
        offered_per_s: offered.len() as f64 / seconds,
        rejected: refused.len(),
        rejection_rate: share(refused.len(), offered.len()),
        rejections_by_reason: count_by(&refused),
        failed: failed.len(),
        failures_by_reason: count_by(&failed),
        completed: completed.len(),
        completed_per_s: completed.len() as f64 / seconds,
        output_tokens_per_s: completed.iter().map(|r| r.tokens).sum::<u64>() as f64 / seconds,
        ttft: summarize(&durations(&|r| r.first_token.map(|t| t - r.submitted))),
        latency: summarize(&durations(&|r| Some(r.end - r.submitted))),
        answered_per_upstream: run.answered.clone(),
        calibration,
    }
}

/// Within this of the target share, a run is taken as it is.
fn tolerance(target: f64) -> f64 {
    (target * 0.25).max(0.02)
}

/// Measures one fleet size: calibrates the rate to the target share (or takes the fixed rate)
/// and reports the run that came closest to it.
async fn measure(
    services: &Services,
    pool: &Pool,
    n: usize,
    request: &ChatRequest,
    config: &FleetBenchConfig,
    cancel: &CancellationToken,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<FleetRow, FleetBenchError> {
    let lane = lane_over(services, pool, n).await?;
    let capacity = lane.fleet().capacity();
    let service_ms = service_time(&lane, request, cancel).await?;
    let (mut rate, rounds) = match config.load {
        Load::RatePerUpstream(r) => (r * n as f64, 1),
        Load::TargetRejection(target) => (
            erlang_load_for(capacity, target) / (service_ms / 1000.0),
            config.calibration_rounds.max(1),
        ),
    };
    let mut calibration = Vec::new();
    let mut best: Option<(f64, Run)> = None;
    for round in 0..rounds {
        progress(&format!(
            "{n} upstream(s), {capacity} slots: {:.0} s at {rate:.2} requests/s (run {}/{rounds}; service ~{service_ms:.0} ms)",
            config.warmup_seconds + config.seconds,
            round + 1
        ));
        let seed = config.seed.wrapping_add((n * 1000 + round) as u64);
        let run = run_at(services, &lane, request, rate, config, seed, cancel).await?;
        let measured = run.rejection_rate();
        calibration.push(CalibrationRound {
            rate_per_s: rate,
            rejection_rate: measured,
            mean_service_ms: run.mean_service_ms(),
        });
        progress(&format!(
            "{n} upstream(s): {:.1}% refused",
            measured * 100.0
        ));
        if run.records.iter().all(|r| !r.ok()) {
            let all: Vec<&Record> = run.records.iter().collect();
            return Err(FleetBenchError::NoProgress {
                rate,
                upstreams: n,
                outcomes: count_by(&all),
            });
        }
        let Load::TargetRejection(target) = config.load else {
            return Ok(row(n, capacity, &run, calibration, config.seconds));
        };
        let closest = best.as_ref().is_none_or(|(share, _): &(f64, Run)| {
            (measured - target).abs() < (share - target).abs()
        });
        let done = (measured - target).abs() <= tolerance(target);
        if closest {
            best = Some((measured, run));
        }
        if done || round + 1 == rounds {
            // The run whose share came closest to the target is the row.
            let (_, run) = best.expect("a run was kept");
            return Ok(row(n, capacity, &run, calibration, config.seconds));
        }
        // Correct the rate by the load the measured share stands for in the loss formula.
        let implied = if measured <= 0.0 {
            None
        } else {
            Some(erlang_load_for(capacity, measured))
        };
        let wanted = erlang_load_for(capacity, target);
        rate *= match implied {
            Some(implied) if implied > 0.0 => (wanted / implied).clamp(0.5, 2.0),
            _ => 1.5,
        };
    }
    unreachable!("the last round returns")
}

/// Kills the first upstream of `n` under load and watches the lane route around it.
#[allow(clippy::too_many_arguments)]
async fn kill_one(
    services: &Services,
    pool: &mut Pool,
    n: usize,
    rate: f64,
    request: &ChatRequest,
    config: &FleetBenchConfig,
    cancel: &CancellationToken,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<KillReport, FleetBenchError> {
    let lane = lane_over(services, pool, n).await?;
    service_time(&lane, request, cancel).await?;
    let capacity_before = lane.fleet().capacity();
    let victim = lane.fleet().views()[0].name.clone();
    let metrics = services.metrics().clone();
    progress(&format!(
        "kill: {n} upstreams at {rate:.2} requests/s; killing {victim} after {:.0} s",
        config.kill_after_s
    ));
    let start = Instant::now();
    let kill_at = start + Duration::from_secs_f64(config.kill_after_s);
    let total = config.kill_after_s + config.kill_watch_s;
    let seed = config.seed.wrapping_add(7919 * n as u64);
    let load = with_health_checks(
        &lane,
        open_loop(&lane, request, rate, start, total, seed, cancel),
    );
    let victim_member = &mut pool.members[0];
    let watch = async {
        tokio::time::sleep_until(kill_at).await;
        let streams_on_it = lane.fleet().views()[0].in_flight;
        let unavailable_at_kill = metrics.upstream_requests(Lane::Text, &victim, "unavailable");
        let answered_at_kill = metrics.upstream_requests(Lane::Text, &victim, "answered");
        let killed = Instant::now();
        victim_member.kill().await?;
        // Watched every millisecond: when the lane marks it down, and every request it is sent.
        let mut marked_down = None;
        let mut attempts = Vec::new();
        let mut seen = unavailable_at_kill;
        let until = start + Duration::from_secs_f64(total);
        let mut ticker = tokio::time::interval(Duration::from_millis(1));
        while Instant::now() < until {
            ticker.tick().await;
            let now = Instant::now();
            if marked_down.is_none() && !lane.fleet().views()[0].up {
                marked_down = Some(now);
            }
            let count = metrics.upstream_requests(Lane::Text, &victim, "unavailable");
            for _ in seen..count {
                attempts.push(now);
            }
            seen = count;
        }
        let answered_after =
            metrics.upstream_requests(Lane::Text, &victim, "answered") - answered_at_kill;
        Ok::<_, FleetBenchError>((killed, streams_on_it, marked_down, attempts, answered_after))
    };
    let (records, watched) = tokio::join!(load, watch);
    let records = records?;
    let (killed, streams_on_it, marked_down, attempts, answered_by_it_after_kill) = watched?;
    let capacity_after = lane
        .fleet()
        .views()
        .iter()
        .filter(|v| v.up)
        .map(|v| v.capacity)
        .sum();
    drop(lane);
    pool.replace(0, cancel).await?;

    let running_at_kill: Vec<&Record> = records
        .iter()
        .filter(|r| r.submitted < killed && r.end >= killed && !r.refused)
        .collect();
    let failed: Vec<&Record> = running_at_kill
        .iter()
        .copied()
        .filter(|r| !r.ok())
        .collect();
    let before: Vec<&Record> = records.iter().filter(|r| r.submitted < killed).collect();
    let after: Vec<&Record> = records.iter().filter(|r| r.submitted >= killed).collect();
    let first_served = after.iter().filter(|r| r.ok()).min_by_key(|r| r.submitted);
    let before = window(&before, config.kill_after_s);
    let after = window(&after, config.kill_watch_s);
    let marked_down_after_ms = marked_down.map(|t| ms(t - killed));
    let attempts_after_kill_ms: Vec<f64> = attempts.iter().map(|t| ms(*t - killed)).collect();
    let attempts_before_marked_down = match marked_down {
        Some(down) => attempts.iter().filter(|t| **t <= down).count(),
        None => attempts.len(),
    };
    Ok(KillReport {
        upstreams: n,
        killed: victim,
        rate_per_s: rate,
        killed_after_s: config.kill_after_s,
        capacity_before,
        capacity_after,
        streams_on_it,
        failed_by_kill: failed.len(),
        failures_by_reason: count_by(&failed),
        marked_down_after_ms,
        breaker_probes: attempts.len() - attempts_before_marked_down,
        attempts_before_marked_down,
        attempts_after_kill_ms,
        answered_by_it_after_kill,
        first_token_elsewhere_after_ms: first_served
            .and_then(|r| r.first_token)
            .map(|t| ms(t - killed)),
        first_completion_elsewhere_after_ms: first_served.map(|r| ms(r.end - killed)),
        excess_refused: after.refused as f64 - before.rejection_rate * after.offered as f64,
        before,
        after,
    })
}

/// Runs the fleet benchmark. `progress` gets one line per step; `cancel` stops it (every
/// server it started is stopped).
pub async fn run(
    services: &Services,
    backend: Backend,
    config: FleetBenchConfig,
    cancel: CancellationToken,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<FleetReport, FleetBenchError> {
    if config.counts.is_empty() && config.kill_with.is_empty() || config.counts.contains(&0) {
        return Err(FleetBenchError::EmptyPlan);
    }
    if let Some(&n) = config.kill_with.iter().find(|n| **n < 2) {
        return Err(FleetBenchError::KillNeedsTwo(n));
    }
    let info = match &backend {
        Backend::Simulated(server) => BackendInfo::Simulated { server: *server },
        Backend::LlamaServer(config) => BackendInfo::LlamaServer {
            config: config.clone(),
        },
        Backend::External(urls) => {
            if !config.kill_with.is_empty() {
                return Err(FleetBenchError::CannotKill);
            }
            let most = config.counts.iter().copied().max().unwrap_or(0);
            if most > urls.len() {
                return Err(FleetBenchError::TooFewUpstreams {
                    asked: most,
                    given: urls.len(),
                });
            }
            BackendInfo::External { urls: urls.clone() }
        }
    };
    let mut pool = Pool {
        members: match &backend {
            Backend::External(urls) => urls.iter().cloned().map(Member::External).collect(),
            _ => Vec::new(),
        },
        backend,
    };
    let started_unix_ms = headroom_base::clock::unix_ms();
    let mut rows = Vec::new();
    // The lane fills in the model its first upstream names.
    let request = chat_request(FLEET_PROMPT, None, config.max_tokens);
    let most = config
        .counts
        .iter()
        .chain(&config.kill_with)
        .copied()
        .max()
        .unwrap_or(0);
    pool.ensure(most, &cancel, progress).await?;
    for &n in &config.counts {
        rows.push(measure(services, &pool, n, &request, &config, &cancel, progress).await?);
    }
    let mut kills = Vec::new();
    for &n in &config.kill_with {
        let rate = match rows.iter().find(|r| r.upstreams == n) {
            Some(row) => row.rate_per_s,
            None => match config.load {
                Load::RatePerUpstream(r) => r * n as f64,
                Load::TargetRejection(target) => {
                    let lane = lane_over(services, &pool, n).await?;
                    let service_ms = service_time(&lane, &request, &cancel).await?;
                    erlang_load_for(lane.fleet().capacity(), target) / (service_ms / 1000.0)
                }
            },
        };
        kills.push(
            kill_one(
                services, &mut pool, n, rate, &request, &config, &cancel, progress,
            )
            .await?,
        );
    }
    Ok(FleetReport {
        backend: info,
        max_in_flight_per_upstream: TextLaneConfig::default().max_in_flight,
        max_waiting: TextLaneConfig::default().max_waiting,
        load: config.load,
        arrivals: "poisson",
        seconds: config.seconds,
        warmup_seconds: config.warmup_seconds,
        max_tokens: config.max_tokens,
        seed: config.seed,
        started_unix_ms,
        rows,
        kills,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_formula_and_its_inverse_agree() {
        // Two slots offered one erlang refuse 1/5 (a²/2 / (1 + a + a²/2)).
        assert!((erlang_b(2, 1.0) - 0.2).abs() < 1e-12);
        for servers in [2, 4, 6] {
            let load = erlang_load_for(servers, 0.1);
            assert!((erlang_b(servers, load) - 0.1).abs() < 1e-9);
        }
        // Pooling: at the same load per slot, more slots refuse less.
        assert!(erlang_b(4, 2.0) < erlang_b(2, 1.0));
    }

    #[test]
    fn arrivals_are_seeded_and_average_the_rate() {
        let mut a = Arrivals(3);
        let mut b = Arrivals(3);
        let gaps: Vec<f64> = (0..20_000).map(|_| a.gap(4.0).as_secs_f64()).collect();
        assert_eq!(
            gaps[..5],
            (0..5).map(|_| b.gap(4.0).as_secs_f64()).collect::<Vec<_>>()[..]
        );
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean - 0.25).abs() < 0.01, "{mean}");
    }
}
