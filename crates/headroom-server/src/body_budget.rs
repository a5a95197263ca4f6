//! One budget for the request bodies held in memory at once, across all requests. Each body a
//! handler buffers (a chat request, a speech request) takes its bytes from the budget before it
//! holds them — the whole declared `Content-Length` at once, else as the bytes arrive — and
//! gives them back when the buffered body is dropped ([`Buffered`] owns a [`Reservation`]). A
//! body that does not fit is refused at once (503 `request_memory_full`), never queued: 300
//! clients that each send most of a 1 MiB body and stall hold at most the budget, not 300 MiB.
//! Uploads for transcription are written to disk as they arrive and take nothing from it.

use axum::body::Body;
use axum::http::{header, HeaderMap};
use futures::StreamExt;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The shared budget, in bytes.
#[derive(Debug, Clone)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    total: usize,
}

/// Bytes the budget could not give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("request bodies already hold {held} of the {total} bytes this server keeps for them; this one needs {wanted} more")]
pub struct BudgetExhausted {
    pub wanted: usize,
    pub held: usize,
    pub total: usize,
}

/// Bytes taken from the budget, given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: BodyBudget,
    permit: Option<OwnedSemaphorePermit>,
}

impl BodyBudget {
    pub fn new(total: usize) -> BodyBudget {
        BodyBudget {
            bytes: Arc::new(Semaphore::new(total.min(Semaphore::MAX_PERMITS))),
            total,
        }
    }

    /// Bytes no body holds now.
    pub fn available(&self) -> usize {
        self.bytes.available_permits()
    }

    /// An empty reservation, to grow.
    pub fn reservation(&self) -> Reservation {
        Reservation {
            budget: self.clone(),
            permit: None,
        }
    }

    /// `bytes` at once, or the refusal.
    pub fn try_reserve(&self, bytes: usize) -> Result<Reservation, BudgetExhausted> {
        let mut reservation = self.reservation();
        reservation.try_grow(bytes)?;
        Ok(reservation)
    }

    fn exhausted(&self, wanted: usize) -> BudgetExhausted {
        BudgetExhausted {
            wanted,
            held: self.total.saturating_sub(self.available()),
            total: self.total,
        }
    }
}

impl Reservation {
    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.permit.as_ref().map_or(0, |p| p.num_permits())
    }

    /// `more` bytes besides those held, or the refusal (the bytes held stay held).
    pub fn try_grow(&mut self, more: usize) -> Result<(), BudgetExhausted> {
        if more == 0 {
            return Ok(());
        }
        let wanted = u32::try_from(more).map_err(|_| self.budget.exhausted(more))?;
        let permit = self
            .budget
            .bytes
            .clone()
            .try_acquire_many_owned(wanted)
            .map_err(|_| self.budget.exhausted(more))?;
        match &mut self.permit {
            Some(held) => held.merge(permit),
            None => self.permit = Some(permit),
        }
        Ok(())
    }
}

/// A body held in memory, with the budget it holds.
#[derive(Debug)]
pub struct Buffered {
    pub bytes: Vec<u8>,
    _reservation: Reservation,
}

/// Why a body was not read.
#[derive(Debug)]
pub enum Unread {
    /// Over the request's own limit (declared or sent).
    TooLarge,
    /// The shared budget has no room for it.
    NoBudget(BudgetExhausted),
    /// The connection broke or the body came too slowly (see [`crate::min_rate`]).
    Broken(axum::Error),
}

/// Reads `body` into memory, up to `limit` bytes, within `budget`. A declared length is
/// checked and reserved before anything is read; otherwise each chunk is reserved as it
/// arrives.
pub async fn read_body(
    budget: &BodyBudget,
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Buffered, Unread> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let mut reservation = match declared {
        Some(length) if length > limit as u64 => return Err(Unread::TooLarge),
        Some(length) => budget
            .try_reserve(length as usize)
            .map_err(Unread::NoBudget)?,
        None => budget.reservation(),
    };
    let mut bytes = Vec::with_capacity(reservation.bytes());
    let mut frames = body.into_data_stream();
    while let Some(frame) = frames.next().await {
        let frame = frame.map_err(Unread::Broken)?;
        let len = bytes.len() + frame.len();
        if len > limit {
            return Err(Unread::TooLarge);
        }
        if len > reservation.bytes() {
            reservation
                .try_grow(len - reservation.bytes())
                .map_err(Unread::NoBudget)?;
        }
        bytes.extend_from_slice(&frame);
    }
    Ok(Buffered {
        bytes,
        _reservation: reservation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Bytes;

    fn declared(length: usize) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, length.into());
        h
    }

    #[test]
    fn reservations_are_given_back_when_dropped() {
        let budget = BodyBudget::new(100);
        let a = budget.try_reserve(60).unwrap();
        assert_eq!(budget.available(), 40);
        let refused = budget.try_reserve(50).unwrap_err();
        assert_eq!(
            refused,
            BudgetExhausted {
                wanted: 50,
                held: 60,
                total: 100
            }
        );
        drop(a);
        assert_eq!(budget.available(), 100);
        assert!(budget.try_reserve(100).is_ok());
        assert_eq!(budget.available(), 100, "the temporary was dropped");
    }

    #[test]
    fn a_reservation_grows_and_keeps_what_it_has_when_it_cannot() {
        let budget = BodyBudget::new(100);
        let mut r = budget.reservation();
        r.try_grow(30).unwrap();
        r.try_grow(30).unwrap();
        assert_eq!(r.bytes(), 60);
        assert!(r.try_grow(41).is_err());
        assert_eq!((r.bytes(), budget.available()), (60, 40));
        drop(r);
        assert_eq!(budget.available(), 100);
    }

    #[tokio::test]
    async fn a_declared_length_over_the_budget_is_refused_before_reading() {
        let budget = BodyBudget::new(100);
        let _held = budget.try_reserve(50).unwrap();
        // A body that would never end: refused without a read.
        let never = Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>());
        let result = read_body(&budget, &declared(60), never, 1000).await;
        assert!(matches!(result, Err(Unread::NoBudget(_))), "{result:?}");
        let never = Body::from_stream(futures::stream::pending::<Result<Bytes, std::io::Error>>());
        let result = read_body(&budget, &declared(2000), never, 1000).await;
        assert!(matches!(result, Err(Unread::TooLarge)), "{result:?}");
        assert_eq!(budget.available(), 50);
    }

    #[tokio::test]
    async fn an_undeclared_body_takes_its_bytes_as_they_arrive_and_gives_them_back() {
        let budget = BodyBudget::new(100);
        let chunks = futures::stream::iter(
            [b"0123456789".as_slice(); 5].map(|c| Ok::<_, std::io::Error>(Bytes::from(c))),
        );
        let buffered = read_body(&budget, &HeaderMap::new(), Body::from_stream(chunks), 1000)
            .await
            .unwrap();
        assert_eq!(buffered.bytes.len(), 50);
        assert_eq!(budget.available(), 50, "held while the body is held");
        drop(buffered);
        assert_eq!(budget.available(), 100);

        let chunks = futures::stream::iter(
            [b"0123456789".as_slice(); 20].map(|c| Ok::<_, std::io::Error>(Bytes::from(c))),
        );
        let result = read_body(&budget, &HeaderMap::new(), Body::from_stream(chunks), 1000).await;
        assert!(matches!(result, Err(Unread::NoBudget(_))), "{result:?}");
        assert_eq!(
            budget.available(),
            100,
            "a refused body gives back what it took"
        );
    }

    #[tokio::test]
    async fn a_body_longer_than_declared_is_counted_as_it_arrives() {
        let budget = BodyBudget::new(100);
        let result = read_body(&budget, &declared(5), Body::from("0123456789"), 8).await;
        assert!(matches!(result, Err(Unread::TooLarge)), "{result:?}");
        let buffered = read_body(&budget, &declared(5), Body::from("0123456789"), 50)
            .await
            .unwrap();
        assert_eq!(budget.available(), 90);
        drop(buffered);
    }
}
