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

/// A TCP relay in front of `target` that keeps the first bytes of each
/// connection it accepts: what the client opened it with.
async fn opening_relay(target: String) -> (String, std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>) {
    use tokio::io::AsyncReadExt as _;
    use tokio::io::AsyncWriteExt as _;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let openings = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = std::sync::Arc::clone(&openings);
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let (seen, target) = (std::sync::Arc::clone(&seen), target.clone());
            tokio::spawn(async move {
                let mut first = vec![0; 24];
                inbound.read_exact(&mut first).await.unwrap();
                seen.lock().unwrap().push(first.clone());
                let mut outbound = tokio::net::TcpStream::connect(target).await.unwrap();
                outbound.write_all(&first).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    (format!("http://{address}/mcp"), openings)
}

/// An upstream spec with `"h2c": true` speaks cleartext HTTP/2 to its
/// upstream (a second Switchyard): every connection opens with the HTTP/2
/// preface, and concurrent calls share one connection instead of each
/// taking its own. Without it, the same upstream is spoken to in HTTP/1.1.
#[tokio::test]
async fn an_upstream_marked_h2c_is_spoken_to_in_http2_on_one_connection() {
    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let upstream = App::start(&[]).await;
    let target = upstream.url().trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let (h2c_url, h2c_openings) = opening_relay(target.clone()).await;
    let (plain_url, plain_openings) = opening_relay(target).await;
    let app = App::start(&[("SWITCHYARD_UPSTREAM__ALLOWED_RANGES", "127.0.0.0/8")]).await;
    let admin = crate::plugins::Admin::of(&app);
    for (namespace, spec) in [("two", json!({"url": h2c_url, "h2c": true})), ("one", json!({"url": plain_url}))] {
        let (status, body) =
            admin.post("/plugins", json!({"namespace": namespace, "kind": "upstream", "spec": spec})).await;
        assert_eq!(status, 201, "{body}");
    }
    let client = app.client();
    let call = |name: &'static str| {
        let client = client.clone();
        async move { client.request("tools/call", json!({"name": name, "arguments": {"text": name}})).await }
    };
    let opened = |openings: &std::sync::Mutex<Vec<Vec<u8>>>| openings.lock().unwrap().clone();
    // Registering checks the spec with a client of its own, then every
    // replica builds its plugin: each has its connection by now.
    let (h2c_before, plain_before) = (opened(&h2c_openings).len(), opened(&plain_openings).len());
    for name in ["two_echo", "one_echo"] {
        for reply in futures::future::join_all((0..8).map(|_| call(name))).await {
            assert_eq!(reply.result()["content"][0]["text"], name, "{:?}", reply.response());
        }
    }
    let h2c = opened(&h2c_openings);
    assert_eq!(h2c.len(), h2c_before, "8 calls at once ride the connections the lists and the listen stream use");
    assert!(h2c.iter().all(|opening| opening == PREFACE), "{h2c:?}");
    let plain = opened(&plain_openings);
    assert!(plain.len() >= plain_before + 4, "HTTP/1.1 takes a connection per request in flight: {}", plain.len());
    assert!(plain.iter().all(|opening| opening.starts_with(b"POST ")), "{plain:?}");
}

/// Requests to an `h2c` upstream go on a connection of our own
/// (`upstream::client::h2c`): a request and an answer larger than an HTTP/2
/// stream's window go whole (the request buffered until the upstream grants
/// window, the answer's window given back as it is read), and once the
/// upstream has closed the connection (here its idle close, with GOAWAY),
/// the next call opens another.
#[tokio::test]
async fn an_h2c_upstream_takes_large_messages_and_is_reconnected_after_it_closes() {
    let upstream = App::start(&[("SWITCHYARD_HTTP__HEADER_READ_TIMEOUT", "1s")]).await;
    let target = upstream.url().trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let (url, openings) = opening_relay(target).await;
    let app = App::start(&[("SWITCHYARD_UPSTREAM__ALLOWED_RANGES", "127.0.0.0/8")]).await;
    let admin = crate::plugins::Admin::of(&app);
    let spec = json!({"url": url, "h2c": true});
    let (status, body) = admin.post("/plugins", json!({"namespace": "two", "kind": "upstream", "spec": spec})).await;
    assert_eq!(status, 201, "{body}");
    let client = app.client();
    // Three times the 1 MiB the upstream grants a stream, and over the 2 MiB we grant one.
    let large = "x".repeat(3 << 20);
    let reply = client.request("tools/call", json!({"name": "two_echo", "arguments": {"text": large}})).await;
    assert_eq!(reply.result()["content"][0]["text"].as_str().map(str::len), Some(large.len()), "{}", reply.status);
    let before = openings.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(2500)).await; // past the upstream's idle close
    let reply = client.request("tools/call", json!({"name": "two_echo", "arguments": {"text": "again"}})).await;
    assert_eq!(reply.result()["content"][0]["text"], "again", "{:?}", reply.response());
    assert_eq!(openings.lock().unwrap().len(), before + 1, "the closed connection was opened again, once");
}
