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
