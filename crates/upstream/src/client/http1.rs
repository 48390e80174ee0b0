//! [`Http1`]: the connections an upstream with an `http` URL (not marked
//! `h2c`) is sent its requests on: cleartext HTTP/1.1, on kept-alive
//! connections of hyper's own client (which reqwest is built on), one
//! request at a time each.
//!
//! reqwest still carries `https` upstreams (TLS), the listen stream, the
//! cancel notices and the answers to an upstream's questions; requests go
//! here because of what a call cost through it (#18, `loadtest plugin-call`,
//! `loadtest/callgrind-tools-call.sh` with `UPSTREAM=http1`): it parsed the
//! URL twice on every request (once in its redirect policy, consulted even
//! with redirects off, once for the response), cloned its client and
//! connector, and passed the request through its retry and redirect layers
//! and its pool's keyed checkout: about 21,000 of the 142,700 instructions an
//! upstream call cost the front server (106,200 here), where the least
//! forwarder over HTTP/1.1 (`loadtest/src/forward.rs`) costs a front a
//! fraction of that.
//!
//! A request takes the connection that went idle last (its buffers likely
//! still in cache), or opens one under the outbound policy (`client::dial`,
//! which also turns on TCP keep-alive, as reqwest did: HTTP/1.1 has no ping
//! to find a peer gone silent). The connection comes back once the answer
//! has been read to its end ([`Lease`]). An answer left unread (a 5xx, a
//! notification's 202, an SSE stream left once its response came, a call
//! given up on) leaves hyper to read what is already there of it, or to
//! close the connection; the connection comes back once hyper says it can
//! send again, as hyper-util's pool under reqwest took it back. (An empty
//! answer's connection is always kept so. One whose SSE answer was left
//! after its last event was closed instead one time in three in a test, for
//! a reason not found: the SDKs' servers answer calls with SSE, so calls to
//! them open connections more often than calls answered in JSON.) A request
//! a kept connection did not send, because the upstream had closed it
//! meanwhile, is sent once more on a new connection, as hyper-util's pool
//! sent it.
//!
//! Idle connections are at most the requests that were once in flight at
//! the same time (the client's `max_in_flight`, and the calls parked for a
//! client's input, which hold theirs). One idle longer than
//! [`IDLE_TIMEOUT`] is closed: when a request finds it, when another is
//! given back, and by a task that looks every [`IDLE_TIMEOUT`] while the
//! pool lives, as reqwest's pool reaped them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HOST, HeaderMap, HeaderValue};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

use super::CallError;
use super::dial::{self, dial};
use crate::outbound::OutboundPolicy;

/// How long a connection may stay idle and still be used (reqwest's default).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a connection may take to be able to send again once its answer
/// was read, or left: else it is closed (it was still writing a request the
/// upstream answered before reading it whole, or reading an answer's rest).
const READY_WITHIN: Duration = Duration::from_secs(1);

type Sender = http1::SendRequest<Full<Bytes>>;
/// The idle connections, each with when it went idle, the last at the end.
type Idle = Mutex<Vec<(Sender, Instant)>>;

/// The HTTP/1.1 connections of one upstream (module docs).
pub(crate) struct Http1 {
    uri: http::Uri,
    /// What the request line names: the URL's path and query.
    target: http::Uri,
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

/// A connection taken for one request: given back once its answer was read
/// to its end, or, dropped before, once hyper has read or dropped the rest.
pub(crate) struct Lease {
    sender: Option<Sender>,
    idle: Arc<Idle>,
}

impl Lease {
    fn new(sender: Sender, idle: &Arc<Idle>) -> Self {
        Self { sender: Some(sender), idle: Arc::clone(idle) }
    }

    /// Back among the idle connections, for the next request.
    pub(crate) fn give_back(mut self) {
        if let Some(sender) = self.sender.take() {
            keep(&self.idle, sender);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(mut sender) = self.sender.take() else { return };
        // (Outside a runtime, as a process ends, it is closed.)
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let idle = Arc::clone(&self.idle);
        runtime.spawn(async move {
            if let Ok(Ok(())) = tokio::time::timeout(READY_WITHIN, sender.ready()).await {
                keep(&idle, sender);
            }
        });
    }
}

/// `sender` among the idle connections, and those idle too long closed.
fn keep(idle: &Idle, sender: Sender) {
    let mut idle = idle.lock().unwrap_or_else(|p| p.into_inner());
    close_stale(&mut idle);
    idle.push((sender, Instant::now()));
}

/// Closes the connections idle longer than [`IDLE_TIMEOUT`] (the first
/// ones: the list is in the order they went idle) and those hyper closed.
fn close_stale(idle: &mut Vec<(Sender, Instant)>) {
    let stale = idle.partition_point(|(_, since)| since.elapsed() > IDLE_TIMEOUT);
    idle.drain(..stale);
    idle.retain(|(sender, _)| !sender.is_closed());
}

/// An answer's head, with its body to read, and the connection it came on.
pub(crate) type Http1Response = (http::Response<Incoming>, Lease);

impl Http1 {
    /// The connections to `url` (an `http` URL the policy let through), none open yet.
    pub(crate) fn new(url: &reqwest::Url, policy: &OutboundPolicy) -> Result<Self, String> {
        let uri = dial::uri(url)?;
        let host = uri.host().unwrap_or_default();
        let host = match uri.port_u16() {
            Some(port) if port != 80 => format!("{host}:{port}"),
            _ => host.to_owned(),
        };
        let target = uri.path_and_query().map_or("/", |p| p.as_str()).parse().map_err(|e| format!("{e}"))?;
        Ok(Self {
            host: HeaderValue::from_str(&host).map_err(|e| format!("{e}"))?,
            target,
            uri,
            policy: policy.clone(),
            idle: Arc::default(),
            reaping: AtomicBool::new(false),
        })
    }

    /// POSTs `body` with `headers`; returns the answer's head once it came,
    /// and the connection, to give back once the body is read.
    ///
    /// # Errors
    /// [`CallError::Transport`]: no connection, or it failed before the head came.
    pub(crate) async fn post(&self, headers: HeaderMap, body: Bytes) -> Result<Http1Response, CallError> {
        let mut request = http::Request::new(Full::new(body));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = self.target.clone();
        *request.headers_mut() = headers;
        request.headers_mut().insert(HOST, self.host.clone());
        let (sender, kept) = match self.kept().await {
            Some(sender) => (sender, true),
            // Boxed: opening (resolving, connecting, the handshake) would make
            // every request's future larger, which each layer of a call moves.
            None => (Box::pin(self.open()).await?, false),
        };
        match self.send(sender, request).await {
            Err(Unsent(Some(request), _)) if kept => {
                // Not sent: the upstream closed the kept connection meanwhile.
                let sender = Box::pin(self.open()).await?;
                self.send(sender, request).await.map_err(|Unsent(_, error)| error)
            }
            sent => sent.map_err(|Unsent(_, error)| error),
        }
    }

    /// `request` on the connection of `sender`; the request back if hyper did not send it.
    async fn send(&self, mut sender: Sender, request: http::Request<Full<Bytes>>) -> Result<Http1Response, Unsent> {
        match sender.try_send_request(request).await {
            Ok(response) => Ok((response, Lease::new(sender, &self.idle))),
            Err(mut failed) => Err(Unsent(failed.take_message(), self.failed(failed.error()))),
        }
    }

    /// The idle connection that went idle last and can send, if any; those
    /// closed or idle too long are dropped on the way.
    async fn kept(&self) -> Option<Sender> {
        loop {
            let (mut sender, _) = {
                let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
                close_stale(&mut idle);
                idle.pop()?
            };
            // At once, or as soon as its task has seen its last answer's end.
            if let Ok(Ok(())) = tokio::time::timeout(READY_WITHIN, sender.ready()).await {
                return Some(sender);
            }
        }
    }

    /// A new connection, driven by a task of its own until it closes.
    async fn open(&self) -> Result<Sender, CallError> {
        if !self.reaping.swap(true, Ordering::Relaxed) {
            reap(Arc::downgrade(&self.idle));
        }
        let tcp = dial(&self.uri, &self.policy).await?;
        let (sender, connection) = http1::handshake(TokioIo::new(tcp)).await.map_err(|e| self.failed(&e))?;
        let uri = self.uri.clone();
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(upstream = %uri, %error, "upstream HTTP/1.1 connection ended");
            }
        });
        Ok(sender)
    }

    /// `error`, of the connection or the exchange, as the call's error.
    fn failed(&self, error: &hyper::Error) -> CallError {
        CallError::Transport(format!("{}: {}", self.uri, switchyard_core::error::chain(error)))
    }
}

/// A request hyper did not send, if it gave it back, and why.
struct Unsent(Option<http::Request<Full<Bytes>>>, CallError);

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
mod tests {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::StreamExt as _;
    use futures::stream::BoxStream;
    use http_body_util::{Either, StreamBody};
    use hyper::body::Frame;
    use hyper::service::service_fn;

    use super::*;
    use crate::client::wire::Response;

    /// An HTTP/1.1 server on loopback answering every POST with `answer`,
    /// counting the connections it accepted; `close` has it close each
    /// connection after its first answer (as an upstream whose idle
    /// timeout is shorter than ours does).
    async fn upstream(answer: &'static str, close: bool) -> (Http1, Arc<AtomicUsize>) {
        serving(close, move || http::Response::new(Either::Left(Full::new(Bytes::from(answer))))).await
    }

    /// The same, answering with what `answer` makes, in whatever coding its body takes.
    async fn serving(
        close: bool,
        answer: impl Fn() -> http::Response<Either<Full<Bytes>, StreamBody<Chunks>>> + Clone + Send + Sync + 'static,
    ) -> (Http1, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&accepted);
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                // As servers answering calls set it: an answer's last bytes
                // leave without waiting for the first ones' acknowledgement.
                tcp.set_nodelay(true).unwrap();
                counted.fetch_add(1, Ordering::SeqCst);
                let answer = answer.clone();
                tokio::spawn(async move {
                    let answering = service_fn(move |_| {
                        let answer = answer();
                        async move { Ok::<_, Infallible>(answer) }
                    });
                    let mut builder = hyper::server::conn::http1::Builder::new();
                    builder.keep_alive(!close);
                    let _ = builder.serve_connection(TokioIo::new(tcp), answering).await;
                });
            }
        });
        let policy =
            OutboundPolicy { allowed_ranges: vec!["127.0.0.0/8".parse().unwrap()], ..OutboundPolicy::default() };
        let url = reqwest::Url::parse(&format!("http://{address}/mcp")).unwrap();
        (Http1::new(&url, &policy).unwrap(), accepted)
    }

    type Chunks = BoxStream<'static, Result<Frame<Bytes>, Infallible>>;

    /// An answer in the chunked coding (no length announced), in `parts`.
    fn chunked(parts: &'static [&'static str]) -> http::Response<Either<Full<Bytes>, StreamBody<Chunks>>> {
        let frames =
            futures::stream::iter(parts.iter().map(|part| Ok(Frame::data(Bytes::from_static(part.as_bytes())))));
        http::Response::new(Either::Right(StreamBody::new(frames.boxed())))
    }

    /// One POST, its answer read to its end (or not), as `wire` reads it.
    async fn call(http1: &Http1, read: bool) -> Vec<u8> {
        let (response, lease) = http1.post(HeaderMap::new(), Bytes::from_static(b"{}")).await.expect("answered");
        assert_eq!(response.status(), http::StatusCode::OK);
        if !read {
            return Vec::new();
        }
        let mut chunks = std::pin::pin!(Response::Http1(response, lease).chunks());
        let mut body = Vec::new();
        while let Some(chunk) = chunks.next().await {
            body.extend_from_slice(&chunk.unwrap());
        }
        body
    }

    #[tokio::test]
    async fn a_chunked_answer_is_read_whole_and_its_connection_kept() {
        let (http1, accepted) = serving(false, || chunked(&["{\"a\":", "1}"])).await;
        for _ in 0..3 {
            assert_eq!(call(&http1, true).await, b"{\"a\":1}");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    /// A notification's answer (202, no body) is not read at all.
    #[tokio::test]
    async fn an_empty_answer_left_unread_keeps_its_connection() {
        let (http1, accepted) = serving(false, || {
            let mut answer = http::Response::new(Either::Left(Full::new(Bytes::new())));
            *answer.status_mut() = http::StatusCode::ACCEPTED;
            answer
        })
        .await;
        for _ in 0..3 {
            let answered = http1.post(HeaderMap::new(), Bytes::new()).await.unwrap();
            assert_eq!(answered.0.status(), http::StatusCode::ACCEPTED);
            drop(answered);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn calls_one_after_another_share_one_connection() {
        let (http1, accepted) = upstream("answer", false).await;
        for _ in 0..5 {
            assert_eq!(call(&http1, true).await, b"answer");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn calls_at_the_same_time_each_take_a_connection_then_reuse_them() {
        let (http1, accepted) = upstream("answer", false).await;
        let leases: Vec<_> =
            futures::future::join_all((0..3).map(|_| http1.post(HeaderMap::new(), Bytes::new()))).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
        for (response, lease) in leases.into_iter().map(Result::unwrap) {
            let _ = Response::Http1(response, lease).chunks().collect::<Vec<_>>().await;
        }
        for _ in 0..3 {
            call(&http1, true).await;
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    /// What is left of an unread answer would come before the next one:
    /// a connection whose answer never ends is not used again.
    #[tokio::test]
    async fn an_answer_left_unfinished_closes_its_connection() {
        let (http1, accepted) = serving(false, || {
            let endless = futures::stream::iter([Ok(Frame::data(Bytes::from_static(b"data: {}\n\n")))])
                .chain(futures::stream::pending());
            http::Response::new(Either::Right(StreamBody::new(endless.boxed())))
        })
        .await;
        call(&http1, false).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let _still_open = http1.post(HeaderMap::new(), Bytes::new()).await.unwrap();
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_connection_the_upstream_closed_is_not_used_again() {
        let (http1, accepted) = upstream("answer", true).await;
        for _ in 0..3 {
            assert_eq!(call(&http1, true).await, b"answer");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_connection_idle_too_long_is_closed_not_used() {
        let (http1, accepted) = upstream("answer", false).await;
        call(&http1, true).await;
        {
            let mut idle = http1.idle.lock().unwrap();
            let (_, since) = idle.last_mut().expect("given back");
            *since = Instant::now().checked_sub(IDLE_TIMEOUT + Duration::from_secs(1)).unwrap();
        }
        call(&http1, true).await;
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
        assert_eq!(http1.idle.lock().unwrap().len(), 1, "the stale one is gone");
    }

    #[tokio::test]
    async fn the_request_names_the_path_and_the_host() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let seen = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let (tx, rx) = tokio::sync::oneshot::channel();
            let tx = Mutex::new(Some(tx));
            let answering = service_fn(move |request: http::Request<Incoming>| {
                let head = (request.uri().to_string(), request.headers().get(HOST).cloned());
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(head);
                }
                async { Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::new()))) }
            });
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), answering).await;
            rx.await.unwrap()
        });
        let policy =
            OutboundPolicy { allowed_ranges: vec!["127.0.0.0/8".parse().unwrap()], ..OutboundPolicy::default() };
        let url = reqwest::Url::parse(&format!("http://{address}/mcp?tenant=a")).unwrap();
        let http1 = Http1::new(&url, &policy).unwrap();
        call(&http1, true).await;
        drop(http1);
        let (target, host) = seen.await.unwrap();
        assert_eq!(target, "/mcp?tenant=a");
        assert_eq!(host.unwrap(), address.to_string().as_str());
    }

    /// The policy decides before any connection is made.
    #[tokio::test]
    async fn an_address_the_policy_refuses_is_not_connected_to() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = reqwest::Url::parse(&format!("http://{}/mcp", listener.local_addr().unwrap())).unwrap();
        let http1 = Http1::new(&url, &OutboundPolicy::default()).unwrap();
        let Err(CallError::Transport(why)) = http1.post(HeaderMap::new(), Bytes::new()).await else {
            panic!("sent to an address the policy refuses")
        };
        assert!(!why.is_empty());
        let accepted = tokio::time::timeout(Duration::from_millis(100), listener.accept()).await;
        assert!(accepted.is_err(), "connected");
    }
}
