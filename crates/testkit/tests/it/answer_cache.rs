//! The answer cache (#19): upstream answers kept for their `ttlMs`, public
//! ones for every caller and private ones per authorization context,
//! identical reads in flight asked once, and everything of an upstream
//! dropped when it reports a change. The upstream is [`HostileUpstream`],
//! honest here, which counts what it is asked. A WASM module's marked
//! results are kept the same way.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::json;
use switchyard_testkit::{App, AuthorizationServer, Client, HostileUpstream, guest_module, until};

use crate::plugins::Admin;

/// `uri`'s text, read through `client`.
async fn read(client: &Client, uri: &str) -> String {
    let reply = client.request("resources/read", json!({"uri": uri})).await;
    reply.result()["contents"][0]["text"].as_str().unwrap_or_else(|| panic!("{:?}", reply.response())).to_owned()
}

async fn register(app: &App, upstream: &HostileUpstream) {
    let plugin = json!({"namespace": "h", "kind": "upstream", "spec": {"url": upstream.url()}});
    let (status, body) = Admin::of(app).post("/plugins", plugin).await;
    assert_eq!(status, 201, "{body}");
}

/// A read the upstream keeps for a minute is asked once; one it keeps for
/// no time is asked every time; eight identical reads in flight at once are
/// asked once; and a change the upstream reports drops what was kept.
#[tokio::test]
async fn reads_are_kept_for_their_ttl_asked_once_at_a_time_and_dropped_on_change() {
    let upstream = HostileUpstream::start().await;
    // A process of its own, for its `/metrics`, with a registry of its own.
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("registry.db").display());
    let replica = crate::upstreams::start_replica(&crate::upstreams::replica_env(&database)).await;
    let plugin = json!({"namespace": "h", "kind": "upstream", "spec": {"url": upstream.url()}});
    crate::upstreams::register(&replica, plugin).await;
    let client = replica.client();
    until("the upstream's listen stream is open", Duration::from_secs(10), async || upstream.listen_streams() == 1)
        .await;

    let asked = || upstream.asked("resources/read");
    let first = read(&client, "hostile://public").await;
    for _ in 0..3 {
        assert_eq!(read(&client, "hostile://public").await, first);
    }
    assert_eq!(asked(), 1, "kept for its ttlMs");
    for n in 2..=4 {
        assert_eq!(read(&client, "hostile://fresh").await, format!("read {n}"));
    }
    assert_eq!(asked(), 4, "ttlMs 0: asked every time");

    let reads = futures::future::join_all((0..8).map(|_| read(&client, "hostile://slow"))).await;
    assert_eq!(asked(), 5, "eight identical reads in flight, one upstream request: {reads:?}");
    assert!(reads.iter().all(|text| text == "read 5"), "{reads:?}");

    upstream.become_(switchyard_testkit::Behaviour::Honest); // announces a list change
    until("the change drops what was kept", Duration::from_secs(5), async || {
        read(&client, "hostile://public").await != first
    })
    .await;
    let hits = crate::upstreams::metric(&replica, r#"switchyard_answers_cache_total{result="hit"}"#).await;
    let misses = crate::upstreams::metric(&replica, r#"switchyard_answers_cache_total{result="miss"}"#).await;
    assert!(hits >= 3 + 7 && misses >= 5, "hits {hits}, misses {misses}");
}

/// A private answer is kept for the authorization context it was given to,
/// never for another; a public one serves both. The contexts are two tokens
/// from a real authorization server with different scopes.
#[tokio::test]
async fn private_answers_are_kept_per_caller_and_public_ones_shared() {
    let authorization = AuthorizationServer::start().await;
    let listener = switchyard_http::bind(([127, 0, 0, 1], 0).into(), 128).expect("bind");
    let resource = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let issuers = format!("[{{ issuer = \"{}\" }}]", authorization.issuer());
    let env = [
        ("SWITCHYARD_AUTH__ISSUERS", issuers.as_str()),
        ("SWITCHYARD_AUTH__REQUIRED_SCOPES", "mcp"),
        ("SWITCHYARD_UPSTREAM__ALLOWED_RANGES", "127.0.0.0/8"),
    ];
    let app = App::start_on(listener, &env).await;
    let upstream = HostileUpstream::start().await;
    register(&app, &upstream).await;
    // One client, two grants: the scopes differ, so the authorization contexts do.
    let one = app.client().with_token(&authorization.token("mcp-test", "mcp", &resource).await);
    let other = app.client().with_token(&authorization.token("mcp-test", "mcp math", &resource).await);

    let asked = || upstream.asked("resources/read");
    let mine = read(&one, "hostile://private").await;
    assert_eq!(read(&one, "hostile://private").await, mine);
    assert_eq!(asked(), 1, "kept for the caller it was given to");
    let theirs = read(&other, "hostile://private").await;
    assert_ne!(theirs, mine, "another caller's private answer is never served");
    assert_eq!(asked(), 2);

    let public = read(&one, "hostile://public").await;
    assert_eq!(read(&other, "hostile://public").await, public, "a public answer serves every caller");
    assert_eq!(asked(), 3);
}

/// A tool result the upstream marks with a `ttlMs` is kept only for a tool
/// annotated read-only: the first marked result teaches the replica that the
/// upstream's tools may be kept, the next is kept, and later calls are served
/// from it. A tool that is not read-only runs every time, marked or not.
#[tokio::test]
async fn marked_results_of_read_only_tools_are_kept_and_others_never() {
    let upstream = HostileUpstream::start().await;
    let app = App::start(&[("SWITCHYARD_UPSTREAM__ALLOWED_RANGES", "127.0.0.0/8")]).await;
    register(&app, &upstream).await;
    let client = app.client();
    let call = async |tool: &str| {
        let reply = client.request("tools/call", json!({"name": tool, "arguments": {"n": 1}})).await;
        reply.result()["content"][0]["text"].as_str().unwrap().to_owned()
    };
    let asked = || upstream.asked("tools/call");
    let texts = [call("h_kept").await, call("h_kept").await, call("h_kept").await, call("h_kept").await];
    assert_eq!(asked(), 2, "{texts:?}");
    assert_eq!(texts[1..], [texts[1].clone(), texts[1].clone(), texts[1].clone()], "kept from the second on");
    for n in 3..=5 {
        assert_eq!(call("h_marked").await, format!("call {n}"), "not read-only: it runs every time");
    }
}

/// A WASM module's result, of a tool annotated `readOnlyHint`, that the
/// module marks reusable for a minute (`textstats`' `analyze`): the same
/// call is answered from the cache, by any caller for a public result, and
/// the module is not run again; other arguments run it. Counted by plugin.
#[tokio::test]
async fn a_wasm_modules_marked_results_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("registry.db").display());
    let replica = crate::upstreams::start_replica(&crate::upstreams::replica_env(&database)).await;
    let admin = format!("{}/admin/v1", replica.base_url());
    let http = reqwest::Client::new();
    let uploaded = http
        .post(format!("{admin}/artifacts"))
        .header("content-type", "application/wasm")
        .body(guest_module("textstats"))
        .send()
        .await
        .unwrap();
    assert_eq!(uploaded.status(), 201);
    let digest = uploaded.json::<serde_json::Value>().await.unwrap()["sha256"].as_str().unwrap().to_owned();
    crate::upstreams::register(&replica, json!({"namespace": "text", "kind": "wasm", "spec": {"artifact": digest}}))
        .await;
    let client = replica.client();
    let analyze = async |text: &str| {
        let reply = client.request("tools/call", json!({"name": "text_analyze", "arguments": {"text": text}})).await;
        reply.result()["structuredContent"]["words"].as_u64().unwrap()
    };
    let counted = async |result: &str| {
        let series = format!("switchyard_answers_cache_total{{result=\"{result}\"}}");
        crate::upstreams::metric(&replica, &series).await
    };
    assert_eq!(analyze("To be, or not to be.").await, 6);
    assert_eq!((counted("hit").await, counted("miss").await), (0, 0), "not looked up before a result was marked");
    for _ in 0..3 {
        assert_eq!(analyze("To be, or not to be.").await, 6);
    }
    assert_eq!(counted("hit").await, 3, "answered from the cache");
    assert_eq!(analyze("Another text entirely.").await, 3);
    assert_eq!(counted("miss").await, 1, "other arguments run the module");
}
