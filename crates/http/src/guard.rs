//! DNS-rebinding protection: `Host` and `Origin` must name an allowed host
//! (MCP Streamable HTTP, "Security"). A browser tricked into calling a local
//! server sends the attacker's name in both, so both are checked.

use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::Request;
use axum::http::uri::Authority;
use axum::http::{HeaderMap, StatusCode, Uri, Version, header};
use axum::response::Response;
use futures::future::{Either, Ready, ready};

use crate::reply;
use crate::router::Config;

/// The guard as a tower layer, for routes that do not check it themselves
/// (the MCP endpoint behind the auth layer, the admin API, `/metrics`): a
/// refusal is answered at once, anything else goes on unboxed.
#[derive(Clone)]
pub struct GuardLayer {
    config: Arc<Config>,
}

impl GuardLayer {
    /// Checks requests against `config`'s allowed hosts and origins.
    pub fn new(config: Arc<Config>) -> Self {
        Self { config }
    }
}

impl<S> tower::Layer<S> for GuardLayer {
    type Service = Guard<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Guard { config: Arc::clone(&self.config), inner }
    }
}

/// The service [`GuardLayer`] wraps around `S`.
#[derive(Clone)]
pub struct Guard<S> {
    config: Arc<Config>,
    inner: S,
}

impl<S> tower::Service<Request> for Guard<S>
where
    S: tower::Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<Ready<Result<Response, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        match refusal(&self.config, request.version(), request.uri(), request.headers()) {
            Some(refusal) => Either::Left(ready(Ok(refusal))),
            None => Either::Right(self.inner.call(request)),
        }
    }
}

/// The refusal of a request whose `Host` or `Origin` is not allowed. It is the first
/// thing the endpoint does: a rebinding attack must not reach any MCP
/// processing. (Without authorization the endpoint calls it itself, which
/// costs nothing; [`GuardLayer`] runs it where another layer comes first.)
///
/// The host is named by `Host` and, on HTTP/2, by `:authority`, which hyper
/// puts in the URI (so does an HTTP/1.1 request in absolute form); every
/// name the request gives must be allowed, and HTTP/1.1 and later must give
/// one.
pub fn refusal(config: &Config, version: Version, uri: &Uri, headers: &HeaderMap) -> Option<Response> {
    // An unreadable `Host` counts as a name, and no allowed one.
    let host = headers.get(header::HOST).map(|h| h.to_str().unwrap_or_default());
    let authority = uri.authority().map(Authority::host);
    if host.is_none() && authority.is_none() {
        if version >= Version::HTTP_11 {
            return Some(reply::plain(StatusCode::BAD_REQUEST, "Host header required"));
        }
    } else if !host.map(host_name).into_iter().chain(authority).all(|name| allowed(&config.allowed_hosts, name)) {
        return Some(reply::forbidden("Host not allowed"));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let name = origin.to_str().ok().and_then(origin_host);
        if !name.is_some_and(|n| allowed(&config.allowed_origins, n)) {
            return Some(reply::forbidden("Origin not allowed"));
        }
    }
    None
}

fn allowed(list: &[String], name: &str) -> bool {
    list.iter().any(|a| a == "*" || a.eq_ignore_ascii_case(name))
}

/// `example.com:8080` → `example.com`; `[::1]:80` → `[::1]`.
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        host.find(']').map_or(host, |end| &host[..=end])
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    }
}

/// `https://example.com:8080` → `example.com`. `null` and malformed origins → `None`.
fn origin_host(origin: &str) -> Option<&str> {
    let (_, rest) = origin.split_once("://")?;
    let authority = rest.split('/').next()?;
    let name = host_name(authority);
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_host_names() {
        assert_eq!(host_name("localhost:3000"), "localhost");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
        assert_eq!(host_name("[::1]:8080"), "[::1]");
        assert_eq!(origin_host("http://localhost:5173"), Some("localhost"));
        assert_eq!(origin_host("https://evil.example"), Some("evil.example"));
        assert_eq!(origin_host("null"), None);
    }

    fn refused(version: Version, uri: &str, host: Option<&str>) -> Option<StatusCode> {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, host.parse().expect("a header value"));
        }
        let uri: Uri = uri.parse().expect("a URI");
        refusal(&Config::default(), version, &uri, &headers).map(|r| r.status())
    }

    #[test]
    fn the_host_is_read_from_host_and_from_the_authority() {
        // HTTP/1.1: `Host`, required.
        assert_eq!(refused(Version::HTTP_11, "/mcp", Some("localhost:8080")), None);
        assert_eq!(refused(Version::HTTP_11, "/mcp", Some("evil.example")), Some(StatusCode::FORBIDDEN));
        assert_eq!(refused(Version::HTTP_11, "/mcp", None), Some(StatusCode::BAD_REQUEST));
        assert_eq!(refused(Version::HTTP_10, "/mcp", None), None);
        // HTTP/2: `:authority`, with or without a `Host` beside it; both must be allowed.
        assert_eq!(refused(Version::HTTP_2, "http://127.0.0.1:8080/mcp", None), None);
        assert_eq!(refused(Version::HTTP_2, "http://[::1]:8080/mcp", None), None);
        assert_eq!(refused(Version::HTTP_2, "http://evil.example/mcp", None), Some(StatusCode::FORBIDDEN));
        assert_eq!(refused(Version::HTTP_2, "http://user@evil.example/mcp", None), Some(StatusCode::FORBIDDEN));
        assert_eq!(refused(Version::HTTP_2, "http://evil.example/mcp", Some("localhost")), Some(StatusCode::FORBIDDEN));
        assert_eq!(refused(Version::HTTP_2, "http://localhost/mcp", Some("evil.example")), Some(StatusCode::FORBIDDEN));
        assert_eq!(refused(Version::HTTP_2, "/mcp", None), Some(StatusCode::BAD_REQUEST));
    }

    #[tokio::test]
    async fn the_layer_refuses_before_the_route_runs_and_passes_the_rest() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tower::ServiceExt as _;
        let reached = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&reached);
        let app = axum::Router::new()
            .route(
                "/admin",
                axum::routing::get(move || {
                    counter.fetch_add(1, Ordering::SeqCst);
                    async { "in" }
                }),
            )
            .layer(GuardLayer::new(Arc::new(Config::default())));
        let request = |host: &str, origin: Option<&str>| {
            let mut request = Request::get("/admin").header(header::HOST, host);
            if let Some(origin) = origin {
                request = request.header(header::ORIGIN, origin);
            }
            request.body(axum::body::Body::empty()).expect("a request")
        };
        let status = |request: Request| {
            let app = app.clone();
            async move { app.oneshot(request).await.expect("infallible").status() }
        };
        assert_eq!(status(request("evil.example", None)).await, StatusCode::FORBIDDEN);
        assert_eq!(status(request("localhost", Some("https://evil.example"))).await, StatusCode::FORBIDDEN);
        assert_eq!(reached.load(Ordering::SeqCst), 0, "a refused request reaches nothing");
        assert_eq!(status(request("localhost:8080", Some("http://localhost:5173"))).await, StatusCode::OK);
        assert_eq!(reached.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn wildcard_and_case() {
        let list = vec!["LocalHost".to_owned()];
        assert!(allowed(&list, "localhost"));
        assert!(!allowed(&list, "evil.example"));
        assert!(allowed(&["*".to_owned()], "anything"));
    }
}
