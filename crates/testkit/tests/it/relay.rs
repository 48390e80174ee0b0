//! What an upstream says reaches our client (#19): progress and log
//! messages during a call, from a 2026-07-28 upstream (a second Switchyard)
//! and from a 2025-era one (the official Python SDK), under our client's own
//! token and level, and only as its request asked; and the updates of its
//! resources, to our streams subscribed to them.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_testkit::{App, Client, HostileUpstream, LegacyPythonServer, Reply};

use crate::plugins::{Admin, upstreams_on_loopback};

/// A front server with `upstream_url` registered as the `namespace` namespace.
async fn front(namespace: &str, upstream_url: &str) -> (App, tempfile::TempDir) {
    let secrets = tempfile::tempdir().unwrap();
    let app = App::start(&upstreams_on_loopback(&secrets)).await;
    let spec = json!({"url": upstream_url});
    let (status, body) =
        Admin::of(&app).post("/plugins", json!({"namespace": namespace, "kind": "upstream", "spec": spec})).await;
    assert_eq!(status, 201, "{body}");
    (app, secrets)
}

/// Calls `tool` with `meta_entries` added to the request's `_meta`.
async fn call(client: &Client, tool: &str, meta_entries: Value) -> Reply {
    let mut meta = switchyard_testkit::meta(json!({}));
    meta.as_object_mut().unwrap().extend(meta_entries.as_object().unwrap().clone());
    client.request("tools/call", json!({"name": tool, "arguments": {}, "_meta": meta})).await
}

fn notifications<'a>(reply: &'a Reply, method: &str) -> Vec<&'a Value> {
    reply.messages.iter().filter(|m| m["method"] == method).map(|m| &m["params"]).collect()
}

/// A stateless upstream is asked for progress and logs only when our client
/// asked; what it sends comes to our client on the call's SSE stream, under
/// our client's `progressToken`, before the answer.
#[tokio::test]
async fn an_upstreams_progress_and_logs_reach_the_client_as_it_asked() {
    let upstream = App::start(&[("SWITCHYARD_FIXTURE", "conformance")]).await;
    let (app, _secrets) = front("up", upstream.url()).await;
    let client = app.client();

    let plain = call(&client, "up_test_tool_with_progress", json!({})).await;
    assert!(plain.content_type().starts_with("application/json"), "no token, no stream");
    assert_eq!(plain.result()["content"][0]["text"], "Progress tool executed successfully");

    let streamed = call(&client, "up_test_tool_with_progress", json!({"progressToken": "ours"})).await;
    assert!(streamed.content_type().starts_with("text/event-stream"));
    let progress = notifications(&streamed, "notifications/progress");
    assert_eq!(progress.iter().map(|p| p["progress"].as_f64().unwrap()).collect::<Vec<_>>(), [0.0, 50.0, 100.0]);
    assert!(progress.iter().all(|p| p["progressToken"] == "ours" && p["total"] == 100.0), "{progress:?}");
    assert_eq!(
        streamed.messages.last().unwrap()["result"]["content"][0]["text"],
        "Progress tool executed successfully"
    );

    let level = |level: &str| json!({"io.modelcontextprotocol/logLevel": level});
    let logged = call(&client, "up_test_tool_with_logging", level("info")).await;
    let messages = notifications(&logged, "notifications/message");
    assert_eq!(
        messages.iter().map(|m| m["data"].as_str().unwrap()).collect::<Vec<_>>(),
        ["Tool execution started", "Tool processing data", "Tool execution completed"]
    );
    assert!(messages.iter().all(|m| m["level"] == "info" && m["logger"] == "conformance"), "{messages:?}");
    let quiet = call(&client, "up_test_tool_with_logging", json!({})).await;
    assert!(notifications(&quiet, "notifications/message").is_empty(), "{:?}", quiet.messages);
    let above = call(&client, "up_test_tool_with_logging", level("warning")).await;
    assert!(notifications(&above, "notifications/message").is_empty(), "{:?}", above.messages);
}

/// A 2025-era upstream (the official Python SDK) reports progress under the
/// token we gave it and logs whatever the level (it has no per-request
/// level): its progress reaches our client under our client's token, and its
/// log messages only when our client set a level they meet.
#[tokio::test]
async fn a_2025_era_upstreams_progress_and_logs_reach_the_client_as_it_asked() {
    let legacy = LegacyPythonServer::start().await;
    let (app, _secrets) = front("py", legacy.url()).await;
    let client = app.client();

    let both = call(&client, "py_steps", json!({"progressToken": 7, "io.modelcontextprotocol/logLevel": "info"})).await;
    assert_eq!(both.result()["content"][0]["text"], "three steps", "{:?}", both.messages);
    let progress = notifications(&both, "notifications/progress");
    assert_eq!(progress.iter().map(|p| p["progress"].as_f64().unwrap()).collect::<Vec<_>>(), [1.0, 2.0, 3.0]);
    assert!(progress.iter().all(|p| p["progressToken"] == 7 && p["total"] == 3.0), "{progress:?}");
    let messages = notifications(&both, "notifications/message");
    assert_eq!(
        messages.iter().map(|m| m["data"].as_str().unwrap()).collect::<Vec<_>>(),
        ["step 1", "step 2", "step 3"]
    );

    let neither = call(&client, "py_steps", json!({})).await;
    assert_eq!(neither.result()["content"][0]["text"], "three steps");
    assert_eq!(neither.messages.len(), 1, "only the answer: {:?}", neither.messages);
    let above = call(&client, "py_steps", json!({"io.modelcontextprotocol/logLevel": "error"})).await;
    assert!(notifications(&above, "notifications/message").is_empty(), "{:?}", above.messages);
}

/// A `resources/updated` on the upstream's own listen stream, for a
/// resource it lists, reaches our streams subscribed to it and drops what
/// the front kept of the upstream's answers, so the next read asks the
/// upstream again. An update of a resource the upstream does not serve
/// reaches nobody.
#[tokio::test]
async fn an_upstreams_resource_updates_reach_the_streams_subscribed_to_them() {
    let upstream = HostileUpstream::start().await;
    let (app, _secrets) = front("h", upstream.url()).await;
    let client = app.client();
    let subscribed = |uris: &[String]| uris.iter().any(|uri| uri == "hostile://public");
    switchyard_testkit::until("the front listens to the upstream's resources", Duration::from_secs(10), async || {
        upstream.listen_streams() == 1 && subscribed(&upstream.subscriptions())
    })
    .await;
    let read = || client.request("resources/read", json!({"uri": "hostile://public"}));
    for _ in 0..2 {
        assert_eq!(read().await.status, 200);
    }
    assert_eq!(upstream.asked("resources/read"), 1, "kept for its ttlMs");

    let params = json!({"notifications": {"resourceSubscriptions": ["hostile://public", "other://"]}});
    let heard = client
        .stream("subscriptions/listen", params, 2, Duration::from_secs(5), || async {
            upstream.update("other://not-the-upstreams");
            upstream.update("hostile://public");
        })
        .await;
    let updates: Vec<&Value> = heard.messages[1..].iter().collect();
    assert_eq!(updates.len(), 1, "{:?}", heard.messages);
    assert_eq!(updates[0]["method"], "notifications/resources/updated");
    assert_eq!(updates[0]["params"]["uri"], "hostile://public", "{updates:?}");
    assert_eq!(read().await.status, 200);
    assert_eq!(upstream.asked("resources/read"), 2, "the update dropped what was kept");
}

/// A call our side gives up on (here: past the front's call timeout) is
/// cancelled at a 2025-era upstream too, by `notifications/cancelled` in its
/// session: the official Python SDK stops the tool's work. (A 2026-07-28
/// upstream is cancelled by closing the request's stream.)
#[tokio::test]
async fn a_call_given_up_is_cancelled_at_a_2025_era_upstream() {
    let legacy = LegacyPythonServer::start().await;
    let secrets = tempfile::tempdir().unwrap();
    let mut env = upstreams_on_loopback(&secrets);
    env.push(("SWITCHYARD_SERVER__CALL_TIMEOUT", "1s"));
    let app = App::start(&env).await;
    let spec = json!({"url": legacy.url()});
    let (status, body) =
        Admin::of(&app).post("/plugins", json!({"namespace": "py", "kind": "upstream", "spec": spec})).await;
    assert_eq!(status, 201, "{body}");
    let client = app.client();
    let cancelled = async || {
        let reply = client.request("tools/call", json!({"name": "py_cancelled", "arguments": {}})).await;
        reply.result()["content"][0]["text"].as_str().unwrap().to_owned()
    };
    assert_eq!(cancelled().await, "0");
    let waited = client.request("tools/call", json!({"name": "py_wait", "arguments": {"seconds": 30}})).await;
    assert!(!waited.messages.iter().any(|m| m.to_string().contains("\"waited\"")), "{:?}", waited.messages);
    switchyard_testkit::until("the upstream cancelled the wait", Duration::from_secs(10), async || {
        cancelled().await == "1"
    })
    .await;
}

/// When the upstream's listen stream breaks, updates may have been missed:
/// once it is open again, each of our streams subscribed to one of the
/// upstream's resources hears that resource updated.
#[tokio::test]
async fn a_break_in_the_upstreams_stream_is_heard_as_updates_of_its_resources() {
    let upstream = HostileUpstream::start().await;
    let (app, _secrets) = front("h", upstream.url()).await;
    let client = app.client();
    switchyard_testkit::until("the front listens to the upstream", Duration::from_secs(10), async || {
        upstream.listen_streams() == 1
    })
    .await;
    let params = json!({"notifications": {"resourceSubscriptions": ["hostile://private"]}});
    let heard = client
        .stream("subscriptions/listen", params, 2, Duration::from_secs(15), || async {
            upstream.end_listen_streams();
        })
        .await;
    assert_eq!(heard.messages.len(), 2, "{:?}", heard.messages);
    assert_eq!(heard.messages[1]["method"], "notifications/resources/updated");
    assert_eq!(heard.messages[1]["params"]["uri"], "hostile://private");
}
