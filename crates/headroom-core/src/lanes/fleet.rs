//! The upstreams behind one text lane: each with its own slots, context, health and breaker.
//!
//! The lane admits a request against the fleet's total capacity (so a full fleet refuses at
//! once, as one server does); the fleet then picks the upstream it goes to: an upstream that
//! is up and has a free slot, the least busy first, then the one whose first tokens came
//! soonest lately. An upstream that fails before the first token is marked down and the
//! request moves on: refused or broken connections and server errors, and as much a reply that
//! cannot be read (not an event stream, not JSON) or first words that do not come before the
//! first-chunk deadline. A down upstream is tried again after a backoff (one request at a time,
//! a half-open breaker), and is up again once that request gets words from it; a health check
//! that finds it answering brings it back at once only when it went down unreachable, since a
//! server whose replies are garbage or stall may answer its model list all the while. When
//! every upstream is down each request still tries them, since a refused connection costs
//! nothing and there is no better place to send it.

use crate::admission::Lane;
use crate::llm::{LlmClient, LlmError, ServerInfo};
use crate::metrics::Metrics;
use headroom_base::sync::Locked;
use serde::Serialize;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

/// The first wait before a down upstream is tried again; it doubles while it stays down.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Weight of the newest first-token time in an upstream's running average.
const TTFT_WEIGHT: f64 = 0.3;

/// A server a fleet sends work to, known by its URL as it may be shown (no secrets): the
/// text lane's chat servers, and the audio servers a batch is spread over.
pub trait Member: Send + Sync + 'static {
    fn shown_url(&self) -> String;
}

impl Member for LlmClient {
    fn shown_url(&self) -> String {
        LlmClient::shown_url(self)
    }
}

/// One upstream as configured: its client and, for a router or a server that does not say,
/// how many requests it should be given at once.
#[derive(Debug, Clone)]
pub struct UpstreamSpec<C = LlmClient> {
    pub client: C,
    pub capacity: Option<usize>,
}

impl<C> UpstreamSpec<C> {
    pub fn new(client: C) -> Self {
        UpstreamSpec {
            client,
            capacity: None,
        }
    }
}

/// How a request sent to an upstream went, as `/metrics` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamResult {
    /// The server answered with a stream.
    Answered,
    /// Unreachable, broken connection or a server error: the upstream is marked down.
    Unavailable,
    /// 429/503: full right now, but up.
    Busy,
    /// The request itself was refused (too long, bad request): no other upstream would differ.
    Error,
    /// No answer, or no first words, before the deadline. At the first-chunk deadline the
    /// upstream stalls and is marked down; at the request's total deadline it is only counted.
    Deadline,
    /// An answer that cannot be read: not an event stream, or a stream that is not the
    /// protocol (a chunk that is not JSON, an event past the bound). Marked down.
    Unreadable,
}

impl UpstreamResult {
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamResult::Answered => "answered",
            UpstreamResult::Unavailable => "unavailable",
            UpstreamResult::Busy => "busy",
            UpstreamResult::Error => "error",
            UpstreamResult::Deadline => "deadline",
            UpstreamResult::Unreadable => "unreadable",
        }
    }

    pub const ALL: [UpstreamResult; 6] = [
        UpstreamResult::Answered,
        UpstreamResult::Unavailable,
        UpstreamResult::Busy,
        UpstreamResult::Error,
        UpstreamResult::Deadline,
        UpstreamResult::Unreadable,
    ];

    /// How an error from an upstream counts: whether it says the upstream is down, busy, or
    /// that the request itself is at fault.
    pub fn of_error(error: &LlmError) -> UpstreamResult {
        match error {
            LlmError::Unreachable { .. } | LlmError::Disconnected(_) | LlmError::Truncated => {
                UpstreamResult::Unavailable
            }
            LlmError::Status { status, .. } if *status >= 500 => UpstreamResult::Unavailable,
            LlmError::Busy { .. } => UpstreamResult::Busy,
            // A 200 whose body is not the protocol says nothing about the request: every
            // server would have read it, this one answered garbage.
            LlmError::Malformed(_) => UpstreamResult::Unreadable,
            LlmError::InStream(e) => match e.code.as_ref().map(|c| c.to_string()).as_deref() {
                Some("429" | "503") => UpstreamResult::Busy,
                // A server error reported inside the stream, as a 5xx status would have been.
                Some(code) if code.parse::<u16>().is_ok_and(|n| (500..600).contains(&n)) => {
                    UpstreamResult::Unavailable
                }
                _ => UpstreamResult::Error,
            },
            LlmError::InvalidUrl { .. }
            | LlmError::ContextOverflow { .. }
            | LlmError::Status { .. } => UpstreamResult::Error,
        }
    }

    /// Whether another upstream may succeed where this one did not.
    pub fn worth_another(self) -> bool {
        matches!(
            self,
            UpstreamResult::Unavailable
                | UpstreamResult::Busy
                | UpstreamResult::Unreadable
                | UpstreamResult::Deadline
        )
    }

    /// Whether it counts against the upstream's breaker: it is marked down.
    pub fn marks_down(self) -> bool {
        self.down_cause().is_some()
    }

    /// What it says took the upstream down, if anything.
    fn down_cause(self) -> Option<DownCause> {
        match self {
            UpstreamResult::Unavailable => Some(DownCause::Unreachable),
            UpstreamResult::Unreadable | UpstreamResult::Deadline => Some(DownCause::Replies),
            UpstreamResult::Answered | UpstreamResult::Busy | UpstreamResult::Error => None,
        }
    }
}

/// What took an upstream down, and so what can show it is back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum DownCause {
    /// Unreachable, a broken connection or a server error: a health check that finds it
    /// answering shows it is back.
    Unreachable,
    /// Its replies could not be read or its first words did not come: its model list may
    /// answer all the while, so only a request that gets words from it shows it is back.
    Replies,
}

#[derive(Debug, Clone)]
enum Health {
    Up,
    Down {
        since: Instant,
        retry_at: Instant,
        backoff: Duration,
        reason: String,
        cause: DownCause,
    },
}

#[derive(Debug)]
struct State {
    capacity: usize,
    in_flight: usize,
    context_tokens: Option<u32>,
    health: Health,
    /// Running average of recent first-token times.
    ttft: Option<Duration>,
    /// A request is testing a down upstream whose backoff ran out.
    probing: bool,
}

/// One server behind the lane.
pub struct Upstream<C = LlmClient> {
    client: C,
    name: String,
    /// The lane it serves: the `lane` label of its metrics.
    lane: Lane,
    /// The capacity to give it: configured for this upstream, else the lane's default.
    limit: usize,
    state: Mutex<State>,
    metrics: Arc<Metrics>,
}

impl<C> Upstream<C> {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// The URL as it may be shown (no secrets): the `upstream` label of its metrics.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn client(&self) -> &C {
        &self.client
    }

    fn publish(&self, st: &State) {
        self.metrics
            .set_upstream_load(self.lane, &self.name, st.in_flight, st.capacity);
    }

    /// The server gave a request words (or a whole reply), or its health check answered while
    /// it was down only as unreachable: it is up (again).
    fn mark_up(&self) {
        let mut st = self.lock();
        st.probing = false;
        if matches!(st.health, Health::Down { .. }) {
            st.health = Health::Up;
            tracing::info!(upstream = %self.name, "upstream is answering again");
            self.metrics
                .set_upstream_up(self.lane, &self.name, true, true, &[]);
        }
    }

    /// The health check answered: up again if it went down unreachable; one that went down
    /// for its replies waits for a request to get words from it (its backoff stands).
    fn vouch(&self) {
        let cause = match &self.lock().health {
            Health::Up => return,
            Health::Down { cause, .. } => *cause,
        };
        match cause {
            DownCause::Unreachable => self.mark_up(),
            DownCause::Replies => tracing::debug!(
                upstream = %self.name,
                "the health check answers, but the upstream's replies failed; it waits for a request"
            ),
        }
    }

    /// The server failed before its first words: down, and tried again after a growing
    /// backoff.
    ///
    /// The backoff grows once per failed try after it ran out (a probe or a health check),
    /// not once per request that was running when the server went away. A down upstream keeps
    /// the stronger of its causes: a health check cannot vouch for one whose replies failed.
    fn mark_down(&self, reason: &str, cause: DownCause) {
        let now = Instant::now();
        let mut st = self.lock();
        st.probing = false;
        let (since, backoff, cause, changed) = match &mut st.health {
            Health::Up => (now, FIRST_BACKOFF, cause, true),
            Health::Down {
                retry_at,
                reason: why,
                cause: was,
                ..
            } if now < *retry_at => {
                *why = reason.to_string();
                *was = cause.max(*was);
                return;
            }
            Health::Down {
                since,
                backoff,
                cause: was,
                ..
            } => (
                *since,
                (*backoff * 2).min(MAX_BACKOFF),
                cause.max(*was),
                false,
            ),
        };
        st.health = Health::Down {
            since,
            retry_at: now + backoff,
            backoff,
            reason: reason.to_string(),
            cause,
        };
        if changed {
            tracing::warn!(upstream = %self.name, reason, "upstream marked down");
        }
        self.metrics
            .set_upstream_up(self.lane, &self.name, false, changed, &[]);
    }

    fn observe_ttft(&self, d: Duration) {
        let mut st = self.lock();
        st.ttft = Some(match st.ttft {
            None => d,
            Some(avg) => avg.mul_f64(1.0 - TTFT_WEIGHT) + d.mul_f64(TTFT_WEIGHT),
        });
        self.metrics.observe_upstream_ttft(self.lane, &self.name, d);
    }

    /// Adopts what the server says: its context and how many requests it runs at once (never
    /// more than the configured limit).
    fn adopt(&self, info: &ServerInfo) -> usize {
        let mut st = self.lock();
        st.context_tokens = info.context_tokens;
        st.capacity = info.slots.map_or(self.limit, |slots| slots.min(self.limit));
        self.publish(&st);
        st.capacity
    }

    fn view(&self, now: Instant) -> UpstreamView {
        let st = self.lock();
        let (down_for_ms, retry_in_ms, down_reason) = match &st.health {
            Health::Up => (None, None, None),
            Health::Down {
                since,
                retry_at,
                reason,
                ..
            } => (
                Some(now.saturating_duration_since(*since).as_millis() as u64),
                Some(retry_at.saturating_duration_since(now).as_millis() as u64),
                Some(reason.clone()),
            ),
        };
        UpstreamView {
            name: self.name.clone(),
            up: matches!(st.health, Health::Up),
            in_flight: st.in_flight,
            capacity: st.capacity,
            context_tokens: st.context_tokens,
            recent_ttft_ms: st.ttft.map(|d| d.as_millis() as u64),
            down_for_ms,
            retry_in_ms,
            down_reason,
        }
    }
}

/// What the lanes panel and `/v1/headroom/lanes` show of one upstream.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct UpstreamView {
    pub name: String,
    pub up: bool,
    pub in_flight: usize,
    pub capacity: usize,
    pub context_tokens: Option<u32>,
    /// Running average of its recent first-token times.
    pub recent_ttft_ms: Option<u64>,
    pub down_for_ms: Option<u64>,
    /// When a down upstream gets its next request (or health check).
    pub retry_in_ms: Option<u64>,
    pub down_reason: Option<String>,
}

/// A request's place on one upstream; dropping it frees the place.
pub struct UpstreamSlot<C = LlmClient> {
    upstream: Arc<Upstream<C>>,
    index: usize,
    probe: bool,
}

impl<C> UpstreamSlot<C> {
    pub fn index(&self) -> usize {
        self.index
    }

    pub fn upstream(&self) -> &Upstream<C> {
        &self.upstream
    }

    /// Records how the request went and what it says about the upstream's health. Headers
    /// alone (`Answered`) do not show a down upstream is back: its first words do
    /// ([`UpstreamSlot::first_words`]), so a probe stays the only request on it until then.
    pub fn record(&self, result: UpstreamResult, detail: &str) {
        self.upstream.metrics.count_upstream_request(
            self.upstream.lane,
            &self.upstream.name,
            result.as_str(),
        );
        match result.down_cause() {
            Some(cause) => self.upstream.mark_down(detail, cause),
            None if self.probe && result != UpstreamResult::Answered => {
                self.upstream.lock().probing = false
            }
            None => {}
        }
    }

    /// The request's own total deadline passed before the upstream answered: counted as a
    /// deadline, but no verdict on the upstream (the time may have gone on others before it).
    pub fn out_of_time(&self) {
        self.upstream.metrics.count_upstream_request(
            self.upstream.lane,
            &self.upstream.name,
            UpstreamResult::Deadline.as_str(),
        );
    }

    /// The first words came `after` the request was sent: the upstream works (it is up again
    /// if it was down), and its first-token time counts in its ranking.
    pub fn first_words(&self, after: Duration) {
        self.upstream.observe_ttft(after);
        self.upstream.mark_up();
    }

    /// The reply ended as it should without any words (an empty answer): the upstream works.
    pub fn completed(&self) {
        self.upstream.mark_up();
    }

    /// The answered request failed later: a broken connection, a server error, a stream that
    /// is not the protocol or first words that never came still say the upstream is down
    /// (counted once, as answered, in the requests).
    pub fn failed_after_answer(&self, result: UpstreamResult, detail: &str) {
        if let Some(cause) = result.down_cause() {
            self.upstream.mark_down(detail, cause);
        }
    }
}

impl<C> Drop for UpstreamSlot<C> {
    fn drop(&mut self) {
        let mut st = self.upstream.lock();
        st.in_flight -= 1;
        if self.probe {
            st.probing = false;
        }
        self.upstream.publish(&st);
    }
}

/// Why no upstream could take a request.
#[derive(Debug, Clone, PartialEq)]
pub enum NoUpstream {
    /// Every upstream that is up is full (and the down ones wait out their backoff).
    Full { down: Vec<String> },
    /// Every upstream has been tried for this request.
    AllTried,
}

/// The upstreams of one text lane (or of a batch spread over audio servers).
pub struct Fleet<C = LlmClient> {
    upstreams: Arc<Vec<Arc<Upstream<C>>>>,
}

impl<C> Clone for Fleet<C> {
    fn clone(&self) -> Self {
        Fleet {
            upstreams: self.upstreams.clone(),
        }
    }
}

impl<C: Member> Fleet<C> {
    /// A fleet of `specs` serving `lane` (its metrics' `lane` label); an upstream without a
    /// configured capacity gets `default_capacity` until its server says it runs fewer.
    pub fn new(
        lane: Lane,
        specs: Vec<UpstreamSpec<C>>,
        default_capacity: usize,
        metrics: Arc<Metrics>,
    ) -> Self {
        assert!(!specs.is_empty(), "a fleet needs an upstream");
        let upstreams = specs
            .into_iter()
            .map(|spec| {
                let limit = spec.capacity.unwrap_or(default_capacity).max(1);
                let upstream = Upstream {
                    name: spec.client.shown_url(),
                    lane,
                    client: spec.client,
                    limit,
                    state: Mutex::new(State {
                        capacity: limit,
                        in_flight: 0,
                        context_tokens: None,
                        health: Health::Up,
                        ttft: None,
                        probing: false,
                    }),
                    metrics: metrics.clone(),
                };
                let results = UpstreamResult::ALL.map(UpstreamResult::as_str);
                metrics.set_upstream_up(lane, &upstream.name, true, false, &results);
                upstream.publish(&upstream.lock());
                Arc::new(upstream)
            })
            .collect();
        Fleet {
            upstreams: Arc::new(upstreams),
        }
    }

    pub fn len(&self) -> usize {
        self.upstreams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.upstreams.is_empty()
    }

    /// The first upstream's client (the only one for a single server).
    pub fn primary(&self) -> &C {
        &self.upstreams[0].client
    }

    pub fn upstreams(&self) -> impl Iterator<Item = &Upstream<C>> {
        self.upstreams.iter().map(|u| u.as_ref())
    }

    /// Requests the fleet runs at once: the sum of its upstreams' capacities.
    pub fn capacity(&self) -> usize {
        self.upstreams.iter().map(|u| u.lock().capacity).sum()
    }

    /// The smallest context any upstream said it has, so a request fits wherever it goes.
    pub fn context_tokens(&self) -> Option<u32> {
        self.upstreams
            .iter()
            .filter_map(|u| u.lock().context_tokens)
            .min()
    }

    /// Picks the upstream for a request that has already tried `tried`: an up one with a free
    /// slot (least in flight, then soonest first tokens); else a down one whose backoff ran out
    /// (one request at a time); else, when none is up at all, a down one all the same.
    pub fn pick(&self, tried: &[usize]) -> Result<UpstreamSlot<C>, NoUpstream> {
        let now = Instant::now();
        let mut best: Option<(usize, (u8, usize, Duration))> = None;
        let mut any_up = false;
        let mut down = Vec::new();
        for (index, upstream) in self.upstreams.iter().enumerate() {
            let st = upstream.lock();
            let up = matches!(st.health, Health::Up);
            any_up |= up;
            if !up {
                down.push(upstream.name.clone());
            }
            if tried.contains(&index) || st.in_flight >= st.capacity {
                continue;
            }
            let rank = match &st.health {
                Health::Up => 0,
                Health::Down { retry_at, .. } if *retry_at <= now && !st.probing => 1,
                Health::Down { .. } => 2,
            };
            let key = (rank, st.in_flight, st.ttft.unwrap_or_default());
            if best.as_ref().is_none_or(|(_, k)| key < *k) {
                best = Some((index, key));
            }
        }
        let chosen = match best {
            Some((index, (rank, ..))) if rank < 2 || !any_up => Some((index, rank == 1)),
            _ => None,
        };
        let Some((index, probe)) = chosen else {
            return Err(if tried.len() >= self.upstreams.len() {
                NoUpstream::AllTried
            } else {
                NoUpstream::Full { down }
            });
        };
        let upstream = self.upstreams[index].clone();
        {
            let mut st = upstream.lock();
            st.in_flight += 1;
            st.probing |= probe;
            upstream.publish(&st);
        }
        Ok(UpstreamSlot {
            upstream,
            index,
            probe,
        })
    }

    pub fn views(&self) -> Vec<UpstreamView> {
        let now = Instant::now();
        self.upstreams.iter().map(|u| u.view(now)).collect()
    }
}

impl Fleet<LlmClient> {
    /// Asks every upstream for its models, context and slots. The first answer is returned
    /// (the first error when none answers); an upstream that does not answer is marked down.
    pub async fn discover(&self) -> Result<ServerInfo, LlmError> {
        let answers =
            futures::future::join_all(self.upstreams.iter().map(|u| u.client.server_info())).await;
        let mut first_ok = None;
        let mut first_err = None;
        for (upstream, answer) in self.upstreams.iter().zip(answers) {
            match answer {
                Ok(info) => {
                    let capacity = upstream.adopt(&info);
                    upstream.vouch();
                    tracing::info!(
                        upstream = %upstream.name,
                        capacity,
                        context_tokens = ?info.context_tokens,
                        "upstream discovered"
                    );
                    first_ok.get_or_insert(info);
                }
                Err(e) => {
                    if UpstreamResult::of_error(&e).marks_down() {
                        upstream.mark_down(&e.to_string(), DownCause::Unreachable);
                    }
                    first_err.get_or_insert(e);
                }
            }
        }
        match (first_ok, first_err) {
            (Some(info), _) => Ok(info),
            (None, Some(e)) => Err(e),
            (None, None) => unreachable!("a fleet has an upstream"),
        }
    }

    /// Checks every upstream: one that answers adopts what it says and is up again if it went
    /// down unreachable (one whose replies failed waits for a request that gets words); one
    /// that does not answer is down, with a longer backoff before a request tries it. The
    /// check itself is the probe, so it ignores the backoff (that only keeps requests away).
    pub async fn check_health(&self) {
        let answers =
            futures::future::join_all(self.upstreams.iter().map(|u| u.client.server_info())).await;
        for (upstream, answer) in self.upstreams.iter().zip(answers) {
            match answer {
                Ok(info) => {
                    upstream.adopt(&info);
                    upstream.vouch();
                }
                // Anything but a refused or broken connection, a server error or an unreadable
                // answer is an answer: a router that rate-limits its model list is up.
                Err(e) if UpstreamResult::of_error(&e).marks_down() => {
                    upstream.mark_down(&format!("health check: {e}"), DownCause::Unreachable)
                }
                Err(_) => upstream.vouch(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet(capacities: &[Option<usize>]) -> Fleet {
        let specs = capacities
            .iter()
            .enumerate()
            .map(|(i, capacity)| UpstreamSpec {
                client: LlmClient::new(&format!("http://127.0.0.1:{}/v1", 9000 + i), None).unwrap(),
                capacity: *capacity,
            })
            .collect();
        Fleet::new(Lane::Text, specs, 2, Arc::new(Metrics::new()))
    }

    #[tokio::test]
    async fn requests_spread_to_the_least_busy_upstream_and_stop_at_the_total() {
        let f = fleet(&[None, None]);
        assert_eq!(f.capacity(), 4);
        let slots: Vec<UpstreamSlot> = (0..4).map(|_| f.pick(&[]).unwrap()).collect();
        let on: Vec<usize> = slots.iter().map(|s| s.index()).collect();
        assert_eq!(on, vec![0, 1, 0, 1]);
        assert_eq!(f.pick(&[]).err(), Some(NoUpstream::Full { down: vec![] }));
        drop(slots);
        assert!(f.views().iter().all(|v| v.in_flight == 0));
    }

    #[tokio::test]
    async fn the_upstream_with_sooner_first_tokens_is_chosen_among_equally_busy_ones() {
        let f = fleet(&[None, None]);
        let a = f.pick(&[]).unwrap();
        a.first_words(Duration::from_millis(900));
        let b = f.pick(&[]).unwrap();
        b.first_words(Duration::from_millis(100));
        drop((a, b));
        assert_eq!(f.pick(&[]).unwrap().index(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_upstream_is_skipped_until_its_backoff_ends_then_probed_once() {
        let f = fleet(&[None, None]);
        let first = f.pick(&[]).unwrap();
        assert_eq!(first.index(), 0);
        first.record(UpstreamResult::Unavailable, "connection refused");
        drop(first);
        let views = f.views();
        assert!(!views[0].up);
        assert_eq!(views[0].down_reason.as_deref(), Some("connection refused"));
        // While it is down every request goes to the other, and the full one refuses.
        let b1 = f.pick(&[]).unwrap();
        let b2 = f.pick(&[]).unwrap();
        assert_eq!((b1.index(), b2.index()), (1, 1));
        let Err(NoUpstream::Full { down }) = f.pick(&[]) else {
            panic!("the up upstream is full and the down one waits")
        };
        assert_eq!(down, vec!["http://127.0.0.1:9000/v1".to_string()]);
        // After the backoff, one request probes it; a second does not join the probe.
        tokio::time::advance(FIRST_BACKOFF).await;
        let probe = f.pick(&[]).unwrap();
        assert_eq!(probe.index(), 0);
        assert!(f.pick(&[]).is_err());
        probe.record(UpstreamResult::Answered, "");
        assert!(
            !f.views()[0].up && f.pick(&[]).is_err(),
            "headers alone are no proof: the probe stays the only request on it"
        );
        probe.first_words(Duration::from_millis(50));
        assert!(f.views()[0].up);
        assert_eq!(f.pick(&[]).unwrap().index(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_backoff_doubles_while_an_upstream_stays_down() {
        let f = fleet(&[None, None]);
        let s = f.pick(&[]).unwrap();
        s.record(UpstreamResult::Unavailable, "refused");
        drop(s);
        tokio::time::advance(FIRST_BACKOFF).await;
        let probe = f.pick(&[1]).unwrap();
        assert_eq!(probe.index(), 0);
        probe.record(UpstreamResult::Unavailable, "refused again");
        drop(probe);
        assert_eq!(f.views()[0].retry_in_ms, Some(2000));
    }

    #[tokio::test(start_paused = true)]
    async fn requests_broken_together_by_one_outage_grow_the_backoff_once() {
        let f = fleet(&[Some(4), None]);
        let slots: Vec<UpstreamSlot> = (0..3).map(|_| f.pick(&[1]).unwrap()).collect();
        for s in &slots {
            s.record(UpstreamResult::Unavailable, "connection reset");
        }
        drop(slots);
        assert_eq!(
            f.views()[0].retry_in_ms,
            Some(FIRST_BACKOFF.as_millis() as u64),
            "three streams broken by one kill are one failure"
        );
    }

    #[tokio::test]
    async fn when_every_upstream_is_down_a_request_still_tries_them_and_stops_after_all() {
        let f = fleet(&[None]);
        let s = f.pick(&[]).unwrap();
        s.record(UpstreamResult::Unavailable, "refused");
        drop(s);
        let again = f
            .pick(&[])
            .expect("the only upstream is tried even while down");
        assert_eq!(again.index(), 0);
        assert_eq!(f.pick(&[0]).err(), Some(NoUpstream::AllTried));
    }

    #[tokio::test]
    async fn a_configured_capacity_is_capped_by_the_slots_the_server_says_it_has() {
        let f = fleet(&[Some(8), None]);
        assert_eq!(f.capacity(), 10);
        let info = |slots| ServerInfo {
            models: vec![],
            context_tokens: Some(2048),
            slots,
        };
        assert_eq!(f.upstreams[0].adopt(&info(Some(4))), 4);
        assert_eq!(
            f.upstreams[1].adopt(&info(Some(4))),
            2,
            "the lane's default"
        );
        assert_eq!(f.capacity(), 6);
        assert_eq!(f.context_tokens(), Some(2048));
    }

    #[test]
    fn errors_are_classified_by_what_they_say_about_the_upstream() {
        use crate::llm::ApiError;
        let unreachable = LlmError::Unreachable {
            url: "u".into(),
            message: "refused".into(),
        };
        assert_eq!(
            UpstreamResult::of_error(&unreachable),
            UpstreamResult::Unavailable
        );
        let busy = LlmError::from_status(429, "slow down", Some(Duration::from_secs(3)));
        assert_eq!(UpstreamResult::of_error(&busy), UpstreamResult::Busy);
        let bad = LlmError::Status {
            status: 400,
            error: Box::new(ApiError::from_body("bad")),
        };
        assert_eq!(UpstreamResult::of_error(&bad), UpstreamResult::Error);
        assert!(!UpstreamResult::Error.worth_another());
        assert!(!UpstreamResult::Error.marks_down());
        assert!(UpstreamResult::Busy.worth_another() && !UpstreamResult::Busy.marks_down());
    }

    #[test]
    fn a_reply_that_cannot_be_read_or_a_stall_counts_against_the_upstream() {
        use crate::llm::ApiError;
        let in_stream = |code: serde_json::Value| {
            let error = ApiError::from_value(&serde_json::json!({
                "error": {"message": "x", "code": code}
            }))
            .unwrap();
            UpstreamResult::of_error(&LlmError::InStream(Box::new(error)))
        };
        let cases = [
            (
                LlmError::Malformed("a stream chunk is not JSON".into()),
                UpstreamResult::Unreadable,
            ),
            (
                LlmError::Malformed("the server answered \"application/json\"".into()),
                UpstreamResult::Unreadable,
            ),
            (LlmError::Truncated, UpstreamResult::Unavailable),
            (
                LlmError::Disconnected("reset".into()),
                UpstreamResult::Unavailable,
            ),
            (
                LlmError::from_status(502, "bad gateway", None),
                UpstreamResult::Unavailable,
            ),
        ];
        for (error, expected) in cases {
            assert_eq!(UpstreamResult::of_error(&error), expected, "{error:?}");
        }
        assert_eq!(
            in_stream(serde_json::json!(500)),
            UpstreamResult::Unavailable
        );
        assert_eq!(in_stream(serde_json::json!("503")), UpstreamResult::Busy);
        assert_eq!(in_stream(serde_json::json!(400)), UpstreamResult::Error);
        assert_eq!(
            in_stream(serde_json::json!("invalid_request_error")),
            UpstreamResult::Error
        );
        for failed in [
            UpstreamResult::Unavailable,
            UpstreamResult::Unreadable,
            UpstreamResult::Deadline,
        ] {
            assert!(failed.worth_another() && failed.marks_down(), "{failed:?}");
        }
        assert!(!UpstreamResult::Answered.marks_down());
    }

    fn up_line(f: &Fleet, index: usize) -> String {
        let name = &f.views()[index].name;
        let metrics = f.upstreams[index].metrics.render();
        metrics
            .lines()
            .find(|l| {
                l.starts_with(&format!(
                    "headroom_upstream_up{{lane=\"text\",upstream=\"{name}\"}}"
                ))
            })
            .unwrap_or_else(|| panic!("no up line for {name}:\n{metrics}"))
            .to_string()
    }

    #[tokio::test(start_paused = true)]
    async fn an_upstream_whose_replies_fail_is_down_until_a_request_gets_words_from_it() {
        for (result, reason) in [
            (UpstreamResult::Unreadable, "a stream chunk is not JSON"),
            (UpstreamResult::Deadline, "no first words within 30 s"),
        ] {
            let f = fleet(&[None, None]);
            let a = f.pick(&[]).unwrap();
            a.record(UpstreamResult::Answered, "");
            assert!(f.views()[0].up);
            a.failed_after_answer(result, reason);
            drop(a);
            let views = f.views();
            assert!(!views[0].up, "{result:?}");
            assert_eq!(views[0].down_reason.as_deref(), Some(reason));
            assert!(up_line(&f, 0).ends_with(" 0"), "{}", up_line(&f, 0));
            assert_eq!(
                f.upstreams[0]
                    .metrics
                    .upstream_health_changes(Lane::Text, &views[0].name),
                1
            );
            // Its model list answers (the health check): that says nothing of its replies.
            f.upstreams[0].vouch();
            assert!(
                !f.views()[0].up,
                "a health check cannot vouch for its replies"
            );
            // While the other has room, every request goes there, backoff or not.
            tokio::time::advance(FIRST_BACKOFF).await;
            let b = f.pick(&[]).unwrap();
            assert_eq!(b.index(), 1);
            drop(b);
            // A probe that answers with headers and then stalls again: still down, and the
            // backoff grows (it never looked up in between).
            let probe = f.pick(&[1]).unwrap();
            assert_eq!(probe.index(), 0);
            probe.record(UpstreamResult::Answered, "");
            assert!(!f.views()[0].up);
            probe.failed_after_answer(UpstreamResult::Deadline, "no first words within 30 s");
            drop(probe);
            assert_eq!(
                f.views()[0].retry_in_ms,
                Some(2 * FIRST_BACKOFF.as_millis() as u64)
            );
            // A probe that gets words brings it back.
            tokio::time::advance(2 * FIRST_BACKOFF).await;
            let probe = f.pick(&[1]).unwrap();
            probe.record(UpstreamResult::Answered, "");
            probe.first_words(Duration::from_millis(20));
            assert!(f.views()[0].up);
            assert!(up_line(&f, 0).ends_with(" 1"));
            assert_eq!(
                f.upstreams[0]
                    .metrics
                    .upstream_health_changes(Lane::Text, &f.views()[0].name),
                2
            );
        }
    }

    #[tokio::test]
    async fn a_health_check_brings_back_an_upstream_that_was_only_unreachable() {
        let f = fleet(&[None, None]);
        let a = f.pick(&[]).unwrap();
        a.record(UpstreamResult::Unavailable, "connection refused");
        drop(a);
        f.upstreams[0].vouch();
        assert!(f.views()[0].up);
        // Unreachable, then its replies failed (or the other way round): the stronger cause
        // stays, whichever came last.
        let a = &f.upstreams[0];
        a.mark_down("connection refused", DownCause::Unreachable);
        a.mark_down("not an event stream", DownCause::Replies);
        a.vouch();
        assert!(!f.views()[0].up);
        let b = &f.upstreams[1];
        b.mark_down("not an event stream", DownCause::Replies);
        b.mark_down("health check: connection refused", DownCause::Unreachable);
        b.vouch();
        assert!(!f.views()[1].up);
    }
}
