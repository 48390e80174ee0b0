use serde_json::json;
use switchyard_testkit::{App, Client};

use crate::fixture;

fn standard(method: &str) -> Vec<(String, String)> {
    Client::headers_for(method, &json!({}))
}

#[tokio::test]
async fn bad_input_battery_gets_documented_errors_and_the_server_stays_up() {
    let app = fixture().await;
    let client = app.client();
    let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
    let cases: Vec<(&str, Vec<u8>, u16, Option<i64>)> = vec![
        ("malformed JSON", b"{\"jsonrpc\":".to_vec(), 400, Some(-32700)),
        ("deeply nested JSON", deep.into_bytes(), 400, Some(-32700)),
        ("invalid UTF-8", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}".to_vec(), 400, Some(-32700)),
        ("batch", br#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#.to_vec(), 400, Some(-32600)),
        ("response body", br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec(), 400, Some(-32600)),
        ("null id", br#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#.to_vec(), 400, Some(-32600)),
        ("params not an object", br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":"x"}"#.to_vec(), 400, Some(-32600)),
        ("_meta of the wrong type", br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":[]}}"#.to_vec(), 400, Some(-32602)),
        ("capabilities of the wrong type", br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":"all"}}}"#.to_vec(), 400, Some(-32602)),
        ("name of the wrong type", br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#.to_vec(), 400, None),
        ("cursor of the wrong type", br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"cursor":5,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#.to_vec(), 400, Some(-32602)),
        ("notification", br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec(), 202, None),
    ];
    for (what, body, status, code) in cases {
        let method = if what.contains("name") { "tools/call" } else { "tools/list" };
        let reply = client.send(body, &standard(method), None).await;
        assert_eq!(reply.status, status, "{what}: {:?}", reply.messages);
        if let Some(code) = code {
            assert_eq!(reply.error_code(), Some(code), "{what}");
        }
    }
    assert_eq!(reqwest::get(format!("{}/healthz", app.base_url())).await.unwrap().status(), 200);
}

#[tokio::test]
async fn wrong_types_in_every_field_are_invalid_params() {
    let app = fixture().await;
    let client = app.client();
    // (method, params with one member of the wrong type, the error code)
    let cases = [
        ("tools/call", json!({ "name": 7 }), -32602),
        ("tools/call", json!({ "name": "echo", "arguments": "text" }), -32602),
        ("tools/call", json!({ "name": "echo", "arguments": { "text": "x" }, "inputResponses": [] }), -32602),
        ("tools/call", json!({ "name": "echo", "arguments": { "text": "x" }, "inputResponses": { "k": 1 } }), -32602),
        ("tools/call", json!({ "name": "echo", "arguments": { "text": "x" }, "requestState": 5 }), -32602),
        ("tools/list", json!({ "cursor": 5 }), -32602),
        ("resources/read", json!({ "uri": 5 }), -32602),
        ("prompts/get", json!({ "name": ["x"] }), -32602),
        (
            "prompts/get",
            json!({ "name": "test_prompt_with_arguments", "arguments": { "arg1": 1, "arg2": "b" } }),
            -32602,
        ),
        (
            "completion/complete",
            json!({ "ref": { "type": "ref/unknown" }, "argument": { "name": "a", "value": "b" } }),
            -32602,
        ),
        (
            "completion/complete",
            json!({ "ref": { "type": "ref/prompt", "name": 3 }, "argument": { "name": "a", "value": "b" } }),
            -32602,
        ),
        ("subscriptions/listen", json!({ "notifications": "all" }), -32602),
        ("subscriptions/listen", json!({ "notifications": { "toolsListChanged": "yes" } }), -32602),
        ("subscriptions/listen", json!({ "notifications": { "resourceSubscriptions": [1] } }), -32602),
    ];
    for (method, params, code) in cases {
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params.clone() });
        let mut with_meta = body.clone();
        with_meta["params"]["_meta"] = switchyard_testkit::meta(json!({}));
        let mut headers = standard(method);
        // A client mirrors whatever it put in the body, wrong type or not.
        if let Some(name) = params.get("name").or(params.get("uri")) {
            headers.push(("mcp-name".into(), name.as_str().map_or_else(|| name.to_string(), str::to_owned)));
        }
        let reply = client.send(with_meta.to_string().into_bytes(), &headers, None).await;
        assert_eq!(reply.error_code(), Some(code), "{method} {params}: {:?}", reply.messages);
    }
    // And in `_meta` itself.
    for (key, value) in [
        ("io.modelcontextprotocol/protocolVersion", json!(2026)),
        ("io.modelcontextprotocol/clientCapabilities", json!([])),
        ("io.modelcontextprotocol/logLevel", json!(3)),
        ("progressToken", json!({})),
    ] {
        let mut meta = switchyard_testkit::meta(json!({}));
        meta[key] = value;
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": { "_meta": meta } });
        let reply = client.send(body.to_string().into_bytes(), &standard("tools/list"), None).await;
        assert_eq!((reply.status, reply.error_code()), (400, Some(-32602)), "_meta {key}");
    }
}

#[tokio::test]
async fn missing_standard_headers_are_header_mismatches() {
    let app = fixture().await;
    let client = app.client();
    let params = json!({ "name": "echo", "arguments": { "text": "x" }, "_meta": switchyard_testkit::meta(json!({})) });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params }).to_string();
    let all = Client::headers_for("tools/call", &params);
    for missing in ["mcp-protocol-version", "mcp-method", "mcp-name"] {
        let headers: Vec<_> = all.iter().filter(|(k, _)| k != missing).cloned().collect();
        let reply = client.send(body.clone().into_bytes(), &headers, None).await;
        assert_eq!((reply.status, reply.error_code()), (400, Some(-32020)), "without {missing}");
    }
    let mut wrong_name = all.clone();
    wrong_name.retain(|(k, _)| k != "mcp-name");
    wrong_name.push(("mcp-name".into(), "calculator_arithmetic".into()));
    let reply = client.send(body.into_bytes(), &wrong_name, None).await;
    assert_eq!((reply.status, reply.error_code()), (400, Some(-32020)));
}

#[tokio::test]
async fn wrong_headers_and_methods() {
    let app = fixture().await;
    let client = app.client();
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#.to_vec();
    let mut text = standard("tools/list");
    text.retain(|(k, _)| k != "content-type");
    text.push(("content-type".into(), "text/plain".into()));
    assert_eq!(client.send(body.clone(), &text, None).await.status, 415);

    let http = reqwest::Client::new();
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let response = http.request(method, app.url()).send().await.unwrap();
        assert_eq!(response.status(), 405);
        assert_eq!(response.headers()["allow"], "POST");
    }
    let evil_origin = http
        .post(app.url())
        .header("origin", "https://evil.example")
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(evil_origin.status(), 403);
    let evil_host = http
        .post(app.url())
        .header("host", "evil.example")
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(evil_host.status(), 403);
    let good_origin = http
        .post(app.url())
        .header("origin", "http://localhost:3000")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_ne!(good_origin.status(), 403);
}

#[tokio::test]
async fn oversized_bodies_and_headers_are_refused() {
    let app = switchyard_testkit::App::start(&[("SWITCHYARD_HTTP__MAX_BODY_BYTES", "1024")]).await;
    let client = app.client();
    let big = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "echo", "arguments": { "text": "x".repeat(4096) } } });
    let reply = client.send(big.to_string().into_bytes(), &standard("tools/call"), None).await;
    assert_eq!(reply.status, 413);
    let huge_header = "y".repeat(1024 * 1024);
    let response = reqwest::Client::new()
        .post(app.url())
        .header("x-padding", huge_header)
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await;
    assert!(response.map(|r| r.status().as_u16() == 431 || r.status().is_client_error()).unwrap_or(true));
    assert_eq!(reqwest::get(format!("{}/healthz", app.base_url())).await.unwrap().status(), 200);
}

/// A client that connects and says nothing, trickles a request head, or
/// starts the HTTP/2 preface and stops, loses its connection after
/// `http.header_read_timeout`; so does an idle keep-alive connection
/// between requests. A prompt client on the same server is answered.
#[tokio::test]
async fn silent_and_trickling_clients_are_disconnected_after_the_head_deadline() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let app = switchyard_testkit::App::start(&[("SWITCHYARD_HTTP__HEADER_READ_TIMEOUT", "300ms")]).await;
    let address = app.base_url().trim_start_matches("http://").to_owned();
    let host = format!("POST /mcp HTTP/1.1\r\nhost: {address}\r\n");
    let health = format!("GET /healthz HTTP/1.1\r\nhost: {address}\r\n\r\n");
    for (what, sent) in [
        ("nothing", String::new()),
        ("half a request head", host.clone()),
        ("half the HTTP/2 preface", "PRI * HTTP/2.0\r\n".to_owned()),
        ("one request, then nothing on the kept-alive connection", health),
    ] {
        let started = std::time::Instant::now();
        let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
        socket.write_all(sent.as_bytes()).await.unwrap();
        let mut answered = Vec::new();
        let read = tokio::time::timeout(std::time::Duration::from_secs(5), socket.read_to_end(&mut answered)).await;
        assert!(read.is_ok(), "{what}: the connection is still open after 5 s");
        assert!(started.elapsed() >= std::time::Duration::from_millis(250), "{what}: closed before the deadline");
        let answered = String::from_utf8_lossy(&answered);
        if sent.starts_with("GET") {
            assert!(answered.starts_with("HTTP/1.1 200"), "{what}: {answered}");
        }
    }
    assert_eq!(app.client().request("tools/list", json!({})).await.status, 200);
}

/// The head deadline of a kept-alive HTTP/1.1 connection counts from its
/// last answer, whichever request that was: the connection keeps one timer
/// from head to head (`head_timer`), moved on each time, never left at an
/// earlier request's deadline.
#[tokio::test]
async fn the_head_deadline_counts_from_the_last_request_on_a_kept_alive_connection() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let app = switchyard_testkit::App::start(&[("SWITCHYARD_HTTP__HEADER_READ_TIMEOUT", "600ms")]).await;
    let address = app.base_url().trim_start_matches("http://").to_owned();
    let health = format!("GET /healthz HTTP/1.1\r\nhost: {address}\r\n\r\n");
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let mut answer = [0; 512];
    // Four requests 350 ms apart: the connection outlives the deadlines of
    // the first heads (600 ms after each was awaited) by far.
    let mut answered = std::time::Instant::now();
    for round in 0..4 {
        if round > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(350)).await;
        }
        socket.write_all(health.as_bytes()).await.unwrap();
        let read = socket.read(&mut answer).await.unwrap();
        assert!(String::from_utf8_lossy(&answer[..read]).starts_with("HTTP/1.1 200"), "round {round}");
        answered = std::time::Instant::now();
    }
    // Then nothing: closed 600 ms after the last answer.
    let closed = tokio::time::timeout(std::time::Duration::from_secs(5), socket.read(&mut answer)).await;
    assert_eq!(closed.expect("closed after the deadline").expect("a clean close"), 0);
    let after = answered.elapsed();
    assert!(after >= std::time::Duration::from_millis(500), "closed {after:?} after the last answer");
}

#[tokio::test]
async fn shutdown_lets_a_request_in_flight_finish() {
    let app = fixture().await;
    let mut meta = switchyard_testkit::meta(json!({}));
    meta["progressToken"] = json!("p");
    let params = json!({ "name": "test_tool_with_progress", "arguments": {}, "_meta": meta });
    // Shut down as soon as the first progress notification is in; the call
    // still has about 100 ms to run.
    let reply = app
        .client()
        .stream("tools/call", params, 4, std::time::Duration::from_secs(5), || async { app.shut_down() })
        .await;
    assert_eq!(reply.messages.len(), 4, "three progress notifications, then the result: {:?}", reply.messages);
    assert!(reply.response()["result"]["content"].is_array());
}

#[tokio::test]
async fn readiness_is_reported_while_serving() {
    let app = fixture().await;
    let ready = format!("{}/readyz", app.base_url());
    assert_eq!(reqwest::get(&ready).await.unwrap().status(), 200);
}

/// Two replicas share one budget per caller and tool through Redis; a refused
/// request gets 429, `Retry-After` and a JSON-RPC error, before its body is read.
#[tokio::test]
async fn rate_limits_are_shared_by_replicas_and_refuse_before_the_body() {
    let redis = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("switchyard-rl-{:x}:", rand::random::<u64>());
    let env = [
        ("SWITCHYARD_REDIS_URL", redis.as_str()),
        ("SWITCHYARD_REDIS_PREFIX", prefix.as_str()),
        ("SWITCHYARD_RATE_LIMIT__RATE", "2/m"),
    ];
    let (one, two) = (App::start(&env).await, App::start(&env).await);
    let call = json!({"name": "echo", "arguments": {"text": "hi"}});
    assert_eq!(one.client().request("tools/call", call.clone()).await.status, 200);
    assert_eq!(two.client().request("tools/call", call.clone()).await.status, 200);
    let refused = one.client().request("tools/call", call.clone()).await;
    assert_eq!(refused.status, 429);
    assert_eq!(refused.error_code(), Some(-32029));
    let retry: u64 = refused.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=30).contains(&retry), "{retry}");
    // Another tool has its own budget.
    let other = json!({"name": "calculator_arithmetic", "arguments": {"expression": "1+1"}});
    assert_eq!(two.client().request("tools/call", other).await.status, 200);
    // Refused before the body is read: even a broken body gets 429, not 400.
    let broken = reqwest::Client::new()
        .post(two.url())
        .header("content-type", "application/json")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "echo")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(broken.status(), 429);
}

/// A request body has a read deadline: one that stops halfway gets 408 (with
/// a JSON-RPC error) after `http.body_read_timeout`, not a request held open.
#[tokio::test]
async fn a_body_that_stops_halfway_gets_408_after_the_deadline() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let app = App::start(&[("SWITCHYARD_HTTP__BODY_READ_TIMEOUT", "300ms")]).await;
    let address = app.base_url().trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: 100\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(br#"{"jsonrpc":"#).await.unwrap();
    let started = std::time::Instant::now();
    let mut answer = vec![0; 4096];
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), socket.read(&mut answer)).await;
    let read = read.expect("no answer 5 s after the body stopped").unwrap();
    let answer = String::from_utf8_lossy(&answer[..read]);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_read_timeout"), "{answer}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(250));
}

/// HTTP/2 connections do not outlive their use: one that sent the preface
/// and its settings and then nothing is closed after the idle time (the
/// head deadline), and one whose peer stops answering pings is closed
/// after the keep-alive timeout, with the listen stream it held.
#[tokio::test]
async fn idle_and_unresponsive_http2_connections_are_closed() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let app = App::start(&[
        ("SWITCHYARD_HTTP__HEADER_READ_TIMEOUT", "300ms"),
        ("SWITCHYARD_HTTP__H2_KEEP_ALIVE_INTERVAL", "200ms"),
        ("SWITCHYARD_HTTP__H2_KEEP_ALIVE_TIMEOUT", "200ms"),
        ("SWITCHYARD_LISTEN__MAX_STREAMS_PER_CALLER", "1"),
    ])
    .await;
    let address = app.base_url().trim_start_matches("http://").to_owned();

    // The preface and an empty SETTINGS frame, then silence.
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    socket.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await.unwrap();
    let started = std::time::Instant::now();
    let mut sent = Vec::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(5), socket.read_to_end(&mut sent)).await;
    assert!(read.is_ok(), "an HTTP/2 connection without streams is still open after 5 s");
    assert!(started.elapsed() >= std::time::Duration::from_millis(250), "closed before the idle time");

    // A listen stream, then a peer that reads nothing more (so answers no ping).
    let tcp = tokio::net::TcpStream::connect(&address).await.unwrap();
    let (mut sender, mut connection) = h2::client::handshake(tcp).await.unwrap();
    let mut params = json!({ "notifications": { "toolsListChanged": true } });
    params["_meta"] = switchyard_testkit::meta(json!({}));
    let mut request = http::Request::post(format!("http://{address}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (name, value) in switchyard_testkit::Client::headers_for("subscriptions/listen", &params) {
        request = request.header(name, value);
    }
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params });
    let (response, mut upload) = sender.send_request(request.body(()).unwrap(), false).unwrap();
    upload.send_data(bytes::Bytes::from(body.to_string()), true).unwrap();
    let response = tokio::select! {
        response = response => response.unwrap(),
        _ = &mut connection => panic!("the connection ended before the answer"),
    };
    assert_eq!(response.status(), 200);
    // The stream holds this address's one place (`max_streams_per_caller`).
    let listen = json!({ "notifications": { "toolsListChanged": true } });
    let client = app.client();
    assert_eq!(client.request("subscriptions/listen", listen.clone()).await.status, 429);
    // `connection` is no longer polled: the server's pings go unanswered,
    // so it closes the connection and the stream gives its place back.
    switchyard_testkit::until(
        "the unresponsive peer's stream to close",
        std::time::Duration::from_secs(5),
        async || client.open("subscriptions/listen", listen.clone()).await.status() == 200,
    )
    .await;
    drop(connection);
}
