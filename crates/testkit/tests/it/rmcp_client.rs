use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion, ServerNotification, SubscriptionFilter};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::json;

use crate::fixture;

#[tokio::test]
async fn the_official_rust_client_lists_calls_and_listens() {
    let app = fixture().await;
    let transport =
        StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(app.url().to_owned()));
    let client = ClientConfig::default()
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover { preferred_versions: vec![ProtocolVersion::V_2026_07_28] },
        )
        .await
        .expect("rmcp connects with server/discover");

    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "calculator_arithmetic"));

    let arguments = json!({ "expression": "sqrt(2) ^ 2" }).as_object().cloned().unwrap();
    let result = client
        .call_tool(CallToolRequestParams::new("calculator_arithmetic").with_arguments(arguments))
        .await
        .expect("tools/call");
    let value = result.structured_content.expect("structured output")["result"].as_f64().unwrap();
    assert!((value - 2.0).abs() < 1e-9);

    let mut subscription = client
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .expect("listen is acknowledged");
    client.call_tool(CallToolRequestParams::new("test_trigger_tool_change")).await.expect("trigger");
    let notification =
        tokio::time::timeout(Duration::from_secs(5), subscription.next()).await.expect("in time").expect("no error");
    assert!(matches!(notification, Some(ServerNotification::ToolListChangedNotification(_))), "{notification:?}");
    subscription.cancel().await.expect("cancel closes the stream");
    client.cancel().await.expect("close");
}

#[tokio::test]
async fn the_official_rust_client_in_legacy_mode() {
    let app = fixture().await;
    let transport =
        StreamableHttpClientTransport::from_config(StreamableHttpClientTransportConfig::with_uri(app.url().to_owned()));
    let client = ClientConfig::default()
        .serve_with_lifecycle(transport, ClientLifecycleMode::Initialize)
        .await
        .expect("initialize");
    let tools = client.list_all_tools().await.expect("tools/list");
    assert!(tools.iter().any(|t| t.name == "echo"));
    client.cancel().await.expect("close");
}
