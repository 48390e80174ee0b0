//! The MCP endpoint through `switchyard_http::router`, called with `oneshot`:
//! no socket, since none of this is about connections. It checks the order
//! of DIGEST §8.6 (which refusal wins when a request has several faults),
//! the status table, and that cache headers follow what `core` decided, not
//! what a result's body claims.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, Response, StatusCode, header};
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_bus::{InMemoryBus, NotificationBus};
use switchyard_core::plugin::PluginResult;
use switchyard_core::{CachePolicy, CacheScope, CallContext, Catalog, Config, ListenHub, Outcome, Plugin, Server};
use switchyard_http::{Health, router};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

/// One tool whose result claims to be cacheable: only `core` may say so.
struct Echo;

impl Plugin for Echo {
    fn id(&self) -> &str {
        "echo"
    }

    fn tools(&self) -> Vec<Value> {
        vec![json!({ "name": "echo", "inputSchema": { "type": "object" } })]
    }

    fn call_tool<'a>(
        &'a self,
        _name: &'a str,
        arguments: Map<String, Value>,
        _cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        let text = arguments.get("text").cloned().unwrap_or(Value::Null);
        Box::pin(async move {
            Ok(Outcome::Complete(json!({
                "content": [{ "type": "text", "text": text }], "ttlMs": 60000, "cacheScope": "public"
            })))
        })
    }
}

async fn app() -> axum::Router {
    let bus: Arc<dyn NotificationBus> = Arc::new(InMemoryBus::new());
    let lists = CachePolicy::new(Duration::from_secs(60), CacheScope::Public);
    let catalog = Catalog::new(vec![Arc::new(Echo)], Arc::clone(&bus), lists).await;
    let hub = ListenHub::spawn(&bus, CancellationToken::new(), Default::default());
    let server = Arc::new(Server::new(catalog, hub, Config::default()));
    let config = switchyard_http::Config { max_body_bytes: 4096, ..Default::default() };
    router(server, config, Health::default(), None, None)
}

const MODERN: &str = "2026-07-28";

/// A modern request for `method` with `params`, its headers as a client sends them.
fn request(method: &str, params: Value) -> Request<Body> {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let mut builder = Request::post("/mcp")
        .header(header::HOST, "localhost")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method);
    if let Some(name) = params.get("name").and_then(Value::as_str) {
        builder = builder.header("mcp-name", name);
    }
    builder.body(Body::from(body.to_string())).unwrap()
}

/// Replaces (or removes, with `None`) one header of a built request.
fn with_header(mut request: Request<Body>, name: &'static str, value: Option<&str>) -> Request<Body> {
    match value {
        Some(value) => request.headers_mut().insert(name, value.parse().unwrap()),
        None => request.headers_mut().remove(name),
    };
    request
}

async fn send(app: &axum::Router, request: Request<Body>) -> (StatusCode, Response<Body>, Value) {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let (parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, Response::from_parts(parts, Body::empty()), body)
}

fn code(body: &Value) -> i64 {
    body["error"]["code"].as_i64().unwrap_or_default()
}

#[tokio::test]
async fn each_fault_is_refused_at_its_step_and_the_first_step_wins() {
    let app = app().await;
    let call = || request("tools/call", json!({ "name": "echo", "arguments": { "text": "hi" } }));

    // Host first: nothing else about the request matters.
    let foreign = with_header(with_header(call(), "host", Some("evil.example")), "content-type", Some("text/plain"));
    assert_eq!(send(&app, foreign).await.0, StatusCode::FORBIDDEN);
    // Then the media type, the size, the JSON.
    assert_eq!(send(&app, with_header(call(), "content-type", Some("text/plain"))).await.0, 415);
    let big = request("tools/call", json!({ "name": "echo", "arguments": { "text": "x".repeat(5000) } }));
    assert_eq!(send(&app, big).await.0, StatusCode::PAYLOAD_TOO_LARGE);
    let (status, _, body) = send(&app, Request::from_parts(call().into_parts().0, Body::from("{"))).await;
    assert_eq!((status, code(&body)), (StatusCode::BAD_REQUEST, -32700));
    // A header that disagrees with the body, then a version we do not serve.
    let mismatch = with_header(call(), "mcp-method", Some("tools/list"));
    assert_eq!(code(&send(&app, mismatch).await.2), -32020);
    let unserved = |version: &str| {
        json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "echo", "_meta": {
            "io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {} } } })
    };
    let (parts, _) = with_header(call(), "mcp-protocol-version", Some("2099-01-01")).into_parts();
    let (status, _, reply) =
        send(&app, Request::from_parts(parts, Body::from(unserved("2099-01-01").to_string()))).await;
    assert_eq!((status, code(&reply)), (StatusCode::BAD_REQUEST, -32022));
    let mut body = unserved(MODERN);
    // Parameters of the wrong shape are the method's own -32602, after the
    // header checks: without `Mcp-Name` the header check answers first.
    body["params"] = json!({ "name": 7, "_meta": { "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {} } });
    let (parts, _) = with_header(call(), "mcp-name", None).into_parts();
    assert_eq!(code(&send(&app, Request::from_parts(parts.clone(), Body::from(body.to_string()))).await.2), -32020);
    let parts = with_header(Request::from_parts(parts, Body::empty()), "mcp-name", Some("7")).into_parts().0;
    let (status, _, reply) = send(&app, Request::from_parts(parts, Body::from(body.to_string()))).await;
    assert_eq!((status, code(&reply)), (StatusCode::BAD_REQUEST, -32602));
    assert_eq!(reply["error"]["message"], "params.name must be a string");
    // A header that disagrees with the body is -32020 even when another
    // member of the body is malformed too: the header checks come first.
    let both = request("tools/call", json!({ "name": "b", "arguments": [] }));
    let (status, _, reply) = send(&app, with_header(both, "mcp-name", Some("a"))).await;
    assert_eq!((status, code(&reply)), (StatusCode::BAD_REQUEST, -32020));
    let state = request("tools/call", json!({ "name": "b", "requestState": 5 }));
    assert_eq!(code(&send(&app, with_header(state, "mcp-name", Some("a"))).await.2), -32020);
    // A legacy client asking for a method its era lacks: unknown, whatever its parameters.
    let legacy = Request::post("/mcp")
        .header(header::HOST, "localhost")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(r#"{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{}}"#))
        .unwrap();
    let (status, _, reply) = send(&app, legacy).await;
    assert_eq!((status, code(&reply)), (StatusCode::NOT_FOUND, -32601));
    // An unknown method is 404; a notification 202; GET has no stream here.
    let (status, _, reply) = send(&app, request("no/such", json!({}))).await;
    assert_eq!((status, code(&reply)), (StatusCode::NOT_FOUND, -32601));
    let notification = Request::post("/mcp")
        .header(header::HOST, "localhost")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#))
        .unwrap();
    assert_eq!(send(&app, notification).await.0, StatusCode::ACCEPTED);
    let get = Request::get("/mcp").header(header::HOST, "localhost").body(Body::empty()).unwrap();
    assert_eq!(send(&app, get).await.0, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn cache_headers_follow_cores_decision_not_the_results_claim() {
    let app = app().await;
    let (status, headers, body) = send(&app, request("tools/list", json!({}))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["result"]["ttlMs"], 60000);
    assert_eq!(headers.headers()[header::CACHE_CONTROL], "max-age=60, public");
    assert!(headers.headers().contains_key(header::ETAG));

    // The tool's result says ttlMs and public, but a tool result is never reused.
    let call = request("tools/call", json!({ "name": "echo", "arguments": { "text": "hi" } }));
    let (status, headers, body) = send(&app, call).await;
    assert_eq!((status, &body["result"]["content"][0]["text"]), (StatusCode::OK, &json!("hi")));
    assert_eq!(headers.headers()[header::CACHE_CONTROL], "no-store");
    assert!(!headers.headers().contains_key(header::ETAG));

    // Nor is a later round of a multi-round request, whatever it asks.
    let retry = request("tools/list", json!({ "requestState": "x" }));
    let (status, headers, _) = send(&app, retry).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers.headers()[header::CACHE_CONTROL], "no-store");
}
