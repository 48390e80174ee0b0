//! A lean hand-written `tools/call` handler, as a baseline beside the bare
//! handler (which answers without parsing the body). It reads the request
//! into borrowed, typed structs (no map is built; strings are borrowed unless
//! escaped), checks the envelope, the required `_meta` members and the
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers against the
//! body, and writes a JSON `CallToolResult` with `serde_json::to_vec`. No
//! Origin or Host check, no authorization, no rate limit, no schema, no
//! telemetry. `../shared/bench/peers`'s `axum-mcp-hand` makes the same checks
//! but parses into a `serde_json::Value`.
//!
//! It shows how much of the bare handler's rate is left once a server reads
//! and answers the protocol at all, written for this one call: a baseline
//! for Switchyard, not a proof of what no server can do (the `loadtest`
//! binary runs on the system allocator; Switchyard on mimalloc).

use std::borrow::Cow;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

const VERSION: &str = "2026-07-28";

/// A string borrowed from the body unless it has escapes. (A bare
/// `Option<Cow<str>>` field is always copied: serde borrows a `Cow` only
/// where it is the field's own type.)
#[derive(Deserialize)]
struct Str<'a>(#[serde(borrow)] Cow<'a, str>);

impl Str<'_> {
    fn get(this: Option<&Self>) -> Option<&str> {
        this.map(|s| s.0.as_ref())
    }
}

#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    jsonrpc: Option<Str<'a>>,
    id: Option<Value>,
    #[serde(borrow)]
    method: Option<Str<'a>>,
    #[serde(borrow)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    name: Option<Str<'a>>,
    #[serde(borrow)]
    arguments: Option<Arguments<'a>>,
    #[serde(rename = "_meta", borrow)]
    meta: Option<Meta<'a>>,
}

#[derive(Deserialize)]
struct Arguments<'a> {
    #[serde(borrow)]
    text: Option<Str<'a>>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow)]
    version: Option<Str<'a>>,
    /// An empty map allocates nothing.
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
    capabilities: Option<serde_json::Map<String, Value>>,
}

#[derive(Serialize)]
struct Answer<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    result: CallToolResult<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallToolResult<'a> {
    result_type: &'static str,
    content: [Text<'a>; 1],
    is_error: bool,
}

#[derive(Serialize)]
struct Text<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

pub(crate) async fn tools_call(headers: HeaderMap, body: Bytes) -> Response {
    let request = match serde_json::from_slice::<Request<'_>>(&body) {
        Ok(request) => request,
        Err(e) if e.is_data() => return error(StatusCode::BAD_REQUEST, &Value::Null, -32600, "Invalid request"),
        Err(_) => return error(StatusCode::BAD_REQUEST, &Value::Null, -32700, "Parse error"),
    };
    let id = request.id.unwrap_or(Value::Null);
    let (Some("2.0"), true, Some(method)) =
        (Str::get(request.jsonrpc.as_ref()), id.is_string() || id.is_i64(), Str::get(request.method.as_ref()))
    else {
        return error(StatusCode::BAD_REQUEST, &id, -32600, "Invalid request");
    };
    let params = request.params.as_ref();
    let meta = params.and_then(|p| p.meta.as_ref());
    let (Some(version), Some(_)) =
        (meta.and_then(|m| Str::get(m.version.as_ref())), meta.and_then(|m| m.capabilities.as_ref()))
    else {
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
        return error(StatusCode::NOT_FOUND, &id, -32601, "Method not found");
    }
    let name = params.and_then(|p| Str::get(p.name.as_ref()));
    if header("mcp-name") != name {
        return error(StatusCode::BAD_REQUEST, &id, -32020, "Header mismatch: Mcp-Name");
    }
    if name != Some("echo") {
        return error(StatusCode::OK, &id, -32602, "Unknown tool");
    }
    let Some(text) = params.and_then(|p| p.arguments.as_ref()).and_then(|a| Str::get(a.text.as_ref())) else {
        return error(StatusCode::OK, &id, -32602, "arguments.text must be a string");
    };
    let result = CallToolResult { result_type: "complete", content: [Text { kind: "text", text }], is_error: false };
    json_response(StatusCode::OK, &Answer { jsonrpc: "2.0", id: &id, result })
}

fn error(status: StatusCode, id: &Value, code: i64, message: &str) -> Response {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    json_response(status, &body)
}

fn json_response(status: StatusCode, body: &impl Serialize) -> Response {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}
