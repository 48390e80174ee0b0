// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::json;

use crate::fixture;

#[tokio::test]
async fn acknowledges_first_and_delivers_only_what_was_asked() {
    let app = fixture().await;
    let client = app.client();
    let trigger = client.clone();
    let reply = client
        .stream(
            "subscriptions/listen",
            json!({ "notifications": { "toolsListChanged": true } }),
            2,
            Duration::from_secs(5),
            || async move {
                trigger.request("tools/call", json!({ "name": "test_trigger_tool_change", "arguments": {} })).await;
            },
        )
        .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.messages[0]["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(reply.messages[0]["params"]["notifications"], json!({ "toolsListChanged": true }));
    assert_eq!(reply.messages[1]["method"], "notifications/tools/list_changed");
    for message in &reply.messages {
        assert_eq!(message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 42);
    }

    let trigger = client.clone();
    let prompts_only = client
        .stream(
            "subscriptions/listen",
            json!({ "notifications": { "promptsListChanged": true } }),
            3,
            Duration::from_millis(800),
            || async move {
                trigger.request("tools/call", json!({ "name": "test_trigger_tool_change", "arguments": {} })).await;
            },
        )
        .await;
    assert_eq!(
        prompts_only.messages.len(),
        1,
        "a tools change must not reach a prompts-only stream: {:?}",
        prompts_only.messages
    );
}

#[tokio::test]
async fn shutdown_ends_streams_with_their_result() {
    let app = fixture().await;
    let client = app.client();
    let reply = client
        .stream("subscriptions/listen", json!({ "notifications": {} }), 2, Duration::from_secs(5), || async {
            app.shut_down()
        })
        .await;
    assert_eq!(reply.messages.len(), 2, "{:?}", reply.messages);
    assert_eq!(reply.messages[1]["id"], 42);
    assert_eq!(reply.messages[1]["result"]["resultType"], "complete");
}

#[tokio::test]
async fn a_missing_filter_is_invalid_params() {
    let app = fixture().await;
    let reply = app.client().request("subscriptions/listen", json!({})).await;
    assert_eq!((reply.status, reply.error_code()), (400, Some(-32602)));
}

/// An operator (or a plugin's backend) publishes `resources/updated` through
/// the admin API of one replica; a listen stream on another replica,
/// subscribed to a URI above it, hears it through Redis. A stream subscribed
/// elsewhere does not. A malformed URI is refused and publishes nothing.
#[tokio::test]
async fn resources_updated_from_the_admin_api_reaches_every_replica() {
    let redis = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("switchyard-it-{:x}:", rand::random::<u64>());
    let env = [("SWITCHYARD_REDIS_URL", redis.as_str()), ("SWITCHYARD_REDIS_PREFIX", prefix.as_str())];
    let (one, two) = (switchyard_testkit::App::start(&env).await, switchyard_testkit::App::start(&env).await);
    let publish = |uri: &'static str| {
        let url = format!("{}/notifications/resources/updated", one.admin_url());
        async move { reqwest::Client::new().post(url).json(&json!({ "uri": uri })).send().await.expect("admin").status() }
    };
    let elsewhere = two.client();
    let (acknowledged, opened) = tokio::sync::oneshot::channel();
    let listening_elsewhere = tokio::spawn(async move {
        let params = json!({ "notifications": { "resourceSubscriptions": ["file:///other/"] } });
        elsewhere
            .stream("subscriptions/listen", params, 2, Duration::from_millis(2000), || async move {
                let _ = acknowledged.send(());
            })
            .await
    });
    opened.await.expect("the other stream opened");
    let params = json!({ "notifications": { "resourceSubscriptions": ["file:///reports/"] } });
    let reply = two
        .client()
        .stream("subscriptions/listen", params, 2, Duration::from_secs(5), || async {
            assert_eq!(publish("not a uri").await, 422);
            assert_eq!(publish("file:///reports/q3.csv").await, 202);
        })
        .await;
    assert_eq!(reply.messages.len(), 2, "{:?}", reply.messages);
    assert_eq!(reply.messages[1]["method"], "notifications/resources/updated");
    assert_eq!(reply.messages[1]["params"]["uri"], "file:///reports/q3.csv");
    let other = listening_elsewhere.await.expect("the other stream");
    assert_eq!(other.messages.len(), 1, "only the acknowledgement: {:?}", other.messages);
}

/// A Redis outage, end to end: two replicas on a Redis of the test's own,
/// a listen stream on replica B. Redis is killed: both replicas keep
/// answering, B's stream stays open, and a publish on A is refused with 503
/// within a bounded time (at once once the heartbeat has seen the outage).
/// Redis comes back empty on the same port: the bus's log is gone, so B's
/// stream, which waits for resources, ends with its final result (a gap is
/// announced, not hidden), and listening again on B hears an update
/// published on A after that.
#[tokio::test]
async fn a_redis_outage_keeps_replicas_answering_and_ends_with_an_announced_gap() {
    use switchyard_testkit::RedisServer;

    let mut redis = RedisServer::start().await;
    let url = redis.url();
    let env = [("SWITCHYARD_REDIS_URL", url.as_str()), ("SWITCHYARD_REDIS_PREFIX", "outage:")];
    let (a, b) = (switchyard_testkit::App::start(&env).await, switchyard_testkit::App::start(&env).await);
    let publish_url = format!("{}/notifications/resources/updated", a.admin_url());
    let publish = move |uri: String| {
        let url = publish_url.clone();
        async move { reqwest::Client::new().post(url).json(&json!({ "uri": uri })).send().await.expect("admin").status() }
    };
    let echo = |client: switchyard_testkit::Client| async move {
        let reply =
            client.request("tools/call", json!({ "name": "echo", "arguments": { "text": "still here" } })).await;
        reply.result()["content"][0]["text"].as_str().map(str::to_owned)
    };
    let (a_client, b_client) = (a.client(), b.client());
    let params = json!({ "notifications": { "resourceSubscriptions": ["file:///reports/"] } });
    // Borrowed, not moved: the server must outlive the closure below.
    let redis = &mut redis;
    let during_publish = publish.clone();
    let reply = b
        .client()
        .stream("subscriptions/listen", params.clone(), 2, Duration::from_secs(30), || async move {
            redis.kill();
            for client in [a_client, b_client] {
                assert_eq!(echo(client).await.as_deref(), Some("still here"), "answered while Redis is down");
            }
            let asked = std::time::Instant::now();
            let during = during_publish("file:///reports/during-the-outage".into()).await;
            // Refused (503), or, sent on the connection Redis's death broke
            // before the heartbeat saw it, unanswered (504: perhaps carried).
            assert!(matches!(during.as_u16(), 503 | 504), "a publish that cannot cross replicas is refused: {during}");
            assert!(asked.elapsed() < Duration::from_secs(3), "refused promptly, not after {:?}", asked.elapsed());
            // Once the heartbeat (every second) has seen the outage, at once.
            switchyard_testkit::until("a publish refused at once", Duration::from_secs(3), async || {
                let asked = std::time::Instant::now();
                let status = during_publish("file:///reports/during-the-outage".into()).await;
                assert!(matches!(status.as_u16(), 503 | 504), "nothing is carried while Redis is down: {status}");
                status == 503 && asked.elapsed() < Duration::from_millis(500)
            })
            .await;
            redis.restart().await;
        })
        .await;
    assert_eq!(reply.messages.len(), 2, "{:?}", reply.messages);
    assert_eq!(reply.messages[1]["id"], 42, "the stream ended with its final result: {:?}", reply.messages);
    assert_eq!(reply.messages[1]["result"]["resultType"], "complete");

    // Listening again (as a client does after a final result) hears what A
    // publishes now. A replica may announce more than one gap after an
    // outage (the lost log, the publish that failed): listen until an update.
    let publisher = tokio::spawn(async move {
        for round in 0.. {
            let _ = publish(format!("file:///reports/after-{round}")).await;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    let mut heard = None;
    for _ in 0..5 {
        let again =
            b.client().stream("subscriptions/listen", params.clone(), 2, Duration::from_secs(10), || async {}).await;
        if again.messages.get(1).is_some_and(|m| m["method"] == "notifications/resources/updated") {
            heard = again.messages[1]["params"]["uri"].as_str().map(str::to_owned);
            break;
        }
    }
    publisher.abort();
    let uri = heard.expect("an update after Redis returned");
    assert!(uri.starts_with("file:///reports/after-"), "published after Redis returned: {uri}");
}

/// SIGTERM to a real process: readiness goes false, the listen stream gets
/// its final result, a request in flight still gets its answer, one that
/// outlasts the grace period gets a JSON-RPC error saying why (not a closed
/// connection), a task that cannot finish within the grace period is failed
/// with a message saying why (not left `working`), and the process exits
/// cleanly.
#[tokio::test]
async fn sigterm_drains_listen_streams_and_requests_in_flight() {
    use futures::StreamExt as _;
    use switchyard_testkit::{Client, ServerProcess, meta};

    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("registry.db").display());
    let mut server = ServerProcess::start(&[
        ("SWITCHYARD_FIXTURE", "conformance"),
        ("SWITCHYARD_SHUTDOWN__GRACE", "3s"),
        ("SWITCHYARD_DATABASE_URL", &database),
    ])
    .await;
    let base = server.base_url().to_owned();
    let http = reqwest::Client::new();
    let tasks = json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } });
    let post_with = |method: &'static str, params: serde_json::Value, capabilities: serde_json::Value| {
        let mut params = params;
        params["_meta"] = meta(capabilities);
        let mut request = http
            .post(format!("{base}/mcp"))
            .json(&json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params }));
        for (name, value) in Client::headers_for(method, &params) {
            request = request.header(name, value);
        }
        request.send()
    };
    let post = |method: &'static str, params: serde_json::Value| post_with(method, params, json!({}));
    let slow = json!({ "name": "slow_compute", "arguments": { "seconds": 60 } });
    let long_task: serde_json::Value =
        post_with("tools/call", slow, tasks.clone()).await.unwrap().json().await.unwrap();
    let long_id = long_task["result"]["taskId"].as_str().unwrap().to_owned();
    let listening =
        post("subscriptions/listen", json!({ "notifications": { "toolsListChanged": true } })).await.unwrap();
    let stream = tokio::spawn(async move {
        let mut body = listening.bytes_stream();
        let mut text = String::new();
        while let Some(chunk) = body.next().await {
            text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        }
        text
    });
    let in_flight =
        tokio::spawn(post("tools/call", json!({ "name": "slow_compute", "arguments": { "seconds": 1.5 } })));
    let outlasting =
        tokio::spawn(post("tools/call", json!({ "name": "slow_compute", "arguments": { "seconds": 30 } })));
    tokio::time::sleep(Duration::from_millis(300)).await;

    let terminated = std::time::Instant::now();
    let pid = server.child().id().to_string();
    let status = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(status.success());
    // Readiness goes false at once: a new probe is refused, or answered 503.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let probe = http.get(format!("{base}/readyz")).send().await;
    assert!(probe.as_ref().map_or(true, |r| r.status() == 503), "still ready while draining: {probe:?}");
    let frames = tokio::time::timeout(Duration::from_secs(5), stream).await.expect("the stream ended").unwrap();
    assert!(frames.contains("acknowledged"), "{frames}");
    assert!(frames.contains(r#""id":7"#) && frames.contains(r#""resultType":"complete""#), "final result: {frames}");
    let answer = in_flight.await.unwrap().expect("the request in flight was answered");
    assert_eq!(answer.status(), 200);
    let answer: serde_json::Value = answer.json().await.unwrap();
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("finished after 1.5 s"), "{answer}");
    // A request that outlasts the grace period is answered too: an error
    // the client can retry on, not a closed connection.
    let cut_off = outlasting.await.unwrap().expect("the request that outlasted the grace period was answered");
    let cut_off: serde_json::Value = cut_off.json().await.expect("a JSON-RPC answer");
    assert_eq!(cut_off["id"], 7, "{cut_off}");
    assert_eq!(cut_off["error"]["code"], -32603, "{cut_off}");
    assert!(cut_off["error"]["message"].as_str().unwrap().contains("shutting down"), "{cut_off}");
    let exited =
        switchyard_testkit::eventually("the server to exit after SIGTERM", Duration::from_secs(8), async || {
            server.child().try_wait().unwrap()
        })
        .await;
    assert!(exited.success(), "{exited:?}");
    assert!(terminated.elapsed() >= Duration::from_secs(3), "the task had the grace period to finish");
    assert!(http.get(format!("{base}/healthz")).send().await.is_err(), "nothing listens any more");

    // Another replica on the same database sees the task failed, with why.
    let survivor = switchyard_testkit::App::start(&[
        ("SWITCHYARD_DATABASE_URL", &database),
        ("SWITCHYARD_FIXTURE", "conformance"),
    ])
    .await;
    let task = survivor.client().request_with("tasks/get", json!({ "taskId": long_id }), tasks).await;
    assert_eq!(task.result()["status"], "failed", "{:?}", task.messages);
    assert!(task.result()["error"]["message"].as_str().unwrap().contains("shut down"), "{:?}", task.messages);
}
