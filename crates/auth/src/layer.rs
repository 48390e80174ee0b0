//! [`RequireBearerLayer`]: no request passes without a verified token, and
//! every refusal carries the challenge that tells the client what to do.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Request, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use switchyard_core::policy::{InsufficientScope, covers};
use switchyard_protocol::error::{INTERNAL_ERROR, INVALID_REQUEST};
use switchyard_protocol::{ErrorObject, jsonrpc};

use crate::error::Rejection;
use crate::metadata;
use crate::principal::Principal;
use crate::verifier::Verifier;

/// Wraps a service so that every request needs a valid bearer token holding
/// `required` scopes. The verified [`Principal`](crate::Principal) and the
/// `core::Caller` made from it go into the request's extensions.
#[derive(Clone)]
pub struct RequireBearerLayer {
    shared: Arc<Gate>,
}

impl RequireBearerLayer {
    /// Requires a token verified by `verifier` holding the configuration's
    /// `required_scopes`.
    pub fn new(verifier: Arc<Verifier>) -> Self {
        Self { shared: Arc::new(Gate::new(verifier)) }
    }
}

/// The check itself, for callers that are not a tower stack (the admin
/// API's access rule): a token, verified, holding the required scopes.
pub struct Gate {
    verifier: Arc<Verifier>,
    required: Vec<String>,
    /// `resource_metadata="…"`, ready to append.
    metadata_param: String,
}

impl Gate {
    /// Requires the configuration's `required_scopes`.
    pub fn new(verifier: Arc<Verifier>) -> Self {
        let required = verifier.config().required_scopes.clone();
        Self::with_scopes(verifier, required)
    }

    /// Requires `required` (the admin API's scope, say).
    pub fn with_scopes(verifier: Arc<Verifier>, required: Vec<String>) -> Self {
        let metadata_param = format!("resource_metadata=\"{}\"", metadata::url(&verifier.config().resource));
        Self { verifier, required, metadata_param }
    }

    /// The verified principal of `request`, or the complete refusal: 400 for
    /// a token in the URL, 401 with the challenge for a missing or bad token,
    /// 403 for missing scopes, 503 when the issuer cannot be asked.
    ///
    /// # Errors
    /// The refusal response.
    pub async fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<Arc<Principal>, Response> {
        // A token in the query string is forbidden: it ends up in logs.
        let failed = |reason| switchyard_telemetry::metrics().auth_failure(reason);
        if uri.query().is_some_and(|q| q.split('&').any(|p| p.starts_with("access_token="))) {
            failed("token_in_url");
            return Err(self.invalid_request("access tokens go in the Authorization header, never the URL"));
        }
        let token = bearer_token(headers).map_err(|rejection| {
            failed(rejection.reason());
            self.unauthorized(&rejection)
        })?;
        let principal = self.verifier.verify(token).await.map_err(|rejection| {
            // Debug, not info: a flood of bad tokens must not flood the log too.
            tracing::debug!(reason = rejection.reason(), "bearer token refused");
            failed(rejection.reason());
            self.unauthorized(&rejection)
        })?;
        if !self.required.iter().all(|scope| covers(&principal.scopes, scope)) {
            failed("insufficient_scope");
            return Err(self.forbidden());
        }
        Ok(principal)
    }
}

impl<S> tower::Layer<S> for RequireBearerLayer {
    type Service = RequireBearer<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequireBearer { inner, shared: Arc::clone(&self.shared) }
    }
}

/// The service made by [`RequireBearerLayer`].
#[derive(Clone)]
pub struct RequireBearer<S> {
    inner: S,
    shared: Arc<Gate>,
}

impl<S> tower::Service<Request<Body>> for RequireBearer<S>
where
    S: tower::Service<Request<Body>, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        // The clone that was made ready is the one that gets the request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = Arc::clone(&self.shared);
        Box::pin(async move {
            let principal = match shared.check(request.uri(), request.headers()).await {
                Ok(principal) => principal,
                Err(refusal) => return Ok(refusal),
            };
            let mut caller = principal.caller();
            // Verified just now: kept for an upstream that exchanges it (RFC 8693).
            caller.subject_token = bearer_token(request.headers())
                .ok()
                .map(|token| switchyard_core::SubjectToken::new(token, &principal.issuer));
            request.extensions_mut().insert(caller);
            request.extensions_mut().insert(principal);
            let mut response = inner.call(request).await?;
            // A refusal by the policy, deeper in: add the challenge.
            if let Some(refusal) = response.extensions_mut().remove::<InsufficientScope>() {
                let value =
                    shared.challenge(Some("insufficient_scope"), &refusal.scopes.iter().cloned().collect(), None);
                if let Ok(value) = HeaderValue::from_str(&value) {
                    response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
                }
            }
            Ok(response)
        })
    }
}

/// The token of `Authorization: Bearer <token>` (the scheme is case-insensitive).
fn bearer_token(headers: &HeaderMap) -> Result<&str, Rejection> {
    let Some(value) = headers.get(header::AUTHORIZATION) else { return Err(Rejection::Missing) };
    let value = value.to_str().map_err(|_| Rejection::Malformed)?;
    let (scheme, token) = value.split_once(' ').ok_or(Rejection::Malformed)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(Rejection::Missing);
    }
    let token = token.trim();
    // RFC 6750 b64token characters only.
    let valid = !token.is_empty() && token.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~+/=".contains(&b));
    if valid { Ok(token) } else { Err(Rejection::Malformed) }
}

impl Gate {
    /// `Bearer error="…", scope="…", resource_metadata="…"`. The scope is
    /// always the whole set: the required scopes plus `extra`.
    fn challenge(&self, error: Option<&str>, extra: &BTreeSet<String>, description: Option<&str>) -> String {
        let mut parts = Vec::new();
        if let Some(error) = error {
            parts.push(format!("error=\"{error}\""));
        }
        let scopes: BTreeSet<&String> = self.required.iter().chain(extra).collect();
        if !scopes.is_empty() {
            let joined: Vec<&str> = scopes.into_iter().map(String::as_str).collect();
            parts.push(format!("scope=\"{}\"", joined.join(" ")));
        }
        parts.push(self.metadata_param.clone());
        if let Some(description) = description {
            parts.push(format!("error_description=\"{description}\""));
        }
        format!("Bearer {}", parts.join(", "))
    }

    fn unauthorized(&self, rejection: &Rejection) -> Response {
        if *rejection == Rejection::Unavailable {
            let mut response = json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                INTERNAL_ERROR,
                "The authorization server could not be reached; retry later",
            );
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            return response;
        }
        // No error code when the client simply sent no token (RFC 6750 §3.1).
        let error = (*rejection != Rejection::Missing).then_some("invalid_token");
        let description = error.map(|_| rejection.to_string());
        let challenge = self.challenge(error, &BTreeSet::new(), description.as_deref());
        let mut response = json_error(StatusCode::UNAUTHORIZED, INVALID_REQUEST, &format!("Unauthorized: {rejection}"));
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }

    /// 403 for a token without the scopes every request here needs.
    fn forbidden(&self) -> Response {
        let challenge = self.challenge(Some("insufficient_scope"), &BTreeSet::new(), None);
        let scopes: BTreeSet<String> = self.required.iter().cloned().collect();
        let error = InsufficientScope { scopes: scopes.into_iter().collect() }.to_error("this endpoint");
        let mut response = with_json(StatusCode::FORBIDDEN, jsonrpc::failure(None, &error));
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }

    fn invalid_request(&self, message: &str) -> Response {
        let mut response = json_error(StatusCode::BAD_REQUEST, INVALID_REQUEST, message);
        let challenge = self.challenge(Some("invalid_request"), &BTreeSet::new(), None);
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

fn json_error(status: StatusCode, code: i32, message: &str) -> Response {
    with_json(status, jsonrpc::failure(None, &ErrorObject::new(code, message)))
}

fn with_json(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = (status, body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
