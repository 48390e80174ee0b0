//! Who may use the admin API: loopback peers, or holders of the admin token.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::problem::Problem;

/// The admin API's access rule.
#[derive(Clone)]
pub struct Access {
    /// Accept any request from a loopback address. Default true. Turn it off
    /// when a proxy on the same host forwards outside traffic.
    pub allow_loopback: bool,
    /// SHA-256 of the admin token; `None` when no token is configured.
    token_digest: Option<[u8; 32]>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("allow_loopback", &self.allow_loopback)
            .field("token", &self.token_digest.map(|_| "***"))
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
        Self { allow_loopback, token_digest: token.map(|t| Sha256::digest(t.as_bytes()).into()) }
    }

    /// An identity for `updated_by`, or the refusal.
    fn actor(&self, peer: Option<SocketAddr>, authorization: Option<&str>) -> Result<&'static str, Problem> {
        if let (Some(expected), Some(given)) =
            (&self.token_digest, authorization.and_then(|a| a.strip_prefix("Bearer ")).map(str::trim))
        {
            // Comparing digests in constant time: the time taken says nothing about the token.
            let given: [u8; 32] = Sha256::digest(given.as_bytes()).into();
            if expected.iter().zip(given).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0 {
                return Ok("admin-token");
            }
            return Err(Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", "the admin token is not valid"));
        }
        if self.allow_loopback && peer.is_some_and(|p| p.ip().is_loopback()) {
            return Ok("loopback");
        }
        Err(Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "the admin API takes requests from loopback or with the admin token (Authorization: Bearer …)",
        ))
    }
}

/// Who made a change, as the handlers record it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Actor(pub(crate) &'static str);

pub(crate) async fn check(State(access): State<Arc<Access>>, mut request: Request, next: Next) -> Response {
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    let authorization = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    match access.actor(peer, authorization) {
        Ok(actor) => {
            request.extensions_mut().insert(Actor(actor));
            next.run(request).await
        }
        Err(problem) => {
            let mut response = problem.into_response();
            response.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_or_token() {
        let loopback: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let remote: SocketAddr = "10.0.0.7:5000".parse().unwrap();
        let open = Access::new(true, None);
        assert_eq!(open.actor(Some(loopback), None).unwrap(), "loopback");
        assert!(open.actor(Some(remote), None).is_err());
        assert!(open.actor(None, None).is_err());
        let guarded = Access::new(false, Some("s3cret"));
        assert!(guarded.actor(Some(loopback), None).is_err());
        assert_eq!(guarded.actor(Some(remote), Some("Bearer s3cret")).unwrap(), "admin-token");
        assert!(guarded.actor(Some(remote), Some("Bearer wrong")).is_err());
        assert!(!format!("{guarded:?}").contains("s3cret"));
    }
}
