//! A real OTLP/HTTP receiver on loopback: it decodes the protobuf export
//! requests Switchyard's exporters send (`/v1/traces`, `/v1/metrics`) with
//! the official `opentelemetry-proto` messages and keeps what arrived, so
//! tests can assert span trees and metric names as a collector saw them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message as _;

/// One received span, flattened out of its resource and scope.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// `service.name` of the resource that sent it.
    pub service: String,
    /// The span name.
    pub name: String,
    /// Span kind as the protobuf enum number (2 = server, 3 = client, 1 = internal).
    pub kind: i32,
    /// Trace id, lowercase hex.
    pub trace_id: String,
    /// Span id, lowercase hex.
    pub span_id: String,
    /// Parent span id, lowercase hex (empty for a root).
    pub parent_span_id: String,
    /// Attributes with string, integer or boolean values, as strings.
    pub attributes: Vec<(String, String)>,
    /// Span ids this span links to, lowercase hex.
    pub links: Vec<String>,
    /// How long the span lasted.
    pub duration: Duration,
}

impl ReceivedSpan {
    /// The value of attribute `key`, if present.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Received {
    spans: Vec<ReceivedSpan>,
    metric_names: Vec<String>,
}

/// The receiver; stops when dropped.
pub struct OtlpReceiver {
    url: String,
    received: Arc<Mutex<Received>>,
    _server: tokio::task::JoinHandle<()>,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attributes(list: &[KeyValue]) -> Vec<(String, String)> {
    list.iter()
        .filter_map(|kv| {
            let value = match kv.value.as_ref()?.value.as_ref()? {
                AnyValue::StringValue(s) => s.clone(),
                AnyValue::IntValue(i) => i.to_string(),
                AnyValue::BoolValue(b) => b.to_string(),
                AnyValue::DoubleValue(d) => d.to_string(),
                _ => return None,
            };
            Some((kv.key.clone(), value))
        })
        .collect()
}

fn protobuf(body: Vec<u8>) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, "application/x-protobuf".parse().expect("a valid header"));
    (StatusCode::OK, headers, body)
}

impl OtlpReceiver {
    /// Starts on a free loopback port.
    pub async fn start() -> Self {
        let received = Arc::new(Mutex::new(Received::default()));
        let traces = Arc::clone(&received);
        let metrics = Arc::clone(&received);
        let app = Router::new()
            .route(
                "/v1/traces",
                post(move |body: Bytes| async move {
                    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
                        return (StatusCode::BAD_REQUEST, HeaderMap::new(), Vec::new());
                    };
                    let mut received = traces.lock().unwrap_or_else(|p| p.into_inner());
                    for resource in request.resource_spans {
                        let resource_attributes =
                            resource.resource.as_ref().map(|r| attributes(&r.attributes)).unwrap_or_default();
                        let service = resource_attributes
                            .iter()
                            .find(|(k, _)| k == "service.name")
                            .map(|(_, v)| v.clone())
                            .unwrap_or_default();
                        for scope in resource.scope_spans {
                            for span in scope.spans {
                                received.spans.push(ReceivedSpan {
                                    service: service.clone(),
                                    name: span.name,
                                    kind: span.kind,
                                    trace_id: hex(&span.trace_id),
                                    span_id: hex(&span.span_id),
                                    parent_span_id: hex(&span.parent_span_id),
                                    attributes: attributes(&span.attributes),
                                    links: span.links.iter().map(|l| hex(&l.span_id)).collect(),
                                    duration: Duration::from_nanos(
                                        span.end_time_unix_nano.saturating_sub(span.start_time_unix_nano),
                                    ),
                                });
                            }
                        }
                    }
                    protobuf(ExportTraceServiceResponse::default().encode_to_vec())
                }),
            )
            .route(
                "/v1/metrics",
                post(move |body: Bytes| async move {
                    let Ok(request) = ExportMetricsServiceRequest::decode(body) else {
                        return (StatusCode::BAD_REQUEST, HeaderMap::new(), Vec::new());
                    };
                    let mut received = metrics.lock().unwrap_or_else(|p| p.into_inner());
                    for resource in request.resource_metrics {
                        for scope in resource.scope_metrics {
                            for metric in scope.metrics {
                                if !received.metric_names.contains(&metric.name) {
                                    received.metric_names.push(metric.name);
                                }
                            }
                        }
                    }
                    protobuf(ExportMetricsServiceResponse::default().encode_to_vec())
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let url = format!("http://{}", listener.local_addr().expect("a bound address"));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { url, received, _server: server }
    }

    /// The base URL, for `telemetry.otlp_endpoint`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.received.lock().unwrap_or_else(|p| p.into_inner()).spans.clone()
    }

    /// The names of every metric received so far.
    pub fn metric_names(&self) -> Vec<String> {
        self.received.lock().unwrap_or_else(|p| p.into_inner()).metric_names.clone()
    }

    /// Waits up to `timeout` for a span satisfying `wanted`.
    pub async fn wait_for_span(
        &self,
        timeout: Duration,
        wanted: impl Fn(&ReceivedSpan) -> bool,
    ) -> Option<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(span) = self.spans().into_iter().find(|s| wanted(s)) {
                return Some(span);
            }
            if tokio::time::Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
