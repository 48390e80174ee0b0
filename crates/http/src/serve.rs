//! Binding and the accept loop: HTTP/1.1 and cleartext HTTP/2 on one port.
//!
//! Our own loop rather than `axum::serve`, for what axum does not expose: a
//! listen backlog sized for thousands of reconnecting clients, a deadline for
//! a request head (a client that connects and sends nothing, or trickles a
//! head byte by byte, must not hold a connection forever), and the HTTP/2
//! stream limit.
//!
//! HTTP/2 is served with prior knowledge (h2c, RFC 9113 §3.3: the client
//! starts with the connection preface; there is no TLS here to negotiate it,
//! TLS ends at the load balancer). It matters at scale: a load balancer that
//! speaks HTTP/2 to the replicas carries many clients' listen streams on one
//! connection, so an idle stream costs its stream state rather than a socket
//! and two 8 KiB buffers, and one write carries an event to many streams.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Poll, Waker};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use crate::head_timer::HeadTimer;
use crate::{Config, connection};

/// Binds `address` with room for `backlog` connections waiting to be
/// accepted. The stock backlog of 128 overflows when thousands of clients
/// (re)open listen streams at once, and every overflowed SYN costs its
/// client a one-second retransmit; the kernel caps the value at
/// `net.core.somaxconn`.
///
/// # Errors
/// When the address cannot be bound.
pub fn bind(address: SocketAddr, backlog: u32) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    // A restarted replica must not wait for the old socket's TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(backlog)
}

/// Serves `app` on `listener` until `shutdown` resolves, then stops
/// accepting, asks every connection to finish (HTTP/1.1: after the response
/// in flight; HTTP/2: GOAWAY, streams in flight run to their end) and
/// returns when all have. Each connection speaks HTTP/1.1 or, when it opens
/// with the HTTP/2 preface, HTTP/2; `TCP_NODELAY` is set on every socket
/// (small JSON answers must not wait for Nagle). The peer address is
/// available to handlers as `ConnectInfo<SocketAddr>`.
///
/// Accept errors are logged and retried: a full file table is a reason to
/// wait, not to stop serving.
pub async fn serve(listener: TcpListener, app: Router, config: &Config, shutdown: impl Future<Output = ()>) {
    // One per protocol: the first bytes were read already, so hyper need not
    // tell them apart again.
    let builders = Arc::new(Builders::new(config));
    let timeouts = Arc::new(config.clone());
    // Tells every connection task to finish, once `shutdown` resolves.
    let stop = Stop::default();
    let connections = TaskTracker::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    wait_after_accept_error(&error).await;
                    continue;
                }
            },
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::debug!(%error, "could not set TCP_NODELAY");
        }
        let (builders, stop, config) = (Arc::clone(&builders), stop.clone(), timeouts.clone());
        let app = app.clone();
        connections.spawn(async move {
            let revealed = tokio::select! {
                revealed = connection::reveal(stream, config.header_read_timeout) => revealed,
                () = stop.token.cancelled() => return,
            };
            let Some(revealed) = revealed else { return };
            let with_peer = move |mut request: axum::http::Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request.map(Body::new)
            };
            // An HTTP/2 connection without streams is closed after the head
            // deadline, as hyper closes an idle HTTP/1.1 one.
            let activity = revealed.is_h2().then(connection::Activity::new);
            // A stream counts from its request's arrival until its response
            // is sent (or the client resets it, dropping the future or body).
            let tracked = activity.clone();
            let respond = move |request: axum::http::Request<Incoming>| {
                let stream = tracked.as_ref().map(|activity| activity.begin());
                let routed = app.clone().oneshot(with_peer(request));
                async move {
                    let response = routed.await?;
                    Ok::<_, std::convert::Infallible>(match stream {
                        Some(stream) => stream.hold_until_sent(response),
                        None => response,
                    })
                }
            };
            let io = TokioIo::new(revealed);
            let result = match activity {
                Some(activity) => {
                    // Each stream is a task of its own, as large as the
                    // larger of its states: answering (this future, 664
                    // bytes inline) and sending the body (96). A listen
                    // stream sends its body for as long as it is open, so
                    // the future is boxed and freed once the response is
                    // made: an idle HTTP/2 listen stream then holds about
                    // 0.4 KiB less (#18's idle stream row, `loadtest fanout`).
                    let service = tower::service_fn(move |request| Box::pin(respond(request)));
                    let service = TowerToHyperService::new(service);
                    // Boxed: an HTTP/2 connection's state is twice an HTTP/1.1
                    // one's (1.6 KiB against 0.75), and inline it made every
                    // connection's task as large, the many HTTP/1.1 ones (each
                    // a listen stream, perhaps) too. A replica has few HTTP/2
                    // connections, each carrying many streams.
                    let mut connection = Box::pin(builders.http2.serve_connection(io, service));
                    let idle = async move {
                        activity.idle_for(config.header_read_timeout).await;
                        tracing::trace!(%peer, "closing an idle HTTP/2 connection");
                    };
                    until_finished(connection.as_mut(), &stop, idle).await
                }
                None => {
                    // Its own timer: the `Sleep` of the head deadline, kept
                    // from one head to the next (see `head_timer`). The
                    // builder is a few `Arc`s and settings, copied once, and
                    // gone before the first await, so the task does not keep it.
                    let connection = {
                        let mut builder = builders.http1.clone();
                        builder.timer(HeadTimer::default());
                        builder.serve_connection(io, TowerToHyperService::new(tower::service_fn(respond)))
                    };
                    tokio::pin!(connection);
                    until_finished(connection, &stop, std::future::pending()).await
                }
            };
            if let Err(error) = result {
                tracing::trace!(%error, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    stop.raise();
    connections.close();
    connections.wait().await;
}

/// Serves `connection` to its end. Once the server stops, or `idle` ends
/// (an HTTP/2 connection without streams), it is asked to finish what it
/// has in flight, and served until it has.
async fn until_finished<C>(
    mut connection: Pin<&mut C>,
    stop: &Stop,
    idle: impl Future<Output = ()>,
) -> Result<(), C::Error>
where
    C: GracefulConnection,
{
    let finish = async {
        tokio::select! {
            biased;
            () = stop.raised() => {}
            () = idle => {}
        }
    };
    // The connection first: it is what woke the task, nearly always.
    tokio::select! {
        biased;
        result = connection.as_mut() => return result,
        () = finish => {}
    }
    connection.as_mut().graceful_shutdown();
    connection.await
}

/// The signal for every connection to finish. A connection's task is woken
/// for each read and write, and polling `CancellationToken::cancelled()`
/// takes the token's mutex twice each time (about 300 instructions a
/// `tools/call`, callgrind): so a task leaves its waker with the token only
/// when it has none there or its waker changed, and otherwise reads a flag.
#[derive(Clone, Default)]
struct Stop {
    token: CancellationToken,
    raised: Arc<AtomicBool>,
}

impl Stop {
    fn raise(&self) {
        self.raised.store(true, Ordering::SeqCst);
        self.token.cancel();
    }

    /// Resolves once [`raise`](Self::raise) is called.
    async fn raised(&self) {
        let cancelled = self.token.cancelled();
        tokio::pin!(cancelled);
        let mut registered: Option<Waker> = None;
        std::future::poll_fn(|cx| {
            // Set before the token wakes anyone.
            if self.raised.load(Ordering::SeqCst) {
                return Poll::Ready(());
            }
            if registered.as_ref().is_some_and(|waker| waker.will_wake(cx.waker())) {
                return Poll::Pending;
            }
            registered = Some(cx.waker().clone());
            cancelled.as_mut().poll(cx)
        })
        .await;
    }
}

/// HTTP/1.1 and HTTP/2 settings of every connection. (An HTTP/1.1
/// connection is given its own timer when it starts.) hyper's own builders,
/// not hyper-util's `auto` one: the first bytes were read already, and a
/// connection of `auto`'s is an enum as large as its HTTP/2 variant, and
/// wraps the socket once more to replay bytes it did not read.
struct Builders {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
}

impl Builders {
    fn new(config: &Config) -> Self {
        let mut http1 = http1::Builder::new();
        // Also between requests: an idle keep-alive connection is closed after it.
        http1.timer(TokioTimer::new()).header_read_timeout(config.header_read_timeout);
        // A peer that stops answering pings is gone: close it, and the
        // listen streams it held, after the keep-alive timeout.
        let mut http2 = http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .max_concurrent_streams(config.h2_max_concurrent_streams)
            .keep_alive_interval(Some(config.h2_keep_alive_interval))
            .keep_alive_timeout(config.h2_keep_alive_timeout);
        Self { http1, http2 }
    }
}

/// A refused or reset connection is the client's business; anything else
/// (most often a full file table, EMFILE) is logged and waited out for a
/// second, as hyper's own server did, instead of spinning on accept.
async fn wait_after_accept_error(error: &std::io::Error) {
    use std::io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(error.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset) {
        return;
    }
    tracing::error!(%error, "accept failed; retrying in one second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
