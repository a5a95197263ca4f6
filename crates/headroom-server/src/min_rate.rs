//! The slowest body accepted. A client that sends a request body below a minimum rate (fewer
//! than `min_bytes` in a window, e.g. 10 KiB in 10 s) is cut off: the body fails with
//! [`BodyTooSlow`], the handler answers 408 `body_too_slow` and returns, and whatever it held
//! (an upload slot, body memory, the connection) is freed. A trickle of a byte a second can no
//! longer hold a slot for as long as it likes.
//!
//! The window's clock runs from the first time the body is read; each window that brought at
//! least `min_bytes` starts a new one. A body is cut off only while it waits on the client:
//! bytes that waited in buffers for a busy handler arrive at once when it reads again, so only
//! a slow client is ever cut off. Headers have their own timeout (hyper's
//! `header_read_timeout`, set by [`crate::connections`]).

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use hyper::body::{Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// The policy: at least `min_bytes` in every `window` while a body is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinRate {
    pub window: Duration,
    pub min_bytes: u64,
}

impl MinRate {
    /// `bytes_per_sec` averaged over `window`.
    pub fn new(window: Duration, bytes_per_sec: usize) -> MinRate {
        MinRate {
            window,
            min_bytes: (bytes_per_sec as f64 * window.as_secs_f64()).ceil() as u64,
        }
    }
}

/// A body sent below the minimum rate.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the request body arrived too slowly: {received} bytes in {window:?}, below the {min_bytes} required; the connection is closed")]
pub struct BodyTooSlow {
    pub received: u64,
    pub window: Duration,
    pub min_bytes: u64,
}

/// Whether `error` (or what caused it) is a [`BodyTooSlow`].
pub fn is_too_slow<'e>(error: &'e (dyn std::error::Error + 'static)) -> Option<&'e BodyTooSlow> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(slow) = e.downcast_ref::<BodyTooSlow>() {
            return Some(slow);
        }
        current = e.source();
    }
    None
}

/// `inner`, failing with [`BodyTooSlow`] when it arrives below `rate`.
pub struct MinRateBody<B> {
    inner: B,
    rate: MinRate,
    window_start: Option<Instant>,
    received: u64,
    timer: Option<Pin<Box<Sleep>>>,
}

impl<B> MinRateBody<B> {
    pub fn new(inner: B, rate: MinRate) -> Self {
        MinRateBody {
            inner,
            rate,
            window_start: None,
            received: 0,
            timer: None,
        }
    }

    /// At the end of a window: a new one if this one brought enough, else the refusal.
    fn check(&mut self, now: Instant) -> Result<(), BodyTooSlow> {
        let start = *self.window_start.get_or_insert(now);
        if now < start + self.rate.window {
            return Ok(());
        }
        if self.received < self.rate.min_bytes {
            return Err(BodyTooSlow {
                received: self.received,
                window: self.rate.window,
                min_bytes: self.rate.min_bytes,
            });
        }
        self.window_start = Some(now);
        self.received = 0;
        Ok(())
    }

    /// Waits for the end of the current window (the body is waiting on the client).
    fn poll_window(&mut self, cx: &mut Context<'_>) -> Result<(), BodyTooSlow> {
        loop {
            let deadline = self.window_start.expect("a window has started") + self.rate.window;
            let timer = self
                .timer
                .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
            if timer.deadline() != deadline {
                timer.as_mut().reset(deadline);
            }
            if timer.as_mut().poll(cx).is_pending() {
                return Ok(());
            }
            self.check(Instant::now())?;
        }
    }
}

impl<B> HttpBody for MinRateBody<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let now = Instant::now();
        this.window_start.get_or_insert(now);
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received += data.len() as u64;
                }
                // Bytes that were waiting are never the client's fault: a short window ends
                // here only when it brought enough, and is judged when the body next waits.
                if this.received >= this.rate.min_bytes {
                    let _ = this.check(now);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.check(now).and_then(|()| this.poll_window(cx)) {
                Ok(()) => Poll::Pending,
                Err(slow) => Poll::Ready(Some(Err(slow.into()))),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The middleware: every request's body is read under the policy.
pub async fn min_rate(State(rate): State<MinRate>, request: Request, next: Next) -> Response {
    next.run(request.map(|body| Body::new(MinRateBody::new(body, rate))))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::mpsc;
    use futures::StreamExt;

    type Sender = mpsc::UnboundedSender<Result<Bytes, std::io::Error>>;

    fn body(rate: MinRate) -> (Sender, MinRateBody<Body>) {
        let (tx, rx) = mpsc::unbounded();
        (tx, MinRateBody::new(Body::from_stream(rx), rate))
    }

    async fn next(body: &mut MinRateBody<Body>) -> Option<Result<Bytes, axum::BoxError>> {
        std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx))
            .await
            .map(|r| r.map(|f| f.into_data().unwrap()))
    }

    const RATE: MinRate = MinRate {
        window: Duration::from_secs(10),
        min_bytes: 100,
    };

    #[test]
    fn the_minimum_is_the_rate_over_the_window() {
        assert_eq!(MinRate::new(Duration::from_secs(10), 1024).min_bytes, 10240);
        assert_eq!(
            MinRate::new(Duration::from_millis(1500), 1000).min_bytes,
            1500
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickle_is_cut_off_at_the_end_of_the_window() {
        let (tx, mut body) = body(RATE);
        let started = Instant::now();
        let trickle = tokio::spawn(async move {
            // A byte every 2 s, forever (until the body is gone).
            loop {
                if tx.unbounded_send(Ok(Bytes::from_static(b"x"))).is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        });
        let mut got = 0;
        let error = loop {
            match next(&mut body).await {
                Some(Ok(bytes)) => got += bytes.len(),
                Some(Err(e)) => break e,
                None => panic!("the trickle never ends"),
            }
        };
        let slow = is_too_slow(&*error).expect("the body was too slow");
        assert!(slow.received < 100 && got < 100, "{slow:?}");
        let at = started.elapsed();
        assert!(
            at >= Duration::from_secs(10) && at <= Duration::from_secs(11),
            "{at:?}"
        );
        drop(body);
        trickle.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_sends_nothing_is_cut_off_too() {
        let (_tx, mut body) = body(RATE);
        let error = next(&mut body).await.unwrap().unwrap_err();
        assert!(is_too_slow(&*error).is_some(), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_at_the_rate_is_read_to_the_end() {
        let (tx, mut body) = body(RATE);
        let sender = tokio::spawn(async move {
            // 60 bytes every 5 s for 60 s: 120 a window, above the 100 required.
            for _ in 0..12 {
                tx.unbounded_send(Ok(Bytes::from(vec![b'x'; 60]))).unwrap();
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
        let mut got = 0;
        while let Some(chunk) = next(&mut body).await {
            got += chunk.expect("the rate is met").len();
        }
        assert_eq!(got, 720);
        sender.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_waiting_for_a_busy_reader_are_not_the_clients_fault() {
        let (tx, mut body) = body(RATE);
        tx.unbounded_send(Ok(Bytes::from(vec![b'x'; 10]))).unwrap();
        assert_eq!(next(&mut body).await.unwrap().unwrap().len(), 10);
        // The client sends the rest at once; the handler reads it 30 s later.
        tx.unbounded_send(Ok(Bytes::from(vec![b'x'; 500]))).unwrap();
        drop(tx);
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(next(&mut body).await.unwrap().unwrap().len(), 500);
        assert!(next(&mut body).await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn the_error_is_found_through_the_bodys_wrappers() {
        let (_tx, body) = body(RATE);
        let mut stream = Body::new(body).into_data_stream();
        let error = stream.next().await.unwrap().unwrap_err();
        assert!(is_too_slow(&error).is_some(), "{error}");
    }
}
