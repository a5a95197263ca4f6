//! A fixed number of slots plus a small bounded wait queue; excess work is shed at once.
//!
//! Unlike a plain semaphore, the wait queue has a bound and an order: higher-priority waiters
//! (interactive audio) are served before lower ones, first come first served within a
//! priority. A [`Permit`] is an owned value the caller keeps for as long as the work runs (for a
//! stream: until it ends or is dropped), not until a response future resolves.
//!
//! A limit may keep slots in reserve for interactive work ([`CapacityLimit::with_interactive_reserve`]):
//! an interactive job then starts beside the batch jobs filling the limit instead of waiting
//! for one of them to end, and never beside more interactive jobs than the limit and the
//! reserve allow.

use headroom_base::sync::Locked;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

/// How full a lane is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "typescript", derive(ts_rs::TS))]
pub struct Occupancy {
    pub in_flight: usize,
    pub limit: usize,
    pub waiting: usize,
    pub wait_limit: usize,
    /// Slots beyond `limit` that only interactive work may take (so `in_flight` may exceed
    /// `limit` by this much).
    #[serde(default)]
    pub reserved: usize,
}

/// Called with the new occupancy after every change (admission, queueing, release).
pub type OccupancyObserver = Arc<dyn Fn(Occupancy) + Send + Sync>;

/// Queue order: interactive work is served before normal work.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// Batch work: long transcriptions, exports, text requests.
    #[default]
    Normal,
    /// A person is waiting on it right now: a short transcription, speaking a segment.
    Interactive,
}

type WaiterKey = (Reverse<Priority>, u64);

struct State {
    occupancy: Occupancy,
    waiters: BTreeMap<WaiterKey, oneshot::Sender<()>>,
    next_seq: u64,
    interactive_in_flight: usize,
}

impl State {
    /// Whether work of `priority` may take a slot now.
    fn may_start(&self, priority: Priority) -> bool {
        let o = &self.occupancy;
        o.in_flight < o.limit
            || (priority == Priority::Interactive
                && self.interactive_in_flight < o.reserved
                && o.in_flight < o.limit + o.reserved)
    }

    fn start(&mut self, priority: Priority) {
        self.occupancy.in_flight += 1;
        if priority == Priority::Interactive {
            self.interactive_in_flight += 1;
        }
    }

    /// Gives free slots to at most `slots` waiters still waiting, in queue order. Waiters are
    /// in priority order: when the first may not start, none behind it may.
    fn grant_waiting(&mut self, slots: usize) {
        let mut granted = 0;
        while granted < slots {
            let Some((&key, _)) = self.waiters.first_key_value() else {
                return;
            };
            let waiting = key.0 .0;
            if !self.may_start(waiting) {
                return;
            }
            let waiter = self
                .waiters
                .remove(&key)
                .expect("the first waiter is there");
            self.occupancy.waiting -= 1;
            if waiter.send(()).is_ok() {
                self.start(waiting);
                granted += 1;
            }
        }
    }
}

struct Shared {
    state: Mutex<State>,
    observer: Option<OccupancyObserver>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    fn notify(&self, occ: Occupancy) {
        if let Some(observer) = &self.observer {
            observer(occ);
        }
    }

    /// Frees a slot held by work of `priority` and gives it to the first waiter still waiting
    /// that may take it.
    fn release_slot(&self, priority: Priority) {
        let now = {
            let mut st = self.lock();
            st.occupancy.in_flight -= 1;
            if priority == Priority::Interactive {
                st.interactive_in_flight -= 1;
            }
            st.grant_waiting(1);
            st.occupancy
        };
        self.notify(now);
    }
}

/// The concurrency limit with a bounded, prioritized wait queue.
#[derive(Clone)]
pub struct CapacityLimit {
    shared: Arc<Shared>,
}

/// The outcome of [`CapacityLimit::try_enter`].
pub enum Entry {
    /// A slot was free: run now.
    Admitted(Permit),
    /// No slot, but a place in the wait queue.
    Queued(QueueTicket),
}

/// No slot and no place in the wait queue; carries the occupancy at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full(pub Occupancy);

impl CapacityLimit {
    pub fn new(limit: usize, wait_limit: usize, observer: Option<OccupancyObserver>) -> Self {
        assert!(limit > 0, "a lane needs at least one slot");
        CapacityLimit {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    occupancy: Occupancy {
                        in_flight: 0,
                        limit,
                        waiting: 0,
                        wait_limit,
                        reserved: 0,
                    },
                    waiters: BTreeMap::new(),
                    next_seq: 0,
                    interactive_in_flight: 0,
                }),
                observer,
            }),
        }
    }

    /// Keeps `reserve` slots beyond the limit for interactive work (see the module's notes).
    pub fn with_interactive_reserve(self, reserve: usize) -> Self {
        self.shared.lock().occupancy.reserved = reserve;
        self
    }

    pub fn occupancy(&self) -> Occupancy {
        self.shared.lock().occupancy
    }

    /// Changes the number of slots (a fleet's upstreams said how many they run). Work already
    /// running keeps its slots; waiters take the new ones at once.
    pub fn set_limit(&self, limit: usize) {
        assert!(limit > 0, "a lane needs at least one slot");
        let now = {
            let mut st = self.shared.lock();
            st.occupancy.limit = limit;
            st.grant_waiting(usize::MAX);
            st.occupancy
        };
        self.shared.notify(now);
    }

    /// Takes a free slot, or a place in the wait queue, or sheds the request at once.
    pub fn try_enter(&self) -> Result<Entry, Full> {
        self.try_enter_with(Priority::Normal)
    }

    /// [`CapacityLimit::try_enter`] with a queue priority.
    pub fn try_enter_with(&self, priority: Priority) -> Result<Entry, Full> {
        let mut st = self.shared.lock();
        if st.may_start(priority) {
            st.start(priority);
            let now = st.occupancy;
            drop(st);
            self.shared.notify(now);
            return Ok(Entry::Admitted(Permit {
                shared: self.shared.clone(),
                priority,
            }));
        }
        if st.occupancy.waiting >= st.occupancy.wait_limit {
            return Err(Full(st.occupancy));
        }
        let key = (Reverse(priority), st.next_seq);
        st.next_seq += 1;
        let (tx, rx) = oneshot::channel();
        st.waiters.insert(key, tx);
        st.occupancy.waiting += 1;
        let position = st.waiters.range(..=key).count();
        let now = st.occupancy;
        drop(st);
        self.shared.notify(now);
        Ok(Entry::Queued(QueueTicket {
            shared: self.shared.clone(),
            key,
            position,
            granted: Some(rx),
        }))
    }
}

/// A place in the wait queue. Dropping it (or the future of [`QueueTicket::wait`]) leaves the
/// queue, and passes on a slot it was given but never used.
pub struct QueueTicket {
    shared: Arc<Shared>,
    key: WaiterKey,
    position: usize,
    granted: Option<oneshot::Receiver<()>>,
}

impl QueueTicket {
    /// 1-based place in the queue when the request joined it.
    pub fn position(&self) -> usize {
        self.position
    }

    /// Waits for a slot.
    pub async fn wait(mut self) -> Permit {
        let rx = self.granted.as_mut().expect("a ticket is waited on once");
        rx.await.expect("the capacity limit outlives its tickets");
        self.granted = None;
        Permit {
            shared: self.shared.clone(),
            priority: self.key.0 .0,
        }
    }
}

impl Drop for QueueTicket {
    fn drop(&mut self) {
        let Some(mut rx) = self.granted.take() else {
            return; // became a Permit
        };
        let removed = {
            let mut st = self.shared.lock();
            let removed = st.waiters.remove(&self.key).is_some();
            if removed {
                st.occupancy.waiting -= 1;
            }
            removed.then_some(st.occupancy)
        };
        match removed {
            Some(now) => self.shared.notify(now),
            // Granted a slot just as it left: hand the slot on.
            None if rx.try_recv().is_ok() => self.shared.release_slot(self.key.0 .0),
            None => {}
        }
    }
}

/// A held slot; dropping it frees the slot for the next waiter.
pub struct Permit {
    shared: Arc<Shared>,
    priority: Priority,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.shared.release_slot(self.priority);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn admitted(e: Result<Entry, Full>) -> Permit {
        match e {
            Ok(Entry::Admitted(p)) => p,
            _ => panic!("expected a slot"),
        }
    }

    #[tokio::test]
    async fn a_larger_limit_lets_waiters_in_and_a_smaller_one_keeps_running_work() {
        let cap = CapacityLimit::new(1, 4, None);
        let running = admitted(cap.try_enter());
        let Ok(Entry::Queued(ticket)) = cap.try_enter() else {
            panic!("the second waits for the only slot")
        };
        cap.set_limit(2);
        let second = ticket.wait().await;
        assert_eq!((cap.occupancy().in_flight, cap.occupancy().waiting), (2, 0));
        cap.set_limit(1);
        assert_eq!(cap.occupancy().in_flight, 2, "running work keeps its slots");
        assert!(matches!(cap.try_enter(), Ok(Entry::Queued(_))));
        drop((running, second));
        assert_eq!(cap.occupancy().in_flight, 0);
    }

    #[tokio::test]
    async fn interactive_work_starts_beside_batch_work_in_the_reserve_and_only_there() {
        let cap = CapacityLimit::new(1, 4, None).with_interactive_reserve(1);
        let batch = admitted(cap.try_enter_with(Priority::Normal));
        // A second batch job waits; an interactive one starts at once beside the first.
        let Ok(Entry::Queued(batch_ticket)) = cap.try_enter_with(Priority::Normal) else {
            panic!("batch work beyond the limit waits")
        };
        let first = admitted(cap.try_enter_with(Priority::Interactive));
        assert_eq!((cap.occupancy().in_flight, cap.occupancy().limit), (2, 1));
        assert_eq!(
            cap.occupancy().reserved,
            1,
            "the snapshot says why 2 of 1 is allowed"
        );
        // Never two interactive jobs beyond the limit and the reserve.
        let Ok(Entry::Queued(second)) = cap.try_enter_with(Priority::Interactive) else {
            panic!("the reserve holds one")
        };
        // The interactive job ends: the next interactive one takes the reserve, not the batch.
        drop(first);
        let second = second.wait().await;
        assert_eq!(cap.occupancy().in_flight, 2);
        drop(second);
        assert_eq!(
            cap.occupancy().in_flight,
            1,
            "the batch waiter may not take the reserve"
        );
        assert_eq!(cap.occupancy().waiting, 1);
        drop(batch);
        let _next = batch_ticket.wait().await;
        assert_eq!((cap.occupancy().in_flight, cap.occupancy().waiting), (1, 0));
        // Without a reserve, interactive work waits like any other.
        let plain = CapacityLimit::new(1, 4, None);
        let _held = admitted(plain.try_enter_with(Priority::Normal));
        assert!(matches!(
            plain.try_enter_with(Priority::Interactive),
            Ok(Entry::Queued(_))
        ));
    }

    #[test]
    fn admits_up_to_the_limit_then_sheds_without_a_queue() {
        let cap = CapacityLimit::new(2, 0, None);
        let _a = admitted(cap.try_enter());
        let _b = admitted(cap.try_enter());
        let full = match cap.try_enter() {
            Err(full) => full,
            Ok(_) => panic!("third request must be shed"),
        };
        assert_eq!(
            full.0,
            Occupancy {
                in_flight: 2,
                limit: 2,
                waiting: 0,
                wait_limit: 0,
                reserved: 0
            }
        );
    }

    #[test]
    fn dropping_a_permit_frees_its_slot() {
        let cap = CapacityLimit::new(1, 0, None);
        let a = admitted(cap.try_enter());
        assert!(cap.try_enter().is_err());
        drop(a);
        assert_eq!(cap.occupancy().in_flight, 0);
        let _b = admitted(cap.try_enter());
    }

    #[tokio::test]
    async fn a_bounded_queue_holds_waiters_in_order_and_sheds_beyond_it() {
        let cap = CapacityLimit::new(1, 2, None);
        let running = admitted(cap.try_enter());
        let Ok(Entry::Queued(first)) = cap.try_enter() else {
            panic!("expected a queue place")
        };
        let Ok(Entry::Queued(second)) = cap.try_enter() else {
            panic!("expected a queue place")
        };
        assert_eq!((first.position(), second.position()), (1, 2));
        assert!(cap.try_enter().is_err(), "queue of 2 is full");
        assert_eq!(cap.occupancy().waiting, 2);

        let first_wait = tokio::spawn(first.wait());
        drop(running);
        let permit = first_wait.await.unwrap();
        assert_eq!(
            cap.occupancy(),
            Occupancy {
                in_flight: 1,
                limit: 1,
                waiting: 1,
                wait_limit: 2,
                reserved: 0
            }
        );
        drop(second);
        assert_eq!(cap.occupancy().waiting, 0);
        drop(permit);
        assert_eq!(cap.occupancy().in_flight, 0);
    }

    #[tokio::test]
    async fn interactive_waiters_are_served_before_normal_ones() {
        let cap = CapacityLimit::new(1, 3, None);
        let running = admitted(cap.try_enter());
        let Ok(Entry::Queued(batch)) = cap.try_enter_with(Priority::Normal) else {
            panic!("queued")
        };
        let Ok(Entry::Queued(interactive)) = cap.try_enter_with(Priority::Interactive) else {
            panic!("queued")
        };
        assert_eq!(interactive.position(), 1, "jumps ahead of the batch job");
        let batch_wait = tokio::spawn(batch.wait());
        let interactive_wait = tokio::spawn(interactive.wait());
        drop(running);
        let first = interactive_wait.await.unwrap();
        assert!(!batch_wait.is_finished());
        drop(first);
        let _second = batch_wait.await.unwrap();
        assert_eq!(cap.occupancy().waiting, 0);
    }

    #[test]
    fn a_ticket_granted_as_it_leaves_passes_the_slot_on() {
        let cap = CapacityLimit::new(1, 2, None);
        let running = admitted(cap.try_enter());
        let Ok(Entry::Queued(first)) = cap.try_enter() else {
            panic!("queued")
        };
        let Ok(Entry::Queued(second)) = cap.try_enter() else {
            panic!("queued")
        };
        drop(running); // the slot goes to `first`, which never collects it
        drop(first);
        assert_eq!(
            cap.occupancy(),
            Occupancy {
                in_flight: 1,
                limit: 1,
                waiting: 0,
                wait_limit: 2,
                reserved: 0
            }
        );
        drop(second);
        assert_eq!(cap.occupancy().in_flight, 0, "no slot is lost");
    }

    #[test]
    fn observer_sees_every_change() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let cap = CapacityLimit::new(
            1,
            1,
            Some(Arc::new(move |o: Occupancy| {
                sink.locked().push((o.in_flight, o.waiting))
            })),
        );
        let p = admitted(cap.try_enter());
        let ticket = cap.try_enter();
        drop(ticket);
        drop(p);
        assert_eq!(*seen.locked(), vec![(1, 0), (1, 1), (1, 0), (0, 0)]);
    }
}
