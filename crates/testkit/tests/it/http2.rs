// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::json;
use switchyard_testkit::{App, Client};

use crate::fixture;

/// Cleartext HTTP/2 with prior knowledge, on the same port as HTTP/1.1: a
/// JSON answer, and many listen streams multiplexed on one connection (as a
/// load balancer that speaks HTTP/2 to the replicas carries its clients'
/// streams), each of which hears a `resources/updated` published through the
/// admin API. Every message is checked against the schema by the client.
#[tokio::test]
async fn json_answers_and_listen_streams_share_one_http2_connection() {
    let app = fixture().await;
    let client = app.client_h2();
    let reply = client.request("tools/call", json!({ "name": "test_simple_text", "arguments": {} })).await;
    assert_eq!((reply.status, reply.version), (200, reqwest::Version::HTTP_2));
    assert_eq!(reply.content_type(), "application/json");
    assert_eq!(reply.result()["content"][0]["type"], "text");
    let plain = app.client().request("tools/list", json!({})).await;
    assert_eq!((plain.status, plain.version), (200, reqwest::Version::HTTP_11), "HTTP/1.1 on the same port");

    const STREAMS: usize = 50;
    let (opened, mut all_open) = tokio::sync::mpsc::channel(STREAMS);
    let mut streams = Vec::new();
    for _ in 0..STREAMS {
        let (client, opened) = (client.clone(), opened.clone());
        streams.push(tokio::spawn(async move {
            let params = json!({ "notifications": { "resourceSubscriptions": ["file:///h2/"] } });
            client
                .stream("subscriptions/listen", params, 2, Duration::from_secs(10), || async move {
                    opened.send(()).await.unwrap();
                })
                .await
        }));
    }
    for _ in 0..STREAMS {
        tokio::time::timeout(Duration::from_secs(10), all_open.recv()).await.expect("every stream opened");
    }
    let published = reqwest::Client::new()
        .post(format!("{}/notifications/resources/updated", app.admin_url()))
        .json(&json!({ "uri": "file:///h2/report.csv" }))
        .send()
        .await
        .unwrap();
    assert_eq!(published.status(), 202);
    for stream in streams {
        let reply = stream.await.unwrap();
        assert_eq!((reply.status, reply.version), (200, reqwest::Version::HTTP_2));
        assert_eq!(reply.messages.len(), 2, "{:?}", reply.messages);
        assert_eq!(reply.messages[1]["method"], "notifications/resources/updated");
        assert_eq!(reply.messages[1]["params"]["uri"], "file:///h2/report.csv");
    }
}

/// DNS-rebinding protection holds on HTTP/2, where the host is named by
/// `:authority` and no `Host` header need be sent.
#[tokio::test]
async fn the_authority_of_an_http2_request_is_checked_as_host_is() {
    let app =
        App::start(&[("SWITCHYARD_FIXTURE", "conformance"), ("SWITCHYARD_HTTP__ALLOWED_HOSTS", "mcp.example")]).await;
    let address: std::net::SocketAddr = app.base_url().trim_start_matches("http://").parse().unwrap();
    let http = reqwest::Client::builder()
        .http2_prior_knowledge()
        .resolve("mcp.example", address)
        .resolve("evil.example", address)
        .build()
        .unwrap();
    let params = json!({ "_meta": switchyard_testkit::meta(json!({})) });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params }).to_string();
    let status = |host: &str| {
        let mut request = http.post(format!("http://{host}:{}/mcp", address.port())).body(body.clone());
        for (name, value) in Client::headers_for("tools/list", &params) {
            request = request.header(name, value);
        }
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.version(), reqwest::Version::HTTP_2);
            response.status().as_u16()
        }
    };
    assert_eq!(status("mcp.example").await, 200);
    assert_eq!(status("evil.example").await, 403);
    assert_eq!(status(&address.ip().to_string()).await, 403, "127.0.0.1 is not in the allow-list here");
}

/// A graceful shutdown ends a listen stream held on an HTTP/2 connection
/// with its final result, as on HTTP/1.1 (the server sends GOAWAY and lets
/// the streams in flight finish).
#[tokio::test]
async fn shutdown_ends_http2_listen_streams_with_their_result() {
    let app = fixture().await;
    let reply = app
        .client_h2()
        .stream("subscriptions/listen", json!({ "notifications": {} }), 2, Duration::from_secs(5), || async {
            app.shut_down()
        })
        .await;
    assert_eq!(reply.version, reqwest::Version::HTTP_2);
    assert_eq!(reply.messages.len(), 2, "{:?}", reply.messages);
    assert_eq!(reply.messages[1]["id"], 42);
    assert_eq!(reply.messages[1]["result"]["resultType"], "complete");
}
