//! Acting on the caller's behalf (#19): an upstream whose spec asks for
//! token exchange (RFC 8693) gets, with each call, a token the real
//! authorization server (`oidc-provider`) issued for it in exchange for the
//! caller's, never the caller's own; the exchange is kept per caller token
//! and asked once; a refused exchange is a clear error and no platform
//! credential goes instead.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use base64::Engine as _;
use serde_json::{Value, json};
use switchyard_testkit::{App, AuthorizationServer, Client, HostileUpstream, LegacyPythonServer};

use crate::plugins::{Admin, upstreams_on_loopback};

/// A front server that requires tokens of `authorization` for itself, may
/// reach loopback upstreams and read secrets from `secrets`; and its
/// resource URL, for the callers' tokens.
pub(crate) async fn front(authorization: &AuthorizationServer, secrets: &tempfile::TempDir) -> (App, String) {
    let listener = switchyard_http::bind(([127, 0, 0, 1], 0).into(), 128).expect("bind");
    let resource = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let issuers = format!("[{{ issuer = \"{}\" }}]", authorization.issuer());
    let mut env = upstreams_on_loopback(secrets);
    env.extend([("SWITCHYARD_AUTH__ISSUERS", issuers.as_str()), ("SWITCHYARD_AUTH__REQUIRED_SCOPES", "mcp")]);
    (App::start_on(listener, &env).await, resource)
}

/// An upstream plugin spec for `url` that exchanges callers' tokens at
/// `authorization` as the client `switchyard-exchanger`.
pub(crate) fn exchanging(authorization: &AuthorizationServer, secrets: &tempfile::TempDir, url: &str) -> Value {
    let secret = secrets.path().join("exchanger");
    std::fs::write(&secret, "switchyard-exchanger-secret").unwrap();
    json!({"url": url, "auth": {"token_exchange": {
        "token_url": authorization.token_endpoint(), "client_id": "switchyard-exchanger",
        "client_secret_from_file": secret, "resource": url, "scope": "mcp tools:call"}}})
}

/// A JWT's claims, read without checking it (the upstream's affair).
pub(crate) fn claims(token: &str) -> Value {
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

async fn call(client: &Client, tool: &str) -> Value {
    client.request("tools/call", json!({"name": tool, "arguments": {}})).await.result().clone()
}

/// Each call carries a token exchanged for the caller's: meant for the
/// upstream, about the caller's subject, naming Switchyard as the actor,
/// and never the caller's own token. Two calls with one caller token ask
/// the authorization server once; another caller token is exchanged anew.
/// The platform's own requests (discovery, lists) carry its own token. A
/// caller token the server will not exchange is a clear error naming the
/// upstream: the upstream is not asked, and the refusal is remembered.
#[tokio::test]
async fn calls_carry_a_token_exchanged_for_the_callers_and_never_the_callers_own() {
    let authorization = AuthorizationServer::start().await;
    let secrets = tempfile::tempdir().unwrap();
    let (app, resource) = front(&authorization, &secrets).await;
    let upstream = HostileUpstream::start().await;
    let plugin =
        json!({"namespace": "h", "kind": "upstream", "spec": exchanging(&authorization, &secrets, upstream.url())});
    let (status, body) = Admin::of(&app).post("/plugins", plugin).await;
    assert_eq!(status, 201, "{body}");
    let listed = upstream.bearers("tools/list");
    let platform = claims(listed[0].as_deref().expect("the lists are asked with a token"));
    assert_eq!(platform["sub"], "switchyard-exchanger", "lists are the platform's own requests: {platform}");
    assert_eq!(authorization.exchanges().await, 0);

    let mine = authorization.token("mcp-test", "mcp tools:call", &resource).await;
    let one = app.client().with_token(&mine);
    for _ in 0..2 {
        let result = call(&one, "h_ok").await;
        assert_eq!(result["content"][0]["text"], "ok", "{result}");
    }
    assert_eq!(authorization.exchanges().await, 1, "kept for the caller token it was exchanged for");
    let sent = upstream.bearers("tools/call");
    assert_eq!(sent.len(), 2);
    let exchanged = sent[0].clone().expect("a token");
    assert_eq!(sent[1].as_deref(), Some(exchanged.as_str()));
    assert_ne!(exchanged, mine, "the caller's own token never leaves");
    let (theirs, ours) = (claims(&mine), claims(&exchanged));
    assert_eq!(ours["aud"], upstream.url(), "meant for the upstream: {ours}");
    assert_eq!(ours["sub"], theirs["sub"], "about the caller: {ours}");
    assert_eq!(ours["act"]["sub"], "switchyard-exchanger", "Switchyard acts: {ours}");

    let another = app.client().with_token(&authorization.token("mcp-test", "mcp tools:call math", &resource).await);
    assert_eq!(call(&another, "h_ok").await["content"][0]["text"], "ok");
    assert_eq!(authorization.exchanges().await, 2, "another caller token is exchanged anew");
    assert_ne!(upstream.bearers("tools/call")[2].as_deref(), Some(exchanged.as_str()));

    // The authorization server exchanges only tokens that grant `tools:call`.
    let refused = app.client().with_token(&authorization.token("mcp-test", "mcp", &resource).await);
    for _ in 0..2 {
        let result = call(&refused, "h_ok").await;
        assert_eq!(result["isError"], true, "{result}");
        let text = result["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("refused to exchange") && text.contains("invalid_grant"), "{text}");
        assert!(text.contains("upstream 127.0.0.1"), "names the upstream: {text}");
    }
    assert_eq!(upstream.asked("tools/call"), 3, "no request went with a platform credential instead");
    assert_eq!(authorization.exchanges().await, 3, "a refusal is remembered for a while");
}

/// The upstream is a second Switchyard that requires tokens meant for it:
/// the caller's own token (meant for the front) would be refused there, the
/// exchanged one is accepted. A front without authorization has no caller
/// token to exchange: its calls fail, and no other token is sent.
#[tokio::test]
async fn a_real_resource_server_accepts_the_exchanged_token_and_a_caller_without_one_is_refused() {
    let authorization = AuthorizationServer::start().await;
    let listener = switchyard_http::bind(([127, 0, 0, 1], 0).into(), 128).expect("bind");
    let upstream_url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let issuers = format!("[{{ issuer = \"{}\" }}]", authorization.issuer());
    let upstream_env = [
        ("SWITCHYARD_AUTH__ISSUERS", issuers.as_str()),
        ("SWITCHYARD_AUTH__REQUIRED_SCOPES", "tools:call"),
        ("SWITCHYARD_FIXTURE", "conformance"),
    ];
    let upstream = App::start_on(listener, &upstream_env).await;
    let secrets = tempfile::tempdir().unwrap();
    let (app, resource) = front(&authorization, &secrets).await;
    let spec = exchanging(&authorization, &secrets, &upstream_url);
    let (status, body) =
        Admin::of(&app).post("/plugins", json!({"namespace": "up", "kind": "upstream", "spec": spec.clone()})).await;
    assert_eq!(status, 201, "{body}");

    let mine = authorization.token("mcp-test", "mcp tools:call", &resource).await;
    let direct = upstream.client().with_token(&mine);
    let refused = direct.request("tools/call", json!({"name": "test_simple_text", "arguments": {}})).await;
    assert_eq!(refused.status, 401, "the caller's own token is not meant for the upstream");
    let result = call(&app.client().with_token(&mine), "up_test_simple_text").await;
    assert_eq!(result["content"][0]["type"], "text", "{result}");
    assert_ne!(result["isError"], true, "{result}");

    // No authorization at the front: an anonymous caller has no token to exchange.
    let open = App::start(&upstreams_on_loopback(&secrets)).await;
    let (status, body) =
        Admin::of(&open).post("/plugins", json!({"namespace": "up", "kind": "upstream", "spec": spec})).await;
    assert_eq!(status, 201, "{body}");
    let result = call(&open.client(), "up_test_simple_text").await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(result["content"][0]["text"].as_str().unwrap().contains("no token of the caller's"), "{result}");
}

/// A 2025-era upstream (the official Python SDK) keeps one session for all
/// our callers: each caller's exchanged token would travel in it. Token
/// exchange with one is refused at registration, saying why.
#[tokio::test]
async fn token_exchange_with_a_2025_era_upstream_is_refused() {
    let authorization = AuthorizationServer::start().await;
    let secrets = tempfile::tempdir().unwrap();
    let (app, _) = front(&authorization, &secrets).await;
    let legacy = LegacyPythonServer::start().await;
    let plugin =
        json!({"namespace": "py", "kind": "upstream", "spec": exchanging(&authorization, &secrets, legacy.url())});
    let (status, body) = Admin::of(&app).post("/plugins", plugin).await;
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("token exchange needs a 2026-07-28 upstream"), "{body}");
}
