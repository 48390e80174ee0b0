//! An upstream's multi-round requests reach our client (#19): a 2026-07-28
//! upstream (a second Switchyard) that answers `input_required` has its
//! input requests asked of our client, by the client's own retry (a modern
//! client) or on the call's stream (a 2025-era one), and the answers and the
//! upstream's own `requestState` go back to it, sealed inside ours on the
//! way, so the client can neither read nor change it. The upstream learns
//! what our client can be asked for from our client's own declaration. A
//! 2025-era upstream (the official Python SDK) that asks our client in the
//! middle of a call has its question relayed the same way while the call
//! waits.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use switchyard_testkit::{App, Client, LegacyPythonServer, Reply};

use crate::plugins::{Admin, upstreams_on_loopback};
use crate::protocol::{SHARED_STATE_KEY, legacy_elicitation};

/// A front server with a conformance-fixture Switchyard registered as `up`.
async fn front() -> (App, App, tempfile::TempDir) {
    let upstream = App::start(&[("SWITCHYARD_FIXTURE", "conformance")]).await;
    let (app, secrets) = front_of(&upstream).await;
    (app, upstream, secrets)
}

/// A front replica with `upstream` registered as `up`; the replicas trust
/// each other's sealed state, as a deployment's do.
async fn front_of(upstream: &App) -> (App, tempfile::TempDir) {
    let secrets = tempfile::tempdir().unwrap();
    let mut env = upstreams_on_loopback(&secrets);
    env.push(("SWITCHYARD_STATE__KEYS", SHARED_STATE_KEY));
    let app = App::start(&env).await;
    let spec = json!({"url": upstream.url()});
    let (status, body) =
        Admin::of(&app).post("/plugins", json!({"namespace": "up", "kind": "upstream", "spec": spec})).await;
    assert_eq!(status, 201, "{body}");
    (app, secrets)
}

async fn call(client: &Client, params: &Value, capabilities: &Value) -> Reply {
    client.request_with("tools/call", params.clone(), capabilities.clone()).await
}

/// `params` again, with the answers of one round and the state it gave.
fn retry(params: &Value, asked: &Value, responses: Value) -> Value {
    let mut retry = params.clone();
    retry["inputResponses"] = responses;
    retry["requestState"] = asked["requestState"].clone();
    retry
}

/// The `_meta` of a request declaring `capabilities`, with `entries` added.
fn with_meta(capabilities: &Value, entries: Value) -> Value {
    let mut meta = switchyard_testkit::meta(capabilities.clone());
    meta.as_object_mut().unwrap().extend(entries.as_object().unwrap().clone());
    meta
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

/// One round and two: the upstream's input requests reach the client under
/// the upstream's keys, the answers reach the upstream, and so does the state
/// it carries from round to round, whichever front replica the retry lands
/// on. The state our client holds is ours, not the upstream's, and a changed
/// one is refused.
#[tokio::test]
async fn a_modern_client_answers_an_upstreams_input_requests_by_retrying() {
    let (app, upstream, _secrets) = front().await;
    let (other, _other_secrets) = front_of(&upstream).await;
    let client = app.client();
    let elicitation = json!({"elicitation": {}});

    let params = json!({"name": "up_test_input_required_result_elicitation", "arguments": {}});
    let asked = call(&client, &params, &elicitation).await.result().clone();
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    assert_eq!(asked["inputRequests"]["user_name"]["method"], "elicitation/create", "{asked}");
    let done =
        call(&client, &retry(&params, &asked, json!({"user_name": accept(json!({"name": "Ada"}))})), &elicitation)
            .await;
    assert_eq!(done.result()["content"][0]["text"], "Hello, Ada!", "{:?}", done.messages);

    // The upstream's state (its `round` and the name) travels inside ours.
    let params = json!({"name": "up_test_input_required_result_multi_round", "arguments": {}});
    let first = call(&client, &params, &elicitation).await.result().clone();
    assert!(first["requestState"].is_string(), "{first}");
    let step1 = retry(&params, &first, json!({"step1": accept(json!({"name": "Ada"}))}));
    let second = call(&other.client(), &step1, &elicitation).await.result().clone();
    assert_eq!(second["resultType"], "input_required", "{second}");
    assert!(second["inputRequests"]["step2"].is_object(), "{second}");
    let answers = json!({"step2": accept(json!({"color": "green"}))});
    let mut tampered = retry(&params, &second, answers.clone());
    tampered["requestState"] = json!(format!("{}x", second["requestState"].as_str().unwrap()));
    assert_eq!(call(&client, &tampered, &elicitation).await.error_code(), Some(-32602));
    let done = call(&client, &retry(&params, &second, answers), &elicitation).await;
    assert_eq!(done.result()["content"][0]["text"], "Ada likes green", "{:?}", done.messages);

    let params = json!({"name": "up_test_input_required_result_request_state", "arguments": {}});
    let asked = call(&client, &params, &elicitation).await.result().clone();
    let done =
        call(&client, &retry(&params, &asked, json!({"confirm": accept(json!({"ok": true}))})), &elicitation).await;
    assert_eq!(done.result()["content"][0]["text"], "state-ok: the request state was verified");
}

/// The upstream hears what our client declared it can be asked for, and
/// nothing else: it asks for only that, and a client that cannot answer
/// gets the upstream's missing-capability error with what it needs.
#[tokio::test]
async fn the_upstream_asks_only_for_what_the_client_declared() {
    let (app, _upstream, _secrets) = front().await;
    let client = app.client();
    let params = json!({"name": "up_test_input_required_result_capabilities", "arguments": {}});
    let asked = call(&client, &params, &json!({"sampling": {}, "experimental": {"x": {}}})).await.result().clone();
    let keys: Vec<&String> = asked["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["greeting"], "{asked}");
    let none = call(&client, &params, &json!({})).await;
    assert_eq!(none.result()["content"][0]["text"], "The client declared no capability to ask through");

    let params = json!({"name": "up_test_input_required_result_elicitation", "arguments": {}});
    let refused = call(&client, &params, &json!({"sampling": {}})).await;
    assert_eq!((refused.status, refused.error_code()), (400, Some(-32021)), "{:?}", refused.messages);
    assert_eq!(refused.response()["error"]["data"]["requiredCapabilities"], json!({"elicitation": {"form": {}}}));
}

/// An upstream tool's arguments that its schema mirrors into headers
/// (SEP-2243) reach the upstream in those headers, which a Switchyard
/// upstream checks against the body: text (a value outside ASCII encoded),
/// a number and a boolean; an argument not given sends no header.
#[tokio::test]
async fn an_upstream_tool_s_mirrored_arguments_reach_it_in_their_headers() {
    let (app, _upstream, _secrets) = front().await;
    let client = app.client();
    for (arguments, mirrored) in [
        (
            json!({"region": "eu wést", "count": 3, "dryRun": true}),
            vec![
                ("mcp-param-region", "=?base64?ZXUgd8Opc3Q=?="),
                ("mcp-param-count", "3"),
                ("mcp-param-dry-run", "true"),
            ],
        ),
        (json!({"region": "eu west"}), vec![("mcp-param-region", "eu west")]),
    ] {
        let params = json!({"name": "up_test_custom_header", "arguments": arguments,
                            "_meta": switchyard_testkit::meta(json!({}))});
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).to_string();
        // Our client mirrors them to the front as well: it checks them too.
        let mut headers = Client::headers_for("tools/call", &params);
        headers.extend(mirrored.iter().map(|(name, value)| ((*name).to_owned(), (*value).to_owned())));
        let reply = client.send(body.into_bytes(), &headers, Some("tools/call")).await;
        let region = arguments["region"].as_str().unwrap();
        assert_eq!(reply.result()["content"][0]["text"], format!("Region: {region}"), "{:?}", reply.response());
        assert_eq!(reply.result().get("isError"), None, "{:?}", reply.response());
    }
}

/// An upstream's description of itself in a result's `_meta` reaches no
/// client: a 2026-era client reads ours there, a 2025-era one (whose results
/// carry none of ours) none at all.
#[tokio::test]
async fn an_upstream_s_server_info_reaches_no_client() {
    let upstream =
        App::start(&[("SWITCHYARD_FIXTURE", "conformance"), ("SWITCHYARD_SERVER__NAME", "upstream-side")]).await;
    let (app, _secrets) = front_of(&upstream).await;
    let client = app.client();
    // The upstream does describe itself in its own results.
    let direct = upstream.client().request("tools/call", json!({"name": "test_simple_text", "arguments": {}})).await;
    assert_eq!(direct.result()["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "upstream-side");

    let modern = client.request("tools/call", json!({"name": "up_test_simple_text", "arguments": {}})).await;
    assert_eq!(
        modern.result()["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "switchyard",
        "{:?}",
        modern.response()
    );
    assert!(modern.result()["content"].is_array());
    let headers = vec![
        ("content-type".to_owned(), "application/json".to_owned()),
        ("accept".to_owned(), "application/json, text/event-stream".to_owned()),
    ];
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "up_test_simple_text", "arguments": {}}});
    let legacy = client.send_legacy(call.to_string().into_bytes(), &headers).await;
    assert!(legacy.result()["content"].is_array(), "{:?}", legacy.response());
    for reply in [&modern, &legacy] {
        assert!(!reply.response().to_string().contains("upstream-side"), "{:?}", reply.response());
    }
}

/// A 2025-era client, which cannot retry with answers, is asked on the
/// call's stream; its answer goes to the upstream as a retry.
#[tokio::test]
async fn a_2025_era_client_answers_an_upstreams_input_request_on_its_stream() {
    let (app, _upstream, _secrets) = front().await;
    let events = legacy_elicitation("up_test_elicitation", app.url(), app.url()).await;
    assert_eq!(events[1]["id"], 5, "{events:?}");
    assert!(events[1]["result"]["content"][0]["text"].as_str().unwrap().contains("ada"), "{events:?}");
}

/// The one input request of an `input_required` result: its key and request.
fn only_request(asked: &Value) -> (String, Value) {
    let requests = asked["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{asked}");
    let (key, request) = requests.iter().next().unwrap();
    (key.clone(), request.clone())
}

/// A 2025-era upstream (the official Python SDK) whose tool asks our client
/// mid-call, on the call's stream, and waits: the question reaches our
/// client as our `input_required`, the answer goes back to the waiting call,
/// and a second question is asked the same way. The call waits on the
/// replica that made it, and a retry that lands on another replica reaches
/// it over the bus (Redis). A client that cannot answer is told at once,
/// with what it lacks.
#[tokio::test]
async fn a_2025_era_upstreams_question_mid_call_reaches_the_client() {
    let legacy = LegacyPythonServer::start().await;
    let secrets = tempfile::tempdir().unwrap();
    let redis = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("switchyard-parked-{}:", std::process::id());
    let mut env = upstreams_on_loopback(&secrets);
    env.extend([
        ("SWITCHYARD_STATE__KEYS", SHARED_STATE_KEY),
        ("SWITCHYARD_REDIS_URL", redis.as_str()),
        ("SWITCHYARD_REDIS_PREFIX", prefix.as_str()),
    ]);
    let (app, other) = (App::start(&env).await, App::start(&env).await);
    for front in [&app, &other] {
        let spec = json!({"url": legacy.url()});
        let (status, body) =
            Admin::of(front).post("/plugins", json!({"namespace": "py", "kind": "upstream", "spec": spec})).await;
        assert_eq!(status, 201, "{body}");
    }
    let client = app.client();
    let elicitation = json!({"elicitation": {}});
    let params = json!({"name": "py_confirm", "arguments": {}});

    let asked = call(&client, &params, &elicitation).await.result().clone();
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let (key, request) = only_request(&asked);
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert_eq!(request["params"]["message"], "Proceed?", "{request}");
    let yes = retry(&params, &asked, json!({key: accept(json!({"ok": true}))}));
    let done = call(&client, &yes, &elicitation).await;
    assert_eq!(done.result()["content"][0]["text"], "proceeding", "{:?}", done.messages);

    let asked = call(&client, &params, &elicitation).await.result().clone();
    let (key, _) = only_request(&asked);
    let no = retry(&params, &asked, json!({key: accept(json!({"ok": false}))}));
    let again = call(&client, &no, &elicitation).await.result().clone();
    let (key, request) = only_request(&again);
    assert_eq!(request["params"]["message"], "Really not?", "{again}");
    let declined = retry(&params, &again, json!({key: {"action": "decline"}}));
    let done = call(&client, &declined, &elicitation).await;
    assert_eq!(done.result()["content"][0]["text"], "second answer: decline", "{:?}", done.messages);

    // Asked on one replica, told no on the other, asked again there, answered on the first.
    let asked = call(&client, &params, &elicitation).await.result().clone();
    let (key, _) = only_request(&asked);
    let no = retry(&params, &asked, json!({key: accept(json!({"ok": false}))}));
    let again = call(&other.client(), &no, &elicitation).await.result().clone();
    let (key, request) = only_request(&again);
    assert_eq!(request["params"]["message"], "Really not?", "{again}");
    let yes = retry(&params, &again, json!({key: accept(json!({"ok": true}))}));
    let done = call(&client, &yes, &elicitation).await;
    assert_eq!(done.result()["content"][0]["text"], "second answer: accept", "{:?}", done.messages);

    // Answered on the other replica: what the upstream says as it goes on
    // reaches the retry's stream there, under the retry's token and level.
    let approve = json!({"name": "py_approve", "arguments": {},
        "_meta": with_meta(&elicitation, json!({"progressToken": "first"}))});
    let asked = call(&client, &approve, &elicitation).await.result().clone();
    let (key, _) = only_request(&asked);
    let mut yes = retry(&approve, &asked, json!({key: accept(json!({"ok": true}))}));
    yes["_meta"] =
        with_meta(&elicitation, json!({"progressToken": "retry", "io.modelcontextprotocol/logLevel": "info"}));
    let done = call(&other.client(), &yes, &elicitation).await;
    let said: Vec<&Value> = done.messages.iter().filter(|m| m.get("method").is_some()).collect();
    assert_eq!(said.len(), 2, "{:?}", done.messages);
    assert_eq!(
        (&said[0]["method"], &said[0]["params"]["progressToken"]),
        (&json!("notifications/progress"), &json!("retry"))
    );
    assert_eq!(
        (&said[1]["method"], &said[1]["params"]["data"]),
        (&json!("notifications/message"), &json!("approval recorded"))
    );
    assert_eq!(done.messages.last().unwrap()["result"]["content"][0]["text"], "approval: accept");
    // A retry that asked for neither progress nor info-level logs hears neither.
    let asked = call(&client, &approve, &elicitation).await.result().clone();
    let (key, _) = only_request(&asked);
    let mut quiet = retry(&approve, &asked, json!({key: accept(json!({"ok": false}))}));
    quiet["_meta"] = with_meta(&elicitation, json!({"io.modelcontextprotocol/logLevel": "error"}));
    let done = call(&other.client(), &quiet, &elicitation).await;
    assert!(done.messages.iter().all(|m| m.get("method").is_none()), "{:?}", done.messages);
    assert_eq!(done.result()["content"][0]["text"], "approval: accept");

    // The replica holding the call is gone: a retry on the other hears so at
    // once, not at its deadline.
    let asked = call(&other.client(), &params, &elicitation).await.result().clone();
    let (key, _) = only_request(&asked);
    other.shut_down();
    let started = std::time::Instant::now();
    let orphan = call(&client, &retry(&params, &asked, json!({key: accept(json!({"ok": true}))})), &elicitation).await;
    let text = orphan.result()["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.contains("does not answer") && text.contains("call the tool again"), "{:?}", orphan.messages);
    assert!(started.elapsed() < std::time::Duration::from_secs(15), "heard after {:?}", started.elapsed());

    let unable = call(&client, &params, &json!({"sampling": {}})).await;
    assert_eq!((unable.status, unable.error_code()), (400, Some(-32021)), "{:?}", unable.messages);
    assert_eq!(unable.response()["error"]["data"]["requiredCapabilities"], json!({"elicitation": {"form": {}}}));
}
