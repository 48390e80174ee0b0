//! W3C trace context in and out: from HTTP headers, from `traceparent` and
//! `tracestate` in a request's `_meta` (how MCP carries it on any
//! transport), and into the requests we send upstream.
//!
//! Always the W3C Trace Context format, which is what MCP specifies; a
//! malformed value is ignored (the span starts a new trace), never an error.
//!
//! A client's context is joined only when the operator trusts clients to
//! name traces ([`follow_clients`], `telemetry.follow_client_traces`):
//! otherwise its `sampled` flag would let anyone have every request traced
//! and exported, and its trace id would pick the ratio sampler's verdict.
//! An untrusted context becomes a link of a new trace that our own sampler
//! decides, so the two traces can still be found from each other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::propagation::{Extractor, TextMapPropagator as _};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The `_meta` key (and header) of the parent span.
pub const TRACEPARENT: &str = "traceparent";
/// The `_meta` key (and header) of vendor trace state.
pub const TRACESTATE: &str = "tracestate";

struct Headers<'a>(&'a http::HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

struct Pair<'a> {
    traceparent: &'a str,
    tracestate: Option<&'a str>,
}

impl Extractor for Pair<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => Some(self.traceparent),
            TRACESTATE => self.tracestate,
            _ => None,
        }
    }
    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE]
    }
}

/// Whether a client's trace context is joined (set once by `init`).
static FOLLOW_CLIENTS: AtomicBool = AtomicBool::new(false);

/// Joins clients' traces from now on (`true`), or only links to them.
pub fn follow_clients(follow: bool) {
    FOLLOW_CLIENTS.store(follow, Ordering::Relaxed);
}

/// Makes `cx` the parent of `span` when clients are trusted with traces;
/// otherwise links it. Returns whether `cx` became the parent.
fn adopt(span: &tracing::Span, cx: opentelemetry::Context) -> bool {
    if FOLLOW_CLIENTS.load(Ordering::Relaxed) {
        span.set_parent(cx).is_ok()
    } else {
        span.add_link(cx.span().span_context().clone());
        false
    }
}

fn valid(cx: opentelemetry::Context) -> Option<opentelemetry::Context> {
    cx.span().span_context().is_valid().then_some(cx)
}

/// Makes `span` a child of the remote span named by `traceparent` and
/// `tracestate` headers, if they are present and well formed and clients
/// are trusted with traces (else links it). Returns whether it did.
pub fn parent_from_headers(span: &tracing::Span, headers: &http::HeaderMap) -> bool {
    if !headers.contains_key(TRACEPARENT) {
        return false;
    }
    match valid(TraceContextPropagator::new().extract(&Headers(headers))) {
        Some(cx) => adopt(span, cx),
        None => false,
    }
}

/// Makes `span` a child of the span named in a request's `_meta` (when
/// clients are trusted with traces; else links it), and links it to the
/// span it would otherwise have had as parent (the HTTP request that
/// carried it), so neither trace loses the other. Returns whether it did.
pub fn parent_from_meta(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) -> bool {
    let Some(cx) = valid(TraceContextPropagator::new().extract(&Pair { traceparent, tracestate })) else {
        return false;
    };
    let transport = tracing::Span::current().context().span().span_context().clone();
    if !adopt(span, cx) {
        return false;
    }
    if transport.is_valid() {
        span.add_link(transport);
    }
    true
}

/// The current span as `(traceparent, tracestate)` for an outgoing request,
/// if tracing is on and a span is recording.
pub fn current() -> Option<(String, Option<String>)> {
    let cx = tracing::Span::current().context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    let traceparent = carrier.remove(TRACEPARENT)?;
    Some((traceparent, carrier.remove(TRACESTATE).filter(|s| !s.is_empty())))
}
