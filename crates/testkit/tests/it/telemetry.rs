//! Telemetry as an operator's collector sees it: two real Switchyard
//! processes (a front and the upstream it republishes) export over OTLP/HTTP
//! to a real receiver on loopback; the span tree of one `tools/call` is
//! asserted across both, and the metrics on `/metrics` and over OTLP.

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_testkit::{Client, OtlpReceiver, ReceivedSpan, ServerProcess, meta};

const SERVER: i32 = 2;
const CLIENT: i32 = 3;
/// An argument value that must never appear in telemetry.
const SECRET: &str = "argument-that-must-not-leak";

fn process_env<'a>(receiver: &'a OtlpReceiver, service: &'a str, database: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("SWITCHYARD_DATABASE_URL", database),
        ("SWITCHYARD_TELEMETRY__OTLP_ENDPOINT", receiver.url()),
        ("SWITCHYARD_TELEMETRY__SERVICE_NAME", service),
        // Nothing is exported on a timer in this test: what arrives was
        // flushed at shutdown.
        ("SWITCHYARD_TELEMETRY__TRACE_INTERVAL", "1h"),
        ("SWITCHYARD_TELEMETRY__METRICS_INTERVAL", "1h"),
    ]
}

async fn call(base: &str, tool: &str, traceparent_meta: Option<&str>, traceparent_header: Option<&str>) -> Value {
    let mut params = json!({ "name": tool, "arguments": { "text": SECRET } });
    params["_meta"] = meta(json!({}));
    if let Some(traceparent) = traceparent_meta {
        params["_meta"]["traceparent"] = json!(traceparent);
    }
    let mut request = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params }));
    for (name, value) in Client::headers_for("tools/call", &params) {
        request = request.header(name, value);
    }
    if let Some(traceparent) = traceparent_header {
        request = request.header("traceparent", traceparent);
    }
    request.send().await.expect("an answer").json().await.expect("a JSON answer")
}

async fn terminate(server: &mut ServerProcess) {
    let pid = server.child().id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs").success());
    for _ in 0..200 {
        if let Some(status) = server.child().try_wait().expect("the process can be waited for") {
            assert!(status.success(), "{status:?}");
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("still running 10 s after SIGTERM");
}

fn find<'a>(spans: &'a [ReceivedSpan], what: &str, wanted: impl Fn(&ReceivedSpan) -> bool) -> &'a ReceivedSpan {
    spans.iter().find(|s| wanted(s)).unwrap_or_else(|| panic!("no {what} among {spans:#?}"))
}

#[tokio::test]
async fn a_tool_call_is_one_trace_across_two_replicas_and_the_metrics_are_exported() {
    let receiver = OtlpReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (front_db, upstream_db) = (
        format!("sqlite://{}", dir.path().join("front.db").display()),
        format!("sqlite://{}", dir.path().join("upstream.db").display()),
    );
    let mut upstream = ServerProcess::start(&process_env(&receiver, "upstream", &upstream_db)).await;
    let mut front = ServerProcess::start(&process_env(&receiver, "front", &front_db)).await;
    let base = front.base_url().to_owned();
    let registered = reqwest::Client::new()
        .post(format!("{base}/admin/v1/plugins"))
        .json(&json!({ "namespace": "up", "kind": "upstream", "spec": { "url": format!("{}/mcp", upstream.base_url()) } }))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 201, "{}", registered.text().await.unwrap());

    // 1. The caller's context in `_meta` only.
    let (trace_a, parent_a) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let answer = call(&base, "up_echo", Some(&format!("00-{trace_a}-{parent_a}-01")), None).await;
    assert_eq!(answer["result"]["content"][0]["text"], SECRET, "{answer}");
    // 2. The caller's context in the W3C header only.
    let (trace_b, parent_b) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let answer = call(&base, "echo", None, Some(&format!("00-{trace_b}-{parent_b}-01"))).await;
    assert_eq!(answer["result"]["content"][0]["text"], SECRET, "{answer}");

    let scrape = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(scrape.status(), 200);
    assert!(scrape.headers()["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    let scrape = scrape.text().await.unwrap();
    for expected in [
        r#"switchyard_tool_calls_total{gen_ai_tool_name="up_echo",outcome="ok"} 1"#,
        r#"switchyard_tool_calls_total{gen_ai_tool_name="echo",outcome="ok"} 1"#,
        r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call"} 2"#,
        r#"http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="200",http_route="/mcp"} 2"#,
        "switchyard_listen_streams 0",
        "# TYPE switchyard_catalog_version gauge",
    ] {
        assert!(scrape.contains(expected), "{expected} missing from\n{scrape}");
    }
    assert!(!scrape.contains(SECRET), "an argument reached a metric");

    // SIGTERM flushes what the exporters hold.
    terminate(&mut front).await;
    terminate(&mut upstream).await;
    let spans = receiver.spans();
    assert!(
        spans.iter().all(|s| s.attributes.iter().all(|(_, v)| !v.contains(SECRET))),
        "an argument reached a span: {spans:#?}"
    );

    // Request 1: HTTP span (a root: no header), MCP span (child of `_meta`'s
    // parent, linked to the HTTP span), plugin span, upstream client span,
    // and on the upstream its HTTP and MCP spans, children of that client span.
    let front_mcp = find(&spans, "front MCP span of request 1", |s| {
        s.service == "front" && s.name == "tools/call up_echo" && s.trace_id == trace_a
    });
    assert_eq!(front_mcp.parent_span_id, parent_a, "{front_mcp:#?}");
    assert_eq!(front_mcp.kind, SERVER);
    assert_eq!(front_mcp.attribute("mcp.method.name"), Some("tools/call"));
    assert_eq!(front_mcp.attribute("gen_ai.tool.name"), Some("up_echo"));
    assert_eq!(front_mcp.attribute("jsonrpc.request.id"), Some("1"));
    assert_eq!(front_mcp.attribute("mcp.protocol.version"), Some("2026-07-28"));
    let front_http = find(&spans, "front HTTP span of request 1", |s| {
        s.service == "front" && s.name == "POST /mcp" && front_mcp.links.contains(&s.span_id)
    });
    assert_eq!((front_http.kind, front_http.parent_span_id.as_str()), (SERVER, ""), "{front_http:#?}");
    assert_eq!(front_http.attribute("http.response.status_code"), Some("200"));
    let plugin = find(&spans, "plugin span", |s| s.parent_span_id == front_mcp.span_id);
    assert!(plugin.name.starts_with("plugin "), "{plugin:#?}");
    let client = find(&spans, "upstream client span", |s| s.parent_span_id == plugin.span_id);
    assert_eq!((client.name.as_str(), client.kind), ("tools/call echo", CLIENT), "{client:#?}");
    let upstream_http = find(&spans, "upstream HTTP span", |s| {
        s.service == "upstream" && s.name == "POST /mcp" && s.parent_span_id == client.span_id
    });
    assert_eq!(upstream_http.trace_id, trace_a);
    let upstream_mcp = find(&spans, "upstream MCP span", |s| s.service == "upstream" && s.name == "tools/call echo");
    assert_eq!(upstream_mcp.parent_span_id, client.span_id, "parent taken from _meta: {upstream_mcp:#?}");
    assert_eq!(upstream_mcp.trace_id, trace_a);

    // Request 2: the header's parent for the HTTP span, which parents the MCP span.
    let http_b = find(&spans, "HTTP span of request 2", |s| {
        s.service == "front" && s.trace_id == trace_b && s.name == "POST /mcp"
    });
    assert_eq!(http_b.parent_span_id, parent_b);
    let mcp_b = find(&spans, "MCP span of request 2", |s| s.name == "tools/call echo" && s.trace_id == trace_b);
    assert_eq!(mcp_b.parent_span_id, http_b.span_id, "{mcp_b:#?}");

    let metrics = receiver.metric_names();
    for name in ["http.server.request.duration", "mcp.server.operation.duration", "switchyard.tool.calls"] {
        assert!(metrics.iter().any(|m| m == name), "{name} not exported over OTLP: {metrics:?}");
    }
}

