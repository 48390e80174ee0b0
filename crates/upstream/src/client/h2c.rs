//! [`H2c`]: the connection an upstream marked `h2c` is sent its requests on,
//! cleartext HTTP/2 by prior knowledge, over the `h2` crate itself.
//!
//! reqwest speaks h2c too, and still carries the listen stream, the cancel
//! notices and the answers to an upstream's questions; requests go here
//! because of what a call cost through it (#18, `loadtest plugin-call`):
//! - hyper gave a request's body a task of its own whenever the connection
//!   had not yet granted the stream window, which it had not for a new
//!   stream, and the headers and the body often left in two writes. Here the
//!   body is queued with the headers (`h2` buffers what exceeds the window),
//!   and both leave together.
//! - The connection's task, woken by each request, ran at once (tokio runs a
//!   task woken by the running one next) and wrote each request alone: a
//!   system call per call, which on loopback also wakes the upstream. Here
//!   the task first lets every other task ready on its worker run
//!   ([`gathered`]), so under load one write carries the requests of many
//!   calls, as one read already brought many answers.
//!
//! One connection per upstream, opened on first use under the outbound
//! policy (every address DNS gives is checked, each given its share of the
//! connect timeout) and opened again once it has failed, the upstream sent
//! GOAWAY, or a ping went unanswered (pinged every 30 s, as reqwest pinged a
//! connection with a request open, so that one a peer or a middlebox dropped
//! silently is found; and at once, at most once a second, when a request on
//! it is given up on before its answer's head came, its deadline passed or
//! its caller gone: a connection gone silent is then found within the ping's
//! timeout, not after every call of the next 40 s has waited out its own
//! deadline on it; an answer streamed as SSE has its head at once, and is
//! not watched so). Requests in flight on a failed one fail in transport,
//! which the client's retry budget may send again; one the upstream says it
//! never processed is sent again here.
//!
//! The cost of [`gathered`]: each wake of the connection's task is two
//! polls, and its turn comes once its worker has run what was ready (or at
//! tokio's event interval, under a queue that never empties).

use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use h2::client::{Connection, SendRequest};
use reqwest::header::HeaderMap;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

use super::CallError;
use super::dial::{self, dial};
use crate::outbound::OutboundPolicy;

/// How often an open connection is pinged, and how long its pong may take.
const PING_INTERVAL: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(10);
/// The least time between two pings, however many requests are given up on.
const PING_SPACING: Duration = Duration::from_secs(1);
/// Streams opened before the upstream's own limit is known (hyper's default).
const FIRST_MAX_STREAMS: usize = 100;
/// What an upstream's header block may take of our memory.
const MAX_HEADER_LIST: u32 = 64 * 1024;
/// What an upstream may send on a stream, and on the connection, before we
/// read it: hyper's windows, which the requests had through reqwest.
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;
const CONNECTION_WINDOW: u32 = 5 * 1024 * 1024;

/// The cleartext HTTP/2 connection of one upstream (module docs).
pub(crate) struct H2c {
    uri: http::Uri,
    policy: OutboundPolicy,
    /// The open connection, cloned by each request.
    open: std::sync::Mutex<Option<Opened>>,
    /// Held while a connection is opened, so that concurrent first requests open one.
    opening: tokio::sync::Mutex<()>,
}

/// An open connection: its handle, and what tells its keep-alive that a
/// request on it was given up on before its answer's head came (each
/// connection its own, so that one still draining after a GOAWAY does not
/// take the notice meant for its successor).
#[derive(Clone)]
struct Opened {
    sender: SendRequest<Bytes>,
    abandoned: Arc<Notify>,
}

impl Opened {
    /// Itself, once its handle may send a request.
    async fn ready(self) -> Result<Self, h2::Error> {
        Ok(Self { sender: self.sender.ready().await?, abandoned: self.abandoned })
    }
}

impl std::fmt::Debug for H2c {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H2c").field("uri", &self.uri).finish_non_exhaustive()
    }
}

/// An answer's head, with its body to read.
pub(crate) type H2cResponse = http::Response<h2::RecvStream>;

impl H2c {
    /// The connection to `url` (an `http` URL the policy let through), opened on first use.
    pub(crate) fn new(url: &reqwest::Url, policy: &OutboundPolicy) -> Result<Self, String> {
        Ok(Self {
            uri: dial::uri(url)?,
            policy: policy.clone(),
            open: std::sync::Mutex::new(None),
            opening: tokio::sync::Mutex::new(()),
        })
    }

    /// POSTs `body` with the headers `headers` makes; returns the answer's
    /// head once it came. The map is made for each attempt, not cloned for
    /// a retry that seldom comes: a clone was about 1,100 instructions of
    /// every call's (#18).
    ///
    /// # Errors
    /// [`CallError::Transport`]: no connection, or the stream or the
    /// connection failed before the head came.
    pub(crate) async fn post(&self, headers: impl Fn() -> HeaderMap, body: Bytes) -> Result<H2cResponse, CallError> {
        match self.send(headers(), body.clone()).await {
            // The upstream says it never processed the request (it was going
            // away, or refused the stream): sent again, once (after a GOAWAY,
            // on a new connection), whatever the method, as nothing of it happened.
            Err(Failed::Stream(e)) if unprocessed(&e) => self.send(headers(), body).await,
            sent => sent,
        }
        .map_err(|failed| match failed {
            Failed::Connecting(e) => e,
            Failed::Stream(e) => self.failed(&e),
        })
    }

    /// One attempt of [`H2c::post`]. A failed connection needs no forgetting:
    /// its handle is no longer ready (h2 keeps the connection's error, a
    /// GOAWAY's too), so the next request opens another.
    async fn send(&self, headers: HeaderMap, body: Bytes) -> Result<H2cResponse, Failed> {
        let Opened { mut sender, abandoned } = self.ready().await.map_err(Failed::Connecting)?;
        let mut request = http::Request::new(());
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = headers;
        request.headers_mut().insert(http::header::CONTENT_LENGTH, body.len().into());
        let (response, mut stream) = sender.send_request(request, false).map_err(Failed::Stream)?;
        stream.send_data(body, true).map_err(Failed::Stream)?;
        // Dropped while waiting (the call's deadline, its caller gone), this
        // tells the keep-alive to ping: the connection may have gone silent.
        let mut waiting = Abandoned(Some(&abandoned));
        let head = response.await;
        waiting.0 = None;
        head.map_err(Failed::Stream)
    }

    /// A handle on an open connection: the open one, or a new one when it
    /// has closed. A request beyond the upstream's limit of streams waits in
    /// `h2` for one to end (bounded by the client's `max_in_flight`).
    async fn ready(&self) -> Result<Opened, CallError> {
        if let Some(ready) = self.still_open().await {
            return Ok(ready);
        }
        let _opening = self.opening.lock().await;
        // Opened while this request waited?
        if let Some(ready) = self.still_open().await {
            return Ok(ready);
        }
        // Boxed: opening (resolving, connecting, the handshake) would make
        // every request's future larger, which each layer of a call moves.
        let opened = Box::pin(self.open()).await?;
        *self.open.lock().unwrap_or_else(|p| p.into_inner()) = Some(opened.clone());
        opened.ready().await.map_err(|e| self.failed(&e))
    }

    /// The open connection, unless there is none or it has failed.
    async fn still_open(&self) -> Option<Opened> {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner()).clone()?;
        open.ready().await.ok()
    }

    /// `error`, on the stream or the connection, as the call's error.
    fn failed(&self, error: &h2::Error) -> CallError {
        CallError::Transport(format!("{}: {}", self.uri, switchyard_core::error::chain(error)))
    }

    /// Opens a connection: the first address the policy allows that accepts,
    /// then the HTTP/2 handshake; its task runs until the connection ends.
    async fn open(&self) -> Result<Opened, CallError> {
        let tcp = dial(&self.uri, &self.policy).await?;
        // (The handshake only queues our preface and settings: it waits for nothing.)
        let (sender, mut connection) = h2::client::Builder::new()
            .initial_max_send_streams(FIRST_MAX_STREAMS)
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_header_list_size(MAX_HEADER_LIST)
            .enable_push(false)
            .handshake::<_, Bytes>(tcp)
            .await
            .map_err(|e| self.failed(&e))?;
        let uri = self.uri.clone();
        let abandoned = Arc::new(Notify::new());
        let (pings, watched) = (connection.ping_pong(), Arc::clone(&abandoned));
        tokio::spawn(async move {
            let driven = gathered(connection);
            // Unanswered, the connection is dropped: its streams fail, and
            // its handle is no longer ready.
            let ended = match pings {
                Some(pings) => tokio::select! {
                    biased;
                    ended = driven => ended.map_err(|e| e.to_string()),
                    silent = keep_alive(pings, &watched) => Err(silent),
                },
                None => driven.await.map_err(|e| e.to_string()),
            };
            if let Err(error) = ended {
                tracing::debug!(upstream = %uri, %error, "upstream HTTP/2 connection ended");
            }
        });
        Ok(Opened { sender, abandoned })
    }
}

/// Notifies its [`Notify`] when dropped still holding it: a request given up
/// on while it waited for its answer.
struct Abandoned<'a>(Option<&'a Notify>);

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if let Some(abandoned) = self.0 {
            abandoned.notify_one();
        }
    }
}

/// How an attempt failed: no connection to send on, or the request's stream.
enum Failed {
    Connecting(CallError),
    Stream(h2::Error),
}

/// Whether `error` says the upstream did not process the request: a GOAWAY
/// that excluded its stream, or the stream refused (RFC 9113, 8.7).
fn unprocessed(error: &h2::Error) -> bool {
    error.is_remote() && (error.is_go_away() || error.reason() == Some(h2::Reason::REFUSED_STREAM))
}

/// Pings every [`PING_INTERVAL`], and when a request is given up on
/// (`abandoned`), at most once every [`PING_SPACING`]; returns why, once a
/// ping fails or is not answered within [`PING_TIMEOUT`].
async fn keep_alive(mut pings: h2::PingPong, abandoned: &Notify) -> String {
    loop {
        tokio::select! {
            () = tokio::time::sleep(PING_INTERVAL) => {}
            () = abandoned.notified() => {}
        }
        match tokio::time::timeout(PING_TIMEOUT, pings.ping(h2::Ping::opaque())).await {
            Ok(Ok(_pong)) => {}
            Ok(Err(e)) => return e.to_string(),
            Err(_) => return format!("no answer to a ping within {PING_TIMEOUT:?}"),
        }
        tokio::time::sleep(PING_SPACING).await;
    }
}

/// Drives a connection, letting the tasks ready on its worker run before
/// each turn (module docs). Woken, it first yields with `yield_now`, which
/// tokio holds until its worker has run what is ready and polled for I/O
/// (so no idle worker is woken to take it), then reads and writes what has
/// gathered meanwhile, and waits for the next wake: the connection's I/O, a
/// request, window given back. (A task that wakes itself is queued behind the
/// others too, but tokio then wakes an idle worker to take it: one call at a
/// time on two workers, that put the median call at 162 to 208 µs against
/// 150 to 179 µs this way and 152 to 158 µs through reqwest; under load, on
/// one worker, both ways batch alike.)
async fn gathered<T: AsyncRead + AsyncWrite + Unpin>(mut connection: Connection<T, Bytes>) -> Result<(), h2::Error> {
    loop {
        tokio::task::yield_now().await;
        if let Poll::Ready(ended) = futures::poll!(&mut connection) {
            return ended;
        }
        let mut woken = false;
        std::future::poll_fn(|_| if std::mem::replace(&mut woken, true) { Poll::Ready(()) } else { Poll::Pending })
            .await;
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt as _;

    use super::*;

    /// A client connection over an in-memory pipe, driven as `open` drives
    /// it (`gathered`), and its pings; `answering` says whether the far end runs an HTTP/2
    /// server (which answers pings, and each request with an empty 200),
    /// else it is returned, open and unread.
    /// The handle is returned too: a client connection without one closes.
    async fn connection(answering: bool) -> (h2::PingPong, SendRequest<Bytes>, Option<tokio::io::DuplexStream>) {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let (sender, mut connection) = h2::client::handshake(ours).await.unwrap();
        let pings = connection.ping_pong().unwrap();
        tokio::spawn(gathered(connection));
        if !answering {
            return (pings, sender, Some(theirs));
        }
        tokio::spawn(async move {
            let mut server = h2::server::handshake(theirs).await.unwrap();
            while let Some(Ok((_, mut respond))) = server.accept().await {
                let _ = respond.send_response(http::Response::new(()), true);
            }
        });
        (pings, sender, None)
    }

    /// The host and port come from the URL, an IPv6 literal without its
    /// brackets: the connection is tried at `[::1]:9` itself (where nothing
    /// listens), not refused at resolving.
    #[tokio::test]
    async fn an_ipv6_literal_is_connected_to_at_its_address_and_port() {
        let policy = OutboundPolicy { allowed_ranges: vec!["::1/128".parse().unwrap()], ..OutboundPolicy::default() };
        let h2c = H2c::new(&reqwest::Url::parse("http://[::1]:9/mcp").unwrap(), &policy).unwrap();
        let Err(CallError::Transport(why)) = h2c.open().await else { panic!("connected to the discard port") };
        assert!(why.starts_with("[::1]:9: "), "{why}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_whose_pings_go_unanswered_is_given_up() {
        let (pings, _open, _unread) = connection(false).await;
        let why = tokio::time::timeout(10 * PING_INTERVAL, keep_alive(pings, &Notify::new())).await.expect("given up");
        assert!(why.contains("no answer to a ping"), "{why}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_answers_its_pings_is_kept() {
        let (pings, _open, _) = connection(true).await;
        let kept = tokio::time::timeout(10 * PING_INTERVAL, keep_alive(pings, &Notify::new())).await;
        assert!(kept.is_err(), "given up: {kept:?}");
    }

    /// A request given up on before its answer came (the far end has gone
    /// silent) has the connection pinged at once: it is given up within the
    /// ping's timeout, long before the next interval's ping would be sent.
    #[tokio::test(start_paused = true)]
    async fn a_request_given_up_on_has_its_silent_connection_pinged_at_once() {
        let (pings, sender, _unread) = connection(false).await;
        let (h2c, abandoned) = on(sender);
        let watching = tokio::spawn(async move { keep_alive(pings, &abandoned).await });
        let started = tokio::time::Instant::now();
        let gave_up = tokio::time::timeout(Duration::from_secs(1), h2c.post(HeaderMap::new, Bytes::new())).await;
        assert!(gave_up.is_err(), "the silent far end answered: {gave_up:?}");
        let why = tokio::time::timeout(PING_INTERVAL, watching).await.expect("given up").unwrap();
        assert!(why.contains("no answer to a ping"), "{why}");
        // Given up a ping's timeout after the request was (and a tick).
        let limit = Duration::from_secs(1) + PING_TIMEOUT + Duration::from_millis(100);
        assert!(started.elapsed() <= limit, "after {:?}", started.elapsed());
    }

    /// A request whose answer came tells the keep-alive nothing.
    #[tokio::test(start_paused = true)]
    async fn an_answered_request_has_no_ping_sent() {
        let (_pings, sender, _) = connection(true).await;
        let (h2c, abandoned) = on(sender);
        let answer = h2c.post(HeaderMap::new, Bytes::new()).await.expect("answered");
        assert_eq!(answer.status(), http::StatusCode::OK);
        assert!(abandoned.notified().now_or_never().is_none(), "a ping was asked for");
    }

    /// A request the upstream refuses unprocessed (`REFUSED_STREAM`) is sent
    /// again, once, with the same headers: made again for the second attempt.
    #[tokio::test]
    async fn a_refused_stream_is_sent_again_with_its_headers() {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let (sender, connection) = h2::client::handshake(ours).await.unwrap();
        tokio::spawn(gathered(connection));
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let recorded = Arc::clone(&seen);
        // (Kept accepting: the connection is driven, and its frames written, by `accept`.)
        tokio::spawn(async move {
            let mut server = h2::server::handshake(theirs).await.unwrap();
            while let Some(Ok((request, mut respond))) = server.accept().await {
                let mut seen = recorded.lock().unwrap();
                seen.push(request.headers().get("mcp-method").cloned());
                if seen.len() == 1 {
                    respond.send_reset(h2::Reason::REFUSED_STREAM);
                } else {
                    let _ = respond.send_response(http::Response::new(()), true);
                }
            }
        });
        let (h2c, _abandoned) = on(sender);
        let made = std::sync::atomic::AtomicUsize::new(0);
        let headers = || {
            made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut headers = HeaderMap::new();
            headers.insert("mcp-method", http::HeaderValue::from_static("tools/call"));
            headers
        };
        let answer = tokio::time::timeout(Duration::from_secs(10), h2c.post(headers, Bytes::from_static(b"{}")))
            .await
            .expect("answered in time")
            .expect("answered the second time");
        assert_eq!(answer.status(), http::StatusCode::OK);
        assert_eq!(made.into_inner(), 2);
        assert_eq!(*seen.lock().unwrap(), vec![Some(http::HeaderValue::from_static("tools/call")); 2]);
    }

    /// An `H2c` whose open connection is `sender`, and what tells that
    /// connection's keep-alive of requests given up on.
    fn on(sender: SendRequest<Bytes>) -> (H2c, Arc<Notify>) {
        let url = reqwest::Url::parse("http://tools.example.com/mcp").unwrap();
        let h2c = H2c::new(&url, &OutboundPolicy::default()).unwrap();
        let abandoned = Arc::new(Notify::new());
        *h2c.open.lock().unwrap() = Some(Opened { sender, abandoned: Arc::clone(&abandoned) });
        (h2c, abandoned)
    }
}
