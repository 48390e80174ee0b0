//! The span of an MCP request, after the OpenTelemetry semantic conventions
//! for MCP: named `{mcp.method.name} {target}`, with `mcp.method.name`,
//! `jsonrpc.request.id`, `mcp.protocol.version`, the tool, prompt or
//! resource it addresses, and `error.type` when it failed. Its parent is the
//! span named by `traceparent` in `_meta` when the client sent one (linked
//! to the HTTP span that carried it), else the transport's span.
//!
//! Arguments, results and tokens never become attributes.
//!
//! Also the request's `mcp.server.operation.duration` series, kept per
//! method beside the span's attributes (`switchyard_telemetry::series`).

use std::sync::LazyLock;

use serde_json::Value;
use switchyard_protocol::Method;
use switchyard_protocol::meta::META;
use switchyard_telemetry::{FixedAttributes, MethodDurations};
use tracing::field::Empty;

use crate::request::{Execution, Prepared};

/// What a method alone decides, made once per method.
struct ByMethod {
    method: Method,
    /// The span's attributes (`mcp.method.name`, and for a tool call
    /// `gen_ai.operation.name`), encoded once.
    attributes: FixedAttributes,
    /// The method's `mcp.server.operation.duration`.
    durations: MethodDurations,
}

static BY_METHOD: LazyLock<Vec<ByMethod>> = LazyLock::new(|| {
    let unknown = Method::Unknown(String::new());
    Method::KNOWN
        .into_iter()
        .chain([unknown])
        .map(|method| {
            let mut pairs = vec![("mcp.method.name", method.label())];
            if method == Method::CallTool {
                pairs.push(("gen_ai.operation.name", "execute_tool"));
            }
            ByMethod {
                attributes: FixedAttributes::new(pairs),
                durations: MethodDurations::new(method.label()),
                method,
            }
        })
        .collect()
});

fn by_method(method: &Method) -> &'static ByMethod {
    let table = &*BY_METHOD;
    let found = table.iter().find(|entry| entry.method == *method);
    // Any other name shares the last entry's label, "other".
    found.unwrap_or(&table[table.len() - 1])
}

/// The request's span, and the series its duration is recorded in.
pub(crate) fn mcp_span(request: &Prepared) -> (tracing::Span, &'static MethodDurations) {
    let by_method = by_method(&request.method);
    let method = request.method.label();
    // What the span is about: the member `Mcp-Name` mirrors (tool, prompt, URI or task).
    let target = request.name();
    let (tool, prompt, uri) = match (&request.method, target) {
        (Method::CallTool, Some(tool)) => (Some(tool), None, None),
        (Method::GetPrompt, Some(prompt)) => (None, Some(prompt), None),
        (Method::ReadResource, Some(uri)) => (None, None, Some(uri)),
        _ => (None, None, None),
    };
    // Every value known now is given here rather than recorded after: each
    // `record` is a trip through the subscriber of its own. A `None` is
    // not recorded. The name and the method's attributes are written into
    // the span in one piece below.
    let span = tracing::info_span!(
        "mcp",
        otel.kind = "server",
        otel.status_code = Empty,
        jsonrpc.request.id = %request.id,
        mcp.protocol.version = request.meta.as_ref().map(|meta| meta.protocol_version.as_str()),
        gen_ai.tool.name = tool,
        gen_ai.prompt.name = prompt,
        mcp.resource.uri = uri,
        error.type = Empty,
        rpc.response.status_code = Empty,
    );
    let attributes = &by_method.attributes;
    match target {
        Some(target) => attributes.add_named(&span, &[method, " ", target]),
        None => attributes.add_named(&span, &[method]),
    }
    let trace_context = match &request.meta {
        Some(meta) => meta.trace_context.clone(),
        // A legacy request keeps its `_meta` in the parameters.
        None => request.rest.get(META).and_then(Value::as_object).and_then(switchyard_protocol::meta::trace_context),
    };
    if let Some((traceparent, tracestate)) = trace_context {
        switchyard_telemetry::context::parent_from_meta(&span, &traceparent, tracestate.as_deref());
    }
    (span, &by_method.durations)
}

pub(crate) fn finish_span(span: &tracing::Span, execution: &Execution) {
    match execution {
        Execution::Error { error, .. } => {
            span.record("error.type", error.code.to_string());
            span.record("rpc.response.status_code", error.code.to_string());
            span.record("otel.status_code", "ERROR");
        }
        Execution::Result { result, .. } if result.is_error() => {
            span.record("error.type", "tool_error");
            span.record("otel.status_code", "ERROR");
        }
        _ => {}
    }
}
