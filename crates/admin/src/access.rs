//! Who may use the admin API: loopback peers, holders of the admin token, or
//! OAuth callers whose token holds the admin scope (when authorization is on).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use sha2::{Digest, Sha256};

use crate::problem::Problem;

/// Checks an OAuth bearer token for admin rights. The binary implements it
/// over the `auth` crate; this crate does not know how tokens are checked.
pub trait BearerCheck: Send + Sync + 'static {
    /// The caller's principal when the request's token is valid and holds
    /// the admin scope; otherwise the complete refusal (401 or 403 with its
    /// challenge).
    fn admin<'a>(&'a self, uri: &'a Uri, headers: &'a HeaderMap) -> BoxFuture<'a, Result<String, Response>>;
}

/// The admin API's access rule.
#[derive(Clone)]
pub struct Access {
    /// Accept any request from a loopback address. Default true. Turn it off
    /// when a proxy on the same host forwards outside traffic.
    pub allow_loopback: bool,
    /// SHA-256 of the admin token; `None` when no token is configured.
    token_digest: Option<[u8; 32]>,
    /// OAuth tokens with the admin scope, when authorization is on.
    oauth: Option<Arc<dyn BearerCheck>>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("allow_loopback", &self.allow_loopback)
            .field("token", &self.token_digest.map(|_| "***"))
            .field("oauth", &self.oauth.is_some())
            .finish()
    }
}

impl Default for Access {
    fn default() -> Self {
        Self::new(true, None)
    }
}

impl Access {
    /// Loopback peers, plus bearers of `token` when one is given.
    pub fn new(allow_loopback: bool, token: Option<&str>) -> Self {
        Self { allow_loopback, token_digest: token.map(|t| Sha256::digest(t.as_bytes()).into()), oauth: None }
    }

    /// Also accepts OAuth bearer tokens that `check` approves.
    #[must_use]
    pub fn with_oauth(mut self, check: Arc<dyn BearerCheck>) -> Self {
        self.oauth = Some(check);
        self
    }

    /// Who is asking, or the refusal.
    fn actor(&self, peer: Option<SocketAddr>, authorization: Option<&str>) -> Result<Verdict<'_>, Problem> {
        if let Some(given) = authorization.and_then(|a| a.strip_prefix("Bearer ")).map(str::trim) {
            if let Some(expected) = &self.token_digest {
                // Comparing digests in constant time: the time taken says nothing about the token.
                let given: [u8; 32] = Sha256::digest(given.as_bytes()).into();
                if expected.iter().zip(given).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0 {
                    return Ok(Verdict::Known("admin-token"));
                }
            }
            if let Some(oauth) = &self.oauth {
                return Ok(Verdict::OAuth(oauth));
            }
            return Err(Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", "the admin token is not valid"));
        }
        if self.allow_loopback && peer.is_some_and(|p| p.ip().is_loopback()) {
            return Ok(Verdict::Known("loopback"));
        }
        Err(Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the admin API takes requests from loopback or with the admin token (Authorization: Bearer …)",
        ))
    }
}

/// What [`Access::actor`] found.
enum Verdict<'a> {
    /// An identity for `updated_by`.
    Known(&'static str),
    /// A bearer token that is not the admin token: OAuth decides.
    OAuth(&'a Arc<dyn BearerCheck>),
}

/// Who made a change, as the handlers record it.
#[derive(Debug, Clone)]
pub(crate) struct Actor(pub(crate) String);

pub(crate) async fn check(State(access): State<Arc<Access>>, mut request: Request, next: Next) -> Response {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let authorization = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let actor = match access.actor(peer, authorization) {
        Ok(Verdict::Known(actor)) => actor.to_owned(),
        Ok(Verdict::OAuth(oauth)) => match oauth.admin(request.uri(), request.headers()).await {
            Ok(principal) => format!("oauth:{principal}"),
            Err(refusal) => return refusal,
        },
        Err(problem) => {
            let mut response = problem.into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            return response;
        }
    };
    request.extensions_mut().insert(Actor(actor));
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The identity of an accepted request that OAuth did not have to decide.
    fn known(verdict: Verdict<'_>) -> Option<&'static str> {
        match verdict {
            Verdict::Known(actor) => Some(actor),
            Verdict::OAuth(_) => None,
        }
    }

    #[test]
    fn loopback_or_token() {
        let loopback: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let remote: SocketAddr = "10.0.0.7:5000".parse().unwrap();
        let open = Access::new(true, None);
        assert_eq!(known(open.actor(Some(loopback), None).unwrap()), Some("loopback"));
        assert!(open.actor(Some(remote), None).is_err());
        assert!(open.actor(None, None).is_err());
        let guarded = Access::new(false, Some("s3cret"));
        assert!(guarded.actor(Some(loopback), None).is_err());
        assert_eq!(known(guarded.actor(Some(remote), Some("Bearer s3cret")).unwrap()), Some("admin-token"));
        assert!(guarded.actor(Some(remote), Some("Bearer wrong")).is_err());
        assert!(!format!("{guarded:?}").contains("s3cret"));
    }
}
