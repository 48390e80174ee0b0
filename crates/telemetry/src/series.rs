//! Series recorded on every request, bound once to their labels.
//!
//! Recording through an instrument with labels makes the SDK hash the labels
//! and look their series up in a map under a lock: about 3,500 of a
//! `tools/call`'s 58,800 instructions went there (callgrind, three records a
//! request). A series kept here is bound to its aggregator the
//! first time it is recorded (binding earlier would show every method and
//! status at 0 before it happened), and each record after that is a direct
//! write.
//!
//! Each type is kept where its labels are fixed: the HTTP layer per route,
//! `core` per MCP method, the catalog per tool. A record whose labels are
//! rarer than these (an error code, an unusual status) goes through the
//! labelled instrument as before, so the exported series are the same.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use opentelemetry::metrics::{BoundCounter, BoundHistogram};
use opentelemetry::{KeyValue, StringValue};

use crate::metrics::{ToolOutcome, metrics};

/// The statuses a POST is bound for: what a request that succeeds answers
/// (200: a result or a stream; 202: a notification or a response).
const BOUND_STATUSES: [u16; 2] = [200, 202];

/// `http.server.request.duration` of one route.
#[derive(Debug)]
pub struct RouteDurations {
    route: Arc<str>,
    /// By position in [`BOUND_STATUSES`], for POST.
    posts: [OnceLock<BoundHistogram<f64>>; BOUND_STATUSES.len()],
}

impl RouteDurations {
    /// The series of `route`, a route template (never a raw path).
    pub fn new(route: Arc<str>) -> Self {
        Self { route, posts: Default::default() }
    }

    /// A request answered with `status` after `elapsed`. `method` is a
    /// known method or `_OTHER`.
    pub fn record(&self, method: &'static str, status: u16, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bound = BOUND_STATUSES.iter().position(|bound| *bound == status).filter(|_| method == "POST");
        match bound {
            Some(index) => self.posts[index]
                .get_or_init(|| metrics().http_duration.bind(&http_labels(method, &self.route, status)))
                .record(seconds),
            None => metrics().http_duration.record(seconds, &http_labels(method, &self.route, status)),
        }
    }
}

/// The labels of `http.server.request.duration`.
fn http_labels(method: &'static str, route: &Arc<str>, status: u16) -> [KeyValue; 3] {
    [
        KeyValue::new("http.request.method", method),
        KeyValue::new("http.route", StringValue::from(Arc::clone(route))),
        KeyValue::new("http.response.status_code", i64::from(status)),
    ]
}

/// `mcp.server.operation.duration` of one MCP method.
#[derive(Debug)]
pub struct MethodDurations {
    method: &'static str,
    /// The series of the requests that ended without an error.
    succeeded: OnceLock<BoundHistogram<f64>>,
}

impl MethodDurations {
    /// The series of `method`, a known method's name or `other`.
    pub const fn new(method: &'static str) -> Self {
        Self { method, succeeded: OnceLock::new() }
    }

    /// A request that ended after `elapsed`; `error` is the JSON-RPC error
    /// code it ended with, if any.
    pub fn record(&self, error: Option<i64>, elapsed: Duration) {
        match error {
            None => self
                .succeeded
                .get_or_init(|| metrics().mcp_duration.bind(&[KeyValue::new("mcp.method.name", self.method)]))
                .record(elapsed.as_secs_f64()),
            Some(_) => metrics().mcp_request(self.method, error, elapsed),
        }
    }
}

/// `switchyard.tool.calls` of one tool, by outcome.
#[derive(Debug)]
pub struct ToolCalls {
    /// The tool's name, from the catalog.
    tool: StringValue,
    /// By [`ToolOutcome::index`].
    outcomes: [OnceLock<BoundCounter<u64>>; ToolOutcome::COUNT],
}

impl ToolCalls {
    /// The series of `tool`, a name from the catalog (never client input).
    pub fn new(tool: &str) -> Self {
        Self { tool: StringValue::from(Arc::<str>::from(tool)), outcomes: Default::default() }
    }

    /// A call of the tool that ended with `outcome`.
    pub fn record(&self, outcome: ToolOutcome) {
        // `index` is below `COUNT` for every outcome (a test in `metrics` checks).
        self.outcomes[outcome.index()]
            .get_or_init(|| metrics().tool_calls.bind(&tool_labels(self.tool.clone(), outcome)))
            .add(1);
    }
}

/// The labels of `switchyard.tool.calls`.
fn tool_labels(tool: StringValue, outcome: ToolOutcome) -> [KeyValue; 2] {
    [KeyValue::new("gen_ai.tool.name", tool), KeyValue::new("outcome", outcome.as_str())]
}
