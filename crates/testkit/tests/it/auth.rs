//! Switchyard as an OAuth 2.1 resource server, against a real authorization
//! server (`oidc-provider` on loopback): token checks, the 401/403
//! challenges, protected resource metadata, scope policy, introspection, and
//! the admin scope.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use switchyard_testkit::{App, AuthorizationServer, Reply, eventually, until};

/// A Switchyard that trusts `authorization`, with its resource URI.
struct Secured {
    app: App,
    resource: String,
}

/// Starts a Switchyard trusting `authorization` for its own URI, requiring
/// `mcp` of every caller and `math` for the calculator; `extra` adds settings.
async fn secured(authorization: &AuthorizationServer, extra: &[(&str, &str)]) -> Secured {
    let listener = switchyard_http::bind(([127, 0, 0, 1], 0).into(), 128).expect("bind");
    let resource = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let issuers = format!("[{{ issuer = \"{}\" }}]", authorization.issuer());
    let mut env = vec![
        ("SWITCHYARD_FIXTURE", "conformance"),
        ("SWITCHYARD_AUTH__ISSUERS", issuers.as_str()),
        ("SWITCHYARD_AUTH__REQUIRED_SCOPES", "mcp"),
        ("SWITCHYARD_AUTH__SCOPES__TOOLS__CALCULATOR_ARITHMETIC", "math"),
        ("SWITCHYARD_AUTH__LEEWAY", "1s"),
        ("SWITCHYARD_AUTH__JWKS_MIN_REFETCH", "1s"),
    ];
    env.extend_from_slice(extra);
    let app = App::start_on(listener, &env).await;
    Secured { app, resource }
}

fn challenge(reply: &Reply) -> String {
    reply.headers.get("www-authenticate").map(|v| v.to_str().unwrap_or_default().to_owned()).unwrap_or_default()
}

fn tool_names(reply: &Reply) -> Vec<String> {
    reply.result()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// Re-signs nothing: swaps the claims of a real token, keeping its header and signature.
fn with_claims(token: &str, change: impl FnOnce(&mut Value)) -> String {
    let parts: Vec<&str> = token.split('.').collect();
    let mut claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    change(&mut claims);
    format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(claims.to_string()), parts[2])
}

fn header_of(token: &str) -> Value {
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').next().unwrap()).unwrap()).unwrap()
}

#[tokio::test]
async fn bearer_tokens_are_checked_against_the_issuer() {
    let authorization = AuthorizationServer::start().await;
    let Secured { app, resource } = secured(&authorization, &[]).await;
    let anonymous = app.client();

    // No token: 401 pointing at the metadata, with the scope every request needs.
    let reply = anonymous.request("tools/list", json!({})).await;
    assert_eq!(reply.status, 401);
    let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp", app.base_url());
    assert_eq!(challenge(&reply), format!("Bearer scope=\"mcp\", resource_metadata=\"{metadata_url}\""));

    // The metadata: this resource, this issuer, the scopes the policy names.
    for url in [metadata_url.clone(), format!("{}/.well-known/oauth-protected-resource", app.base_url())] {
        let document: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        assert_eq!(document["resource"], resource.as_str());
        assert_eq!(document["authorization_servers"], json!([authorization.issuer()]));
        assert_eq!(document["scopes_supported"], json!(["math", "mcp"]));
    }

    // A valid token.
    let token = authorization.token("mcp-test", "mcp math", &resource).await;
    let reply = anonymous.with_token(&token).request("tools/list", json!({})).await;
    assert_eq!(reply.status, 200, "{:?}", reply.messages);
    assert!(tool_names(&reply).contains(&"calculator_arithmetic".to_owned()));

    let refused = |reply: &Reply, why: &str| {
        assert_eq!(reply.status, 401, "{why}: {:?}", reply.messages);
        let challenge = challenge(reply);
        assert!(challenge.contains("error=\"invalid_token\""), "{why}: {challenge}");
        assert!(challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")), "{why}: {challenge}");
    };
    // Issued for another resource (RFC 8707).
    let elsewhere = authorization.token("mcp-test", "mcp", "http://127.0.0.1:9/other").await;
    refused(&anonymous.with_token(&elsewhere).request("tools/list", json!({})).await, "wrong audience");
    // Tampered: more scope, same signature.
    let tampered = with_claims(&token, |claims| claims["scope"] = json!("mcp math switchyard:admin"));
    let reply = anonymous.with_token(&tampered).request("tools/list", json!({})).await;
    refused(&reply, "tampered");
    assert!(challenge(&reply).contains("invalid token signature"));
    // `alg: none`, unsigned.
    let payload = token.split('.').nth(1).unwrap();
    let none = format!("{}.{payload}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"at+jwt"}"#));
    refused(&anonymous.with_token(&none).request("tools/list", json!({})).await, "alg none");
    // HS256 "signed" with the issuer's public key as the HMAC secret.
    let kid = header_of(&token)["kid"].as_str().unwrap().to_owned();
    let jwks = reqwest::get(format!("{}/jwks", authorization.issuer())).await.unwrap().text().await.unwrap();
    let head = URL_SAFE_NO_PAD.encode(json!({"alg": "HS256", "kid": kid}).to_string());
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(jwks.as_bytes()).unwrap();
    mac.update(format!("{head}.{payload}").as_bytes());
    let confused = format!("{head}.{payload}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()));
    refused(&anonymous.with_token(&confused).request("tools/list", json!({})).await, "HS256 with the public key");
    // Not valid for an hour yet.
    let future = authorization.token("mcp-future", "mcp", &resource).await;
    let reply = anonymous.with_token(&future).request("tools/list", json!({})).await;
    refused(&reply, "nbf");
    assert!(challenge(&reply).contains("not yet valid"));
    // From an issuer Switchyard does not trust.
    let stranger = AuthorizationServer::start().await;
    let foreign = stranger.token("mcp-test", "mcp", &resource).await;
    refused(&anonymous.with_token(&foreign).request("tools/list", json!({})).await, "untrusted issuer");
    // Garbage.
    refused(&anonymous.with_token("not-a-token").request("tools/list", json!({})).await, "garbage");

    // The issuer rotates its key: a token with the new `kid` makes Switchyard
    // refetch the keys (once the refetch interval allows) and pass.
    let new_kid = authorization.rotate_key().await;
    let rotated = authorization.token("mcp-test", "mcp", &resource).await;
    assert_eq!(header_of(&rotated)["kid"], new_kid.as_str());
    // `jwks_min_refetch` is 1 s here: once it has passed, the new key is fetched.
    until("a token signed with the rotated key to pass", Duration::from_secs(3), || async {
        anonymous.with_token(&rotated).request("tools/list", json!({})).await.status == 200
    })
    .await;
    // Tokens signed with the old, still published key stay good.
    assert_eq!(anonymous.with_token(&token).request("tools/list", json!({})).await.status, 200);

    // Expired: 2-second tokens, 1 s of leeway, and claims in whole seconds,
    // so it is refused at the latest 4 s after it was issued.
    let short = authorization.token("mcp-short", "mcp", &resource).await;
    let issued = std::time::Instant::now();
    assert_eq!(anonymous.with_token(&short).request("tools/list", json!({})).await.status, 200);
    let reply = eventually("the 2-second token to expire", Duration::from_millis(4300), || async {
        let reply = anonymous.with_token(&short).request("tools/list", json!({})).await;
        (reply.status == 401).then_some(reply)
    })
    .await;
    assert!(issued.elapsed() > Duration::from_secs(1), "refused only once it expired: {:?}", issued.elapsed());
    refused(&reply, "expired");
    assert!(challenge(&reply).contains("token expired"), "a cached verification must not outlive its token");

    // A token in the URL is refused outright.
    let client = reqwest::Client::new();
    let reply = client.post(format!("{}?access_token={token}", app.url())).body("{}").send().await.unwrap();
    assert_eq!(reply.status(), 400);
}

#[tokio::test]
async fn scopes_decide_what_a_caller_sees_and_calls() {
    let authorization = AuthorizationServer::start().await;
    let Secured { app, resource } = secured(&authorization, &[]).await;
    let plain = app.client().with_token(&authorization.token("mcp-test", "mcp", &resource).await);
    let math = app.client().with_token(&authorization.token("mcp-test", "mcp math", &resource).await);

    // The calculator needs `math`: hidden from the plain caller, and the list
    // is private (another caller sees another list).
    let listed = plain.request("tools/list", json!({})).await;
    assert!(!tool_names(&listed).contains(&"calculator_arithmetic".to_owned()));
    assert!(tool_names(&listed).contains(&"echo".to_owned()));
    assert_eq!(listed.result()["cacheScope"], "private");
    assert!(tool_names(&math.request("tools/list", json!({})).await).contains(&"calculator_arithmetic".to_owned()));

    // Calling it without `math`: 403 naming every scope the call needs.
    let call = json!({ "name": "calculator_arithmetic", "arguments": { "operation": "add", "a": 1, "b": 2 } });
    let reply = plain.request("tools/call", call.clone()).await;
    assert_eq!(reply.status, 403, "{:?}", reply.messages);
    let step_up = challenge(&reply);
    assert!(step_up.starts_with("Bearer error=\"insufficient_scope\", scope=\"math mcp\""), "{step_up}");
    assert!(step_up.contains("resource_metadata="), "{step_up}");
    assert_eq!(reply.error_code(), Some(-32030));
    assert_eq!(reply.response()["error"]["data"]["requiredScopes"], json!(["math"]));
    // Other tools stay callable; with `math` the calculator is too.
    let echo = plain.request("tools/call", json!({ "name": "echo", "arguments": { "text": "hi" } })).await;
    assert_eq!(echo.status, 200);
    assert_eq!(math.request("tools/call", call).await.status, 200);

    // Without the scope every request needs: 403 at the door.
    let bare = app.client().with_token(&authorization.token("mcp-test", "tools:call", &resource).await);
    let reply = bare.request("tools/list", json!({})).await;
    assert_eq!(reply.status, 403);
    assert!(challenge(&reply).contains("scope=\"mcp\""));

    // `requestState` is bound to the principal: another caller cannot replay it.
    let caps = json!({ "elicitation": {} });
    let params = json!({ "name": "test_input_required_result_request_state", "arguments": {} });
    let first = plain.request_with("tools/call", params.clone(), caps.clone()).await;
    let mut retry = params;
    retry["inputResponses"] = json!({ "confirm": { "action": "accept", "content": { "ok": true } } });
    retry["requestState"] = first.result()["requestState"].clone();
    let other = app.client().with_token(&authorization.token("mcp-short", "mcp", &resource).await);
    assert_eq!(other.request_with("tools/call", retry.clone(), caps.clone()).await.error_code(), Some(-32602));
    assert_eq!(plain.request_with("tools/call", retry, caps).await.status, 200);

    // So are tasks: to another caller a task id is unknown, for reading and cancelling.
    let tasks = json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } });
    let slow = json!({ "name": "slow_compute", "arguments": { "seconds": 1 } });
    let created = plain.request_with("tools/call", slow, tasks.clone()).await;
    let task = json!({ "taskId": created.result()["taskId"] });
    assert_eq!(other.request_with("tasks/get", task.clone(), tasks.clone()).await.error_code(), Some(-32602));
    assert_eq!(other.request_with("tasks/cancel", task.clone(), tasks.clone()).await.error_code(), Some(-32602));
    assert_eq!(plain.request_with("tasks/get", task, tasks).await.result()["status"], "working");
}

/// `SWITCHYARD_AUTH__INTROSPECTION` for the test server's introspection
/// endpoint, with `more` (`, key = value` pairs) inside the table.
fn introspection_setting(authorization: &AuthorizationServer, more: &str) -> String {
    format!(
        "{{ endpoint = \"{0}/token/introspection\", client_id = \"switchyard-introspector\", client_secret = \"switchyard-introspector-secret\", issuer = \"{0}\"{more} }}",
        authorization.issuer()
    )
}

#[tokio::test]
async fn opaque_tokens_are_introspected() {
    let authorization = AuthorizationServer::start().await;
    let introspection = introspection_setting(&authorization, "");
    let Secured { app, resource } =
        secured(&authorization, &[("SWITCHYARD_AUTH__INTROSPECTION", introspection.as_str())]).await;
    let token = authorization.token("mcp-opaque", "mcp", &resource).await;
    assert_eq!(token.split('.').count(), 1, "an opaque token: {token}");
    let client = app.client().with_token(&token);
    let reply = client.request("tools/list", json!({})).await;
    assert_eq!(reply.status, 200, "{:?}", reply.messages);
    assert!(!tool_names(&reply).contains(&"calculator_arithmetic".to_owned()), "scopes come from introspection");
    // For another resource, or unknown to the server: refused.
    let elsewhere = authorization.token("mcp-opaque", "mcp", "http://127.0.0.1:9/other").await;
    assert_eq!(app.client().with_token(&elsewhere).request("tools/list", json!({})).await.status, 401);
    let reply = app.client().with_token("madeUpOpaqueToken").request("tools/list", json!({})).await;
    assert_eq!(reply.status, 401);
    assert!(challenge(&reply).contains("token inactive"));
}

/// An introspected token is asked about again after
/// `auth.introspection.max_age`, however late its `exp`, so a revocation is
/// seen within it; a refused token is remembered for `negative_ttl`, so
/// repeating it needs no call to the authorization server.
#[tokio::test]
async fn introspection_answers_age_out_and_refusals_are_remembered() {
    let authorization = AuthorizationServer::start().await;
    let introspection = introspection_setting(&authorization, r#", max_age = "1s", negative_ttl = "1m""#);
    let Secured { app, resource } =
        secured(&authorization, &[("SWITCHYARD_AUTH__INTROSPECTION", introspection.as_str())]).await;
    let token = authorization.token("mcp-opaque", "mcp", &resource).await;
    let client = app.client().with_token(&token);
    assert_eq!(client.request("tools/list", json!({})).await.status, 200);
    authorization.revoke("mcp-opaque", &token).await;
    // The answer is trusted for `max_age` (1 s), then asked again: the token
    // lives 10 minutes, but was revoked.
    until("the revoked token to be refused", Duration::from_millis(2500), || async {
        client.request("tools/list", json!({})).await.status == 401
    })
    .await;

    let made_up = app.client().with_token("madeUpOpaqueTokenRemembered");
    assert_eq!(made_up.request("tools/list", json!({})).await.status, 401);
    drop(authorization);
    assert_eq!(made_up.request("tools/list", json!({})).await.status, 401, "remembered: no call was needed");
    let fresh = app.client().with_token("anotherMadeUpOpaqueToken");
    assert_eq!(fresh.request("tools/list", json!({})).await.status, 503, "a new token needs the server, which is gone");
}

/// Made-up opaque tokens are new every time, so no cache absorbs them: the
/// introspection calls they cost are capped (`max_concurrent`), and the
/// rest wait their turn rather than each becoming a call at once.
#[tokio::test]
async fn introspection_calls_for_made_up_tokens_are_capped() {
    let authorization = AuthorizationServer::start().await;
    let introspection = introspection_setting(&authorization, ", max_concurrent = 2");
    let Secured { app, .. } =
        secured(&authorization, &[("SWITCHYARD_AUTH__INTROSPECTION", introspection.as_str())]).await;
    authorization.delay_introspection(Duration::from_millis(300)).await;
    let requests = (0..10).map(|n| {
        let client = app.client().with_token(&format!("madeUpOpaqueToken{n}"));
        async move { client.request("tools/list", json!({})).await.status }
    });
    let statuses = futures::future::join_all(requests).await;
    assert_eq!(statuses, [401; 10], "each is asked about, in turn, and refused");
    assert_eq!(authorization.introspection_load().await, (10, 2), "(asked, most at once)");
}

#[tokio::test]
async fn the_admin_api_needs_the_admin_scope_and_registered_scopes_gate_tools() {
    let authorization = AuthorizationServer::start().await;
    let Secured { app, resource } = secured(&authorization, &[("SWITCHYARD_ADMIN__ALLOW_LOOPBACK", "false")]).await;
    let http = reqwest::Client::new();
    let plugins = format!("{}/plugins", app.admin_url());
    assert_eq!(http.get(&plugins).send().await.unwrap().status(), 401);
    let user = authorization.token("mcp-test", "mcp units", &resource).await;
    let reply = http.get(&plugins).bearer_auth(&user).send().await.unwrap();
    assert_eq!(reply.status(), 403);
    assert!(reply.headers()["www-authenticate"].to_str().unwrap().contains("scope=\"switchyard:admin\""));
    let admin = authorization.token("mcp-test", "switchyard:admin", &resource).await;
    assert_eq!(http.get(&plugins).bearer_auth(&admin).send().await.unwrap().status(), 200);

    // A plugin registered with scopes: its tools need them.
    let created: Value = http
        .post(&plugins)
        .bearer_auth(&admin)
        .json(&json!({ "namespace": "gated", "kind": "builtin", "spec": { "name": "echo" }, "scopes": ["units"] }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(created["scopes"], json!(["units"]));
    assert!(created["updated_by"].as_str().unwrap().starts_with("oauth:"), "{created}");
    let without = app.client().with_token(&authorization.token("mcp-test", "mcp", &resource).await);
    let with = app.client().with_token(&user);
    until("the registered tool to be listed", Duration::from_secs(5), || async {
        tool_names(&with.request("tools/list", json!({})).await).contains(&"gated_echo".to_owned())
    })
    .await;
    assert!(!tool_names(&without.request("tools/list", json!({})).await).contains(&"gated_echo".to_owned()));
    let call = json!({ "name": "gated_echo", "arguments": { "text": "hi" } });
    assert_eq!(without.request("tools/call", call.clone()).await.status, 403);
    assert_eq!(with.request("tools/call", call).await.status, 200);
    let document: Value = reqwest::get(format!("{}/.well-known/oauth-protected-resource/mcp", app.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(document["scopes_supported"], json!(["math", "mcp", "units"]), "registered scopes are announced");
}

/// The used-by flow with today's official clients, the Python SDK (PyPI
/// `mcp` 2.3) and the TypeScript client (`@modelcontextprotocol/client` 2.4),
/// each in the 2025 era and in 2026-07-28, against a server with no scope
/// configured (the metadata names none) and one with required scopes: each
/// starts with no token, follows the 401 to the metadata and the
/// authorization server, registers itself, completes authorization code +
/// PKCE headlessly, and calls a tool.
#[tokio::test]
async fn todays_official_clients_authorize_in_both_eras_with_and_without_scopes() {
    let authorization = AuthorizationServer::start().await;
    let issuers = format!("[{{ issuer = \"{}\" }}]", authorization.issuer());
    for required in [None, Some("mcp")] {
        let mut env = vec![("SWITCHYARD_AUTH__ISSUERS", issuers.as_str())];
        env.extend(required.map(|scopes| ("SWITCHYARD_AUTH__REQUIRED_SCOPES", scopes)));
        let listener = switchyard_http::bind(([127, 0, 0, 1], 0).into(), 128).expect("bind");
        let app = App::start_on(listener, &env).await;
        let flows =
            [("python", "legacy"), ("python", "2026-07-28"), ("typescript", "legacy"), ("typescript", "2026-07-28")]
                .map(|(client, mode)| {
                    let url = app.url();
                    async move {
                        let limit = Duration::from_secs(60);
                        let output = match client {
                            "python" => switchyard_testkit::python_client("oauth_client.py", &[url, mode], limit).await,
                            _ => switchyard_testkit::node_client("oauth_client.mjs", &[url, mode], limit).await,
                        };
                        (client, mode, output)
                    }
                });
        for (client, mode, output) in futures::future::join_all(flows).await {
            let case = format!("{client} {mode}, required scopes {required:?}");
            let output = output.unwrap_or_else(|stderr| panic!("{case}: the client failed:\n{stderr}"));
            let outcome: Value =
                serde_json::from_str(output.trim()).unwrap_or_else(|_| panic!("{case}: not JSON: {output}"));
            assert_eq!(outcome["text"], "hello through oauth", "{case}");
            assert!(!outcome["client_id"].as_str().unwrap_or_default().is_empty(), "{case}: registered: {outcome}");
            if let Some(scope) = required {
                // The client asked for what the challenge named, and got it for this resource.
                let granted = outcome["scope"].as_str().unwrap_or_default();
                assert!(granted.split(' ').any(|s| s == scope), "{case}: {outcome}");
            }
        }
    }
}

/// Two trusted issuers both work, and rate limits count per principal, not
/// per address: two callers on one address each get their own budget.
#[tokio::test]
async fn several_issuers_are_trusted_and_limits_count_per_principal() {
    let first = AuthorizationServer::start().await;
    let second = AuthorizationServer::start().await;
    let listener = switchyard_http::bind(([127, 0, 0, 1], 0).into(), 128).expect("bind");
    let resource = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let issuers = format!("[{{ issuer = \"{}\" }}, {{ issuer = \"{}\" }}]", first.issuer(), second.issuer());
    let env = [
        ("SWITCHYARD_AUTH__ISSUERS", issuers.as_str()),
        ("SWITCHYARD_RATE_LIMIT__RATE", "2/m"),
        ("SWITCHYARD_RATE_LIMIT__BURST", "2"),
    ];
    let app = App::start_on(listener, &env).await;
    let alice = app.client().with_token(&first.token("mcp-test", "mcp", &resource).await);
    let bob = app.client().with_token(&second.token("mcp-test", "mcp", &resource).await);
    let echo = json!({ "name": "echo", "arguments": { "text": "hi" } });
    for _ in 0..2 {
        assert_eq!(alice.request("tools/call", echo.clone()).await.status, 200);
    }
    assert_eq!(alice.request("tools/call", echo.clone()).await.status, 429, "alice spent her budget");
    // Same address, another principal (another issuer, too): a budget of its own.
    assert_eq!(bob.request("tools/call", echo.clone()).await.status, 200);
}

/// A listen stream hears `resources/updated` only of what its caller may
/// read: the scope policy of `resources/read` applies to subscriptions too.
#[tokio::test]
async fn a_stream_hears_updates_only_of_resources_its_caller_may_read() {
    let authorization = AuthorizationServer::start().await;
    let gated = r#"{ "test://static-text" = ["units"] }"#;
    let Secured { app, resource } = secured(&authorization, &[("SWITCHYARD_AUTH__SCOPES__RESOURCES", gated)]).await;
    let plain = app.client().with_token(&authorization.token("mcp-test", "mcp", &resource).await);
    let cleared = app.client().with_token(&authorization.token("mcp-test", "mcp units", &resource).await);
    assert_eq!(plain.request("resources/read", json!({ "uri": "test://static-text" })).await.status, 403);

    let publish_url = format!("{}/notifications/resources/updated", app.admin_url());
    let publish = |uri: &'static str| {
        let url = publish_url.clone();
        async move { reqwest::Client::new().post(url).json(&json!({ "uri": uri })).send().await.unwrap().status() }
    };
    let everything = json!({ "notifications": { "resourceSubscriptions": ["test://"] } });
    let (acknowledged, opened) = tokio::sync::oneshot::channel();
    let params = everything.clone();
    let uncleared = tokio::spawn(async move {
        plain
            .stream("subscriptions/listen", params, 3, Duration::from_secs(3), || async move {
                let _ = acknowledged.send(());
            })
            .await
    });
    opened.await.unwrap();
    let heard = cleared
        .stream("subscriptions/listen", everything, 3, Duration::from_secs(5), || async {
            assert_eq!(publish("test://static-text").await, 202);
            assert_eq!(publish("test://watched-resource").await, 202);
        })
        .await;
    let uris =
        |reply: &Reply| -> Vec<Value> { reply.messages[1..].iter().map(|m| m["params"]["uri"].clone()).collect() };
    assert_eq!(uris(&heard), vec![json!("test://static-text"), json!("test://watched-resource")]);
    let uncleared = uncleared.await.unwrap();
    assert_eq!(uris(&uncleared), vec![json!("test://watched-resource")], "{:?}", uncleared.messages);
}
