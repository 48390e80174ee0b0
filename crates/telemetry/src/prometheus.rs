//! The Prometheus text format (version 0.0.4) of the SDK's metrics, for
//! `/metrics`: a manual reader collected on each scrape and rendered with the
//! OpenTelemetry-to-Prometheus naming rules (dots to underscores, the unit as
//! a suffix, `_total` on counters).
//!
//! Our own few dozen lines instead of the `opentelemetry-prometheus` crate,
//! which pulls in the `prometheus` crate's registry for what is string
//! formatting over data the SDK already holds.

use std::fmt::Write as _;
use std::sync::{Arc, Weak};
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::reader::MetricReader;
use opentelemetry_sdk::metrics::{InstrumentKind, ManualReader, Pipeline, Temporality};

/// The handle `/metrics` renders from. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Prometheus {
    reader: Arc<ManualReader>,
}

/// The reader as the meter provider holds it, sharing the manual reader
/// with [`Prometheus`].
#[derive(Debug)]
pub(crate) struct SharedReader(Arc<ManualReader>);

impl MetricReader for SharedReader {
    fn register_pipeline(&self, pipeline: Weak<Pipeline>) {
        self.0.register_pipeline(pipeline);
    }
    fn collect(&self, rm: &mut ResourceMetrics) -> OTelSdkResult {
        self.0.collect(rm)
    }
    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }
    fn temporality(&self, kind: InstrumentKind) -> Temporality {
        self.0.temporality(kind)
    }
}

impl Prometheus {
    pub(crate) fn new() -> Self {
        Self { reader: Arc::new(ManualReader::builder().with_temporality(Temporality::Cumulative).build()) }
    }

    pub(crate) fn reader(&self) -> SharedReader {
        SharedReader(Arc::clone(&self.reader))
    }

    /// Every metric, as Prometheus text.
    pub fn render(&self) -> String {
        let mut collected = ResourceMetrics::default();
        if let Err(error) = self.reader.collect(&mut collected) {
            tracing::debug!(%error, "collecting metrics for /metrics");
        }
        let mut out = String::new();
        for scope in collected.scope_metrics() {
            for metric in scope.metrics() {
                write_metric(&mut out, metric);
            }
        }
        out
    }
}

/// Prometheus's name for an OpenTelemetry metric: invalid characters become
/// `_`, and the unit (unless an annotation like `{call}`) becomes a suffix.
fn base_name(metric: &Metric) -> String {
    let mut name: String =
        metric.name().chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect();
    let unit = match metric.unit() {
        "s" => "seconds",
        "ms" => "milliseconds",
        "By" => "bytes",
        "1" => "ratio",
        _ => "",
    };
    if !unit.is_empty() && !name.ends_with(unit) {
        name.push('_');
        name.push_str(unit);
    }
    name
}

fn write_metric(out: &mut String, metric: &Metric) {
    let name = base_name(metric);
    match metric.data() {
        AggregatedMetrics::F64(data) => write_data(out, &name, metric.description(), data, |v| *v),
        AggregatedMetrics::U64(data) => write_data(out, &name, metric.description(), data, |v| *v as f64),
        AggregatedMetrics::I64(data) => write_data(out, &name, metric.description(), data, |v| *v as f64),
    }
}

fn write_data<T: Copy>(out: &mut String, name: &str, help: &str, data: &MetricData<T>, value: impl Fn(&T) -> f64) {
    let header = |out: &mut String, name: &str, kind: &str| {
        let _ = writeln!(out, "# HELP {name} {}", help.replace('\\', "\\\\").replace('\n', "\\n"));
        let _ = writeln!(out, "# TYPE {name} {kind}");
    };
    match data {
        MetricData::Gauge(gauge) => {
            header(out, name, "gauge");
            for point in gauge.data_points() {
                sample(out, name, point.attributes(), None, value(&point.value()));
            }
        }
        MetricData::Sum(sum) if sum.is_monotonic() => {
            let name = if name.ends_with("_total") { name.to_owned() } else { format!("{name}_total") };
            header(out, &name, "counter");
            for point in sum.data_points() {
                sample(out, &name, point.attributes(), None, value(&point.value()));
            }
        }
        MetricData::Sum(sum) => {
            header(out, name, "gauge");
            for point in sum.data_points() {
                sample(out, name, point.attributes(), None, value(&point.value()));
            }
        }
        MetricData::Histogram(histogram) => {
            header(out, name, "histogram");
            let bucket = format!("{name}_bucket");
            for point in histogram.data_points() {
                let mut cumulative = 0;
                for (bound, count) in point.bounds().zip(point.bucket_counts()) {
                    cumulative += count;
                    sample(out, &bucket, point.attributes(), Some(&format_value(bound)), cumulative as f64);
                }
                sample(out, &bucket, point.attributes(), Some("+Inf"), point.count() as f64);
                sample(out, &format!("{name}_sum"), point.attributes(), None, value(&point.sum()));
                sample(out, &format!("{name}_count"), point.attributes(), None, point.count() as f64);
            }
        }
        // Not used by our instruments; rendered as nothing rather than wrongly.
        MetricData::ExponentialHistogram(_) => {}
    }
}

fn sample<'a>(
    out: &mut String,
    name: &str,
    attributes: impl Iterator<Item = &'a KeyValue>,
    le: Option<&str>,
    value: f64,
) {
    out.push_str(name);
    let mut labels: Vec<(String, String)> = attributes
        .map(|kv| {
            let key = kv.key.as_str().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
            (key, kv.value.to_string())
        })
        .collect();
    // Sorted, so a series reads the same in every scrape.
    labels.sort();
    if let Some(le) = le {
        labels.push(("le".into(), le.into()));
    }
    if !labels.is_empty() {
        out.push('{');
        for (i, (key, value)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let escaped = value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
            let _ = write!(out, "{key}=\"{escaped}\"");
        }
        out.push('}');
    }
    let _ = writeln!(out, " {}", format_value(value));
}

fn format_value(value: f64) -> String {
    if value.is_infinite() { if value > 0.0 { "+Inf".into() } else { "-Inf".into() } } else { format!("{value}") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::SdkMeterProvider;

    #[test]
    fn renders_counters_gauges_and_histograms_in_the_text_format() {
        let prometheus = Prometheus::new();
        let provider = SdkMeterProvider::builder().with_reader(prometheus.reader()).build();
        let meter = provider.meter("test");
        let calls = meter.u64_counter("switchyard.tool.calls").with_unit("{call}").build();
        calls.add(2, &[KeyValue::new("gen_ai.tool.name", "echo"), KeyValue::new("outcome", "ok")]);
        calls.add(1, &[KeyValue::new("gen_ai.tool.name", "say \"hi\""), KeyValue::new("outcome", "ok")]);
        let streams = meter.i64_up_down_counter("switchyard.listen.streams").build();
        streams.add(3, &[]);
        streams.add(-1, &[]);
        let latency =
            meter.f64_histogram("mcp.server.operation.duration").with_unit("s").with_boundaries(vec![0.1, 1.0]).build();
        latency.record(0.05, &[KeyValue::new("mcp.method.name", "tools/call")]);
        latency.record(0.5, &[KeyValue::new("mcp.method.name", "tools/call")]);
        latency.record(5.0, &[KeyValue::new("mcp.method.name", "tools/call")]);

        let text = prometheus.render();
        assert!(text.contains("# TYPE switchyard_tool_calls_total counter\n"), "{text}");
        assert!(text.contains(r#"switchyard_tool_calls_total{gen_ai_tool_name="echo",outcome="ok"} 2"#), "{text}");
        assert!(text.contains(r#"gen_ai_tool_name="say \"hi\"""#), "label values are escaped: {text}");
        assert!(text.contains("# TYPE switchyard_listen_streams gauge\nswitchyard_listen_streams 2\n"), "{text}");
        assert!(text.contains("# TYPE mcp_server_operation_duration_seconds histogram\n"), "{text}");
        let bucket = r#"mcp_server_operation_duration_seconds_bucket{mcp_method_name="tools/call",le="#;
        assert!(text.contains(&format!("{bucket}\"0.1\"}} 1\n")), "{text}");
        assert!(text.contains(&format!("{bucket}\"1\"}} 2\n")), "cumulative: {text}");
        assert!(text.contains(&format!("{bucket}\"+Inf\"}} 3\n")), "{text}");
        assert!(
            text.contains(r#"mcp_server_operation_duration_seconds_sum{mcp_method_name="tools/call"} 5.55"#),
            "{text}"
        );
        assert!(
            text.contains(r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call"} 3"#),
            "{text}"
        );
    }
}
