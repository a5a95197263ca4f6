//! The slowest reader served. An answer waiting for a client that takes none of it for
//! `server.write_timeout_secs` (10 s) is not kept: the connection is closed, the response
//! body dropped, and whatever was working for it stops (a streamed take's synthesis, its
//! stream turn, the connection's place). The uploads' minimum rate ([`crate::min_rate`]) is the
//! same rule for what a client sends; this is it for what a client is sent.
//!
//! Two parts, both set on every connection by [`crate::connections`]:
//!
//! - [`WriteDeadline`] wraps the connection's socket. Its clock runs only while a write is
//!   waiting on the client (the socket takes nothing more); any byte taken stops it. A client
//!   that reads slowly, or not at all between requests, is never cut off; one that has stopped
//!   reading an answer is, once `timeout` has passed since the socket last took a byte. The
//!   write then fails with [`ClientNotReading`], which ends the connection.
//! - [`ClientTaking`], shared by the socket's [`WriteDeadline`] and each of the connection's
//!   requests (an extension), says whether the socket is waiting on the client; work that
//!   makes an answer piece by piece (streamed speech) waits for it before making the next
//!   piece, rather than running ahead of a client that has stopped reading.
//! - [`limit_unsent`] bounds what the kernel holds for a client that does not read
//!   (`TCP_NOTSENT_LOWAT`): without it Linux lets a loopback socket queue up to 4 MiB
//!   (`tcp_wmem`), minutes of an MP3 take synthesized for nobody before a write ever waits;
//!   with it the socket takes little more than the client's own receive buffer (about 160 KiB
//!   with Linux's defaults) before writes wait, so the server notices a client that stopped
//!   reading after a few seconds of audio, and the deadline can start.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio::time::Sleep;

/// Bytes the kernel keeps unsent for a connection beyond what is already on its way to the
/// client ([`limit_unsent`]).
pub const MAX_UNSENT_BYTES: u32 = 16 * 1024;

/// A connection closed because its client took none of its answer for the write timeout.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the client took none of its answer for {timeout:?}; the connection is closed and the work for it stopped (server.write_timeout_secs)")]
pub struct ClientNotReading {
    pub timeout: Duration,
}

/// Whether `error` (or what caused it, through I/O errors too) is a [`ClientNotReading`].
pub fn is_not_reading<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> Option<&'e ClientNotReading> {
    let mut current = Some(error);
    while let Some(e) = current {
        if let Some(found) = e.downcast_ref::<ClientNotReading>() {
            return Some(found);
        }
        // `io::Error::source` skips the error it wraps; look inside it.
        if let Some(found) = e
            .downcast_ref::<io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<ClientNotReading>())
        {
            return Some(found);
        }
        current = e.source();
    }
    None
}

/// Whether a connection's socket is waiting on its client (it takes no more bytes). Kept up to
/// date by the connection's [`WriteDeadline`]; every request on the connection carries a clone
/// as an extension.
#[derive(Debug, Clone, Default)]
pub struct ClientTaking {
    state: Arc<watch::Sender<Taking>>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Taking {
    /// The last write waited on the client.
    waiting: bool,
    /// How many times the socket took bytes again after waiting.
    resumed: u64,
}

impl ClientTaking {
    pub fn new() -> Self {
        Self::default()
    }

    /// Changes are sent only when the socket starts or stops waiting, not on every write.
    fn set_waiting(&self, waiting: bool) {
        self.state.send_if_modified(|t| {
            if t.waiting == waiting {
                return false;
            }
            t.resumed += u64::from(!waiting);
            t.waiting = waiting;
            true
        });
    }

    /// Whether the socket is waiting on the client now.
    pub fn is_waiting(&self) -> bool {
        self.state.borrow().waiting
    }

    /// Resolves once the socket has taken bytes since this was called; at once when it is not
    /// waiting. A client that reads a little at a time (a player) lets the work go on at each
    /// read, however soon its socket is full again.
    pub async fn until_taking(&self) {
        let mut rx = self.state.subscribe();
        let since = rx.borrow_and_update().resumed;
        let _ = rx.wait_for(|t| !t.waiting || t.resumed != since).await;
    }
}

/// `inner`, whose writes fail with [`ClientNotReading`] once they have waited on the client
/// for `timeout` without it taking a byte. Reads pass through untouched.
pub struct WriteDeadline<IO> {
    inner: IO,
    timeout: Duration,
    /// Armed when a write first waits, cleared when the socket takes a byte.
    waiting_since: Option<Pin<Box<Sleep>>>,
    taking: ClientTaking,
}

impl<IO> WriteDeadline<IO> {
    /// `inner` under the deadline, telling `taking` whether its writes wait on the client.
    pub fn new(inner: IO, timeout: Duration, taking: ClientTaking) -> Self {
        WriteDeadline {
            inner,
            timeout,
            waiting_since: None,
            taking,
        }
    }

    /// After the socket answered a write: progress stops the clock; waiting starts it (once)
    /// and fails the write when it has run out.
    fn judge<T>(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match written {
            Poll::Ready(result) => {
                self.waiting_since = None;
                self.taking.set_waiting(false);
                Poll::Ready(result)
            }
            Poll::Pending => {
                self.taking.set_waiting(true);
                let timeout = self.timeout;
                let timer = self
                    .waiting_since
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match timer.as_mut().poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        ClientNotReading { timeout },
                    ))),
                }
            }
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for WriteDeadline<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.judge(cx, written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.judge(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = Pin::new(&mut this.inner).poll_flush(cx);
        this.judge(cx, flushed)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let shut = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.judge(cx, shut)
    }
}

/// Keeps at most [`MAX_UNSENT_BYTES`] unsent in the kernel for `socket` (`TCP_NOTSENT_LOWAT`,
/// Linux): writes then wait once the client's receive buffer is full, instead of after
/// megabytes more. Elsewhere nothing changes (the deadline still holds, later).
pub fn limit_unsent(socket: &tokio::net::TcpStream) -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use std::os::fd::AsRawFd;
        let value: libc::c_int = MAX_UNSENT_BYTES as libc::c_int;
        // SAFETY: a valid socket descriptor, an option of the size given.
        let done = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_NOTSENT_LOWAT,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = socket;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::time::Instant;

    /// A connected pair: the server's end (accepted, unsent bytes limited) and the client's.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        limit_unsent(&server).unwrap();
        (server, client)
    }

    /// Writes until the writer fails; the bytes written and the error.
    async fn write_until_it_fails(writer: &mut WriteDeadline<TcpStream>) -> (usize, io::Error) {
        let chunk = vec![7u8; 4096];
        let mut written = 0;
        loop {
            match writer.write(&chunk).await {
                Ok(n) => written += n,
                Err(e) => return (written, e),
            }
        }
    }

    #[tokio::test]
    async fn a_client_that_stops_reading_is_cut_off_after_the_timeout() {
        let (server, client) = pair().await;
        let timeout = Duration::from_millis(400);
        let taking = ClientTaking::new();
        let mut writer = WriteDeadline::new(server, timeout, taking.clone());
        let started = Instant::now();
        let (written, error) = write_until_it_fails(&mut writer).await;
        let took = started.elapsed();
        let not_reading = is_not_reading(&error).expect("the error says why");
        assert_eq!(not_reading.timeout, timeout);
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        // The kernel took only about the client's receive buffer, not megabytes.
        assert!(
            written < 1024 * 1024,
            "{written} bytes taken by a client that never read"
        );
        assert!(took >= timeout && took < timeout * 10, "{took:?}");
        assert!(taking.is_waiting(), "the socket waits on the client");
        drop(client);
    }

    #[tokio::test]
    async fn a_slow_reader_is_never_cut_off_and_idle_time_does_not_count() {
        let (server, mut client) = pair().await;
        let timeout = Duration::from_millis(300);
        let taking = ClientTaking::new();
        let mut writer = WriteDeadline::new(server, timeout, taking.clone());
        let total = 1024 * 1024;
        // The client reads a little every 100 ms: slower than the writer, never stopped.
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = vec![0u8; 64 * 1024];
            while got < total {
                tokio::time::sleep(Duration::from_millis(100)).await;
                match client.read(&mut buf).await.unwrap() {
                    0 => break,
                    n => got += n,
                }
            }
            got
        });
        let chunk = vec![7u8; 64 * 1024];
        for _ in 0..total / chunk.len() {
            writer
                .write_all(&chunk)
                .await
                .expect("a slow reader is served");
        }
        assert_eq!(reader.await.unwrap(), total);
        assert!(!taking.is_waiting(), "everything written was taken");
        // Nothing to write for longer than the timeout: not the client's fault.
        tokio::time::sleep(timeout * 3).await;
        writer.write_all(b"more").await.unwrap();
    }

    #[tokio::test]
    async fn work_waiting_on_the_client_goes_on_once_it_reads() {
        let (server, mut client) = pair().await;
        let taking = ClientTaking::new();
        let mut writer = WriteDeadline::new(server, Duration::from_secs(60), taking.clone());
        let writing = tokio::spawn(async move {
            let chunk = vec![7u8; 4096];
            while writer.write_all(&chunk).await.is_ok() {}
        });
        // Full: waiting on the client, and still so a moment later.
        let give_up = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(Instant::now() < give_up, "the socket never filled");
            tokio::time::sleep(Duration::from_millis(100)).await;
            if taking.is_waiting() {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if taking.is_waiting() {
                    break;
                }
            }
        }
        // The client reads nothing: whoever waits for it waits.
        let waiter = tokio::spawn({
            let taking = taking.clone();
            async move { taking.until_taking().await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            !waiter.is_finished(),
            "goes on although the client took nothing"
        );
        // It reads once: the writer's next bytes go out, and the waiter goes on, although the
        // socket fills again at once.
        let mut buf = vec![0u8; 256 * 1024];
        assert!(client.read(&mut buf).await.unwrap() > 0);
        tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("goes on once the client reads")
            .unwrap();
        writing.abort();
    }

    #[test]
    fn the_reason_is_found_through_wrapping_errors() {
        let inner = io::Error::new(
            io::ErrorKind::TimedOut,
            ClientNotReading {
                timeout: Duration::from_secs(10),
            },
        );
        #[derive(Debug, thiserror::Error)]
        #[error("the connection failed")]
        struct Wrapper(#[source] io::Error);
        let wrapped = Wrapper(inner);
        assert!(is_not_reading(&wrapped).is_some());
        assert!(is_not_reading(&io::Error::other("reset")).is_none());
    }
}
