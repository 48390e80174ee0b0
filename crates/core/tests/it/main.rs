//! Dispatch through `core::Server` with a probe plugin, no transport: the
//! behaviours a transport cannot show directly (cancellation reaching the
//! plugin, deadlines, output checks, capability checks on input requests).

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_bus::{Delivery, Event, InMemoryBus, NotificationBus};
use switchyard_core::plugin::PluginResult;
use switchyard_core::state::StateKey;
use switchyard_core::{
    CachePolicy, CacheScope, CallContext, Caller, Catalog, Config, Execution, ListenHub, Outcome, Plugin, Server,
};
use switchyard_protocol::result_text::{Leaves, ToolResultText};
use switchyard_protocol::version::Era;
use switchyard_protocol::{RequestId, jsonrpc};
use tokio_util::sync::CancellationToken;

/// A plugin whose tools exercise the server's edges.
#[derive(Default)]
struct Probe {
    cancelled: Arc<AtomicBool>,
    /// Whether a `text_*` tool was last answered as text.
    gave_text: AtomicBool,
}

fn schema() -> Value {
    json!({ "type": "object" })
}

fn n_schema() -> Value {
    json!({ "type": "object", "properties": { "n": { "type": "integer" } }, "required": ["n"] })
}

/// The result each `text_*` tool writes: its `structuredContent`'s text.
fn text_result(tool: &str) -> String {
    let structured = match tool {
        "text_good" => r#"{"n":3}"#,
        "text_bad" => r#"{"n":"three"}"#,
        _ => r#"{"n":"three","n":3}"#,
    };
    format!(r#"{{"content":[{{"type":"text","text":"{tool}"}}],"structuredContent":{structured}}}"#)
}

impl Plugin for Probe {
    fn id(&self) -> &str {
        "probe"
    }

    fn tools(&self) -> Vec<Value> {
        vec![
            json!({ "name": "wait_for_cancel", "inputSchema": schema() }),
            json!({ "name": "sleep_long", "inputSchema": schema() }),
            json!({ "name": "bad_output", "inputSchema": schema(), "outputSchema": n_schema() }),
            json!({ "name": "needs_url_elicitation", "inputSchema": schema() }),
            json!({ "name": "not a valid name", "inputSchema": schema() }),
            json!({ "name": "text_good", "inputSchema": schema(), "outputSchema": n_schema() }),
            json!({ "name": "text_bad", "inputSchema": schema(), "outputSchema": n_schema() }),
            json!({ "name": "text_twice", "inputSchema": schema(), "outputSchema": n_schema() }),
            json!({ "name": "no_object_root", "inputSchema": { "type": "string" } }),
        ]
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        _arguments: Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        Box::pin(async move {
            match name {
                "wait_for_cancel" => {
                    // Work that outlives the call's future (a blocking thread, a
                    // WASM instance) learns of the cancellation through the token.
                    let token = cx.cancellation().clone();
                    let cancelled = Arc::clone(&self.cancelled);
                    tokio::spawn(async move {
                        token.cancelled().await;
                        cancelled.store(true, Ordering::SeqCst);
                    });
                    std::future::pending::<()>().await;
                    unreachable!()
                }
                "sleep_long" => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(Outcome::Complete(json!({ "content": [] })))
                }
                "bad_output" => Ok(Outcome::Complete(json!({ "content": [], "structuredContent": { "n": "three" } }))),
                tool if tool.starts_with("text_") => {
                    let text = text_result(tool);
                    let kept = ToolResultText::read(&text, Leaves::Nothing).ok().filter(|_| cx.takes_result_text());
                    self.gave_text.store(kept.is_some(), Ordering::SeqCst);
                    match kept {
                        Some(kept) => Ok(Outcome::CompleteText(kept)),
                        None => Ok(Outcome::Complete(serde_json::from_str(&text).unwrap())),
                    }
                }
                _ => {
                    let request = json!({ "method": "elicitation/create", "params": { "mode": "url", "message": "Sign in", "url": "https://example.com" } });
                    Ok(Outcome::InputRequired {
                        requests: [("login".to_owned(), request)].into_iter().collect(),
                        state: None,
                    })
                }
            }
        })
    }
}

async fn server(probe: Probe, call_timeout: Duration) -> (Server, Arc<dyn NotificationBus>) {
    server_of(Arc::new(probe), call_timeout).await
}

async fn server_of(probe: Arc<dyn Plugin>, call_timeout: Duration) -> (Server, Arc<dyn NotificationBus>) {
    let bus: Arc<dyn NotificationBus> = Arc::new(InMemoryBus::new());
    let policy = CachePolicy::new(Duration::from_secs(60), CacheScope::Public);
    let catalog = Catalog::new(vec![probe], Arc::clone(&bus), policy).await;
    let hub = ListenHub::spawn(
        &bus,
        CancellationToken::new(),
        switchyard_core::ListenLimits { queue: 8, ..Default::default() },
    );
    let config = Config {
        server_name: "test".into(),
        server_version: "0".into(),
        instructions: None,
        page_size: 10,
        discover_cache: policy,
        read_cache: policy,
        call_timeout,
        state_keys: vec![StateKey { id: "k".into(), secret: vec![7; 32].into() }],
        state_lifetime: Duration::from_secs(60),
        state_single_use: true,
        policy: Default::default(),
    };
    (Server::new(catalog, hub, config), bus)
}

fn params(value: Value) -> Map<String, Value> {
    let mut params = value.as_object().cloned().unwrap_or_default();
    params.insert(
        "_meta".into(),
        json!({ "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} } }),
    );
    params
}

async fn call(server: &Server, tool: &str) -> Execution {
    let prepared = server
        .prepare(RequestId::Number(1), "tools/call", params(json!({ "name": tool })), false, Caller::default())
        .unwrap();
    server.execute(prepared, None).await
}

#[tokio::test]
async fn dropping_a_request_cancels_the_plugin() {
    let probe = Probe::default();
    let cancelled = Arc::clone(&probe.cancelled);
    let (server, _) = server(probe, Duration::from_secs(60)).await;
    let server = Arc::new(server);
    let running = tokio::spawn({
        let server = Arc::clone(&server);
        async move { call(&server, "wait_for_cancel").await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!cancelled.load(Ordering::SeqCst));
    running.abort(); // what a closed HTTP response does to the request future
    let _ = running.await;
    for _ in 0..100 {
        if cancelled.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the plugin's cancellation token did not fire when the request was dropped");
}

#[tokio::test]
async fn a_call_past_its_deadline_is_a_tool_error() {
    let (server, _) = server(Probe::default(), Duration::from_millis(100)).await;
    let Execution::Result { result, .. } = call(&server, "sleep_long").await else { panic!("a result") };
    let result = result.into_value();
    assert_eq!(result["isError"], true);
    assert!(result["content"][0]["text"].as_str().unwrap().contains("timed out"));
}

#[tokio::test]
async fn output_that_breaks_the_output_schema_is_a_tool_error() {
    let (server, _) = server(Probe::default(), Duration::from_secs(5)).await;
    let Execution::Result { result, .. } = call(&server, "bad_output").await else { panic!("a result") };
    let result = result.into_value();
    assert_eq!(result["isError"], true);
    assert_eq!(result["content"][0]["text"], "Tool bad_output produced invalid output");
}

/// The result of `tool` as its client reads it, in the era `modern` says.
async fn written_result(server: &Server, tool: &str, modern: bool) -> Value {
    let params =
        if modern { params(json!({ "name": tool })) } else { json!({ "name": tool }).as_object().cloned().unwrap() };
    let prepared = server.prepare(RequestId::Number(1), "tools/call", params, false, Caller::default()).unwrap();
    let Execution::Result { result, .. } = server.execute(prepared, None).await else { panic!("a result") };
    let written: Value = serde_json::from_slice(&jsonrpc::finished(&RequestId::Number(1), &result)).unwrap();
    written["result"].clone()
}

#[tokio::test]
async fn a_result_kept_as_text_goes_out_as_its_value_would() {
    let probe = Arc::new(Probe::default());
    let (server, _) = server_of(Arc::clone(&probe) as Arc<dyn Plugin>, Duration::from_secs(5)).await;
    let value: Value = serde_json::from_str(&text_result("text_good")).unwrap();
    let modern = written_result(&server, "text_good", true).await;
    assert!(probe.gave_text.load(Ordering::SeqCst), "a modern call takes text");
    let mut stamped = value.clone();
    stamped["resultType"] = json!("complete");
    stamped["_meta"] = json!({ "io.modelcontextprotocol/serverInfo": { "name": "test", "version": "0" } });
    assert_eq!(modern, stamped);
    let legacy = written_result(&server, "text_good", false).await;
    assert!(probe.gave_text.load(Ordering::SeqCst), "so does a 2025-era one");
    assert_eq!(legacy, value);
    // Checked against the output schema as a value would be.
    let bad = written_result(&server, "text_bad", true).await;
    assert_eq!(bad["isError"], true);
    assert_eq!(bad["content"][0]["text"], "Tool text_bad produced invalid output");
    // A key given twice in `structuredContent`: built, the last stands, and that is checked and sent.
    let twice = written_result(&server, "text_twice", true).await;
    assert!(!probe.gave_text.load(Ordering::SeqCst));
    assert_eq!(twice["structuredContent"], json!({ "n": 3 }));
    assert_eq!(twice.get("isError"), None);
}

#[tokio::test]
async fn url_elicitation_needs_the_url_capability() {
    let (server, _) = server(Probe::default(), Duration::from_secs(5)).await;
    let Execution::Error { error, .. } = call(&server, "needs_url_elicitation").await else { panic!("an error") };
    assert_eq!(error.code, -32021);
    assert_eq!(error.data.unwrap()["requiredCapabilities"], json!({ "elicitation": { "url": {} } }));
}

#[tokio::test]
async fn invalid_tool_definitions_are_not_listed() {
    let (server, _) = server(Probe::default(), Duration::from_secs(5)).await;
    let names: Vec<String> = server.catalog().snapshot().tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(
        names,
        ["bad_output", "needs_url_elicitation", "sleep_long", "text_bad", "text_good", "text_twice", "wait_for_cancel"]
    );
}

#[tokio::test]
async fn era_classification() {
    let (server, _) = server(Probe::default(), Duration::from_secs(5)).await;
    let legacy = server.prepare(RequestId::Number(1), "tools/list", Map::new(), false, Caller::default()).unwrap();
    assert_eq!(legacy.era, Era::Legacy);
    // A modern header without _meta is a modern request with a missing _meta.
    let error = server.prepare(RequestId::Number(1), "tools/list", Map::new(), true, Caller::default()).unwrap_err();
    assert_eq!(error.code, -32602);
    let mut old = params(json!({}));
    old["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let error = server.prepare(RequestId::Number(1), "tools/list", old, false, Caller::default()).unwrap_err();
    assert_eq!(error.code, -32022, "a modern envelope naming a legacy version is refused");
}

#[tokio::test]
async fn a_rebuild_publishes_only_lists_that_changed() {
    let (server, bus) = server(Probe::default(), Duration::from_secs(5)).await;
    let mut events = bus.subscribe();
    server.catalog().rebuild().await;
    server.catalog().replace_plugins(Vec::new()).await;
    let next = tokio::time::timeout(Duration::from_secs(1), events.recv()).await.unwrap();
    assert!(matches!(next, Some(Delivery::Event(Event::ToolsListChanged { .. }))), "{next:?}");
    assert!(
        tokio::time::timeout(Duration::from_millis(100), events.recv()).await.is_err(),
        "prompts and resources did not change"
    );
}
