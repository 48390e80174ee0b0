//! What the accept loop needs per connection beyond hyper: learning the
//! protocol from the first bytes without polling for them, and closing an
//! HTTP/2 connection that holds no stream for too long.
//!
//! hyper closes an idle HTTP/1.1 connection itself (its head deadline runs
//! between requests too), and pings HTTP/2 peers for us; but an HTTP/2
//! connection that sent its preface and then nothing, or whose streams all
//! ended, would stay open for as long as the peer answers pings. [`Activity`]
//! counts its open streams, so the loop can close it after the idle time.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use http_body_util::BodyExt as _;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The first bytes of every HTTP/2 connection (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A connection whose first bytes were read to tell its protocol; they are
/// read again, first, by whoever reads it next.
pub(crate) struct Revealed {
    first: [u8; H2_PREFACE.len()],
    len: usize,
    read: usize,
    stream: TcpStream,
}

impl Revealed {
    /// Whether the client opened with the HTTP/2 preface.
    pub(crate) fn is_h2(&self) -> bool {
        self.first[..self.len] == H2_PREFACE[..]
    }
}

/// Reads the client's first bytes, within `limit`: the HTTP/2 preface whole,
/// or as much as shows it is not the preface. `None` when the client closes
/// or is too slow. hyper-util's `auto` builder tells the protocols apart by
/// the same bytes but would wait for them forever (hyper's head deadline
/// starts only after); a read here sleeps until bytes arrive, where peeking
/// would have to poll.
pub(crate) async fn reveal(mut stream: TcpStream, limit: Duration) -> Option<Revealed> {
    let mut first = [0; H2_PREFACE.len()];
    let read = async {
        let mut len = 0;
        loop {
            let read = stream.read(&mut first[len..]).await.ok()?;
            if read == 0 {
                return None;
            }
            len += read;
            if len == first.len() || first[..len] != H2_PREFACE[..len] {
                return Some(len);
            }
        }
    };
    let len = tokio::time::timeout(limit, read).await.ok()??;
    Some(Revealed { first, len, read: 0, stream })
}

impl AsyncRead for Revealed {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.read < this.len {
            let n = (this.len - this.read).min(buf.remaining());
            buf.put_slice(&this.first[this.read..this.read + n]);
            this.read += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Revealed {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The streams of one HTTP/2 connection: how many are open, and when the
/// last one ended.
pub(crate) struct Activity {
    open: AtomicUsize,
    /// When the connection was last without streams, in ms since `epoch`.
    quiet_since_ms: AtomicU64,
    epoch: Instant,
    ended: Notify,
}

impl Activity {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            open: AtomicUsize::new(0),
            quiet_since_ms: AtomicU64::new(0),
            epoch: Instant::now(),
            ended: Notify::new(),
        })
    }

    /// Counts a stream from its request's arrival; it ends when the guard
    /// is dropped (see [`StreamGuard::hold_until_sent`]).
    pub(crate) fn begin(self: &Arc<Self>) -> StreamGuard {
        self.open.fetch_add(1, Ordering::AcqRel);
        StreamGuard(Arc::clone(self))
    }

    /// Resolves once the connection has held no stream for `limit`.
    pub(crate) async fn idle_for(&self, limit: Duration) {
        loop {
            if self.open.load(Ordering::Acquire) > 0 {
                // A permit is stored if the stream ends before we wait.
                self.ended.notified().await;
                continue;
            }
            let since = self.quiet_since_ms.load(Ordering::Acquire);
            tokio::time::sleep_until(self.epoch + Duration::from_millis(since) + limit).await;
            if self.open.load(Ordering::Acquire) == 0 && self.quiet_since_ms.load(Ordering::Acquire) == since {
                return;
            }
        }
    }
}

/// One open stream of an HTTP/2 connection.
pub(crate) struct StreamGuard(Arc<Activity>);

impl StreamGuard {
    /// Keeps the stream counted until `response`'s body is done (sent, or
    /// reset by the client).
    pub(crate) fn hold_until_sent(self, response: axum::response::Response) -> axum::response::Response {
        response.map(|body| {
            Body::new(body.map_frame(move |frame| {
                let _held = &self;
                frame
            }))
        })
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let activity = &self.0;
        let now = u64::try_from(activity.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        activity.quiet_since_ms.store(now, Ordering::Release);
        activity.open.fetch_sub(1, Ordering::AcqRel);
        activity.ended.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_once_its_last_stream_ended_long_enough_ago() {
        let activity = Activity::new();
        let limit = Duration::from_secs(10);
        let stream = activity.begin();
        let idle_with_a_request_in_flight = tokio::spawn({
            let activity = Arc::clone(&activity);
            async move { activity.idle_for(limit).await }
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!idle_with_a_request_in_flight.is_finished(), "a request is being handled");
        idle_with_a_request_in_flight.abort();
        let response = stream.hold_until_sent(axum::response::Response::new(Body::from("x")));
        let idle = tokio::spawn({
            let activity = Arc::clone(&activity);
            async move { activity.idle_for(limit).await }
        });
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!idle.is_finished(), "a stream is open");
        drop(response);
        tokio::time::sleep(Duration::from_secs(9)).await;
        assert!(!idle.is_finished(), "the stream ended 9 s ago");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(idle.is_finished());
    }
}
