//! The span of an MCP request, after the OpenTelemetry semantic conventions
//! for MCP: named `{mcp.method.name} {target}`, with `mcp.method.name`,
//! `jsonrpc.request.id`, `mcp.protocol.version`, the tool, prompt or
//! resource it addresses, and `error.type` when it failed. Its parent is the
//! span named by `traceparent` in `_meta` when the client sent one (linked
//! to the HTTP span that carried it), else the transport's span.
//!
//! Arguments, results and tokens never become attributes.

use serde_json::Value;
use switchyard_protocol::Method;
use switchyard_protocol::meta::META;
use tracing::field::Empty;

use crate::request::{Execution, Prepared};

pub(crate) fn mcp_span(request: &Prepared) -> tracing::Span {
    let method = request.method.label();
    // What the span is about: the member `Mcp-Name` mirrors (tool, prompt, URI or task).
    let target = request.name();
    let span = tracing::info_span!(
        "mcp",
        // Formatted only when a subscriber records the span.
        otel.name = %format_args!("{method}{}{}", if target.is_some() { " " } else { "" }, target.unwrap_or_default()),
        otel.kind = "server",
        otel.status_code = Empty,
        mcp.method.name = method,
        jsonrpc.request.id = %request.id,
        mcp.protocol.version = Empty,
        gen_ai.operation.name = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.prompt.name = Empty,
        mcp.resource.uri = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
    );
    match (&request.method, target) {
        (Method::CallTool, Some(tool)) => {
            span.record("gen_ai.operation.name", "execute_tool");
            span.record("gen_ai.tool.name", tool);
        }
        (Method::GetPrompt, Some(prompt)) => {
            span.record("gen_ai.prompt.name", prompt);
        }
        (Method::ReadResource, Some(uri)) => {
            span.record("mcp.resource.uri", uri);
        }
        _ => {}
    }
    let trace_context = match &request.meta {
        Some(meta) => {
            span.record("mcp.protocol.version", meta.protocol_version.as_str());
            meta.trace_context.clone()
        }
        // A legacy request keeps its `_meta` in the parameters.
        None => request.rest.get(META).and_then(Value::as_object).and_then(switchyard_protocol::meta::trace_context),
    };
    if let Some((traceparent, tracestate)) = trace_context {
        switchyard_telemetry::context::parent_from_meta(&span, &traceparent, tracestate.as_deref());
    }
    span
}

pub(crate) fn finish_span(span: &tracing::Span, execution: &Execution) {
    match execution {
        Execution::Error { error, .. } => {
            span.record("error.type", error.code.to_string());
            span.record("rpc.response.status_code", error.code.to_string());
            span.record("otel.status_code", "ERROR");
        }
        Execution::Result { result, .. } if result.get("isError").and_then(Value::as_bool) == Some(true) => {
            span.record("error.type", "tool_error");
            span.record("otel.status_code", "ERROR");
        }
        _ => {}
    }
}
