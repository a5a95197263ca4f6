//! One rule for a lock whose holder panicked: go on with what it guards. Every value Headroom
//! keeps behind a `Mutex` (counters, caches, settings, a lane's bookkeeping) is whole between
//! statements, and a panic in one job must not take every later caller down with it (a
//! poisoned lock that panics on `lock()` would turn one failed request into a dead desktop).

use std::sync::{Mutex, MutexGuard, PoisonError};

/// [`Mutex::lock`] that recovers a poisoned lock (see the module).
pub trait Locked<T: ?Sized> {
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The value of a mutex no one else holds, taken as [`Locked::locked`] takes it: a holder's
/// panic does not lose it.
pub fn into_value<T>(mutex: Mutex<T>) -> T {
    mutex.into_inner().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_whose_holder_panicked_is_taken_with_its_value() {
        let shared = std::sync::Arc::new(Mutex::new(vec![1]));
        let holder = shared.clone();
        let panicked = std::thread::spawn(move || {
            let mut v = holder.lock().unwrap();
            v.push(2);
            panic!("a job failed while holding the lock");
        })
        .join();
        assert!(panicked.is_err());
        assert!(shared.is_poisoned());
        assert_eq!(*shared.locked(), [1, 2]);
    }
}
