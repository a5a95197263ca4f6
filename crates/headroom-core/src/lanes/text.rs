use super::monitor::{LaneEvent, LaneMonitor, LaneSnapshot};
use crate::admission::{
    estimate_chat_tokens, human_duration, AdmissionStack, CapacityLimit, ContextWindow,
    DeadlineClock, DeadlineKind, Deadlines, GpuPressure, InputBound, Lane, MemoryGauge, Permit,
    RejectReason, Rejection, RequestShape, YieldRule, YieldToAudio,
};
use crate::lanes::fleet::{Fleet, NoUpstream, UpstreamResult, UpstreamSlot, UpstreamSpec};
use crate::lanes::AudioActivity;
use crate::llm::{ChatChunk, ChatRequest, ChatStream, LlmClient, LlmError, ServerInfo};
use crate::metrics::{Metrics, Outcome};
use futures::{Stream, StreamExt};
use headroom_base::sync::Locked;
use serde::{Deserialize, Serialize};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tracing::Instrument;

/// The text lane's limits. The defaults are the bounded starting configuration: two requests
/// in flight (like `--max-num-seqs 2`), no wait queue, a 4096-token context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TextLaneConfig {
    /// Requests each upstream is given at once unless it has a capacity of its own (and never
    /// more than the slots its server says it has): the lane runs the sum.
    pub max_in_flight: usize,
    pub max_waiting: usize,
    /// The model's context; `None` means "ask the server, else 4096". When set and the server
    /// reports a smaller one, the smaller wins.
    pub context_tokens: Option<u32>,
    pub max_input_chars: usize,
    /// Reply budget reserved for requests that do not set `max_tokens`.
    pub default_max_tokens: u32,
    pub deadlines: Deadlines,
    /// The model to use when a request names none (else the server's first model).
    pub model: Option<String>,
    /// What the lane does while an interactive audio job runs.
    pub yield_rule: YieldRule,
    /// Free GPU memory (MiB) kept for audio: below it new text work is refused with
    /// `gpu_memory_pressure`. `None`: no GPU gate.
    pub audio_headroom_mib: Option<u64>,
}

/// The context assumed when neither the user nor the server gives one.
pub const DEFAULT_CONTEXT_TOKENS: u32 = 4096;

impl Default for TextLaneConfig {
    fn default() -> Self {
        TextLaneConfig {
            max_in_flight: 2,
            max_waiting: 0,
            context_tokens: None,
            max_input_chars: 16_000,
            default_max_tokens: 512,
            deadlines: Deadlines::default(),
            model: None,
            yield_rule: YieldRule::default(),
            audio_headroom_mib: None,
        }
    }
}

struct Inner {
    fleet: Fleet,
    stack: AdmissionStack,
    monitor: Arc<LaneMonitor>,
    capacity: CapacityLimit,
    context: ContextWindow,
    config: TextLaneConfig,
    audio: AudioActivity,
    discovered_model: Mutex<Option<String>>,
    next_id: AtomicU64,
    /// Something was sent upstream (a request, or the servers were asked what they run):
    /// from then on a health check may ask them again.
    used: AtomicBool,
}

/// The admission-controlled lane in front of the text model.
#[derive(Clone)]
pub struct TextLane {
    inner: Arc<Inner>,
}

/// A reference to a lane that does not keep it alive (a background task's).
#[derive(Clone)]
pub struct WeakTextLane {
    inner: std::sync::Weak<Inner>,
}

impl WeakTextLane {
    pub fn upgrade(&self) -> Option<TextLane> {
        self.inner.upgrade().map(|inner| TextLane { inner })
    }
}

impl TextLane {
    /// A text lane with no audio lane beside it.
    pub fn new(client: LlmClient, config: TextLaneConfig, metrics: Arc<Metrics>) -> Self {
        Self::beside_audio(client, config, metrics, AudioActivity::idle())
    }

    /// A text lane that yields to the interactive jobs of an audio lane, by `config.yield_rule`.
    pub fn beside_audio(
        client: LlmClient,
        config: TextLaneConfig,
        metrics: Arc<Metrics>,
        audio: AudioActivity,
    ) -> Self {
        Self::guarded(client, config, metrics, audio, None)
    }

    /// A text lane beside an audio lane that also refuses new work under GPU memory pressure
    /// (`config.audio_headroom_mib`, read from `gpu`).
    pub fn guarded(
        client: LlmClient,
        config: TextLaneConfig,
        metrics: Arc<Metrics>,
        audio: AudioActivity,
        gpu: Option<Arc<dyn MemoryGauge>>,
    ) -> Self {
        Self::over_fleet(vec![UpstreamSpec::new(client)], config, metrics, audio, gpu)
    }

    /// A text lane in front of several upstreams (or one): the lane admits up to their total
    /// capacity and each request goes to the upstream with a free slot that is least busy.
    pub fn over_fleet(
        upstreams: Vec<UpstreamSpec>,
        config: TextLaneConfig,
        metrics: Arc<Metrics>,
        audio: AudioActivity,
        gpu: Option<Arc<dyn MemoryGauge>>,
    ) -> Self {
        let fleet = Fleet::new(
            Lane::Text,
            upstreams,
            config.max_in_flight.max(1),
            metrics.clone(),
        );
        let monitor = LaneMonitor::new(Lane::Text, metrics);
        let capacity = CapacityLimit::new(
            fleet.capacity(),
            config.max_waiting,
            Some(monitor.occupancy_observer()),
        );
        let context = ContextWindow::new(config.context_tokens.unwrap_or(DEFAULT_CONTEXT_TOKENS));
        let stack = AdmissionStack::for_text_lane(
            InputBound {
                max_chars: config.max_input_chars,
                context: context.clone(),
            },
            YieldToAudio {
                rule: config.yield_rule,
                activity: Arc::new(audio.clone()),
            },
            gpu.zip(config.audio_headroom_mib)
                .map(|(gauge, audio_headroom_mib)| GpuPressure {
                    gauge,
                    audio_headroom_mib,
                }),
            capacity.clone(),
            config.deadlines,
        );
        TextLane {
            inner: Arc::new(Inner {
                fleet,
                stack,
                monitor,
                capacity,
                context,
                config,
                audio,
                discovered_model: Mutex::new(None),
                next_id: AtomicU64::new(1),
                used: AtomicBool::new(false),
            }),
        }
    }

    pub fn downgrade(&self) -> WeakTextLane {
        WeakTextLane {
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Asks the upstreams for their models, context lengths and slots, and adopts them: the
    /// lane's capacity becomes the sum of theirs, its context the smallest.
    pub async fn discover(&self) -> Result<ServerInfo, LlmError> {
        self.inner.used.store(true, Ordering::Relaxed);
        let discovered = self.inner.fleet.discover().await;
        self.adopt_fleet();
        let info = discovered?;
        if let Some(first) = info.models.first() {
            *self.inner.discovered_model.locked() = Some(first.id.clone());
        }
        tracing::info!(
            context_tokens = self.inner.context.tokens(),
            capacity = self.inner.capacity.occupancy().limit,
            model = ?self.model(),
            "text model discovered"
        );
        Ok(info)
    }

    /// Whether anything has been sent upstream yet. A lane made for a server the user has not
    /// allowed is never used, and its servers are never asked anything, health included.
    pub fn in_use(&self) -> bool {
        self.inner.used.load(Ordering::Relaxed)
    }

    /// Checks the upstreams' health (a down one that answers is up again) and adopts what
    /// they say; the front end that runs the lane calls it now and then.
    pub async fn check_health(&self) {
        self.inner.fleet.check_health().await;
        self.adopt_fleet();
    }

    fn adopt_fleet(&self) {
        self.inner
            .capacity
            .set_limit(self.inner.fleet.capacity().max(1));
        if let Some(server_ctx) = self.inner.fleet.context_tokens() {
            let ctx = match self.inner.config.context_tokens {
                Some(configured) => configured.min(server_ctx),
                None => server_ctx,
            };
            self.inner.context.set(ctx);
        }
    }

    /// The metrics this lane reports to.
    pub fn metrics(&self) -> &Arc<Metrics> {
        self.inner.monitor.metrics()
    }

    /// The first upstream's client (the only one's, for a single server).
    pub fn client(&self) -> &LlmClient {
        self.inner.fleet.primary()
    }

    pub fn fleet(&self) -> &Fleet {
        &self.inner.fleet
    }

    pub fn config(&self) -> &TextLaneConfig {
        &self.inner.config
    }

    pub fn context_tokens(&self) -> u32 {
        self.inner.context.tokens()
    }

    /// The most reply tokens `request` can ask for and still fit the context (its prompt as the
    /// input bound estimates it); batch work sizes its requests with this.
    pub fn reply_room(&self, request: &ChatRequest) -> u32 {
        let prompt = request.prompt_texts();
        self.context_tokens()
            .saturating_sub(estimate_chat_tokens(prompt.iter().map(String::as_str)))
    }

    /// The model requests use when they name none.
    pub fn model(&self) -> Option<String> {
        self.inner
            .config
            .model
            .clone()
            .or_else(|| self.inner.discovered_model.locked().clone())
    }

    pub fn snapshot(&self) -> LaneSnapshot {
        let mut snapshot = self.inner.monitor.snapshot(self.inner.capacity.occupancy());
        snapshot.upstreams = self.inner.fleet.views();
        snapshot
    }

    pub fn subscribe(&self) -> broadcast::Receiver<LaneEvent> {
        self.inner.monitor.subscribe()
    }

    /// Records a rejection decided outside the lane (e.g. by the server's body parser), so it
    /// shows in history and metrics like any other.
    pub fn record_rejection(&self, reason: RejectReason, detail: impl Into<String>) -> Rejection {
        let r = self.inner.stack.rejection(reason).with_detail(detail);
        self.inner.monitor.reject(r)
    }

    /// Admits the request (bounded input, capacity, queue-wait deadline), sends it upstream
    /// under the first-chunk deadline, and returns its stream once the server answers. The
    /// returned stream holds the slot until it ends, fails or is dropped.
    pub async fn submit(&self, request: ChatRequest) -> Result<TextStream, Rejection> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        self.submit_traced(id, request)
            .instrument(tracing::info_span!("text_request", id))
            .await
    }

    async fn submit_traced(
        &self,
        id: u64,
        mut request: ChatRequest,
    ) -> Result<TextStream, Rejection> {
        let inner = &self.inner;
        if request.reply_budget().is_none() {
            request.max_tokens = Some(inner.config.default_max_tokens);
        }
        if request.model.is_none() {
            request.model = self.model();
        }
        let texts = request.prompt_texts();
        let shape = RequestShape {
            chars: texts.iter().map(|t| t.chars().count()).sum(),
            estimated_tokens: estimate_chat_tokens(texts.iter().map(String::as_str)),
            max_tokens: request
                .reply_budget()
                .unwrap_or(inner.config.default_max_tokens),
        };
        let monitor = &inner.monitor;
        monitor.metrics().count_submitted(Lane::Text);
        let admitted = inner
            .stack
            .admit(&shape, &|occ| monitor.retry_after(occ))
            .await
            .map_err(|r| monitor.reject(r))?;
        monitor
            .metrics()
            .observe_queue_wait(Lane::Text, admitted.queue_wait);
        monitor.metrics().count_dispatched(Lane::Text);
        inner.used.store(true, Ordering::Relaxed);
        let mut clock = admitted.clock;
        let request = Arc::new(request);
        let mut tried = Vec::new();
        let (slot, upstream) = match self.dispatch(&request, &mut clock, &mut tried, false).await {
            Ok(sent) => sent,
            Err(r) => {
                monitor.finished(Outcome::Failed, clock.submitted().elapsed());
                return Err(monitor.reject(r));
            }
        };
        tracing::debug!(
            id,
            upstream = slot.upstream().name(),
            "upstream answered; streaming"
        );
        let ending = Arc::new(Ending {
            lane: self.clone(),
            permit: Mutex::new(Some(admitted.permit)),
            slot: Mutex::new(Some(slot)),
            submitted: clock.submitted(),
            done: AtomicBool::new(false),
        });
        let state = StreamState {
            lane: self.clone(),
            upstream,
            ending,
            clock,
            delivered: false,
            request,
            tried,
            sent_at: Instant::now(),
        };
        Ok(TextStream::start(id, admitted.queue_wait, state))
    }

    /// Sends `request` to an upstream with a free slot, moving on to another while one is down,
    /// busy, answers what cannot be read or stalls past the first-chunk deadline, until one
    /// answers, the total deadline passes, or none is left. Each upstream tried gets the
    /// first-chunk deadline from when it is sent the request, within the total deadline.
    async fn dispatch(
        &self,
        request: &ChatRequest,
        clock: &mut DeadlineClock,
        tried: &mut Vec<usize>,
        after_output: bool,
    ) -> Result<(UpstreamSlot, ChatStream), Rejection> {
        let mut last: Option<Rejection> = None;
        loop {
            let slot = match self.inner.fleet.pick(tried) {
                Ok(slot) => slot,
                Err(NoUpstream::AllTried) => {
                    return Err(last.unwrap_or_else(|| {
                        self.inner
                            .stack
                            .rejection(RejectReason::UpstreamUnavailable)
                            .with_detail("every upstream has been tried for this request")
                    }))
                }
                // The others are full: a busy answer keeps its Retry-After; a failed probe of
                // a down upstream is not why this request is refused, the full lane is.
                Err(NoUpstream::Full { down }) => {
                    return Err(match last {
                        Some(r) if r.reason == RejectReason::UpstreamBusy => r,
                        _ => self.fleet_full_rejection(&down),
                    })
                }
            };
            tried.push(slot.index());
            clock.mark_dispatched(Instant::now());
            let (deadline, kind) = clock.next_deadline();
            let client = slot.upstream().client();
            match tokio::time::timeout_at(deadline, client.stream_chat(request)).await {
                Ok(Ok(stream)) => {
                    slot.record(UpstreamResult::Answered, "");
                    return Ok((slot, stream));
                }
                Ok(Err(e)) => {
                    let result = UpstreamResult::of_error(&e);
                    slot.record(result, &e.to_string());
                    let r = self.upstream_rejection(e, after_output);
                    if !result.worth_another() || self.inner.fleet.len() == tried.len() {
                        return Err(r);
                    }
                    tracing::info!(
                        upstream = slot.upstream().name(),
                        reason = %r.reason,
                        "trying another upstream"
                    );
                    last = Some(r);
                }
                Err(_) => {
                    let r = self.deadline_rejection(clock, kind, after_output);
                    if kind != DeadlineKind::FirstChunk {
                        // The request ran out of time, not necessarily this upstream.
                        slot.out_of_time();
                        return Err(r);
                    }
                    // A stall through the whole first-chunk deadline: the upstream is marked
                    // down, and while the total deadline leaves room another is tried.
                    slot.record(
                        UpstreamResult::Deadline,
                        &format!("no answer within {}", human_duration(clock.length_of(kind))),
                    );
                    if self.inner.fleet.len() == tried.len() {
                        return Err(r);
                    }
                    tracing::info!(
                        upstream = slot.upstream().name(),
                        "no answer before the first-chunk deadline; trying another upstream"
                    );
                    last = Some(r);
                }
            }
        }
    }

    /// Every upstream that is up is full while others are down: the lane's total capacity
    /// counts slots that cannot be used now.
    fn fleet_full_rejection(&self, down: &[String]) -> Rejection {
        let mut r = self
            .inner
            .stack
            .rejection(RejectReason::TextLaneFull)
            .with_retry_after(
                self.inner
                    .monitor
                    .retry_after(self.inner.capacity.occupancy()),
            );
        if !down.is_empty() {
            r = r.with_detail(format!(
                "every upstream that is up is full; down: {}",
                down.join(", ")
            ));
        }
        r
    }

    fn deadline_rejection(
        &self,
        clock: &DeadlineClock,
        kind: DeadlineKind,
        after_output: bool,
    ) -> Rejection {
        let what = match kind {
            DeadlineKind::QueueWait => "no slot came free",
            DeadlineKind::FirstChunk => "the first words did not arrive",
            DeadlineKind::Total => "the whole reply did not arrive",
        };
        let mut r = self
            .inner
            .stack
            .rejection(RejectReason::DeadlineExceeded)
            .with_deadline(kind)
            .with_detail(format!(
                "{what} within {}",
                human_duration(clock.length_of(kind))
            ));
        r.after_output = after_output;
        if kind != DeadlineKind::Total {
            r.retry_after = self
                .inner
                .monitor
                .retry_after(self.inner.capacity.occupancy());
        }
        r
    }

    /// Explains an upstream failure as a rejection the user can act on.
    fn upstream_rejection(&self, error: LlmError, after_output: bool) -> Rejection {
        let base = |reason| self.inner.stack.rejection(reason);
        let estimate = || {
            self.inner
                .monitor
                .retry_after(self.inner.capacity.occupancy())
        };
        let mut r = match &error {
            LlmError::Unreachable { url, message } => base(RejectReason::UpstreamUnavailable)
                .with_detail(format!("{url}: {message}"))
                .with_retry_after(Some(Duration::from_secs(5))),
            LlmError::Disconnected(message) => base(RejectReason::UpstreamUnavailable)
                .with_detail(format!("the connection broke: {message}"))
                .with_retry_after(estimate()),
            LlmError::Busy {
                status,
                error,
                retry_after,
            } => base(RejectReason::UpstreamBusy)
                .with_detail(format!("HTTP {status}: {}", error.message))
                .with_retry_after(retry_after.or_else(estimate)),
            LlmError::ContextOverflow { error } => base(RejectReason::InputTooLong)
                .with_detail(format!("the server says: {}", error.message)),
            LlmError::Status { status, error } if *status >= 500 => {
                base(RejectReason::UpstreamUnavailable)
                    .with_detail(format!("HTTP {status}: {}", error.message))
                    .with_retry_after(estimate())
            }
            LlmError::InStream(error)
                if matches!(
                    error.code.as_ref().map(|c| c.to_string()).as_deref(),
                    Some("429" | "503")
                ) =>
            {
                base(RejectReason::UpstreamBusy)
                    .with_detail(format!("error inside the stream: {}", error.message))
                    .with_retry_after(estimate())
            }
            other => base(RejectReason::UpstreamError).with_detail(other.to_string()),
        };
        r.after_output = after_output;
        r
    }
}

/// The end of an admitted request, shared by its stream and the task that drives it:
/// whichever gets there first frees the slot and records the outcome, exactly once.
struct Ending {
    lane: TextLane,
    permit: Mutex<Option<Permit>>,
    /// The request's place on its upstream; replaced when it moves to another.
    slot: Mutex<Option<UpstreamSlot>>,
    submitted: Instant,
    done: AtomicBool,
}

impl Ending {
    /// Frees the slot and records `outcome`; false if the request had already ended.
    fn finish(&self, outcome: Outcome) -> bool {
        if self.done.swap(true, Ordering::SeqCst) {
            return false;
        }
        drop(self.slot.locked().take());
        drop(self.permit.locked().take());
        self.lane
            .inner
            .monitor
            .finished(outcome, self.submitted.elapsed());
        true
    }

    fn is_done(&self) -> bool {
        self.done.load(Ordering::SeqCst)
    }
}

/// Chunks the driver reads ahead of a slow reader.
const READ_AHEAD: usize = 64;

type Item = Result<ChatChunk, Rejection>;

struct StreamState {
    lane: TextLane,
    upstream: ChatStream,
    ending: Arc<Ending>,
    clock: DeadlineClock,
    delivered: bool,
    /// Kept to send again to another upstream if this one fails before the first words.
    request: Arc<ChatRequest>,
    tried: Vec<usize>,
    /// When the current upstream was sent the request.
    sent_at: Instant,
}

impl StreamState {
    /// Ends the request: frees the slot at once and closes the upstream connection.
    /// Ends the request (false if it had already ended) and closes the upstream connection.
    fn finish(&mut self, outcome: Outcome) -> bool {
        self.upstream = Box::pin(futures::stream::empty());
        self.ending.finish(outcome)
    }

    async fn next_chunk(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.next_from_upstream().await {
                return item;
            }
        }
    }

    /// The next item, or `None` when the request moved to another upstream and reading starts
    /// again there.
    async fn next_from_upstream(&mut self) -> Option<Option<Item>> {
        if self.ending.is_done() {
            return Some(None);
        }
        let (deadline, kind) = self.clock.next_deadline();
        let inner = self.lane.inner.clone();
        let preempting = inner.config.yield_rule == YieldRule::Preempt;
        let next = tokio::select! {
            next = tokio::time::timeout_at(deadline, self.upstream.next()) => next,
            _ = inner.audio.until_interactive(), if preempting => {
                self.finish(Outcome::Cancelled);
                let mut r = self
                    .lane
                    .inner
                    .stack
                    .rejection(RejectReason::AudioPriority)
                    .with_detail("stopped: an interactive audio job started")
                    .with_retry_after(Some(Duration::from_secs(1)));
                r.after_output = self.delivered;
                return Some(Some(Err(inner.monitor.reject(r))));
            }
        };
        Some(match next {
            Err(_) if !self.delivered => return self.stalled(kind).await,
            Err(_) => self.deadline_passed(kind).map(Err),
            Ok(None) => {
                if let Some(slot) = self.ending.slot.locked().as_ref() {
                    slot.completed();
                }
                self.finish(Outcome::Completed);
                None
            }
            Ok(Some(Err(e))) => {
                let result = UpstreamResult::of_error(&e);
                if let Some(slot) = self.ending.slot.locked().as_ref() {
                    slot.failed_after_answer(result, &e.to_string());
                }
                let untried = self.tried.len() < self.lane.inner.fleet.len();
                if !self.delivered && result.worth_another() && untried {
                    match self.move_on().await {
                        Ok(()) => return None,
                        Err(r) => {
                            self.finish(Outcome::Failed);
                            return Some(Some(Err(self.lane.inner.monitor.reject(r))));
                        }
                    }
                }
                self.finish(Outcome::Failed);
                let r = self.lane.upstream_rejection(e, self.delivered);
                Some(Err(self.lane.inner.monitor.reject(r)))
            }
            Ok(Some(Ok(chunk))) => {
                if chunk.text().is_some() && self.clock.first_content().is_none() {
                    let now = Instant::now();
                    self.clock.mark_first_content(now);
                    self.lane
                        .inner
                        .monitor
                        .metrics()
                        .observe_ttft(Lane::Text, now - self.clock.submitted());
                    if let Some(slot) = self.ending.slot.locked().as_ref() {
                        slot.first_words(now - self.sent_at);
                    }
                }
                self.delivered |= chunk.text().is_some();
                Some(Ok(chunk))
            }
        })
    }

    /// A deadline passed before the first words. At the first-chunk deadline the upstream
    /// stalls and is marked down, and with an upstream left to try the request moves on (the
    /// total deadline still bounds it); else the request ends at its deadline.
    async fn stalled(&mut self, kind: DeadlineKind) -> Option<Option<Item>> {
        if kind != DeadlineKind::FirstChunk {
            return Some(self.deadline_passed(kind).map(Err));
        }
        if let Some(slot) = self.ending.slot.locked().as_ref() {
            let detail = format!(
                "no first words within {}",
                human_duration(self.clock.length_of(kind))
            );
            slot.failed_after_answer(UpstreamResult::Deadline, &detail);
        }
        let untried = self.tried.len() < self.lane.inner.fleet.len();
        if untried && !self.ending.is_done() {
            tracing::info!("no first words before the first-chunk deadline; moving on");
            return match self.move_on().await {
                Ok(()) => None,
                Err(r) => {
                    self.finish(Outcome::Failed);
                    Some(Some(Err(self.lane.inner.monitor.reject(r))))
                }
            };
        }
        Some(self.deadline_passed(kind).map(Err))
    }

    /// The upstream failed before the first words: the request goes to another upstream
    /// within its deadline (its place on the failed one is freed first).
    async fn move_on(&mut self) -> Result<(), Rejection> {
        drop(self.ending.slot.locked().take());
        self.upstream = Box::pin(futures::stream::empty());
        let (slot, upstream) = self
            .lane
            .dispatch(&self.request, &mut self.clock, &mut self.tried, false)
            .await?;
        tracing::info!(
            upstream = slot.upstream().name(),
            "the request moved to another upstream"
        );
        *self.ending.slot.locked() = Some(slot);
        self.upstream = upstream;
        self.sent_at = Instant::now();
        Ok(())
    }

    /// Ends the request at a deadline; the rejection (recorded once) if this ended it.
    fn deadline_passed(&mut self, kind: DeadlineKind) -> Option<Rejection> {
        if !self.finish(Outcome::Failed) {
            return None;
        }
        let r = self
            .lane
            .deadline_rejection(&self.clock, kind, self.delivered);
        Some(self.lane.inner.monitor.reject(r))
    }

    /// Reads the upstream into `chunks` until the reply ends, fails or is cancelled. The total
    /// deadline is a timer here, so a reader that stops reading still loses the slot at the
    /// deadline and the upstream request is aborted (the connection closes when this returns).
    async fn drive(mut self, chunks: mpsc::Sender<Item>, ended: Arc<Mutex<Option<Rejection>>>) {
        let total = self.clock.total_deadline();
        loop {
            let item = tokio::select! {
                item = self.next_chunk() => item,
                _ = chunks.closed() => return,
            };
            let Some(item) = item else { return };
            if item.is_err() {
                // The request has ended (slot free, upstream closed): hand the ending over
                // without waiting on a reader that may have stopped reading.
                if let Err(mpsc::error::TrySendError::Full(Err(r))) = chunks.try_send(item) {
                    *ended.locked() = Some(r);
                }
                return;
            }
            tokio::select! {
                biased;
                sent = chunks.send(item) => if sent.is_err() { return },
                _ = tokio::time::sleep_until(total) => {
                    tracing::info!("the reader stopped reading; total deadline passed");
                    *ended.locked() =
                        self.deadline_passed(DeadlineKind::Total);
                    return;
                }
            }
        }
    }
}

/// The chunks of an admitted text request, read from the upstream by a task of its own.
/// Dropping it cancels the request: the slot frees at once and the upstream connection
/// closes, so the server aborts the generation too.
pub struct TextStream {
    id: u64,
    queue_wait: Duration,
    chunks: mpsc::Receiver<Item>,
    /// How the request ended when the reader was not reading (its chunk could not be queued).
    ended: Arc<Mutex<Option<Rejection>>>,
    ending: Arc<Ending>,
}

impl TextStream {
    fn start(id: u64, queue_wait: Duration, state: StreamState) -> Self {
        let (tx, chunks) = mpsc::channel(READ_AHEAD);
        let ended = Arc::new(Mutex::new(None));
        let ending = state.ending.clone();
        tokio::spawn(
            state
                .drive(tx, ended.clone())
                .instrument(tracing::info_span!("text_stream", id)),
        );
        TextStream {
            id,
            queue_wait,
            chunks,
            ended,
            ending,
        }
    }

    pub fn id(&self) -> u64 {
        self.id
    }

    /// How long the request waited for a slot.
    pub fn queue_wait(&self) -> Duration {
        self.queue_wait
    }

    /// Reads the whole reply; a failure keeps the text received so far in the rejection's
    /// `after_output` flag and returns it alongside.
    pub async fn collect_text(mut self) -> Result<String, (String, Rejection)> {
        let mut text = String::new();
        while let Some(item) = self.next().await {
            match item {
                Ok(chunk) => text.push_str(chunk.content.as_deref().unwrap_or("")),
                Err(r) => return Err((text, r)),
            }
        }
        Ok(text)
    }
}

impl Drop for TextStream {
    fn drop(&mut self) {
        if self.ending.finish(Outcome::Cancelled) {
            tracing::info!(
                id = self.id,
                "text request dropped before the end; upstream closed"
            );
        }
    }
}

impl Stream for TextStream {
    type Item = Item;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Item>> {
        match self.chunks.poll_recv(cx) {
            Poll::Ready(None) => Poll::Ready(self.ended.locked().take().map(Err)),
            other => other,
        }
    }
}
