//! The layer's records, and what the encoder writes, read back with the
//! official OTLP messages.

use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message as _;
use tracing::field::Empty;
use tracing_subscriber::layer::SubscriberExt as _;

use super::otlp::Envelope;
use super::{Exporter, Sampler, SpanContext, SpanLayer, with_record};

/// Runs `body` with a subscriber whose span layer samples `ratio`, and
/// returns the export request of the spans it finished, as a collector
/// decodes it, and how many spans the batch counted.
fn traced(ratio: f64, body: impl FnOnce()) -> (ExportTraceServiceRequest, usize) {
    let exporter = Exporter::unstarted();
    let subscriber =
        tracing_subscriber::registry().with(SpanLayer::new(Sampler::ratio(ratio), false, Arc::clone(&exporter)));
    tracing::subscriber::with_default(subscriber, body);
    exported(&exporter)
}

/// What `exporter` holds, as a collector decodes it, and how many spans the
/// batch counted.
pub(crate) fn exported(exporter: &Exporter) -> (ExportTraceServiceRequest, usize) {
    let batch = exporter.take();
    let body = Envelope::new("unit").wrap(&batch.bytes);
    (ExportTraceServiceRequest::decode(body.as_slice()).expect("a valid ExportTraceServiceRequest"), batch.spans)
}

fn text(value: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        other => panic!("unexpected value {other:?}"),
    }
}

#[test]
fn a_span_tree_is_exported_as_otlp_reads_it() {
    let (request, count) = traced(1.0, || {
        let outer = tracing::info_span!(
            "http",
            otel.name = %format_args!("POST {}", "/mcp"),
            otel.kind = "server",
            otel.status_code = Empty,
            http.response.status_code = Empty,
            url.scheme = "http",
            network.protocol.version = ?http::Version::HTTP_11,
        );
        outer.in_scope(|| {
            let inner = tracing::info_span!(
                "plugin",
                otel.kind = "internal",
                count = -3_i64,
                big = u64::MAX,
                ok = true,
                share = 0.5
            );
            inner.in_scope(|| {});
        });
        outer.record("http.response.status_code", 500_u64);
        // Declared `Empty`, recorded twice: the second value replaces the first.
        outer.record("http.response.status_code", 200_u64);
        outer.record("url.scheme", "https");
        outer.record("otel.status_code", "ERROR");
        outer.record("otel.name", "POST /renamed");
        super::FixedAttributes::new([("http.route", "/mcp"), ("http.request.method", "POST")]).add_named(&outer, &[]);
        super::annotate(&outer, |annotations| annotations.int("http.request.body.size", 42));
    });
    assert_eq!(count, 2);
    assert_eq!(request.resource_spans.len(), 1);
    let resource = request.resource_spans[0].resource.as_ref().unwrap();
    let service = resource.attributes.iter().find(|kv| kv.key == "service.name").unwrap();
    assert_eq!(text(&service.value), "unit");
    let scope_spans = &request.resource_spans[0].scope_spans[0];
    assert_eq!(scope_spans.scope.as_ref().unwrap().name, "switchyard");
    let [inner, outer] = &scope_spans.spans[..] else { panic!("{scope_spans:#?}") };

    assert_eq!(outer.name, "POST /renamed", "a name recorded later wins");
    assert_eq!(outer.kind, 2, "server");
    assert_eq!(outer.trace_id.len(), 16);
    assert_eq!(outer.span_id.len(), 8);
    assert!(outer.parent_span_id.is_empty(), "a root");
    assert_eq!(outer.status.as_ref().unwrap().code, 2, "error");
    assert!(outer.end_time_unix_nano >= outer.start_time_unix_nano && outer.start_time_unix_nano > 0);
    assert_eq!(outer.flags & 1, 1, "sampled");
    let attribute = |span: &opentelemetry_proto::tonic::trace::v1::Span, key: &str| {
        span.attributes.iter().find(|kv| kv.key == key).map(|kv| text(&kv.value))
    };
    assert_eq!(attribute(outer, "http.response.status_code").as_deref(), Some("200"));
    assert_eq!(attribute(outer, "url.scheme").as_deref(), Some("https"), "recorded again, replaced");
    assert_eq!(attribute(outer, "network.protocol.version").as_deref(), Some("HTTP/1.1"));
    assert_eq!(attribute(outer, "otel.name"), None, "special fields are not attributes");
    assert_eq!(attribute(outer, "http.route").as_deref(), Some("/mcp"), "a fixed attribute");
    assert_eq!(attribute(outer, "http.request.method").as_deref(), Some("POST"));
    assert_eq!(attribute(outer, "http.request.body.size").as_deref(), Some("42"), "annotated");
    assert_eq!(outer.attributes.len(), 6, "{outer:#?}");

    assert_eq!(inner.name, "plugin", "the tracing name without otel.name");
    assert_eq!(inner.kind, 1, "internal");
    assert_eq!(inner.trace_id, outer.trace_id);
    assert_eq!(inner.parent_span_id, outer.span_id);
    assert_ne!(inner.span_id, outer.span_id);
    assert!(inner.status.is_none());
    assert_eq!(attribute(inner, "count").as_deref(), Some("-3"));
    assert_eq!(attribute(inner, "big").as_deref(), Some(u64::MAX.to_string().as_str()));
    assert_eq!(attribute(inner, "ok").as_deref(), Some("true"));
    assert_eq!(attribute(inner, "share").as_deref(), Some("0.5"));
}

#[test]
fn a_trace_not_sampled_keeps_its_ids_and_exports_nothing() {
    let (mut seen, mut seen_inside) = (None, None);
    let (request, count) = traced(0.0, || {
        let span = tracing::info_span!("http", otel.name = "POST /mcp");
        assert!(!span.is_disabled(), "the root is made: it carries the ids");
        seen = span.in_scope(crate::context::current);
        span.in_scope(|| {
            let child = tracing::info_span!("child");
            assert!(child.is_disabled(), "no span is made inside a trace not sampled");
            seen_inside = child.in_scope(crate::context::current);
        });
    });
    assert_eq!(count, 0);
    assert!(request.resource_spans[0].scope_spans[0].spans.is_empty(), "{request:#?}");
    let (traceparent, tracestate) = seen.expect("ids to send upstream");
    assert!(traceparent.starts_with("00-") && traceparent.ends_with("-00"), "flagged not sampled: {traceparent}");
    assert_eq!(tracestate, None);
    assert_eq!(seen_inside, Some((traceparent, None)), "inside, the root's ids go upstream");
}

#[test]
fn when_clients_name_traces_a_span_inside_one_not_sampled_is_still_made() {
    let exporter = Exporter::unstarted();
    let subscriber = tracing_subscriber::registry().with(SpanLayer::new(Sampler::ratio(0.0), true, exporter));
    tracing::subscriber::with_default(subscriber, || {
        tracing::info_span!("http").in_scope(|| {
            // Its `_meta` may yet name a sampled parent.
            assert!(!tracing::info_span!("mcp").is_disabled());
        });
    });
}

#[test]
fn the_ratio_sampler_follows_the_trace_id() {
    let half = Sampler::ratio(0.5);
    assert!(half.samples(1 << 1));
    assert!(!half.samples(u64::MAX as u128));
    assert!(Sampler::ratio(1.0).samples(u64::MAX as u128));
    assert!(!Sampler::ratio(0.0).samples(2));
    let sampled =
        (1..=10_000u128).filter(|i| half.samples(i.wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c835))).count();
    assert!((4_500..5_500).contains(&sampled), "{sampled} of 10000");
}

#[test]
fn a_remote_parent_and_links_reach_the_collector() {
    let remote = SpanContext {
        trace_id: 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736,
        span_id: 0x00f0_67aa_0ba9_02b7,
        sampled: true,
        trace_state: Some(Arc::from("congo=t61rcWkgMzE")),
    };
    let linked = SpanContext { trace_id: 7, span_id: 9, sampled: false, trace_state: None };
    let (request, _) = traced(1.0, || {
        let span = tracing::info_span!("mcp");
        with_record(&span, |record| {
            record.adopt(remote.clone());
            record.link(linked.clone());
            record.link(linked.clone());
        })
        .expect("a record");
        span.in_scope(|| {
            let (traceparent, tracestate) = crate::context::current().unwrap();
            assert!(traceparent.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"), "{traceparent}");
            assert_eq!(tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
        });
    });
    let span = &request.resource_spans[0].scope_spans[0].spans[0];
    assert_eq!(span.trace_id, remote.trace_id.to_be_bytes());
    assert_eq!(span.parent_span_id, remote.span_id.to_be_bytes());
    assert_eq!(span.trace_state, "congo=t61rcWkgMzE");
    assert_eq!(span.links.len(), 1, "a repeated link is kept once");
    assert_eq!(span.links[0].trace_id, 7u128.to_be_bytes());
    assert_eq!(span.links[0].span_id, 9u64.to_be_bytes());
    assert_eq!(span.links[0].flags & 1, 0);
}

#[test]
fn a_full_batch_drops_and_counts_rather_than_grows() {
    let exporter = Exporter::unstarted();
    let subscriber =
        tracing_subscriber::registry().with(SpanLayer::new(Sampler::ratio(1.0), false, Arc::clone(&exporter)));
    let mut closed = 0;
    tracing::subscriber::with_default(subscriber, || {
        while exporter.dropped() < 10 {
            tracing::info_span!("request", otel.name = "POST /mcp", http.route = "/mcp").in_scope(|| {});
            closed += 1;
        }
    });
    let batch = exporter.take();
    assert!(batch.bytes.len() <= super::export::CAPACITY);
    assert!(batch.bytes.len() > super::export::CAPACITY - 200, "full: {} bytes", batch.bytes.len());
    assert_eq!(batch.spans + 10, closed);
}

#[test]
fn only_our_spans_at_info_and_above_are_exported() {
    let (request, count) = traced(1.0, || {
        tracing::info_span!(target: "hyper::proto::h1", "read").in_scope(|| {
            tracing::info_span!("ours").in_scope(|| {});
        });
        tracing::debug_span!("ours, too verbose").in_scope(|| {});
        tracing::warn_span!(target: "switchyard_upstream::client", "upstream").in_scope(|| {});
    });
    let names: Vec<_> = request.resource_spans[0].scope_spans[0].spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["ours", "upstream"]);
    assert_eq!(count, 2);
    let ours = &request.resource_spans[0].scope_spans[0].spans[0];
    assert!(ours.parent_span_id.is_empty(), "a dependency's span is nobody's parent");
}

#[test]
fn an_error_logged_inside_a_span_marks_it_failed() {
    let (request, _) = traced(1.0, || {
        tracing::info_span!("failing").in_scope(|| tracing::error!("the plugin failed"));
        super::annotate(&tracing::info_span!("annotated"), |annotations| annotations.failed());
        tracing::info_span!("warned").in_scope(|| tracing::warn!("slow"));
    });
    let spans = &request.resource_spans[0].scope_spans[0].spans;
    let status = |name: &str| spans.iter().find(|s| s.name == name).unwrap().status.as_ref().map(|s| s.code);
    assert_eq!(status("failing"), Some(2), "{spans:#?}");
    assert_eq!(status("warned"), None);
    assert_eq!(status("annotated"), Some(2), "marked failed by annotate");
}

#[test]
fn fixed_attributes_and_a_name_of_parts_are_written_in_one_piece() {
    let fixed = super::FixedAttributes::new([("mcp.method.name", "tools/call")]);
    let (request, _) = traced(1.0, || {
        let span = tracing::info_span!("mcp", jsonrpc.request.id = "7");
        fixed.add_named(&span, &["tools/call", " ", "echo"]);
        let unnamed = tracing::info_span!("mcp");
        fixed.add_named(&unnamed, &[]);
    });
    let spans = &request.resource_spans[0].scope_spans[0].spans;
    // In the order they closed: the later first.
    let [unnamed, named] = &spans[..] else { panic!("{spans:#?}") };
    assert_eq!(named.name, "tools/call echo");
    let keys = |span: &opentelemetry_proto::tonic::trace::v1::Span| {
        span.attributes.iter().map(|kv| (kv.key.clone(), text(&kv.value))).collect::<Vec<_>>()
    };
    assert_eq!(
        keys(named),
        [("jsonrpc.request.id".to_owned(), "7".to_owned()), ("mcp.method.name".to_owned(), "tools/call".to_owned())]
    );
    assert_eq!(unnamed.name, "mcp", "no parts: the tracing name");
    assert_eq!(keys(unnamed), [("mcp.method.name".to_owned(), "tools/call".to_owned())]);
}
