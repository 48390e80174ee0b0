//! [`Http1`]: the connections an upstream with an `http` URL (not marked
//! `h2c`) is sent its requests on: cleartext HTTP/1.1, on kept-alive
//! connections of our own, one request at a time each.
//!
//! reqwest still carries `https` upstreams (TLS), the listen stream, the
//! cancel notices and the answers to an upstream's questions. Requests left
//! it because of what a call cost through it (#18, `loadtest plugin-call`,
//! `loadtest/callgrind-tools-call.sh` with `UPSTREAM=http1`): it parsed the
//! URL twice on every request and passed it through its retry and redirect
//! layers and its pool's keyed checkout, about 21,000 of the 142,700
//! instructions an upstream call cost the front server. They then went on
//! hyper's client connections, whose task, woken by each request and then
//! by each read, and handing the answer back over a channel, still cost the
//! front about 13,200 instructions a call. Here the calling task writes the
//! request and reads its answer on the connection itself: the request's
//! head and body leave in one write, the answer's head is parsed by
//! httparse (hyper's own parser), of its headers only what frames its body
//! and what an MCP client reads is kept, and its body is taken from the
//! same buffer ([`message`], which also says what of a hostile upstream's
//! answer is refused).
//!
//! A request takes the connection that went idle last (its buffers likely
//! still in cache), or opens one under the outbound policy (`client::dial`,
//! which also turns on TCP keep-alive, as reqwest did: HTTP/1.1 has no ping
//! to find a peer gone silent). One the upstream closed while it was idle,
//! as far as the runtime has seen, is dropped, not used. One whose first
//! write fails with nothing written is dropped and the request written once
//! more on a new one, as nothing of it was sent (rare: a write to a socket
//! the peer closed is usually taken by the kernel, and the close is then
//! read where the answer's head was awaited; that fails the request in
//! transport, which the client's retry budget sends again only if the
//! method changes nothing, as with hyper's pool).
//!
//! The connection comes back once the answer has been read to its end
//! ([`Body`]): with the head itself when the answer is empty, else once its
//! reader has taken its last piece. An answer left unread (a 5xx, an SSE
//! stream left once its response came, a call given up on) is read to its
//! end by a task of its own, as long as that takes at most [`DRAIN_MOST`]
//! bytes from the connection and [`DRAIN_WITHIN`], and the connection then
//! comes back; else it is closed. An answer that ends with its connection,
//! says it closes it, or comes with bytes after its end, closes it too. A
//! request is written whole before its answer is read: an upstream that
//! answers early (a 413) and stops reading leaves it waiting until the
//! call's deadline, and one that answers and resets leaves a transport error.
//!
//! Idle connections are at most the requests that were once in flight at
//! the same time (the client's `max_in_flight`, and the calls parked for a
//! client's input, which hold theirs), and those whose answer's rest a task
//! read once their request's place was free again. One idle longer than
//! [`IDLE_TIMEOUT`] is closed: when a request finds it, when another is
//! given back, and by a task that looks every [`IDLE_TIMEOUT`] while the
//! pool lives, as reqwest's pool reaped them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use http::header::{HeaderName, HeaderValue};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::CallError;
use super::dial::{self, dial};
use crate::outbound::OutboundPolicy;

mod message;

use message::{Decoded, Decoder, Head, HeadReader};

/// How long a connection may stay idle and still be used (reqwest's default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How long the rest of an answer left unread may take to come, and how
/// much of it is read, before its connection is closed instead of kept.
const DRAIN_WITHIN: Duration = Duration::from_secs(1);
const DRAIN_MOST: usize = 64 * 1024;
/// The read buffer's size, and the least room a read is given in it.
const READ_BUFFER: usize = 8 * 1024;
const LEAST_READ: usize = 1024;
/// The most room a connection's write buffer keeps between requests.
const KEPT_WRITE_BUFFER: usize = 64 * 1024;

/// The idle connections, each with when it went idle, the last at the end.
type Idle = Mutex<Vec<(Connection, Instant)>>;

/// The HTTP/1.1 connections of one upstream (module docs).
pub(crate) struct Http1 {
    uri: http::Uri,
    /// What the request line names: the URL's path and query.
    target: String,
    /// The `Host` header: the URL's host, and its port unless it is 80.
    host: HeaderValue,
    policy: OutboundPolicy,
    idle: Arc<Idle>,
    /// Whether the task that closes connections idle too long runs.
    reaping: AtomicBool,
}

impl std::fmt::Debug for Http1 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http1").field("uri", &self.uri).finish_non_exhaustive()
    }
}

/// One connection of ours: what has been read of it and not yet used, and
/// the buffer its requests are written in (both kept from request to
/// request, the latter only while small), and how much it has read in all.
struct Connection {
    tcp: TcpStream,
    read: BytesMut,
    write: Vec<u8>,
    received: usize,
}

impl Connection {
    fn new(tcp: TcpStream) -> Self {
        Self { tcp, read: BytesMut::with_capacity(READ_BUFFER), write: Vec::new(), received: 0 }
    }

    /// Writes the request in `write`. `Err(true)` if nothing of it left.
    async fn send(&mut self) -> Result<(), (bool, std::io::Error)> {
        let mut written = 0;
        while written < self.write.len() {
            match self.tcp.write(&self.write[written..]).await {
                Ok(0) => return Err((written == 0, std::io::ErrorKind::WriteZero.into())),
                Ok(n) => written += n,
                Err(e) => return Err((written == 0, e)),
            }
        }
        // An idle connection does not keep the room its largest request took.
        if self.write.capacity() > KEPT_WRITE_BUFFER {
            self.write = Vec::new();
        }
        Ok(())
    }

    /// Reads what has come into `read`; 0 once the upstream closed.
    async fn fill(&mut self) -> std::io::Result<usize> {
        if self.read.capacity() - self.read.len() < LEAST_READ {
            self.read.reserve(READ_BUFFER);
        }
        let read = self.tcp.read_buf(&mut self.read).await?;
        self.received += read;
        Ok(read)
    }

    /// Whether it may still carry a request: nothing unasked came on it and,
    /// as far as the runtime has seen (no system call unless it saw
    /// something), the upstream has not closed it.
    fn alive(&self) -> bool {
        if !self.read.is_empty() {
            return false;
        }
        match self.tcp.poll_read_ready(&mut Context::from_waker(Waker::noop())) {
            Poll::Pending => true,
            // Something came: the upstream's close, or bytes nobody asked for.
            Poll::Ready(Ok(())) => {
                matches!(self.tcp.try_read(&mut [0]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
            }
            Poll::Ready(Err(_)) => false,
        }
    }
}

/// `connection` among the idle connections, and those idle too long closed.
fn keep(idle: &Idle, connection: Connection) {
    let mut idle = idle.lock().unwrap_or_else(|p| p.into_inner());
    close_stale(&mut idle);
    idle.push((connection, Instant::now()));
}

/// Closes the connections idle longer than [`IDLE_TIMEOUT`] (the first
/// ones: the list is in the order they went idle) and those the upstream closed.
fn close_stale(idle: &mut Vec<(Connection, Instant)>) {
    let stale = idle.partition_point(|(_, since)| since.elapsed() > IDLE_TIMEOUT);
    idle.drain(..stale);
    idle.retain(|(connection, _)| connection.alive());
}

/// An answer that came on one of our connections: what of its head an MCP
/// client reads (`message::Head`), and its body to read.
pub(crate) struct Http1Response {
    pub(crate) status: StatusCode,
    /// Whether its `Content-Type` is `text/event-stream`.
    pub(crate) event_stream: bool,
    /// Its `Mcp-Session-Id`, if that is text.
    pub(crate) session: Option<String>,
    /// Its body's length, when its framing is one (0 for a 204 or 304).
    pub(crate) length: Option<u64>,
    pub(crate) body: Body,
}

/// An answer's body, read from its connection, which it gives back once
/// read to its end; dropped before, its rest is read by a task of its own
/// (module docs).
pub(crate) struct Body {
    /// `None` once given back, closed or failed.
    connection: Option<Connection>,
    decoder: Decoder,
    /// Whether the connection may carry another request once the body is read.
    reusable: bool,
    /// Why the body's framing broke, found after its last piece was handed
    /// on: told on the next read.
    broken: Option<String>,
    /// Whether this is the rest of an answer left unread, read by its own task.
    draining: bool,
    idle: Arc<Idle>,
}

impl Body {
    fn new(connection: Connection, head: &Head, idle: &Arc<Idle>) -> Self {
        let mut body = Self {
            connection: Some(connection),
            decoder: Decoder::new(head.framing),
            reusable: head.reusable,
            broken: None,
            draining: false,
            idle: Arc::clone(idle),
        };
        body.settle();
        body
    }

    /// The body's next piece as it comes; `None` once it has ended.
    pub(crate) async fn next(&mut self) -> Option<Result<Bytes, CallError>> {
        if let Some(why) = self.broken.take() {
            return Some(Err(CallError::Transport(why)));
        }
        loop {
            let connection = self.connection.as_mut()?;
            match self.decoder.decode(&mut connection.read) {
                Ok(Decoded::Data(piece)) => {
                    self.settle();
                    return Some(Ok(piece));
                }
                Ok(Decoded::End) => {
                    self.settle();
                    return None;
                }
                Ok(Decoded::More) => match connection.fill().await {
                    Ok(0) if self.decoder.until_close() => {
                        self.decoder.closed();
                        self.connection = None;
                        return None;
                    }
                    Ok(0) => return Some(Err(self.fail("the upstream closed the connection before the answer's end"))),
                    Ok(_) => {}
                    Err(e) => return Some(Err(self.fail(&format!("reading the answer: {e}")))),
                },
                Err(why) => return Some(Err(self.fail(&why))),
            }
        }
    }

    /// Past what frames the data already read; the connection given back
    /// if that is the body's end.
    fn settle(&mut self) {
        let Some(connection) = self.connection.as_mut() else { return };
        match self.decoder.frame(&mut connection.read) {
            Ok(_) if self.decoder.ended() => {
                let connection = self.connection.take().expect("taken above");
                // Bytes after the answer's end were never asked for.
                if self.reusable && connection.read.is_empty() {
                    keep(&self.idle, connection);
                }
            }
            Ok(_) => {}
            Err(why) => {
                self.connection = None;
                self.broken = Some(why);
            }
        }
    }

    /// The connection closed, and `why` as the call's error.
    fn fail(&mut self, why: &str) -> CallError {
        self.connection = None;
        CallError::Transport(why.to_owned())
    }
}

impl Drop for Body {
    fn drop(&mut self) {
        if self.draining || !self.reusable || self.connection.is_none() {
            return;
        }
        // What has come already, read at once: a short answer left unread
        // (a 5xx's) gives its connection back here.
        while let Some(connection) = self.connection.as_mut() {
            match self.decoder.decode(&mut connection.read) {
                Ok(Decoded::Data(_)) => self.settle(),
                Ok(Decoded::End) => self.settle(),
                Ok(Decoded::More) => break,
                Err(_) => self.connection = None,
            }
        }
        let Some(connection) = self.connection.take() else { return };
        // (Outside a runtime, as a process ends, it is closed.)
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let mut rest = Body {
            connection: Some(connection),
            decoder: self.decoder,
            reusable: true,
            broken: None,
            draining: true,
            idle: Arc::clone(&self.idle),
        };
        runtime.spawn(async move {
            let read = async {
                // Counted as read from the connection, the chunked coding's own bytes too.
                let from = rest.connection.as_ref().map_or(0, |c| c.received);
                while let Some(Ok(_)) = rest.next().await {
                    if rest.connection.as_ref().is_some_and(|c| c.received - from > DRAIN_MOST) {
                        return;
                    }
                }
            };
            // Read to its end, `next` gave the connection back; else it closes here.
            let _ = tokio::time::timeout(DRAIN_WITHIN, read).await;
        });
    }
}

impl Http1 {
    /// The connections to `url` (an `http` URL the policy let through), none open yet.
    pub(crate) fn new(url: &reqwest::Url, policy: &OutboundPolicy) -> Result<Self, String> {
        let uri = dial::uri(url)?;
        let host = uri.host().unwrap_or_default();
        let host = match uri.port_u16() {
            Some(port) if port != 80 => format!("{host}:{port}"),
            _ => host.to_owned(),
        };
        Ok(Self {
            host: HeaderValue::from_str(&host).map_err(|e| format!("{e}"))?,
            target: uri.path_and_query().map_or("/", |p| p.as_str()).to_owned(),
            uri,
            policy: policy.clone(),
            idle: Arc::default(),
            reaping: AtomicBool::new(false),
        })
    }

    /// POSTs `body` with `headers`; returns the answer's head once it came,
    /// with its body to read.
    ///
    /// # Errors
    /// [`CallError::Transport`]: no connection, it failed or closed before
    /// the head came, or the head is not one we read (`message`).
    pub(crate) async fn post<'h>(
        &self,
        headers: impl IntoIterator<Item = (&'h HeaderName, &'h HeaderValue)>,
        body: Bytes,
    ) -> Result<Http1Response, CallError> {
        let (mut connection, kept) = match self.kept() {
            Some(connection) => (connection, true),
            // Boxed: opening (resolving, connecting) would make every
            // request's future larger, which each layer of a call moves.
            None => (Box::pin(self.open()).await?, false),
        };
        message::write_request(&mut connection.write, &self.target, &self.host, headers, &body);
        match connection.send().await {
            Ok(()) => {}
            // Nothing of it left: the upstream closed the kept connection
            // meanwhile, unseen. Written once more, on a new one.
            Err((true, _)) if kept => {
                let mut fresh = Box::pin(self.open()).await?;
                std::mem::swap(&mut fresh.write, &mut connection.write);
                connection = fresh;
                connection.send().await.map_err(|(_, e)| self.failed(&e.to_string()))?;
            }
            Err((_, e)) => return Err(self.failed(&e.to_string())),
        }
        let mut reader = HeadReader::default();
        let head = loop {
            match reader.parse(&mut connection.read) {
                Ok(Some(head)) => break head,
                Ok(None) => match connection.fill().await {
                    Ok(0) => return Err(self.failed("the connection closed before an answer came")),
                    Ok(_) => {}
                    Err(e) => return Err(self.failed(&e.to_string())),
                },
                Err(why) => return Err(self.failed(&why)),
            }
        };
        let body = Body::new(connection, &head, &self.idle);
        let length = match head.framing {
            message::Framing::Length(length) => Some(length),
            message::Framing::Chunked | message::Framing::UntilClose => None,
        };
        let message::Head { status, event_stream, session, .. } = head;
        Ok(Http1Response { status, event_stream, session, length, body })
    }

    /// The idle connection that went idle last and is still open, if any;
    /// those closed or idle too long are dropped on the way.
    fn kept(&self) -> Option<Connection> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        let stale = idle.partition_point(|(_, since)| since.elapsed() > IDLE_TIMEOUT);
        idle.drain(..stale);
        while let Some((connection, _)) = idle.pop() {
            if connection.alive() {
                return Some(connection);
            }
        }
        None
    }

    /// A new connection.
    async fn open(&self) -> Result<Connection, CallError> {
        if !self.reaping.swap(true, Ordering::Relaxed) {
            reap(Arc::downgrade(&self.idle));
        }
        Ok(Connection::new(dial(&self.uri, &self.policy).await?))
    }

    /// `why` the exchange failed, as the call's error.
    fn failed(&self, why: &str) -> CallError {
        CallError::Transport(format!("{}: {why}", self.uri))
    }
}

/// Closes the connections of `idle` that stay idle too long, every
/// [`IDLE_TIMEOUT`], until the pool is gone.
fn reap(idle: Weak<Idle>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(IDLE_TIMEOUT).await;
            let Some(idle) = idle.upgrade() else { return };
            close_stale(&mut idle.lock().unwrap_or_else(|p| p.into_inner()));
        }
    });
}

#[cfg(test)]
mod tests;
