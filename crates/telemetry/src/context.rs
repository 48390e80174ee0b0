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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::HeaderName;

use crate::spans::{self, SpanContext};

/// The `_meta` key (and header) of the parent span.
pub const TRACEPARENT: &str = "traceparent";
/// The `_meta` key (and header) of vendor trace state.
pub const TRACESTATE: &str = "tracestate";

/// The longest `tracestate` kept: W3C asks to propagate at least 512 bytes,
/// and a longer one is dropped whole rather than cut.
const MAX_TRACESTATE: usize = 512;

/// Whether a client's trace context is joined (set once by `init`).
static FOLLOW_CLIENTS: AtomicBool = AtomicBool::new(false);

/// Joins clients' traces from now on (`true`), or only links to them.
pub fn follow_clients(follow: bool) {
    FOLLOW_CLIENTS.store(follow, Ordering::Relaxed);
}

/// `00-{trace id}-{span id}-{flags}`, as W3C Trace Context level 1 reads it:
/// lowercase hex, ids not all zero, version `ff` invalid, and a later
/// version's extra fields (after a `-`) ignored.
fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<SpanContext> {
    let traceparent = traceparent.trim();
    let head = traceparent.get(..55)?;
    let rest = &traceparent[55..];
    let mut parts = head.split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let hex =
        |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !(hex(version, 2) && hex(trace, 32) && hex(span, 16) && hex(flags, 2)) || version == "ff" {
        return None;
    }
    if !(rest.is_empty() || (version != "00" && rest.starts_with('-'))) {
        return None;
    }
    let trace_id = u128::from_str_radix(trace, 16).ok().filter(|id| *id != 0)?;
    let span_id = u64::from_str_radix(span, 16).ok().filter(|id| *id != 0)?;
    let sampled = u8::from_str_radix(flags, 16).ok()? & 1 == 1;
    let trace_state = tracestate
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE && s.bytes().all(|b| (0x20..0x7f).contains(&b)))
        .map(Arc::from);
    Some(SpanContext { trace_id, span_id, sampled, trace_state })
}

/// Makes `remote` the parent of `span` when clients are trusted with
/// traces; otherwise links it. Returns whether it became the parent.
fn adopt(span: &tracing::Span, remote: SpanContext) -> bool {
    let follow = FOLLOW_CLIENTS.load(Ordering::Relaxed);
    spans::with_record(span, |record| {
        if follow {
            record.adopt(remote);
        } else {
            record.link(remote);
        }
    })
    .is_some()
        && follow
}

/// Makes `span` a child of the remote span named by `traceparent` and
/// `tracestate` headers, if they are present and well formed and clients
/// are trusted with traces (else links it). Returns whether it did.
pub fn parent_from_headers(span: &tracing::Span, headers: &http::HeaderMap) -> bool {
    // Header names made at compile time: a `&str` key is parsed at every lookup.
    const TRACEPARENT_HEADER: HeaderName = HeaderName::from_static(TRACEPARENT);
    const TRACESTATE_HEADER: HeaderName = HeaderName::from_static(TRACESTATE);
    // Untraced (no collector), no span is made: nothing to adopt a parent.
    if span.is_disabled() {
        return false;
    }
    let Some(traceparent) = headers.get(TRACEPARENT_HEADER).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let tracestate = headers.get(TRACESTATE_HEADER).and_then(|v| v.to_str().ok());
    match parse(traceparent, tracestate) {
        Some(remote) => adopt(span, remote),
        None => false,
    }
}

/// Makes `span` a child of the span named in a request's `_meta` (when
/// clients are trusted with traces; else links it), and links it to the
/// span it would otherwise have had as parent (the HTTP request that
/// carried it), so neither trace loses the other. Returns whether it did.
pub fn parent_from_meta(span: &tracing::Span, traceparent: &str, tracestate: Option<&str>) -> bool {
    let Some(remote) = parse(traceparent, tracestate) else {
        return false;
    };
    let transport = spans::with_record(&tracing::Span::current(), |record| record.context.clone());
    if !adopt(span, remote) {
        return false;
    }
    if let Some(transport) = transport {
        spans::with_record(span, |record| record.link(transport));
    }
    true
}

/// The current span as `(traceparent, tracestate)` for an outgoing request,
/// if tracing is on and a span of ours is current.
pub fn current() -> Option<(String, Option<String>)> {
    let context = spans::with_record(&tracing::Span::current(), |record| record.context.clone())?;
    let traceparent =
        format!("00-{:032x}-{:016x}-{:02x}", context.trace_id, context.span_id, u8::from(context.sampled));
    Some((traceparent, context.trace_state.map(|s| s.to_string())))
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn traceparent_is_read_as_w3c_trace_context_says() {
        let context =
            parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(context.trace_id, 0x4bf92f3577b34da6a3ce929d0e0e4736);
        assert_eq!(context.span_id, 0x00f067aa0ba902b7);
        assert!(context.sampled);
        assert_eq!(context.trace_state.as_deref(), Some("congo=t61rcWkgMzE"));
        assert!(!parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", None).unwrap().sampled);
        // A later version may carry more fields after a dash.
        assert!(parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", None).is_some());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert!(parse(bad, None).is_none(), "{bad:?} was accepted");
        }
        let long = "a=".to_owned() + &"b".repeat(600);
        let context = parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", Some(&long)).unwrap();
        assert_eq!(context.trace_state, None, "an overlong tracestate is dropped");
    }
}
