//! The auth layer alone, without a socket in front of it: `RequireBearerLayer`
//! over a stand-in inner service that counts the requests reaching it and
//! keeps the caller it was handed, called with `oneshot` as tower's own
//! tests call layers. The tokens are real, from `oidc-provider` on loopback.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use switchyard_auth::{Config, IssuerConfig, RequireBearerLayer, Verifier};
use switchyard_core::Caller;
use switchyard_core::policy::InsufficientScope;
use switchyard_testkit::AuthorizationServer;
use tower::{Layer, ServiceExt};

const RESOURCE: &str = "http://127.0.0.1:9/mcp";

/// What reached the inner service.
#[derive(Default)]
struct Seen {
    requests: AtomicUsize,
    caller: Mutex<Option<Caller>>,
}

/// The layer requiring `mcp`, over an inner service that answers 200, or,
/// for a request carrying `x-refuse`, a policy refusal needing `math`
/// (what `http` hands back for a tool the caller's scopes do not cover).
fn stack(
    authorization: &AuthorizationServer,
    seen: &Arc<Seen>,
) -> impl tower::Service<Request<Body>, Response = Response, Error = Infallible> + Clone {
    let mut config = Config::new(RESOURCE, vec![IssuerConfig::new(authorization.issuer())]);
    config.required_scopes = vec!["mcp".into()];
    let layer = RequireBearerLayer::new(Arc::new(Verifier::new(config).unwrap()));
    let seen = Arc::clone(seen);
    layer.layer(tower::service_fn(move |request: Request<Body>| {
        let seen = Arc::clone(&seen);
        async move {
            seen.requests.fetch_add(1, Ordering::SeqCst);
            *seen.caller.lock().unwrap() = request.extensions().get::<Caller>().cloned();
            let mut response = StatusCode::OK.into_response();
            if request.headers().contains_key("x-refuse") {
                *response.status_mut() = StatusCode::FORBIDDEN;
                response.extensions_mut().insert(InsufficientScope { scopes: vec!["math".into(), "mcp".into()] });
            }
            Ok::<_, Infallible>(response)
        }
    }))
}

fn request(token: Option<&str>, uri: &str) -> Request<Body> {
    let mut request = Request::post(uri);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    request.body(Body::empty()).unwrap()
}

fn challenge(response: &Response) -> &str {
    response.headers().get(header::WWW_AUTHENTICATE).map_or("", |v| v.to_str().unwrap())
}

#[tokio::test]
async fn only_a_verified_caller_with_the_required_scopes_reaches_the_inner_service() {
    let authorization = AuthorizationServer::start().await;
    let seen = Arc::new(Seen::default());
    let service = stack(&authorization, &seen);
    let metadata = "resource_metadata=\"http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp\"";

    // Refused at the door, each with its challenge; the inner service never sees them.
    let missing = service.clone().oneshot(request(None, "/mcp")).await.unwrap();
    assert_eq!(missing.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(challenge(&missing), format!("Bearer scope=\"mcp\", {metadata}"));
    let made_up = service.clone().oneshot(request(Some("made-up"), "/mcp")).await.unwrap();
    assert_eq!(made_up.status(), StatusCode::UNAUTHORIZED);
    assert!(
        challenge(&made_up).starts_with("Bearer error=\"invalid_token\", scope=\"mcp\""),
        "{}",
        challenge(&made_up)
    );
    let narrow = authorization.token("mcp-test", "math", RESOURCE).await;
    let forbidden = service.clone().oneshot(request(Some(&narrow), "/mcp")).await.unwrap();
    assert_eq!(forbidden.status(), StatusCode::FORBIDDEN);
    assert_eq!(challenge(&forbidden), format!("Bearer error=\"insufficient_scope\", scope=\"mcp\", {metadata}"));
    let token = authorization.token("mcp-test", "mcp", RESOURCE).await;
    let in_url = service.clone().oneshot(request(Some(&token), &format!("/mcp?access_token={token}"))).await.unwrap();
    assert_eq!(in_url.status(), StatusCode::BAD_REQUEST);
    assert_eq!(seen.requests.load(Ordering::SeqCst), 0, "no refused request reached the inner service");

    // A good token passes once, with the caller it proves.
    let passed = service.clone().oneshot(request(Some(&token), "/mcp")).await.unwrap();
    assert_eq!(passed.status(), StatusCode::OK);
    assert!(challenge(&passed).is_empty());
    assert_eq!(seen.requests.load(Ordering::SeqCst), 1);
    let caller = seen.caller.lock().unwrap().clone().expect("a caller in the extensions");
    assert!(caller.principal.is_some_and(|p| p.contains(authorization.issuer())), "the principal names its issuer");
    assert!(caller.scopes.is_some_and(|scopes| scopes.contains("mcp")));
}

#[tokio::test]
async fn a_refusal_from_deeper_in_gets_the_step_up_challenge() {
    let authorization = AuthorizationServer::start().await;
    let seen = Arc::new(Seen::default());
    let token = authorization.token("mcp-test", "mcp", RESOURCE).await;
    let mut refused = request(Some(&token), "/mcp");
    refused.headers_mut().insert("x-refuse", "1".parse().unwrap());
    let response = stack(&authorization, &seen).oneshot(refused).await.unwrap();
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
    let metadata = "resource_metadata=\"http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp\"";
    assert_eq!(challenge(&response), format!("Bearer error=\"insufficient_scope\", scope=\"math mcp\", {metadata}"));
    assert!(response.extensions().get::<InsufficientScope>().is_none(), "the refusal is consumed, not passed on");
}
