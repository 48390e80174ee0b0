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
