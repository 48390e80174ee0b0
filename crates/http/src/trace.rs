//! The HTTP server span and `http.server.request.duration` of every MCP
//! request, through tower-http's `TraceLayer`: the span wraps the guard, the
//! token check and the handler; its parent comes from W3C `traceparent` /
//! `tracestate` headers when the client sent them. The MCP span of the
//! message (core) is its child unless `_meta` names another parent.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response};
use tower_http::classify::{ServerErrorsAsFailures, SharedClassifier};
use tower_http::trace::{MakeSpan, OnResponse, TraceLayer};
use tracing::Span;
use tracing::field::Empty;

/// Makes the span and records the response, for one route.
#[derive(Debug, Clone)]
pub(crate) struct HttpSpans {
    /// The route template (the endpoint path), never the raw path.
    route: Arc<str>,
    /// The span's name for a POST, the route's one method, made once.
    post_name: Arc<str>,
}

pub(crate) type Layer = TraceLayer<SharedClassifier<ServerErrorsAsFailures>, HttpSpans, (), HttpSpans, (), (), ()>;

/// The layer for the MCP route at `route`.
pub(crate) fn layer(route: &str) -> Layer {
    let spans = HttpSpans { route: Arc::from(route), post_name: Arc::from(format!("POST {route}")) };
    TraceLayer::new_for_http()
        .make_span_with(spans.clone())
        .on_request(())
        .on_response(spans)
        .on_body_chunk(())
        .on_eos(())
        .on_failure(())
}

impl MakeSpan<Body> for HttpSpans {
    fn make_span(&mut self, request: &Request<Body>) -> Span {
        let other_name;
        let name = if request.method() == axum::http::Method::POST {
            &*self.post_name
        } else {
            other_name = format!("{} {}", request.method(), self.route);
            &other_name
        };
        let span = tracing::info_span!(
            "http",
            otel.name = name,
            otel.kind = "server",
            otel.status_code = Empty,
            http.request.method = request.method().as_str(),
            http.route = &*self.route,
            url.scheme = "http",
            network.protocol.version = protocol_version(request.version()),
            http.response.status_code = Empty,
        );
        switchyard_telemetry::context::parent_from_headers(&span, request.headers());
        span
    }
}

/// `network.protocol.version` as the semantic conventions write it.
fn protocol_version(version: axum::http::Version) -> &'static str {
    match version {
        axum::http::Version::HTTP_09 => "0.9",
        axum::http::Version::HTTP_10 => "1.0",
        axum::http::Version::HTTP_11 => "1.1",
        axum::http::Version::HTTP_2 => "2",
        axum::http::Version::HTTP_3 => "3",
        _ => "_OTHER",
    }
}

impl OnResponse<Body> for HttpSpans {
    fn on_response(self, response: &Response<Body>, latency: Duration, span: &Span) {
        let status = response.status().as_u16();
        span.record("http.response.status_code", status);
        if response.status().is_server_error() {
            span.record("otel.status_code", "ERROR");
        }
        // The route takes only POST; every other method is answered 405 and
        // a POST never is, so the status tells the method without keeping it.
        let method = if status == 405 { "_OTHER" } else { "POST" };
        switchyard_telemetry::metrics().http_request(method, &self.route, status, latency);
    }
}
