// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use switchyard_testkit::{App, Client};

use crate::fixture;

#[tokio::test]
async fn discover_advertises_what_is_served() {
    let app = fixture().await;
    let reply = app.client().request("server/discover", json!({})).await;
    assert_eq!(reply.status, 200);
    let result = reply.result();
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "switchyard");
    assert!(result["capabilities"]["tools"]["listChanged"].as_bool().unwrap());
    assert_eq!(result["cacheScope"], "public");
}

#[tokio::test]
async fn tools_list_is_deterministic_and_paginates_with_opaque_cursors() {
    let app =
        switchyard_testkit::App::start(&[("SWITCHYARD_FIXTURE", "conformance"), ("SWITCHYARD_SERVER__PAGE_SIZE", "7")])
            .await;
    let client = app.client();
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = cursor.as_ref().map_or_else(|| json!({}), |c| json!({ "cursor": c }));
        let reply = client.request("tools/list", params).await;
        let result = reply.result();
        assert!(result["tools"].as_array().unwrap().len() <= 7);
        names.extend(result["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()));
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    let mut sorted = names.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(names, sorted, "every tool once, in a deterministic order");
    assert!(names.contains(&"calculator_arithmetic".to_owned()) && names.contains(&"test_simple_text".to_owned()));

    let bad = client.request("tools/list", json!({ "cursor": "not-a-cursor!" })).await;
    assert_eq!((bad.status, bad.error_code()), (400, Some(-32602)));
}

#[tokio::test]
async fn tools_list_keeps_2020_12_schemas_verbatim() {
    let app = fixture().await;
    let reply = app.client().request("tools/list", json!({})).await;
    let tool = reply.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "json_schema_2020_12_tool")
        .unwrap()
        .clone();
    let schema = &tool["inputSchema"];
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(schema["$defs"]["address"]["$anchor"], "addressDef");
    assert!(schema["if"].is_object() && schema["then"].is_object() && schema["else"].is_object());
    assert_eq!(schema["additionalProperties"], false);
}

async fn call(client: &Client, name: &str, arguments: Value) -> Value {
    let reply = client.request("tools/call", json!({ "name": name, "arguments": arguments })).await;
    assert_eq!(reply.status, 200, "{:?}", reply.messages);
    reply.result().clone()
}

#[tokio::test]
async fn calculator_answers_and_reports_errors_by_position() {
    let app = fixture().await;
    let client = app.client();
    let result = call(&client, "calculator_arithmetic", json!({ "expression": "2 * (3 + 4) ^ 2 / sqrt(16)" })).await;
    assert_eq!(result["structuredContent"]["result"], 24.5);
    assert_eq!(result["content"][0]["text"], "24.5");
    let result = call(&client, "calculator_arithmetic", json!({ "expression": "1 + * 2" })).await;
    assert_eq!(result["isError"], true);
    assert!(result["content"][0]["text"].as_str().unwrap().contains("position 5"));
}

#[tokio::test]
async fn invalid_arguments_are_tool_errors_and_unknown_tools_are_protocol_errors() {
    let app = fixture().await;
    let client = app.client();
    let result = call(&client, "echo", json!({ "text": 5 })).await;
    assert_eq!(result["isError"], true, "schema failures go to the model (SEP-1303)");
    assert!(result["content"][0]["text"].as_str().unwrap().contains("/text"));
    let result = call(&client, "echo", json!({ "text": "hi", "extra": 1 })).await;
    assert_eq!(result["isError"], true);
    let reply = client.request("tools/call", json!({ "name": "no_such_tool", "arguments": {} })).await;
    assert_eq!((reply.status, reply.error_code()), (400, Some(-32602)));
    let reply = client.request("tools/call", json!({ "name": "echo", "arguments": [1] })).await;
    assert_eq!(reply.error_code(), Some(-32602));
}

#[tokio::test]
async fn every_content_type_validates_against_the_schema() {
    let app = fixture().await;
    let client = app.client();
    for tool in [
        "test_resource_link",
        "test_simple_text",
        "test_image_content",
        "test_audio_content",
        "test_embedded_resource",
        "test_multiple_content_types",
    ] {
        let result = call(&client, tool, json!({})).await;
        assert!(result["content"].as_array().is_some_and(|c| !c.is_empty()), "{tool}");
    }
}

#[tokio::test]
async fn mrtr_round_trip_with_sealed_state() {
    let app = fixture().await;
    let client = app.client();
    let caps = json!({ "elicitation": {} });
    let params = json!({ "name": "test_input_required_result_request_state", "arguments": {} });
    let first = client.request_with("tools/call", params.clone(), caps.clone()).await;
    let result = first.result();
    assert_eq!(result["resultType"], "input_required");
    let state = result["requestState"].as_str().unwrap().to_owned();
    assert!(first.headers.get("cache-control").unwrap() == "no-store");

    let mut retry = params.clone();
    retry["inputResponses"] = json!({ "confirm": { "action": "accept", "content": { "ok": true } } });
    retry["requestState"] = json!(state);
    let done = client.request_with("tools/call", retry.clone(), caps.clone()).await;
    assert!(done.result()["content"][0]["text"].as_str().unwrap().contains("state-ok"));

    // Tampered, or replayed against other arguments: refused.
    let mut tampered = retry.clone();
    tampered["requestState"] = json!(format!("{state}x"));
    let reply = client.request_with("tools/call", tampered, caps.clone()).await;
    assert_eq!(reply.error_code(), Some(-32602));
    let mut elsewhere = retry;
    elsewhere["name"] = json!("test_input_required_result_tampered_state");
    let reply = client.request_with("tools/call", elsewhere, caps).await;
    assert_eq!(reply.error_code(), Some(-32602));
}

#[tokio::test]
async fn input_requests_need_the_declared_capability() {
    let app = fixture().await;
    let client = app.client();
    let params = json!({ "name": "test_input_required_result_elicitation", "arguments": {} });
    let reply = client.request_with("tools/call", params, json!({ "sampling": {} })).await;
    assert_eq!((reply.status, reply.error_code()), (400, Some(-32021)));
    assert_eq!(reply.response()["error"]["data"]["requiredCapabilities"], json!({ "elicitation": { "form": {} } }));
}

#[tokio::test]
async fn progress_streams_as_sse_only_when_asked() {
    let app = fixture().await;
    let client = app.client();
    let mut params = json!({ "name": "test_tool_with_progress", "arguments": {} });
    let plain = client.request("tools/call", params.clone()).await;
    assert!(plain.content_type().starts_with("application/json"), "no token, no stream");
    let mut meta = switchyard_testkit::meta(json!({}));
    meta["progressToken"] = json!("p1");
    params["_meta"] = meta;
    let streamed = client.request("tools/call", params).await;
    assert!(streamed.content_type().starts_with("text/event-stream"));
    assert_eq!(streamed.headers["x-accel-buffering"], "no");
    let progress: Vec<f64> = streamed
        .messages
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress, [0.0, 50.0, 100.0]);
    assert!(streamed.response()["result"]["content"].is_array());
}

#[tokio::test]
async fn log_messages_only_with_a_log_level() {
    let app = fixture().await;
    let client = app.client();
    let params = json!({ "name": "test_tool_with_logging", "arguments": {} });
    let quiet = client.request("tools/call", params.clone()).await;
    assert_eq!(quiet.messages.len(), 1);
    let mut with_level = params;
    let mut meta = switchyard_testkit::meta(json!({}));
    meta["io.modelcontextprotocol/logLevel"] = json!("info");
    with_level["_meta"] = meta;
    let logged = client.request("tools/call", with_level).await;
    assert_eq!(logged.messages.iter().filter(|m| m["method"] == "notifications/message").count(), 3);
}

#[tokio::test]
async fn version_and_meta_errors() {
    let app = fixture().await;
    let client = app.client();
    let reply = client
        .request("server/discover", json!({ "_meta": { "io.modelcontextprotocol/clientCapabilities": {} } }))
        .await;
    assert_eq!((reply.status, reply.error_code()), (400, Some(-32602)));
    // The header agrees with the body here, so the version itself is refused.
    let body = json!({ "jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": { "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2099-01-01", "io.modelcontextprotocol/clientCapabilities": {} } } });
    let mut headers = Client::headers_for("server/discover", &body["params"]);
    headers.retain(|(k, _)| k != "mcp-protocol-version");
    headers.push(("mcp-protocol-version".into(), "2099-01-01".into()));
    let reply = client.send(body.to_string().into_bytes(), &headers, None).await;
    assert_eq!((reply.status, reply.error_code()), (400, Some(-32022)));
    assert_eq!(reply.response()["error"]["data"], json!({ "supported": ["2026-07-28"], "requested": "2099-01-01" }));
    assert_eq!(reply.response()["id"], 9);
    for removed in ["initialize", "ping", "logging/setLevel", "resources/subscribe", "tasks/result", "no/such"] {
        let reply = client.request(removed, json!({})).await;
        assert_eq!((reply.status, reply.error_code()), (404, Some(-32601)), "{removed}");
    }
}

#[tokio::test]
async fn resources_prompts_and_completion() {
    let app = fixture().await;
    let client = app.client();
    let read = client.request("resources/read", json!({ "uri": "test://template/42/data" })).await;
    assert!(read.result()["contents"][0]["text"].as_str().unwrap().contains("Data for ID: 42"));
    assert!(read.result()["ttlMs"].is_u64());
    let missing = client.request("resources/read", json!({ "uri": "test://nope" })).await;
    assert_eq!(
        (missing.error_code(), missing.response()["error"]["data"]["uri"].as_str()),
        (Some(-32602), Some("test://nope"))
    );
    let prompt = client
        .request(
            "prompts/get",
            json!({ "name": "test_prompt_with_arguments", "arguments": { "arg1": "a", "arg2": "b" } }),
        )
        .await;
    assert_eq!(prompt.result()["messages"][0]["content"]["text"], "Prompt with arguments: arg1='a', arg2='b'");
    let missing_arg = client
        .request("prompts/get", json!({ "name": "test_prompt_with_arguments", "arguments": { "arg1": "a" } }))
        .await;
    assert_eq!(missing_arg.error_code(), Some(-32602));
    let completion = client.request("completion/complete", json!({
        "ref": { "type": "ref/prompt", "name": "test_prompt_with_arguments" }, "argument": { "name": "arg1", "value": "par" } })).await;
    assert_eq!(completion.result()["completion"]["values"], json!(["paris", "park", "party"]));
}

#[tokio::test]
async fn legacy_clients_are_served_statelessly() {
    let app = fixture().await;
    let client = app.client();
    let json_headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("accept".to_owned(), "application/json, text/event-stream".to_owned()),
    ];
    let init = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "old", "version": "1" } } });
    let reply = client.send_legacy(init.to_string().into_bytes(), &json_headers).await;
    assert_eq!(reply.result()["protocolVersion"], "2025-06-18");
    assert!(reply.headers.get("mcp-session-id").is_none(), "no session is minted");
    let list = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" });
    let reply = client.send_legacy(list.to_string().into_bytes(), &json_headers).await;
    assert!(reply.result()["tools"].is_array());
    assert!(reply.result().get("resultType").is_none());
    let ping = json!({ "jsonrpc": "2.0", "id": 3, "method": "ping" });
    assert_eq!(client.send_legacy(ping.to_string().into_bytes(), &json_headers).await.result(), &json!({}));
}

#[tokio::test]
async fn cacheable_results_carry_http_cache_headers_and_etags() {
    let app = fixture().await;
    let client = app.client();
    let first = client.request("tools/list", json!({})).await;
    assert_eq!(first.headers["cache-control"], "max-age=60, public");
    let etag = first.headers["etag"].to_str().unwrap().to_owned();
    let params = json!({ "_meta": switchyard_testkit::meta(json!({})) });
    let mut headers = Client::headers_for("tools/list", &params);
    headers.push(("if-none-match".into(), etag));
    let body = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": params });
    let second = client.send(body.to_string().into_bytes(), &headers, None).await;
    assert_eq!(second.status, 304);
    let call = client.request("tools/call", json!({ "name": "echo", "arguments": { "text": "x" } })).await;
    assert_eq!(call.headers["cache-control"], "no-store");
}

#[tokio::test]
async fn header_mismatches_are_refused() {
    let app = fixture().await;
    let client = app.client();
    let params = json!({ "name": "test_custom_header", "arguments": { "region": "eu west" }, "_meta": switchyard_testkit::meta(json!({})) });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params }).to_string();
    let base = Client::headers_for("tools/call", &params);
    let with = |extra: &[(&str, &str)]| {
        let mut h = base.clone();
        h.extend(extra.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        h
    };
    let ok =
        client.send(body.clone().into_bytes(), &with(&[("mcp-param-region", "eu west")]), Some("tools/call")).await;
    assert_eq!(ok.status, 200);
    let encoded = client
        .send(body.clone().into_bytes(), &with(&[("Mcp-Param-Region", "=?base64?ZXUgd2VzdA==?=")]), Some("tools/call"))
        .await;
    assert_eq!(encoded.status, 200);
    for bad in [vec![], vec![("mcp-param-region", "us")], vec![("mcp-param-region", "=?base64?!!?=")]] {
        let reply = client.send(body.clone().into_bytes(), &with(&bad), None).await;
        assert_eq!((reply.status, reply.error_code()), (400, Some(-32020)), "{bad:?}");
    }
    let mut wrong_method = with(&[("mcp-param-region", "eu west")]);
    wrong_method.retain(|(k, _)| k != "mcp-method");
    wrong_method.push(("mcp-method".into(), "TOOLS/CALL".into()));
    let reply = client.send(body.into_bytes(), &wrong_method, None).await;
    assert_eq!((reply.status, reply.error_code()), (400, Some(-32020)));
}

/// A `state.keys` entry for tests whose replicas must trust each other's
/// sealed state and request ids, as a deployment's replicas do.
pub(crate) use switchyard_testkit::SHARED_STATE_KEY;

/// Calls `tool` (the fixture's `test_elicitation`, or a republished copy)
/// as a legacy client at `call_url`, answers the server's
/// `elicitation/create` with a POST to `answer_url`, and returns the
/// messages of the call's stream (the request, then the result).
pub(crate) async fn legacy_elicitation(tool: &str, call_url: &str, answer_url: &str) -> Vec<Value> {
    use futures::StreamExt as _;
    let http = reqwest::Client::new();
    let call = json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": { "name": tool, "arguments": { "message": "Who are you?" } } });
    let response = http
        .post(call_url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    let mut events = Vec::new();
    while events.len() < 2 {
        let chunk =
            tokio::time::timeout(std::time::Duration::from_secs(5), body.next()).await.unwrap().unwrap().unwrap();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) {
                let message: Value = serde_json::from_str(data).unwrap();
                if message["method"] == "elicitation/create" {
                    assert_eq!(message["params"]["message"], "Who are you?");
                    let answer = json!({ "jsonrpc": "2.0", "id": message["id"],
                        "result": { "action": "accept", "content": { "username": "ada", "email": "ada@example.com" } } });
                    let posted = http
                        .post(answer_url)
                        .header("content-type", "application/json")
                        .body(answer.to_string())
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(posted.status(), 202);
                }
                events.push(message);
            }
        }
    }
    events
}

#[tokio::test]
async fn legacy_clients_answer_input_requests_on_the_response_stream() {
    let app = fixture().await;
    let events = legacy_elicitation("test_elicitation", app.url(), app.url()).await;
    assert_eq!(events[1]["id"], 5);
    assert!(events[1]["result"]["content"][0]["text"].as_str().unwrap().contains("ada"));

    let http = reqwest::Client::new();
    // An answer nobody awaits is refused, not silently taken.
    let stray = json!({ "jsonrpc": "2.0", "id": "switchyard-0", "result": {} });
    let posted =
        http.post(app.url()).header("content-type", "application/json").body(stray.to_string()).send().await.unwrap();
    assert_eq!(posted.status(), 400);
}

/// Behind a round-robin balancer the answer lands on another replica, which
/// relays it over the Redis bus to the replica holding the call.
#[tokio::test]
async fn a_legacy_answer_reaches_the_call_on_another_replica() {
    let redis = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("switchyard-legacy-{}:", std::process::id());
    let env = [
        ("SWITCHYARD_FIXTURE", "conformance"),
        // Replicas recognise each other's request ids by the keys they share.
        ("SWITCHYARD_STATE__KEYS", SHARED_STATE_KEY),
        ("SWITCHYARD_REDIS_URL", redis.as_str()),
        ("SWITCHYARD_REDIS_PREFIX", prefix.as_str()),
    ];
    let (one, two) = (App::start(&env).await, App::start(&env).await);
    let events = legacy_elicitation("test_elicitation", one.url(), two.url()).await;
    assert_eq!(events[1]["id"], 5, "{events:?}");
    assert!(events[1]["result"]["content"][0]["text"].as_str().unwrap().contains("ada"), "{events:?}");
}
