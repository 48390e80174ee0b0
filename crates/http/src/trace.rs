//! The HTTP server span and `http.server.request.duration` of every MCP
//! request: the span wraps the guard, the token check and the handler; its
//! parent comes from W3C `traceparent` / `tracestate` headers when the
//! client sent them. The MCP span of the message (core) is its child unless
//! `_meta` names another parent.
//!
//! A layer of our own rather than tower-http's `TraceLayer`, which wraps
//! every response body to time its chunks and its end (three clock reads a
//! request, and the wrapper boxed again by axum) for callbacks we do not
//! have. Here a body is wrapped only to keep the span open while it streams
//! (an SSE answer lasts as long as its body), and only when there is a span:
//! untraced (no collector), there is none. A span sampled out is kept too,
//! as its trace may yet be sampled once its parent is known.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, Response, Version};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use switchyard_telemetry::{FixedAttributes, RouteDurations};
use tower::Service;
use tracing::Span;

/// The HTTP versions a span tells apart, in the order of `version_index`.
const VERSIONS: [&str; 6] = ["0.9", "1.0", "1.1", "2", "3", "_OTHER"];

/// Makes the span and records the response, for one route.
#[derive(Debug, Clone)]
pub(crate) struct HttpSpans {
    /// The route template (the endpoint path), never the raw path.
    route: Arc<str>,
    /// The span's name for a POST, the route's one method, made once.
    post_name: Arc<str>,
    /// A POST span's attributes (method, route, scheme, protocol version),
    /// by HTTP version: the same for every request, so encoded once.
    post_attributes: Arc<[FixedAttributes]>,
    /// The route's `http.server.request.duration`, bound where it can be.
    durations: Arc<RouteDurations>,
}

/// The layer for the MCP route at `route`.
pub(crate) fn layer(route: &str) -> Layer {
    let route_name: Arc<str> = Arc::from(route);
    let spans = HttpSpans {
        route: Arc::clone(&route_name),
        post_name: Arc::from(format!("POST {route}")),
        post_attributes: VERSIONS.iter().map(|version| attributes("POST", route, version)).collect(),
        durations: Arc::new(RouteDurations::new(route_name)),
    };
    Layer { spans: Arc::new(spans) }
}

/// Puts every request of the service it wraps in its HTTP span.
#[derive(Clone)]
pub(crate) struct Layer {
    spans: Arc<HttpSpans>,
}

impl<S> tower::Layer<S> for Layer {
    type Service = Traced<S>;

    fn layer(&self, inner: S) -> Traced<S> {
        Traced { inner, spans: Arc::clone(&self.spans) }
    }
}

/// A service whose requests run in their HTTP span.
#[derive(Clone)]
pub(crate) struct Traced<S> {
    inner: S,
    spans: Arc<HttpSpans>,
}

impl<S> Service<Request<Body>> for Traced<S>
where
    S: Service<Request<Body>, Response = Response<Body>>,
    S::Future: Unpin,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = InSpan<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let started = Instant::now();
        let span = self.spans.make_span(&request);
        let response = span.in_scope(|| self.inner.call(request));
        InSpan { response, span, started, spans: Arc::clone(&self.spans) }
    }
}

/// A response on its way, polled in its span; records the span's status and
/// the request's duration when the head is ready.
pub(crate) struct InSpan<F> {
    response: F,
    span: Span,
    started: Instant,
    spans: Arc<HttpSpans>,
}

impl<F, E> Future for InSpan<F>
where
    F: Future<Output = Result<Response<Body>, E>> + Unpin,
{
    type Output = Result<Response<Body>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let result = {
            let _entered = this.span.enter();
            ready!(Pin::new(&mut this.response).poll(cx))
        };
        Poll::Ready(result.map(|response| {
            this.spans.on_response(&response, this.started.elapsed(), &this.span);
            if this.span.is_disabled() {
                return response;
            }
            // The span lasts as long as the answer: an SSE body streams on.
            let span = this.span.clone();
            response.map(|body| Body::new(BodyInSpan { body, span }))
        }))
    }
}

/// A response body polled in its request's span, which it keeps open.
struct BodyInSpan {
    body: Body,
    span: Span,
}

impl HttpBody for BodyInSpan {
    type Data = <Body as HttpBody>::Data;
    type Error = <Body as HttpBody>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        Pin::new(&mut this.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// The span's attributes known from the request line.
fn attributes(method: &str, route: &str, version: &str) -> FixedAttributes {
    FixedAttributes::new([
        ("http.request.method", method),
        ("http.route", route),
        ("url.scheme", "http"),
        ("network.protocol.version", version),
    ])
}

impl HttpSpans {
    fn make_span(&self, request: &Request<Body>) -> Span {
        // The name and attributes are written into the span in one piece
        // (and the status at the end, by `annotate`): each field given
        // through `tracing` is a trip through the subscriber.
        let span = tracing::info_span!("http", otel.kind = "server");
        let version = version_index(request.version());
        if request.method() == axum::http::Method::POST {
            self.post_attributes[version].add_named(&span, &[&self.post_name]);
        } else if !span.is_disabled() {
            // Answered 405; rare enough to be encoded each time.
            let method = request.method().as_str();
            attributes(method, &self.route, VERSIONS[version]).add_named(&span, &[method, " ", &self.route]);
        }
        switchyard_telemetry::context::parent_from_headers(&span, request.headers());
        span
    }

    fn on_response(&self, response: &Response<Body>, latency: Duration, span: &Span) {
        let status = response.status().as_u16();
        switchyard_telemetry::annotate(span, |annotations| {
            annotations.int("http.response.status_code", i64::from(status));
            if response.status().is_server_error() {
                annotations.failed();
            }
        });
        // The route takes only POST; every other method is answered 405 and
        // a POST never is, so the status tells the method without keeping it.
        let method = if status == 405 { "_OTHER" } else { "POST" };
        self.durations.record(method, status, latency);
    }
}

/// Where `version` is in [`VERSIONS`] (`network.protocol.version` as the
/// semantic conventions write it).
fn version_index(version: Version) -> usize {
    match version {
        Version::HTTP_09 => 0,
        Version::HTTP_10 => 1,
        Version::HTTP_11 => 2,
        Version::HTTP_2 => 3,
        Version::HTTP_3 => 4,
        _ => 5,
    }
}
