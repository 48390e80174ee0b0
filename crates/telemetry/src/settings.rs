//! `[telemetry]` as the operator writes it, its defaults (those of
//! [`Config`]) and its checks.

use std::net::SocketAddr;

use serde::Deserialize;
use switchyard_settings::Section;

use crate::Config;

/// `[telemetry]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTelemetry {
    /// Base URL of an OTLP/HTTP collector, e.g. `http://otel-collector:4318`.
    /// Default none: no traces or metrics leave the process.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported resource. Default `switchyard`.
    pub service_name: Option<String>,
    /// Fraction of new traces kept, 0 to 1. Default 1.
    pub sample_ratio: Option<f64>,
    /// Join the trace a client's `traceparent` names and follow its sampled
    /// flag (trusted clients, or replicas in front of replicas). Default
    /// false: a client's trace is linked from a new one.
    pub follow_client_traces: Option<bool>,
    /// How often spans are sent. Default `"5s"`.
    pub trace_interval: Option<String>,
    /// How often metrics are pushed over OTLP. Default `"30s"`.
    pub metrics_interval: Option<String>,
    /// Whether `/metrics` serves the Prometheus text format. Default true.
    pub prometheus: Option<bool>,
    /// A separate address for `/metrics` (e.g. `0.0.0.0:9464` in a pod, for
    /// the scraper; not behind the Host/Origin check, which a scraper's
    /// `Host: <pod IP>` would fail). Default none: `/metrics` on the main
    /// address, behind the same checks as MCP.
    pub metrics_bind: Option<String>,
}

/// What `[telemetry]` makes.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Traces and metrics.
    pub config: Config,
    /// Where `/metrics` is served, if not on the main address.
    pub metrics_bind: Option<SocketAddr>,
}

impl RawTelemetry {
    /// Telemetry's settings.
    pub fn check(self, mut section: Section<'_>) -> Settings {
        let defaults = Config::default();
        let config = Config {
            trace_interval: section.duration("trace_interval", self.trace_interval.as_deref(), defaults.trace_interval),
            metrics_interval: section.duration(
                "metrics_interval",
                self.metrics_interval.as_deref(),
                defaults.metrics_interval,
            ),
            otlp_endpoint: self.otlp_endpoint.filter(|e| !e.is_empty()),
            service_name: self.service_name.unwrap_or_else(|| defaults.service_name.clone()),
            sample_ratio: self.sample_ratio.unwrap_or(defaults.sample_ratio),
            follow_client_traces: self.follow_client_traces.unwrap_or(defaults.follow_client_traces),
            prometheus: self.prometheus.unwrap_or(defaults.prometheus),
            ..defaults
        };
        if !(0.0..=1.0).contains(&config.sample_ratio) {
            section.push("sample_ratio", "must be between 0 and 1");
        }
        if let Some(endpoint) = &config.otlp_endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            section.push("otlp_endpoint", format_args!("{endpoint:?} is not an http(s) URL"));
        }
        let metrics_bind = self.metrics_bind.as_deref().and_then(|text| {
            text.parse::<SocketAddr>().map_err(|e| section.push("metrics_bind", format_args!("{text:?}: {e}"))).ok()
        });
        Settings { config, metrics_bind }
    }
}
