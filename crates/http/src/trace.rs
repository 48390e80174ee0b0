//! The HTTP server span and `http.server.request.duration` of every MCP
//! request, through tower-http's `TraceLayer`: the span wraps the guard, the
//! token check and the handler; its parent comes from W3C `traceparent` /
//! `tracestate` headers when the client sent them. The MCP span of the
//! message (core) is its child unless `_meta` names another parent.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response, Version};
use switchyard_telemetry::{FixedAttributes, RouteDurations};
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::trace::{MakeSpan, OnResponse, TraceLayer};
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

pub(crate) type Layer = TraceLayer<SharedClassifier<ServerErrorsAsFailures>, HttpSpans, (), HttpSpans, (), (), ()>;

/// The layer for the MCP route at `route`.
pub(crate) fn layer(route: &str) -> Layer {
    let route_name: Arc<str> = Arc::from(route);
    let spans = HttpSpans {
        route: Arc::clone(&route_name),
        post_name: Arc::from(format!("POST {route}")),
        post_attributes: VERSIONS.iter().map(|version| attributes("POST", route, version)).collect(),
        durations: Arc::new(RouteDurations::new(route_name)),
    };
    TraceLayer::new_for_http()
        .make_span_with(spans.clone())
        .on_request(())
        .on_response(spans)
        .on_body_chunk(())
        .on_eos(())
        .on_failure(())
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

impl MakeSpan<Body> for HttpSpans {
    fn make_span(&mut self, request: &Request<Body>) -> Span {
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

impl OnResponse<Body> for HttpSpans {
    fn on_response(self, response: &Response<Body>, latency: Duration, span: &Span) {
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
