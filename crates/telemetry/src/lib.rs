//! Switchyard's telemetry: what an operator sees of a running replica.
//!
//! - [`init`] installs the process's `tracing` subscriber: logs to stderr
//!   (text, or JSON lines carrying trace ids: [`LogFormat`]), and,
//!   when an OTLP endpoint is configured, our spans recorded and exported
//!   over OTLP/HTTP (protobuf) by our own layer and batch exporter (`spans`).
//!   Metrics always go to an
//!   in-process reader that [`Prometheus::render`] turns into the Prometheus
//!   text format for `/metrics`, and to OTLP when an endpoint is configured.
//! - [`metrics()`] holds every instrument, with typed recording methods so that
//!   each label set is bounded by construction (tool names come from the
//!   catalog, never from client input).
//!   The series every request records are kept where their labels are
//!   fixed ([`RouteDurations`], [`MethodDurations`], [`ToolCalls`]) and bound
//!   once, so a record does not look its series up by label.
//! - [`context`] takes trace context from W3C headers and from `traceparent` /
//!   `tracestate` in `_meta`, and writes it into outgoing MCP requests.
//!
//! Exporters run on their own threads with bounded queues: a slow or absent
//! collector drops telemetry, it never makes a request wait. Nothing a client
//! sends as a token, an argument or a result is ever recorded.

pub mod context;
mod logs;
mod metrics;
mod prometheus;
mod push;
mod series;
mod settings;
mod spans;

use std::time::Duration;

use std::sync::Arc;

use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

pub use logs::LogFormat;
pub use metrics::{Metrics, ToolOutcome, metrics};
pub use prometheus::Prometheus;
pub use series::{MethodDurations, RouteDurations, ToolCalls};
pub use settings::{RawTelemetry, Settings};
pub use spans::{Annotations, FixedAttributes, annotate};

/// Telemetry settings; composed into the binary's `Config`.
#[derive(Debug, Clone)]
pub struct Config {
    /// Base URL of an OTLP/HTTP collector, e.g. `http://otel-collector:4318`;
    /// traces go to `{endpoint}/v1/traces`, metrics to `{endpoint}/v1/metrics`.
    /// `None` (the default): nothing leaves the process.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the resource. Default `switchyard`.
    pub service_name: String,
    /// Fraction of new traces recorded (parent-based: a joined client's
    /// decision is kept, see `follow_client_traces`). Default 1.0.
    pub sample_ratio: f64,
    /// Join the trace a client names in `traceparent` (header or `_meta`)
    /// and follow its `sampled` flag. Default false: a client's context is
    /// linked from a new trace that `sample_ratio` decides, so anonymous
    /// traffic cannot have every request traced and exported.
    pub follow_client_traces: bool,
    /// How often spans are sent in a batch. Default 5 s.
    pub trace_interval: Duration,
    /// How often metrics are pushed over OTLP. Default 30 s.
    pub metrics_interval: Duration,
    /// How long one export may take. Default 10 s.
    pub export_timeout: Duration,
    /// Whether `/metrics` serves the Prometheus text format. Default true.
    pub prometheus: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            service_name: "switchyard".into(),
            sample_ratio: 1.0,
            follow_client_traces: false,
            trace_interval: Duration::from_secs(5),
            metrics_interval: Duration::from_secs(30),
            export_timeout: Duration::from_secs(10),
            prometheus: true,
        }
    }
}

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An OTLP exporter could not be built (a malformed endpoint, say).
    #[error("building the OTLP exporter: {0}")]
    Exporter(String),
    /// A subscriber was already installed in this process.
    #[error("a tracing subscriber is already installed")]
    AlreadyInstalled,
}

/// The installed telemetry; [`Telemetry::shutdown`] flushes the exporters.
pub struct Telemetry {
    spans: Option<Arc<spans::Exporter>>,
    metrics_push: Option<push::MetricsPush>,
    meter_provider: SdkMeterProvider,
    prometheus: Option<Prometheus>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").field("exporting", &self.spans.is_some()).finish_non_exhaustive()
    }
}

/// Installs logging (stderr, filtered by `log_filter`, an `EnvFilter`
/// directive, written as `log_format` says), tracing export and the metric
/// instruments for this process.
/// Call it once, before anything records a metric.
///
/// # Errors
/// When an exporter cannot be built or a subscriber is already installed.
pub fn init(config: &Config, log_filter: &str, log_format: LogFormat) -> Result<Telemetry, Error> {
    let resource = Resource::builder().with_service_name(config.service_name.clone()).build();
    let exporting = config.otlp_endpoint.as_deref().map(|e| e.trim_end_matches('/'));
    context::follow_clients(config.follow_client_traces);

    let spans = exporting
        .map(|endpoint| {
            spans::Exporter::spawn(spans::ExporterConfig {
                url: format!("{endpoint}/v1/traces"),
                service_name: config.service_name.clone(),
                interval: config.trace_interval,
                timeout: config.export_timeout,
            })
            .map_err(Error::Exporter)
        })
        .transpose()?;

    // One reader, which `/metrics` renders and the OTLP push collects: each
    // reader would aggregate every measurement again (see `push`).
    let mut meters = SdkMeterProvider::builder().with_resource(resource);
    let reader = (config.prometheus || exporting.is_some()).then(Prometheus::new);
    if let Some(reader) = &reader {
        meters = meters.with_reader(reader.reader());
    }
    let metrics_push = match (exporting, &reader) {
        (Some(endpoint), Some(reader)) => {
            let exporter = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_endpoint(format!("{endpoint}/v1/metrics"))
                .with_timeout(config.export_timeout)
                .build()
                .map_err(|e| Error::Exporter(e.to_string()))?;
            Some(
                push::MetricsPush::spawn(reader.reader(), exporter, config.metrics_interval)
                    .map_err(Error::Exporter)?,
            )
        }
        _ => None,
    };
    let prometheus = reader.filter(|_| config.prometheus);
    let meter_provider = meters.build();
    opentelemetry::global::set_meter_provider(meter_provider.clone());

    let filter = tracing_subscriber::EnvFilter::try_new(log_filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // The log takes events only: were it to take the per-request spans too,
    // every request would pay for formatting their fields even with no
    // collector configured. Without an OTLP endpoint no layer wants a span,
    // so none is created.
    let registry = tracing_subscriber::registry().with(logs::layer(log_format, filter, spans.is_some()));
    let installed = match &spans {
        Some(exporter) => {
            // Spans are exported whatever the log filter says (logs at `warn`
            // must not turn traces off); the layer keeps our own spans and
            // drops the chatter of dependencies. When clients are trusted to
            // name traces, a span not sampled at its start may yet be, so its
            // fields are kept until its parent is known.
            let sampler = spans::Sampler::ratio(config.sample_ratio);
            let layer = spans::SpanLayer::new(sampler, config.follow_client_traces, Arc::clone(exporter));
            registry.with(layer).try_init()
        }
        None => registry.try_init(),
    };
    installed.map_err(|_| Error::AlreadyInstalled)?;
    // Instruments are created now, from the provider just installed.
    let _ = metrics();
    Ok(Telemetry { spans, metrics_push, meter_provider, prometheus })
}

impl Telemetry {
    /// The Prometheus view of the metrics, unless disabled.
    pub fn prometheus(&self) -> Option<Prometheus> {
        self.prometheus.clone()
    }

    /// Sends what is buffered and stops the exporters; called last at
    /// shutdown. Bounded by the exporters' timeouts.
    pub fn shutdown(self) {
        if let Some(spans) = self.spans {
            spans.shutdown();
            let dropped = spans.dropped();
            if dropped > 0 {
                eprintln!("switchyard: {dropped} spans were dropped with the export queue full");
            }
        }
        if let Some(push) = self.metrics_push {
            push.shutdown();
        }
        if let Err(error) = self.meter_provider.shutdown() {
            eprintln!("switchyard: flushing metrics: {error}");
        }
    }
}
