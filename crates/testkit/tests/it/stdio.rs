use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use switchyard::Switchyard;
use switchyard::config::{Config, RawConfig};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn modern(id: u64, method: &str, mut params: Value) -> String {
    params["_meta"] = switchyard_testkit::meta(json!({}));
    format!("{}\n", json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }))
}

#[tokio::test]
async fn serves_the_same_catalog_over_stdio_and_cancels_a_listen() {
    let config = Config::try_from(RawConfig::load(None, Vec::new()).unwrap()).unwrap();
    let app = Switchyard::build(config).await.unwrap();
    // One pipe each way, so that closing ours is the end of the server's input.
    let (mut client_write, server_read) = tokio::io::duplex(64 * 1024);
    let (server_write, client_read) = tokio::io::duplex(64 * 1024);
    let shutdown = app.shutdown.clone();
    let serving = tokio::spawn(switchyard::stdio::serve(Arc::clone(&app.server), server_read, server_write, shutdown));
    let mut lines = BufReader::new(client_read).lines();
    let schema = switchyard_testkit::SpecSchema::load();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line()).await.unwrap().unwrap().unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        schema.check_message(&message, None);
        message
    };

    client_write
        .write_all(modern(1, "tools/call", json!({ "name": "echo", "arguments": { "text": "over stdio" } })).as_bytes())
        .await
        .unwrap();
    let reply = next().await;
    assert_eq!(reply["result"]["content"][0]["text"], "over stdio");

    client_write.write_all(b"{not json\n").await.unwrap();
    assert_eq!(next().await["error"]["code"], -32700);

    client_write
        .write_all(
            modern(7, "subscriptions/listen", json!({ "notifications": { "toolsListChanged": true } })).as_bytes(),
        )
        .await
        .unwrap();
    assert_eq!(next().await["method"], "notifications/subscriptions/acknowledged");
    client_write
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":7}}\n")
        .await
        .unwrap();
    client_write.write_all(modern(8, "server/discover", json!({})).as_bytes()).await.unwrap();
    assert_eq!(next().await["id"], 8, "the cancelled listen sends nothing more");

    drop(client_write);
    tokio::time::timeout(Duration::from_secs(5), serving).await.unwrap().unwrap().unwrap();
}
