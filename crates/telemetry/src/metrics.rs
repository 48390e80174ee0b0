//! Every instrument Switchyard records, behind typed methods.
//!
//! Names follow the OpenTelemetry semantic conventions where one exists
//! (`http.server.request.duration`, `mcp.server.operation.duration`); the
//! rest live under `switchyard.`. Each method takes only what may become a
//! label, so no label can carry client input beyond a bounded vocabulary.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opentelemetry::metrics::{BoundCounter, Counter, Gauge, Histogram, Meter, UpDownCounter};
use opentelemetry::{KeyValue, StringValue};

/// Bucket bounds in seconds: our requests take from tens of microseconds (a
/// built-in tool) to a minute (a plugin at its deadline).
const SECONDS: [f64; 18] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// The instruments. Obtain them with [`metrics()`].
#[derive(Debug)]
pub struct Metrics {
    pub(crate) http_duration: Histogram<f64>,
    pub(crate) mcp_duration: Histogram<f64>,
    pub(crate) tool_calls: Counter<u64>,
    listen_streams: UpDownCounter<i64>,
    listen_dropped: Counter<u64>,
    bus_published: Counter<u64>,
    bus_received: Counter<u64>,
    bus_rejected: Counter<u64>,
    bus_gaps: Counter<u64>,
    bus_lag: Histogram<f64>,
    auth_failures: Counter<u64>,
    rate_limited: Counter<u64>,
    catalog_version: Gauge<u64>,
    upstream_refusals: Counter<u64>,
    upstream_breaker: Counter<u64>,
    upstream_retries: Counter<u64>,
    answer_cache: Counter<u64>,
    /// `answer_cache`'s hits and misses, bound on first use (a lookup is on
    /// the path of every cached read; `series` says why).
    answer_cache_results: [OnceLock<BoundCounter<u64>>; 2],
}

/// How a tool call ended, as `switchyard.tool.calls` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolOutcome {
    /// A result without `isError`.
    Ok,
    /// A result with `isError: true` (the tool reported a failure).
    ToolError,
    /// The plugin failed (crashed, trapped, returned garbage, upstream down).
    PluginError,
    /// The call ran past its deadline.
    Timeout,
    /// The call asked the client for input (`input_required`).
    InputRequired,
    /// The call became a task.
    Task,
}

impl ToolOutcome {
    /// How many outcomes there are: [`Self::index`] is below it.
    pub(crate) const COUNT: usize = 6;

    /// The outcome's slot in a table of [`Self::COUNT`].
    pub(crate) const fn index(self) -> usize {
        match self {
            Self::Ok => 0,
            Self::ToolError => 1,
            Self::PluginError => 2,
            Self::Timeout => 3,
            Self::InputRequired => 4,
            Self::Task => 5,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::PluginError => "plugin_error",
            Self::Timeout => "timeout",
            Self::InputRequired => "input_required",
            Self::Task => "task",
        }
    }
}

static METRICS: OnceLock<Metrics> = OnceLock::new();

/// The process's instruments, created on first use from the global meter
/// provider. [`crate::init`] installs that provider first; before it (in a
/// test that never calls it), the instruments record nothing.
pub fn metrics() -> &'static Metrics {
    METRICS.get_or_init(|| Metrics::new(&opentelemetry::global::meter("switchyard")))
}

impl Metrics {
    fn new(meter: &Meter) -> Self {
        let metrics = Self::instruments(meter);
        // Series without labels exist from the start, so a dashboard shows 0
        // rather than "no data" before the first event.
        metrics.listen_streams.add(0, &[]);
        metrics.listen_dropped.add(0, &[]);
        metrics.rate_limited.add(0, &[]);
        metrics
    }

    fn instruments(meter: &Meter) -> Self {
        let seconds = |name: &'static str, description: &'static str| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(SECONDS.to_vec())
                .build()
        };
        let counter = |name: &'static str, unit: &'static str, description: &'static str| {
            meter.u64_counter(name).with_unit(unit).with_description(description).build()
        };
        Self {
            http_duration: seconds("http.server.request.duration", "Duration of HTTP requests, to the response head."),
            mcp_duration: seconds(
                "mcp.server.operation.duration",
                "Duration of MCP requests, by method; error.type is set when the request failed.",
            ),
            tool_calls: counter("switchyard.tool.calls", "{call}", "Tool calls by tool and outcome."),
            listen_streams: meter
                .i64_up_down_counter("switchyard.listen.streams")
                .with_unit("{stream}")
                .with_description("Open subscriptions/listen streams.")
                .build(),
            listen_dropped: counter(
                "switchyard.listen.dropped_slow",
                "{stream}",
                "Listen streams closed because their client could not keep up.",
            ),
            bus_published: counter(
                "switchyard.bus.published",
                "{event}",
                "Events published on the bus, by kind and outcome.",
            ),
            bus_received: counter(
                "switchyard.bus.received",
                "{event}",
                "Events received from other replicas over the bus, by kind.",
            ),
            bus_rejected: counter(
                "switchyard.bus.rejected",
                "{message}",
                "Bus messages dropped because their MAC did not verify, or they could not be read.",
            ),
            bus_gaps: counter(
                "switchyard.bus.gaps",
                "{gap}",
                "Times events may have been lost and subscribers were told (cause: lagged, trimmed, reset, unreadable, unpublished).",
            ),
            bus_lag: seconds("switchyard.bus.lag", "From publish on one replica to receipt on this one (wall clocks)."),
            auth_failures: counter(
                "switchyard.auth.failures",
                "{request}",
                "Requests refused by authentication, by reason.",
            ),
            rate_limited: counter("switchyard.rate_limit.refusals", "{request}", "Requests refused by a rate limit."),
            catalog_version: meter
                .u64_gauge("switchyard.catalog.version")
                .with_description("The catalog version this replica serves.")
                .build(),
            upstream_refusals: counter(
                "switchyard.upstream.refusals",
                "{answer}",
                "Upstream answers refused for breaking an operator's bound, by bound and upstream.",
            ),
            upstream_breaker: counter(
                "switchyard.upstream.breaker",
                "{event}",
                "Upstream breakers opened (after failures in a row) and closed (a probe answered), and requests not sent while one was open, by event and upstream.",
            ),
            upstream_retries: counter(
                "switchyard.upstream.retries",
                "{request}",
                "Idempotent upstream requests sent again after a failed attempt, by upstream.",
            ),
            answer_cache: counter(
                "switchyard.answers.cache",
                "{request}",
                "Plugin answers (upstream, WASM) looked up in the answer cache, by result: hit (kept, or shared with an identical request in flight) or miss.",
            ),
            answer_cache_results: Default::default(),
        }
    }

    /// An MCP request of a known `method` (the caller maps unknown methods
    /// to `"other"`) ended after `elapsed`; `error` is the JSON-RPC error code
    /// it ended with, if any. On the request path this is
    /// [`crate::MethodDurations::record`], which binds the series without an
    /// error.
    pub(crate) fn mcp_request(&self, method: &'static str, error: Option<i64>, elapsed: Duration) {
        let mut attributes = vec![KeyValue::new("mcp.method.name", method)];
        if let Some(code) = error {
            attributes.push(KeyValue::new("error.type", code.to_string()));
        }
        self.mcp_duration.record(elapsed.as_secs_f64(), &attributes);
    }

    /// A listen stream opened (`+1`) or closed (`-1`).
    pub fn listen_streams(&self, delta: i64) {
        self.listen_streams.add(delta, &[]);
    }

    /// A listen stream closed because it fell behind.
    pub fn listen_dropped_slow(&self) {
        self.listen_dropped.add(1, &[]);
    }

    /// An event of `kind` published; `delivered` is false when it could not
    /// reach the other replicas.
    pub fn bus_published(&self, kind: &'static str, delivered: bool) {
        let outcome = if delivered { "ok" } else { "error" };
        self.bus_published.add(1, &[KeyValue::new("event", kind), KeyValue::new("outcome", outcome)]);
    }

    /// An event of `kind` received from another replica, `lag` after it was sent.
    pub fn bus_received(&self, kind: &'static str, lag: Option<Duration>) {
        self.bus_received.add(1, &[KeyValue::new("event", kind)]);
        if let Some(lag) = lag {
            self.bus_lag.record(lag.as_secs_f64(), &[]);
        }
    }

    /// A bus message dropped: not authenticated by a shared key, or unreadable.
    pub fn bus_rejected(&self) {
        self.bus_rejected.add(1, &[]);
    }

    /// Events may have been lost, and the bus's subscribers were told:
    /// `cause` is `lagged` (a subscriber fell behind in this process),
    /// `trimmed` (the log dropped entries this replica had not read),
    /// `reset` (Redis lost the log: restarted empty, flushed, rolled back),
    /// `unreadable` (an entry that does not verify) or `unpublished` (a
    /// replica could not publish while cut off, and said so).
    pub fn bus_gap(&self, cause: &'static str) {
        self.bus_gaps.add(1, &[KeyValue::new("cause", cause)]);
    }

    /// A request refused by authentication; `reason` is one of the
    /// verifier's fixed reasons.
    pub fn auth_failure(&self, reason: &'static str) {
        self.auth_failures.add(1, &[KeyValue::new("reason", reason)]);
    }

    /// A request refused by a rate limit.
    pub fn rate_limited(&self) {
        self.rate_limited.add(1, &[]);
    }

    /// An answer of `upstream` refused for breaking `bound`, one of the
    /// upstream crate's fixed bound names.
    ///
    /// `upstream` labels every upstream series: the namespace its plugin was
    /// registered under, one of the registry's (the operator's), so the
    /// label set stays as small as the registry.
    pub fn upstream_refused(&self, bound: &'static str, upstream: &Arc<str>) {
        self.upstream_refusals.add(1, &[KeyValue::new("bound", bound), upstream_label(upstream)]);
    }

    /// `upstream`'s breaker's `event`: `opened`, `closed` or `rejected`.
    pub fn upstream_breaker(&self, event: &'static str, upstream: &Arc<str>) {
        self.upstream_breaker.add(1, &[KeyValue::new("event", event), upstream_label(upstream)]);
    }

    /// An idempotent request to `upstream` sent again.
    pub fn upstream_retried(&self, upstream: &Arc<str>) {
        self.upstream_retries.add(1, &[upstream_label(upstream)]);
    }

    /// An answer-cache lookup: a hit or a miss (`result`). Not labelled by
    /// plugin: each plugin's series would have to be bound and kept per
    /// plugin instance, and the operator's question (is the cache working)
    /// is answered without it.
    pub fn answer_cache(&self, hit: bool) {
        let result = if hit { "hit" } else { "miss" };
        self.answer_cache_results[usize::from(hit)]
            .get_or_init(|| self.answer_cache.bind(&[KeyValue::new("result", result)]))
            .add(1);
    }

    /// The catalog version now served.
    pub fn catalog_version(&self, version: u64) {
        self.catalog_version.record(version, &[]);
    }
}

/// The `upstream` label: shared, not copied, on every record.
fn upstream_label(upstream: &Arc<str>) -> KeyValue {
    KeyValue::new("upstream", StringValue::from(Arc::clone(upstream)))
}

#[cfg(test)]
mod tests {
    use super::ToolOutcome;

    #[test]
    fn every_outcome_has_a_slot_of_its_own() {
        use ToolOutcome::*;
        // Listed through a match, so a new outcome does not compile until it is here.
        let listed = |outcome: ToolOutcome| match outcome {
            Ok | ToolError | PluginError | Timeout | InputRequired | Task => outcome,
        };
        let all = [Ok, ToolError, PluginError, Timeout, InputRequired, Task].map(listed);
        let mut slots: Vec<usize> = all.iter().map(|outcome| outcome.index()).collect();
        slots.sort_unstable();
        assert_eq!(slots, (0..ToolOutcome::COUNT).collect::<Vec<_>>());
    }
}
