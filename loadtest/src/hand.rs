//! A hand-written `tools/call` handler: the least work a 2026-07-28 server
//! can do for the load's `echo` call, as a baseline beside the body-ignoring
//! bare handler. It parses the body into a `serde_json::Value`, checks the
//! envelope, the required `_meta` members and the `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` headers against the body, and answers with a
//! JSON `CallToolResult`: the checks of `../shared/bench/peers`'s
//! `axum-mcp-hand`, plus the envelope's. No Origin or Host check, no
//! authorization, no rate limit, no schema, no telemetry.
//!
//! What it measures against the bare handler is what reading and answering
//! the protocol costs by itself: a ceiling for any server of this protocol on
//! axum and `serde_json`, Switchyard included.

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

const VERSION: &str = "2026-07-28";

pub(crate) async fn tools_call(headers: HeaderMap, body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, &Value::Null, -32700, "Parse error");
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = request.get("method").and_then(Value::as_str);
    if request.get("jsonrpc").and_then(Value::as_str) != Some("2.0") || !(id.is_string() || id.is_i64()) {
        return error(StatusCode::BAD_REQUEST, &id, -32600, "Invalid request");
    }
    let Some(method) = method else {
        return error(StatusCode::BAD_REQUEST, &id, -32600, "Invalid request");
    };
    let params = request.get("params");
    let meta = params.and_then(|p| p.get("_meta"));
    let version = meta.and_then(|m| m.get("io.modelcontextprotocol/protocolVersion")).and_then(Value::as_str);
    let capabilities = meta.and_then(|m| m.get("io.modelcontextprotocol/clientCapabilities"));
    let (Some(version), Some(Value::Object(_))) = (version, capabilities) else {
        return error(StatusCode::BAD_REQUEST, &id, -32602, "params._meta is missing a required member");
    };
    if version != VERSION {
        return error(StatusCode::BAD_REQUEST, &id, -32022, "Unsupported protocol version");
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if header("mcp-protocol-version") != Some(version) || header("mcp-method") != Some(method) {
        return error(StatusCode::BAD_REQUEST, &id, -32020, "Header mismatch");
    }
    if method != "tools/call" {
        return error(StatusCode::OK, &id, -32601, "Method not found");
    }
    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    if header("mcp-name") != name {
        return error(StatusCode::BAD_REQUEST, &id, -32020, "Header mismatch: Mcp-Name");
    }
    if name != Some("echo") {
        return error(StatusCode::OK, &id, -32602, "Unknown tool");
    }
    let Some(text) = params.and_then(|p| p.pointer("/arguments/text")).and_then(Value::as_str) else {
        return error(StatusCode::OK, &id, -32602, "arguments.text must be a string");
    };
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": {
        "resultType": "complete", "content": [{"type": "text", "text": text}], "isError": false}});
    json_response(StatusCode::OK, &answer)
}

fn error(status: StatusCode, id: &Value, code: i64, message: &str) -> Response {
    json_response(status, &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}
