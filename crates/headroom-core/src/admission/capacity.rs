//! A fixed number of slots plus a small bounded wait queue; excess work is shed at once.
//!
//! Unlike a plain semaphore, the wait queue has a bound, and a [`Permit`] is an owned value the
//! caller keeps for as long as the work runs (for a stream: until it ends or is dropped), not
//! until a response future resolves.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How full a lane is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Occupancy {
    pub in_flight: usize,
    pub limit: usize,
    pub waiting: usize,
    pub wait_limit: usize,
}

/// Called with the new occupancy after every change (admission, queueing, release).
pub type OccupancyObserver = Arc<dyn Fn(Occupancy) + Send + Sync>;

struct Shared {
    semaphore: Arc<Semaphore>,
    occupancy: std::sync::Mutex<Occupancy>,
    observer: Option<OccupancyObserver>,
}

impl Shared {
    fn update(&self, change: impl FnOnce(&mut Occupancy)) {
        let now = {
            let mut occ = self.occupancy.lock().expect("occupancy lock poisoned");
            change(&mut occ);
            *occ
        };
        if let Some(observer) = &self.observer {
            observer(now);
        }
    }
}

/// The concurrency limit with a bounded wait queue.
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
                semaphore: Arc::new(Semaphore::new(limit)),
                occupancy: std::sync::Mutex::new(Occupancy {
                    in_flight: 0,
                    limit,
                    waiting: 0,
                    wait_limit,
                }),
                observer,
            }),
        }
    }

    pub fn occupancy(&self) -> Occupancy {
        *self
            .shared
            .occupancy
            .lock()
            .expect("occupancy lock poisoned")
    }

    /// Takes a free slot, or a place in the wait queue, or sheds the request at once.
    pub fn try_enter(&self) -> Result<Entry, Full> {
        if let Ok(permit) = self.shared.semaphore.clone().try_acquire_owned() {
            self.shared.update(|o| o.in_flight += 1);
            return Ok(Entry::Admitted(Permit {
                shared: self.shared.clone(),
                _slot: permit,
            }));
        }
        let mut occ = self
            .shared
            .occupancy
            .lock()
            .expect("occupancy lock poisoned");
        if occ.waiting >= occ.wait_limit {
            return Err(Full(*occ));
        }
        occ.waiting += 1;
        let position = occ.waiting;
        let now = *occ;
        drop(occ);
        if let Some(observer) = &self.shared.observer {
            observer(now);
        }
        Ok(Entry::Queued(QueueTicket {
            shared: self.shared.clone(),
            position,
            waiting: true,
        }))
    }
}

/// A place in the wait queue. Dropping it (or the future of [`QueueTicket::wait`]) leaves the
/// queue.
pub struct QueueTicket {
    shared: Arc<Shared>,
    position: usize,
    waiting: bool,
}

impl QueueTicket {
    /// 1-based place in the queue when the request joined it.
    pub fn position(&self) -> usize {
        self.position
    }

    /// Waits (first come, first served) for a slot.
    pub async fn wait(mut self) -> Permit {
        let slot = self
            .shared
            .semaphore
            .clone()
            .acquire_owned()
            .await
            .expect("the lane semaphore is never closed");
        self.waiting = false;
        self.shared.update(|o| {
            o.waiting -= 1;
            o.in_flight += 1;
        });
        Permit {
            shared: self.shared.clone(),
            _slot: slot,
        }
    }
}

impl Drop for QueueTicket {
    fn drop(&mut self) {
        if self.waiting {
            self.shared.update(|o| o.waiting -= 1);
        }
    }
}

/// A held slot; dropping it frees the slot for the next waiter.
pub struct Permit {
    shared: Arc<Shared>,
    // Dropped after `Drop::drop` runs, so the count goes down before a waiter takes the slot.
    _slot: OwnedSemaphorePermit,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.shared.update(|o| o.in_flight -= 1);
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
                wait_limit: 0
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
                wait_limit: 2
            }
        );
        drop(second);
        assert_eq!(cap.occupancy().waiting, 0);
        drop(permit);
        assert_eq!(cap.occupancy().in_flight, 0);
    }

    #[test]
    fn observer_sees_every_change() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let cap = CapacityLimit::new(
            1,
            1,
            Some(Arc::new(move |o: Occupancy| {
                sink.lock().unwrap().push((o.in_flight, o.waiting))
            })),
        );
        let p = admitted(cap.try_enter());
        let ticket = cap.try_enter();
        drop(ticket);
        drop(p);
        assert_eq!(*seen.lock().unwrap(), vec![(1, 0), (1, 1), (1, 0), (0, 0)]);
    }
}
