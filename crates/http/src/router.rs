//! The router and its configuration.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, get, on};
use switchyard_core::Server;
use tokio_util::sync::CancellationToken;

use std::convert::Infallible;

use axum::extract::Request;
use axum::routing::Route;

use crate::limit::RateLimiter;
use crate::{endpoint, guard};

/// HTTP settings; composed into the binary's `Config`.
#[derive(Debug, Clone)]
pub struct Config {
    /// The MCP endpoint path. Default `/mcp`.
    pub endpoint: String,
    /// Host names accepted in `Host` (without port); `*` accepts any.
    /// Default: the loopback names.
    pub allowed_hosts: Vec<String>,
    /// Origins (host names, any scheme and port) accepted in `Origin`; `*`
    /// accepts any. Requests without `Origin` (non-browser clients) pass.
    /// Default: the loopback names.
    pub allowed_origins: Vec<String>,
    /// Largest request body, in bytes. Default 4 MiB.
    pub max_body_bytes: usize,
    /// Largest answer of a legacy client to a request we sent it (it may
    /// cross the Redis bus, whose subscribers Redis disconnects past their
    /// output buffer, 8 MiB by default). Default 256 KiB.
    pub max_answer_bytes: usize,
    /// Interval of SSE keep-alive comments on listen streams. Default 15 s.
    pub keep_alive: Duration,
    /// Connections the kernel queues before they are accepted. Default 4096.
    pub listen_backlog: u32,
    /// Streams one HTTP/2 connection may have open at once (a load balancer
    /// carrying many clients' listen streams opens more connections when it
    /// reaches this). Default 1000.
    pub h2_max_concurrent_streams: u32,
    /// How long a client may take to send a request head: from connecting
    /// to its first request's head, and between requests (an idle
    /// keep-alive HTTP/1.1 connection, or an HTTP/2 connection without
    /// streams, is closed after it). Default 30 s.
    pub header_read_timeout: Duration,
    /// How long a client may take to send a request body, once its head is
    /// in: 408 after it. Default 30 s.
    pub body_read_timeout: Duration,
    /// How often an HTTP/2 peer is pinged. Default 30 s.
    pub h2_keep_alive_interval: Duration,
    /// How long an HTTP/2 peer may take to answer a ping before its
    /// connection (and every stream on it) is closed. Default 20 s.
    pub h2_keep_alive_timeout: Duration,
    /// Proxies (load balancers, ingress controllers) whose `X-Forwarded-For`
    /// is believed, so anonymous callers behind them are counted by their
    /// own address, not the proxy's. Default none: the header is ignored.
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

impl Default for Config {
    fn default() -> Self {
        let loopback = ["localhost", "127.0.0.1", "[::1]"].map(String::from).to_vec();
        Self {
            endpoint: "/mcp".into(),
            allowed_hosts: loopback.clone(),
            allowed_origins: loopback,
            max_body_bytes: 4 * 1024 * 1024,
            max_answer_bytes: 256 * 1024,
            keep_alive: Duration::from_secs(15),
            listen_backlog: 4096,
            h2_max_concurrent_streams: 1000,
            header_read_timeout: Duration::from_secs(30),
            body_read_timeout: Duration::from_secs(30),
            h2_keep_alive_interval: Duration::from_secs(30),
            h2_keep_alive_timeout: Duration::from_secs(20),
            trusted_proxies: Vec::new(),
        }
    }
}

/// Liveness and readiness, flipped by the binary on shutdown, and the end
/// of the drain.
#[derive(Debug, Clone, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
    cut_off: CancellationToken,
}

impl Health {
    /// Marks the server ready (or not) to take traffic.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// The grace period is over: every request still running is answered
    /// at once with a JSON-RPC error saying so (its work is dropped), so a
    /// client gets an answer it can retry on elsewhere rather than a closed
    /// connection.
    pub fn cut_off_requests(&self) {
        self.cut_off.cancel();
    }

    /// Resolves when [`cut_off_requests`](Self::cut_off_requests) is called.
    pub(crate) async fn requests_cut_off(&self) {
        self.cut_off.cancelled().await;
    }
}

/// Shared state of the handlers.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) server: Arc<Server>,
    pub(crate) config: Arc<Config>,
    pub(crate) limiter: Option<Arc<dyn RateLimiter>>,
    /// Behind an `Arc`: the state is cloned per request, and a cancellation
    /// token's clone takes a lock.
    pub(crate) health: Arc<Health>,
}

/// A tower layer that authenticates MCP requests (the `auth` crate's
/// `RequireBearerLayer`, boxed so this crate does not know it): it answers
/// 401/403 itself, or puts a `core::Caller` into the request's extensions.
pub type AuthLayer = tower::util::BoxCloneSyncServiceLayer<Route, Request, Response, Infallible>;

/// The application: the MCP endpoint (POST only), `/healthz` and `/readyz`.
/// With a `limiter`, every MCP request is counted before its body is read;
/// with `auth`, only authenticated requests reach the endpoint.
pub fn router(
    server: Arc<Server>,
    config: Config,
    health: Health,
    limiter: Option<Arc<dyn RateLimiter>>,
    auth: Option<AuthLayer>,
) -> Router {
    let config = Arc::new(config);
    let state = AppState { server, config: Arc::clone(&config), limiter, health: Arc::new(health.clone()) };
    let mut mcp = Router::new()
        .route(
            &config.endpoint,
            on(MethodFilter::POST, endpoint::post)
                // No sessions and no standing GET stream in 2026-07-28 (SHOULD 405).
                .fallback(method_not_allowed),
        )
        .with_state(state);
    if let Some(auth) = auth {
        // DIGEST §8.6: Origin and Host (step 2) before the token (step 3), so
        // the guard also runs as a layer outside auth. The endpoint's own
        // check stays for the unauthenticated path, where a layer would cost
        // a boxed future per request.
        mcp = mcp.route_layer(auth).route_layer(guard::GuardLayer::new(Arc::clone(&config)));
    }
    // Outermost: the HTTP span covers the guard and the token check too.
    mcp = mcp.route_layer(crate::trace::layer(&config.endpoint));
    let ready = health.clone();
    mcp.route("/healthz", get(|| async { "ok" })).route(
        "/readyz",
        get(move || {
            let ready = ready.is_ready();
            async move {
                if ready { (StatusCode::OK, "ready") } else { (StatusCode::SERVICE_UNAVAILABLE, "not ready") }
            }
        }),
    )
}

async fn method_not_allowed(method: Method) -> Response {
    let mut response =
        (StatusCode::METHOD_NOT_ALLOWED, format!("{method} is not supported; POST JSON-RPC messages")).into_response();
    response.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}
