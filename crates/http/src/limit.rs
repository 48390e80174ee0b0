//! The rate-limit seam: the endpoint asks a [`RateLimiter`] before it reads
//! the body, with only what the headers and the connection say (the caller,
//! `Mcp-Method`, `Mcp-Name`), and the body must then agree with those headers;
//! a request without `Mcp-Method` (a legacy client) is asked about once its
//! body is parsed. How limits are kept (Redis, in process) is the
//! implementation's business; this crate knows no Redis.

use std::time::Duration;

use futures::future::BoxFuture;

/// What a request is counted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key<'a> {
    /// The caller: the authenticated principal, or the peer address when
    /// authorization is off.
    pub principal: &'a str,
    /// The tool, prompt or resource the request names when the catalog has
    /// it, else the method's name (`other` for an unknown method).
    pub target: &'a str,
}

/// The limiter's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Go on.
    Allow,
    /// Refuse: 429, and try again after this long.
    Deny {
        /// When a retry can succeed.
        retry_after: Duration,
    },
}

/// Decides whether a request may proceed.
pub trait RateLimiter: Send + Sync + 'static {
    /// Counts one request against `key`.
    fn check<'a>(&'a self, key: Key<'a>) -> BoxFuture<'a, Decision>;
}
