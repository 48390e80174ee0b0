//! Hostile plugin authors, callers and upstreams against a real server over
//! real HTTP (issue #15): what a spec may reach, what a caller may take, what
//! an upstream may send. Each test fails on a server without the guard.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use switchyard_testkit::{App, Client, eventually, guest_module, meta};

use crate::plugins::{Admin, upstreams_on_loopback};

/// A TCP listener that counts the connections made to it: the "server of
/// the attacker's choosing" a hostile spec names.
async fn counting_listener() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(socket);
        }
    });
    (url, connections)
}

fn field(body: &Value) -> &str {
    body["error"]["field"].as_str().unwrap_or_default()
}

/// A spec may name only the variables and directories the operator granted,
/// never `SWITCHYARD_*`, and the refusal comes before any connection.
#[tokio::test]
async fn an_upstream_spec_cannot_send_the_servers_secrets_anywhere() {
    let granted = tempfile::tempdir().unwrap();
    let mut env = upstreams_on_loopback(&granted);
    env.push(("SWITCHYARD_UPSTREAM__SECRET_ENV", "TOOLS_*"));
    let app = App::start(&env).await;
    let admin = Admin::of(&app);
    let (attacker, connections) = counting_listener().await;
    // A readable file outside the granted directory: a service-account
    // token, or the server's own configuration.
    let outside = tempfile::tempdir().unwrap();
    let token = outside.path().join("token");
    std::fs::write(&token, "service-account-token").unwrap();
    let header = |auth: Value| json!({"url": attacker, "timeout_ms": 1000, "auth": {"header": auth}});
    let client_credentials = |secret: Value| {
        let mut cc = json!({"token_url": attacker, "client_id": "c"});
        cc.as_object_mut().unwrap().extend(secret.as_object().unwrap().clone());
        json!({"url": attacker, "timeout_ms": 1000, "auth": {"client_credentials": cc}})
    };
    for (spec, expected) in [
        (header(json!({"name": "X-Key", "value_from_file": token})), "spec.auth.header.value_from_file"),
        (header(json!({"name": "X-Key", "value_from_file": "/proc/self/environ"})), "spec.auth.header.value_from_file"),
        (
            header(json!({"name": "X-Key", "value_from_file": format!("{}/../token", granted.path().display())})),
            "spec.auth.header.value_from_file",
        ),
        (
            header(json!({"name": "X-Key", "value_from_env": "SWITCHYARD_STATE__KEYS"})),
            "spec.auth.header.value_from_env",
        ),
        (header(json!({"name": "X-Key", "value_from_env": "HOME"})), "spec.auth.header.value_from_env"),
        (
            client_credentials(json!({"client_secret_from_env": "SWITCHYARD_DATABASE_URL"})),
            "spec.auth.client_credentials.client_secret_from_env",
        ),
        (
            client_credentials(json!({"client_secret_from_file": token})),
            "spec.auth.client_credentials.client_secret_from_file",
        ),
    ] {
        let (status, body) =
            admin.post("/plugins", json!({"namespace": "evil", "kind": "upstream", "spec": spec})).await;
        assert_eq!((status, field(&body)), (422, expected), "{spec}: {body}");
        assert!(!body.to_string().contains("service-account-token"), "{body}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(connections.load(Ordering::SeqCst), 0, "a refused spec connected to its upstream");
}

/// A WASM spec may preopen only directories the operator made grantable,
/// and a writable one only from `wasm.writable_dirs`.
#[tokio::test]
async fn a_wasm_spec_cannot_preopen_host_directories_it_was_not_granted() {
    let data = tempfile::tempdir().unwrap();
    let app = App::start(&[("SWITCHYARD_WASM__GRANTABLE_DIRS", data.path().to_str().unwrap())]).await;
    let admin = Admin::of(&app);
    let digest = admin.upload(guest_module("units")).await;
    let register = |namespace: &str, host: &str, writable: bool| {
        let spec =
            json!({"artifact": digest, "grants": {"dirs": [{"host": host, "guest": "/d", "writable": writable}]}});
        admin.post("/plugins", json!({"namespace": namespace, "kind": "wasm", "spec": spec}))
    };
    for host in ["/proc", "/var/run/secrets", "/etc", "/"] {
        let (status, body) = register("evil", host, false).await;
        assert_eq!((status, field(&body)), (422, "spec.grants.dirs[0].host"), "{host}: {body}");
    }
    let (status, body) = register("evil", data.path().to_str().unwrap(), true).await;
    assert_eq!((status, field(&body)), (422, "spec.grants.dirs[0].host"), "writable needs wasm.writable_dirs: {body}");
    let (status, body) = register("units", data.path().to_str().unwrap(), false).await;
    assert_eq!(status, 201, "a granted directory is accepted: {body}");
}

/// Under a WASM memory budget, every instance at its cap fits: a plugin
/// asking for more memory than the budget's share is refused at
/// registration, naming the field; one within it is accepted.
#[tokio::test]
async fn a_wasm_plugin_cannot_ask_for_more_memory_than_the_budget_allows() {
    let app =
        App::start(&[("SWITCHYARD_WASM__MEMORY_BUDGET_MIB", "64"), ("SWITCHYARD_WASM__MAX_INSTANCES", "4")]).await;
    let admin = Admin::of(&app);
    let digest = admin.upload(guest_module("units")).await;
    let register = |namespace: &str, mib: u64| {
        let spec = json!({"artifact": digest, "limits": {"memory_mib": mib}});
        admin.post("/plugins", json!({"namespace": namespace, "kind": "wasm", "spec": spec}))
    };
    let (status, body) = register("greedy", 32).await;
    assert_eq!((status, field(&body)), (422, "spec.limits.memory_mib"), "{body}");
    let (status, body) = register("units", 16).await;
    assert_eq!(status, 201, "{body}");
}

/// With a non-loopback `bind` (the image binds 0.0.0.0), a loopback peer is
/// what a service-mesh sidecar makes of every outside request: it gets no
/// admin rights unless the operator says so.
#[tokio::test]
async fn loopback_peers_are_not_admins_when_the_server_binds_beyond_loopback() {
    // The listener is on loopback, as every test server is; the configured
    // `bind` is what a pod's would be.
    let open = ("SWITCHYARD_AUTH__ALLOW_UNAUTHENTICATED", "true");
    let exposed = App::start(&[("SWITCHYARD_BIND", "0.0.0.0:8080"), open]).await;
    let echo = json!({"namespace": "more", "kind": "builtin", "spec": {"name": "echo"}});
    let (status, body) = Admin::of(&exposed).post("/plugins", echo.clone()).await;
    assert_eq!(status, 401, "a loopback peer of a 0.0.0.0 server is not trusted: {body}");
    let trusting =
        App::start(&[("SWITCHYARD_BIND", "0.0.0.0:8080"), open, ("SWITCHYARD_ADMIN__ALLOW_LOOPBACK", "true")]).await;
    assert_eq!(Admin::of(&trusting).post("/plugins", echo.clone()).await.0, 201, "the operator opted in");
    let local = App::start(&[]).await;
    assert_eq!(Admin::of(&local).post("/plugins", echo).await.0, 201, "loopback bind: loopback peers are trusted");
}

/// Legacy answers are relayed only for ids a replica of ours minted for this
/// caller, at a bounded size: a forged id is 400 (it once was 202 and went on
/// the bus), a huge answer 413, and a flood of forgeries leaves the relay
/// working for the real answer that follows.
#[tokio::test]
async fn forged_and_oversized_legacy_answers_never_reach_the_bus() {
    let redis = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("switchyard-hostile-{:x}:", rand::random::<u64>());
    let env = [
        ("SWITCHYARD_FIXTURE", "conformance"),
        ("SWITCHYARD_REDIS_URL", redis.as_str()),
        ("SWITCHYARD_REDIS_PREFIX", prefix.as_str()),
        ("SWITCHYARD_HTTP__MAX_ANSWER_BYTES", "4096"),
        ("SWITCHYARD_STATE__KEYS", crate::protocol::SHARED_STATE_KEY),
    ];
    let (one, two) = (App::start(&env).await, App::start(&env).await);
    let http = reqwest::Client::new();
    let post = |body: String| http.post(two.url()).header("content-type", "application/json").body(body).send();
    // An id in our format that names a replica that does not exist.
    let forged = format!("switchyard-{:016x}-{:032x}-{:032x}", 7u64, 9u128, 11u128);
    let answer = |id: &str, text: &str| json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept", "content": {"t": text}}});
    let refused = post(answer(&forged, "x").to_string()).await.unwrap();
    assert_eq!(refused.status(), 400);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["code"], -32600, "{error}");
    let huge = post(answer(&forged, &"x".repeat(8192)).to_string()).await.unwrap();
    assert_eq!(huge.status(), 413);
    let flood = futures::future::join_all((0..300u128).map(|i| {
        let id = format!("switchyard-{:016x}-{i:032x}-{:032x}", rand::random::<u64>(), rand::random::<u128>());
        post(answer(&id, "flood").to_string())
    }))
    .await;
    assert!(flood.iter().all(|r| r.as_ref().is_ok_and(|r| r.status() == 400)), "every forgery is refused");
    // The real answer, posted to the other replica, still crosses.
    let events = crate::protocol::legacy_elicitation("test_elicitation", one.url(), two.url()).await;
    assert!(events[1]["result"]["content"][0]["text"].as_str().unwrap().contains("ada"), "{events:?}");
}

/// Sends one JSON-RPC request with exactly these headers; the status.
async fn post_raw(url: &str, headers: &[(&str, &str)], body: Value) -> u16 {
    let mut request = reqwest::Client::new().post(url).header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(body.to_string()).send().await.unwrap().status().as_u16()
}

/// A fresh random `Mcp-Name` per request buys no fresh budget, in either
/// era: names the catalog does not know count as their method, a method
/// without a name counts as itself whatever `Mcp-Name` says, and a legacy
/// request (no `Mcp-Method`) is limited by what its body says.
#[tokio::test]
async fn random_names_do_not_dodge_the_rate_limit() {
    let env = [("SWITCHYARD_RATE_LIMIT__RATE", "3/m"), ("SWITCHYARD_RATE_LIMIT__PLUGINS__CALCULATOR", "1/m")];
    let modern = App::start(&env).await;
    let version = switchyard_protocol::version::LATEST;
    let call = |name: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": name, "arguments": {}, "_meta": switchyard_testkit::meta(json!({}))}})
    };
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let name = format!("t{:x}", rand::random::<u64>());
        let headers = [("mcp-protocol-version", version), ("mcp-method", "tools/call"), ("mcp-name", name.as_str())];
        statuses.push(post_raw(modern.url(), &headers, call(&name)).await);
    }
    assert_eq!(statuses, [400, 400, 400, 429], "unknown tools share the method's budget");
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": switchyard_testkit::meta(json!({}))}});
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let name = format!("n{:x}", rand::random::<u64>());
        let headers = [("mcp-protocol-version", version), ("mcp-method", "tools/list"), ("mcp-name", name.as_str())];
        statuses.push(post_raw(modern.url(), &headers, list.clone()).await);
    }
    assert_eq!(statuses, [200, 200, 200, 429], "a method without a name is limited by the method alone");

    let legacy = App::start(&env).await;
    let legacy_call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}});
    // Headers that contradict a legacy body are refused, and count for nothing.
    assert_eq!(post_raw(legacy.url(), &[("mcp-name", "other")], legacy_call.clone()).await, 400);
    assert_eq!(post_raw(legacy.url(), &[("mcp-method", "tools/list")], legacy_call.clone()).await, 400);
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(post_raw(legacy.url(), &[], legacy_call.clone()).await);
    }
    assert_eq!(statuses, [200, 200, 200, 429], "a legacy request is limited by its body");
    // `Mcp-Method` alone counts the method; the body's tool, under a
    // stricter rate of its own, is counted too.
    let sum = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                     "params": {"name": "calculator_arithmetic", "arguments": {"expression": "1+1"}}});
    let method_only = [("mcp-method", "tools/call")];
    assert_eq!(post_raw(legacy.url(), &method_only, sum.clone()).await, 200);
    assert_eq!(post_raw(legacy.url(), &method_only, sum).await, 429, "the tool's own 1/m applies");
}

/// With `[auth]` on, a request that reaches `core` without a verified caller
/// is refused: here the MCP route is assembled without its auth layer, as a
/// wiring mistake would, and nothing is served to the unverified caller.
#[tokio::test]
async fn a_route_without_its_auth_layer_fails_closed() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("registry.db").display());
    let env = [
        ("SWITCHYARD_AUTH__ISSUERS".to_owned(), "[{ issuer = \"http://127.0.0.1:9\" }]".to_owned()),
        ("SWITCHYARD_DATABASE_URL".to_owned(), database),
    ];
    let config = switchyard::config::RawConfig::load(None, env)
        .and_then(switchyard::config::Config::try_from)
        .expect("valid configuration");
    let http_config = config.http.clone();
    let app = switchyard::Switchyard::build(config).await.unwrap();
    let unguarded = switchyard_http::router(app.server.clone(), http_config.clone(), app.health.clone(), None, None);
    let listener = switchyard_http::bind(([127, 0, 0, 1], 0).into(), 128).unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(
        async move { switchyard_http::serve(listener, unguarded, &http_config, stopped.cancelled_owned()).await },
    );
    let version = switchyard_protocol::version::LATEST;
    let meta = switchyard_testkit::meta(json!({}));
    for (method, name, params) in [
        ("tools/list", None, json!({"_meta": meta})),
        ("tools/call", Some("echo"), json!({"name": "echo", "arguments": {"text": "x"}, "_meta": meta})),
    ] {
        let mut request = reqwest::Client::new()
            .post(&url)
            .header("content-type", "application/json")
            .header("mcp-protocol-version", version)
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let answer: Value = request.body(body.to_string()).send().await.unwrap().json().await.unwrap();
        assert!(answer.get("result").is_none(), "{method} was served to an unverified caller: {answer}");
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
    }
    // A legacy request too.
    let legacy = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    let answer: Value = reqwest::Client::new()
        .post(&url)
        .header("content-type", "application/json")
        .body(legacy.to_string())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    stop.cancel();
}

/// `requestState` is sealed so the client cannot read the plugin's state,
/// and a retry with answers opens it once, on any replica: replaying the
/// same retry (a captured one, or a client's duplicate) is `-32602`.
#[tokio::test]
async fn a_request_state_is_unreadable_and_opens_once_on_every_replica() {
    let redis = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("switchyard-replay-{:x}:", rand::random::<u64>());
    let env = [
        ("SWITCHYARD_FIXTURE", "conformance"),
        ("SWITCHYARD_REDIS_URL", redis.as_str()),
        ("SWITCHYARD_REDIS_PREFIX", prefix.as_str()),
        ("SWITCHYARD_STATE__KEYS", crate::protocol::SHARED_STATE_KEY),
    ];
    let (one, two) = (App::start(&env).await, App::start(&env).await);
    let caps = json!({ "elicitation": {} });
    let params = json!({ "name": "test_input_required_result_request_state", "arguments": {} });
    let first = one.client().request_with("tools/call", params.clone(), caps.clone()).await;
    let state = first.result()["requestState"].as_str().unwrap().to_owned();
    let body = state.rsplit('.').next().unwrap();
    let decoded = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, body).unwrap();
    assert!(!String::from_utf8_lossy(&decoded).contains("tools/call"), "the payload is encrypted: {state}");

    let mut retry = params;
    retry["inputResponses"] = json!({ "confirm": { "action": "accept", "content": { "ok": true } } });
    retry["requestState"] = json!(state);
    let done = two.client().request_with("tools/call", retry.clone(), caps.clone()).await;
    assert!(done.result()["content"][0]["text"].as_str().unwrap().contains("state-ok"), "{:?}", done.messages);
    for replica in [&one, &two] {
        let replayed = replica.client().request_with("tools/call", retry.clone(), caps.clone()).await;
        assert_eq!(replayed.error_code(), Some(-32602), "{:?}", replayed.messages);
    }
    // Without Redis, in process.
    let alone = App::start(&[("SWITCHYARD_FIXTURE", "conformance")]).await;
    let fresh = json!({ "name": "test_input_required_result_request_state", "arguments": {} });
    let first = alone.client().request_with("tools/call", fresh, caps.clone()).await;
    let mut retry = retry.clone();
    retry["requestState"] = first.result()["requestState"].clone();
    assert!(
        alone.client().request_with("tools/call", retry.clone(), caps.clone()).await.result()["content"].is_array()
    );
    assert_eq!(alone.client().request_with("tools/call", retry, caps).await.error_code(), Some(-32602));
}

/// One caller cannot hold a replica's listen streams or memory: streams are
/// bounded per caller (here per peer address: no authentication) and each
/// stream's subscription list in count and bytes. A refusal is a JSON-RPC
/// error with its status, the server keeps answering, and a closed stream
/// gives its place back.
#[tokio::test]
async fn listen_streams_and_their_subscriptions_are_bounded() {
    let app = App::start(&[
        ("SWITCHYARD_LISTEN__MAX_STREAMS_PER_CALLER", "3"),
        ("SWITCHYARD_LISTEN__MAX_RESOURCE_SUBSCRIPTIONS", "4"),
        ("SWITCHYARD_LISTEN__MAX_SUBSCRIPTION_BYTES", "200"),
        // The server notices a client gone when it next writes.
        ("SWITCHYARD_HTTP__KEEP_ALIVE", "100ms"),
    ])
    .await;
    let client = app.client();
    let listen = json!({ "notifications": { "toolsListChanged": true } });
    let mut held = Vec::new();
    for _ in 0..3 {
        let stream = client.open("subscriptions/listen", listen.clone()).await;
        assert_eq!(stream.status(), 200);
        held.push(stream);
    }
    let refused = client.request("subscriptions/listen", listen.clone()).await;
    assert_eq!((refused.status, refused.error_code()), (429, Some(-32029)), "{:?}", refused.messages);
    let echo = client.request("tools/call", json!({ "name": "echo", "arguments": { "text": "still here" } })).await;
    assert_eq!(echo.status, 200, "the server keeps answering");

    let uris =
        |n: usize, len: usize| -> Vec<String> { (0..n).map(|i| format!("file:///{i}/{}", "x".repeat(len))).collect() };
    for (subscriptions, bound) in [(uris(5, 1), "at most 4"), (uris(2, 150), "at most 200")] {
        let params = json!({ "notifications": { "resourceSubscriptions": subscriptions } });
        held.pop();
        let reply = client.request("subscriptions/listen", params).await;
        assert_eq!((reply.status, reply.error_code()), (400, Some(-32602)), "{:?}", reply.messages);
        let message = reply.response()["error"]["message"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains(bound), "{message}");
    }
    // Both places were given back: two streams open again.
    for _ in 0..2 {
        let stream = eventually("a closed stream to give its place back", Duration::from_secs(5), async || {
            let stream = client.open("subscriptions/listen", listen.clone()).await;
            (stream.status() == 200).then_some(stream)
        })
        .await;
        held.push(stream);
    }
    let refused = client.request("subscriptions/listen", listen).await;
    assert_eq!(refused.status, 429);
}

/// Behind a load balancer, anonymous callers are counted by the address the
/// trusted proxy forwarded for, not as one caller (the proxy); a client's own
/// entries left of the proxy's are not believed, and without trusted proxies
/// `X-Forwarded-For` buys nothing.
#[tokio::test]
async fn anonymous_callers_behind_a_trusted_proxy_are_counted_apart() {
    let params = json!({ "notifications": { "toolsListChanged": true }, "_meta": meta(json!({})) });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params });
    let open = async |url: &str, forwarded_for: &str| {
        let mut request = reqwest::Client::new().post(url).header("x-forwarded-for", forwarded_for);
        for (name, value) in Client::headers_for("subscriptions/listen", &params) {
            request = request.header(name, value);
        }
        request.body(body.to_string()).send().await.unwrap()
    };
    for (trusted, another_client) in [(Some("127.0.0.1"), 200), (None, 429)] {
        let mut env = vec![("SWITCHYARD_LISTEN__MAX_STREAMS_PER_CALLER", "1")];
        env.extend(trusted.map(|proxies| ("SWITCHYARD_HTTP__TRUSTED_PROXIES", proxies)));
        let app = App::start(&env).await;
        let held = open(app.url(), "203.0.113.1").await;
        assert_eq!(held.status(), 200);
        assert_eq!(open(app.url(), "203.0.113.1").await.status(), 429, "trusted {trusted:?}: the same client");
        let other = open(app.url(), "203.0.113.2").await;
        assert_eq!(other.status(), another_client, "trusted {trusted:?}: another client");
        let forged = open(app.url(), "198.51.100.7, 203.0.113.1").await;
        assert_eq!(forged.status(), 429, "trusted {trusted:?}: a made-up entry left of the proxy's");
        drop((held, other));
    }
}

/// Whoever can write to the bus's log in Redis but holds no key cannot
/// inject a notification: an unsigned (version 1) message, one with a bad
/// MAC and one signed with a key the replicas do not hold are all dropped;
/// a real publish on the other replica arrives.
#[tokio::test]
async fn a_forged_bus_message_reaches_no_stream() {
    let redis_url = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("switchyard-forged-{:x}:", rand::random::<u64>());
    let env = [("SWITCHYARD_REDIS_URL", redis_url.as_str()), ("SWITCHYARD_REDIS_PREFIX", prefix.as_str())];
    let (one, two) = (App::start(&env).await, App::start(&env).await);
    let log = format!("{prefix}{{bus}}:log");
    let event = r#"{"kind":"resource_updated","uri":"file:///forged/1"}"#;
    let envelope = format!(r#"{{"v":2,"origin":"attacker","event":{event}}}"#);
    let forgeries = [
        format!(r#"{{"v":1,"origin":"attacker","event":{event}}}"#),
        format!("s2.it.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.{envelope}"),
        format!("s2.stolen.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.{envelope}"),
    ];
    let publish_url = format!("{}/notifications/resources/updated", one.admin_url());
    let params = json!({ "notifications": { "resourceSubscriptions": ["file:///forged/", "file:///real/"] } });
    let reply = two
        .client()
        .stream("subscriptions/listen", params, 3, Duration::from_secs(3), || async {
            let client = redis::Client::open(redis_url.as_str()).unwrap();
            let mut connection = client.get_multiplexed_async_connection().await.unwrap();
            for forged in &forgeries {
                let _: String = redis::cmd("XADD")
                    .arg(&log)
                    .arg("*")
                    .arg("m")
                    .arg(forged)
                    .query_async(&mut connection)
                    .await
                    .unwrap();
            }
            let real = reqwest::Client::new().post(&publish_url).json(&json!({ "uri": "file:///real/1" })).send();
            assert_eq!(real.await.unwrap().status(), 202);
        })
        .await;
    let uris: Vec<&Value> = reply.messages[1..].iter().map(|m| &m["params"]["uri"]).collect();
    assert_eq!(uris, [&json!("file:///real/1")], "{:?}", reply.messages);
}

/// The Redis ACL that docs/operating.md gives works: a Redis user limited to the
/// deployment's prefix (keys and channels) and to the commands Switchyard
/// sends serves the bus, the shared rate limits and the single-use marks of
/// two replicas; the same user cannot touch another deployment's keys.
#[tokio::test]
async fn a_redis_user_limited_to_its_prefix_serves_everything() {
    let redis = switchyard_testkit::RedisServer::start().await;
    let admin = redis::Client::open(redis.url()).unwrap();
    let mut admin = admin.get_multiplexed_async_connection().await.unwrap();
    // docs/operating.md's "Redis access" rule, for the prefix `acl:`.
    let rule = "on >a-long-redis-password resetkeys resetchannels ~acl:* -@all \
                +hello +auth +ping +set +get +eval +evalsha +script|load +time \
                +exists +xadd +xread +xrange +xrevrange +hincrby +hsetnx +hget";
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("switchyard")
        .arg(rule.split_whitespace().collect::<Vec<_>>())
        .query_async(&mut admin)
        .await
        .unwrap();
    let url = format!("redis://switchyard:a-long-redis-password@127.0.0.1:{}", redis.port());
    let env = [
        ("SWITCHYARD_FIXTURE", "conformance"),
        ("SWITCHYARD_REDIS_URL", url.as_str()),
        ("SWITCHYARD_REDIS_PREFIX", "acl:"),
        ("SWITCHYARD_RATE_LIMIT__RATE", "1000/s"),
        // A limiter the ACL refused would refuse the calls, not let them through.
        ("SWITCHYARD_RATE_LIMIT__ON_REDIS_ERROR", "deny"),
    ];
    let (one, two) = (App::start(&env).await, App::start(&env).await);
    redis_serves_everything(&one, &two).await;

    // Nothing outside the prefix.
    let user = redis::Client::open(url.as_str()).unwrap();
    let mut user = user.get_multiplexed_async_connection().await.unwrap();
    let outside: redis::RedisResult<()> = redis::cmd("SET").arg("other:key").arg(1).query_async(&mut user).await;
    assert!(outside.is_err(), "the user wrote outside its prefix");
}

/// Redis over TLS (`rediss://`): the bus, the shared rate limits and the
/// single-use marks of two replicas all work through a TLS-only Redis whose
/// certificate a CA of the test's own signed (`redis_tls_ca_file`); without
/// that CA, the certificate is not trusted and the server does not start.
#[tokio::test]
async fn redis_over_tls_serves_everything_and_checks_its_certificate() {
    let redis = switchyard_testkit::RedisServer::start_tls().await;
    let ca = redis.ca_file().expect("a TLS server has a CA").to_str().unwrap().to_owned();
    let url = redis.url();
    assert!(url.starts_with("rediss://"), "{url}");
    let mut env = vec![
        ("SWITCHYARD_FIXTURE", "conformance"),
        ("SWITCHYARD_REDIS_URL", url.as_str()),
        ("SWITCHYARD_RATE_LIMIT__RATE", "1000/s"),
        ("SWITCHYARD_RATE_LIMIT__ON_REDIS_ERROR", "deny"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("registry.db").display());
    let mut untrusting = switchyard_testkit::with_shared_keys(&env)
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect::<Vec<_>>();
    untrusting.push(("SWITCHYARD_DATABASE_URL".into(), database));
    let config = switchyard::config::RawConfig::load(None, untrusting)
        .and_then(switchyard::config::Config::try_from)
        .expect("a valid configuration");
    let refused = switchyard::Switchyard::build(config).await.err().expect("an untrusted certificate is refused");
    assert!(format!("{refused:#}").to_lowercase().contains("certificate"), "{refused:#}");

    env.push(("SWITCHYARD_REDIS_TLS_CA_FILE", ca.as_str()));
    let (one, two) = (App::start(&env).await, App::start(&env).await);
    redis_serves_everything(&one, &two).await;
}

/// Two replicas sharing a Redis use it for everything: the limiter's script
/// (which denies on a Redis error here), the requestState marks, and the bus.
async fn redis_serves_everything(one: &App, two: &App) {
    // The limiter's script and the requestState marks.
    let caps = json!({ "elicitation": {} });
    let params = json!({ "name": "test_input_required_result_request_state", "arguments": {} });
    let first = one.client().request_with("tools/call", params.clone(), caps.clone()).await;
    assert_eq!(first.status, 200, "{:?}", first.messages);
    let mut retry = params;
    retry["inputResponses"] = json!({ "confirm": { "action": "accept", "content": { "ok": true } } });
    retry["requestState"] = first.result()["requestState"].clone();
    assert_eq!(two.client().request_with("tools/call", retry.clone(), caps.clone()).await.status, 200);
    let replayed = one.client().request_with("tools/call", retry, caps).await;
    assert_eq!(replayed.error_code(), Some(-32602), "the mark was recorded: {:?}", replayed.messages);

    // The bus.
    let publish_url = format!("{}/notifications/resources/updated", one.admin_url());
    let params = json!({ "notifications": { "resourceSubscriptions": ["file:///acl/"] } });
    let reply = two
        .client()
        .stream("subscriptions/listen", params, 2, Duration::from_secs(5), || async {
            let sent = reqwest::Client::new().post(&publish_url).json(&json!({ "uri": "file:///acl/1" })).send();
            assert_eq!(sent.await.unwrap().status(), 202);
        })
        .await;
    assert_eq!(reply.messages.len(), 2, "{:?}", reply.messages);
}
